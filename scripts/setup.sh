#!/usr/bin/env bash
# Idempotent set-up for a fresh Debian 12 machine: system toolchain, Python deps, npm deps,
# benchmark models. Each step is skipped when what it provides is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PKGS=(emscripten clang-19 lld-19 wabt)
missing=()
for p in "${APT_PKGS[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if ((${#missing[@]})); then
  echo "[setup] apt: ${missing[*]}"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

python3 - <<'PY' 2>/dev/null || { echo "[setup] pip: project + deps"; python3 -m pip install -q -e '.[dev]'; }
import importlib.util, sys
need = ["onnx", "onnxruntime", "wasmtime", "numpy", "pytest", "torch", "packager"]
sys.exit(any(importlib.util.find_spec(m) is None for m in need))
PY

if [ ! -d bench/node_modules/onnxruntime-web ]; then
  echo "[setup] npm: bench deps"
  (cd bench && npm install --silent --no-audit --no-fund)
fi

if [ ! -f .cache/models/minilm_like.onnx ]; then
  echo "[setup] building benchmark models into .cache/models"
  python3 ../shared/models/make_models.py .cache/models >/dev/null
fi
