"""edgepack's packager: `package(model, target="web", out=...)` and `load_bundle(path).run(feeds)`."""
__version__ = "0.1.0"

from .api import package  # noqa: E402
from .bundle import load_bundle  # noqa: E402
from .errors import PackagerError  # noqa: E402

__all__ = ["package", "load_bundle", "PackagerError", "__version__"]
