#!/usr/bin/env bash
# Idempotent set-up on a fresh Debian 12 machine: system toolchain, Python deps, npm deps, benchmark
# models, runtime builds. Each step is skipped when what it provides is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PKGS=(emscripten clang-19 lld-19 libclang-rt-19-dev wabt binaryen nodejs npm)  # libclang-rt: libFuzzer + sanitizers
# edge targets (pi5, android): aarch64 cross compiler + its libc (static CLI), qemu-user for tests, JDK, zip
APT_PKGS+=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user zip)
# browser tests and benchmarks (WebGPU on SwiftShader too): Playwright (pip) drives Debian's Chromium;
# never `playwright install`
APT_PKGS+=(chromium)
APT_PKGS+=(espeak-ng)   # tests/test_published_vad.py: speech for the VAD models
command -v javac >/dev/null || APT_PKGS+=(default-jdk-headless)
missing=()
for p in "${APT_PKGS[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
# node/npm may come from elsewhere (e.g. a preinstalled Node 20): only ask apt when the command is absent
command -v node >/dev/null && missing=("${missing[@]/nodejs}")
command -v npm >/dev/null && missing=("${missing[@]/npm}")
missing=($(printf '%s\n' "${missing[@]}" | grep -v '^$' || true))
if ((${#missing[@]})); then
  echo "[setup] apt: ${missing[*]}"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! python3 -c 'import onnx, onnxruntime, onnx_ir, onnxscript, wasmtime, numpy, pytest, torch, playwright, PIL, packager' 2>/dev/null; then
  echo "[setup] pip: edgepack (editable) + dev deps"
  python3 -m pip install -q --disable-pip-version-check -e '.[dev]'
fi

# `npm ci`, never `npm install`: it installs the tracked package-lock.json as it is and never rewrites it, so set-up
# leaves `git status` clean. The locks record the optional platform packages a fresh linux-x64 machine needs
# (@esbuild/linux-x64, @rollup/rollup-linux-x64-gnu); tests/test_web_api.py checks a fresh `npm ci` of each.
if [ -f bench/package.json ] && [ ! -d bench/node_modules/onnxruntime-web ]; then
  echo "[setup] npm: bench deps"
  (cd bench && npm ci --silent --no-audit --no-fund)
fi
if [ ! -x web/node_modules/.bin/tsc ] || [ ! -x web/node_modules/.bin/esbuild ] || [ ! -x web/node_modules/.bin/vite ]; then
  echo "[setup] npm: web dev deps (typescript, esbuild, vite)"
  (cd web && npm ci --silent --no-audit --no-fund)
fi

if [ ! -x wasm_kernels/node_modules/.bin/wasm-opt ]; then
  echo "[setup] npm: binaryen for the relaxed-SIMD wasm builds (wasm_kernels/package.json)"
  (cd wasm_kernels && npm ci --silent --no-audit --no-fund)
fi

# the five benchmark models and the run-time-shape variants (docs/models.md)
MODELS=(cifar10net cifar10net_unfused mobilenetv2 resnet18 minilm_like resnet18_dyn mobilenetv2_dyn minilm_like_dyn)
need=()
for m in "${MODELS[@]}"; do [ -f ".cache/models/$m.onnx" ] || need+=("$m"); done
if ((${#need[@]})); then
  echo "[setup] building benchmark models: ${need[*]}"
  python3 -m bench.models .cache/models "${need[@]}" >/dev/null
fi

echo "[setup] building the runtime (wasm SIMD, scalar, relaxed; host)"
make -s -C wasm_kernels -j2 all >/dev/null
echo "[setup] building the edge runtime (aarch64 pi5 + android, host JNI)"
make -s -C edge -j2 all harness >/dev/null
