"""Build the project's benchmark and test models as ONNX files, deterministically.

    python3 -m bench.models OUTDIR [NAME ...]     (from the repository root; no NAME: the core models)
    python3 -m bench.models OUTDIR zoo            (the benchmark zoo: needs pip install -e '.[zoo]')

Seeded random weights: every run writes the same bytes. Needs torch and onnx. See docs/models.md.
"""
from __future__ import annotations

import sys
import warnings


def main(argv: list[str]) -> int:
    from .registry import EXTRA_NAMES, MODELS, ZOO_NAMES
    if not argv or argv[0] in ('-h', '--help'):
        print(__doc__.strip())
        print('models:', ' '.join(MODELS))
        print('zoo:', ' '.join(ZOO_NAMES))
        print('other:', ' '.join(EXTRA_NAMES))
        return 0 if argv else 2
    outdir, names = argv[0], argv[1:] or list(MODELS)
    names = [z for n in names for z in (ZOO_NAMES if n == 'zoo' else (n,))]
    unknown = [n for n in names if n not in MODELS and n not in ZOO_NAMES and n not in EXTRA_NAMES]
    if unknown:
        print('unknown model(s):', ', '.join(unknown), '- choose from', ', '.join([*MODELS, *ZOO_NAMES, *EXTRA_NAMES]), file=sys.stderr)
        return 2
    from pathlib import Path
    from .export import build
    Path(outdir).mkdir(parents=True, exist_ok=True)
    warnings.filterwarnings('ignore')   # the legacy exporter's deprecation and tracer warnings, every model
    for name in names:
        print(build(name, outdir))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
