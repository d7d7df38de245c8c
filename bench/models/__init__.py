"""The project's own model zoo: `python3 -m bench.models OUTDIR [NAME ...]` (docs/models.md)."""
