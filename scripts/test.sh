#!/usr/bin/env bash
# The whole test suite on a fresh machine: set-up (idempotent), then pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec python3 -m pytest -q -p no:cacheprovider "$@"
