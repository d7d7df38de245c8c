"""Build the project's benchmark and test models as ONNX files, deterministically.

    python3 -m bench.models OUTDIR [NAME ...]     (from the repository root; no NAME: all of them)

Seeded random weights: every run writes the same bytes. Needs torch and onnx. See docs/models.md.
"""
from __future__ import annotations

import sys
import warnings


def main(argv: list[str]) -> int:
    from .registry import MODELS
    if not argv or argv[0] in ('-h', '--help'):
        print(__doc__.strip())
        print('models:', ' '.join(MODELS))
        return 0 if argv else 2
    outdir, names = argv[0], argv[1:] or list(MODELS)
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        print('unknown model(s):', ', '.join(unknown), '- choose from', ', '.join(MODELS), file=sys.stderr)
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
