"""Latency of the WebGPU backend vs the wasm core in the same headless Chromium page (SwiftShader: a CPU
emulation of a GPU, so these are not GPU figures). Runs alternate GPU / wasm after a warm-up by time.

    python3 -m tests.webgpu.bench [model ...]     (default: the five benchmark models)
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from packager import load_bundle, package

from ..conftest import model_path, seeded_feeds
from .browser import WebGPUPage

MODELS = ["cifar10net", "cifar10net_unfused", "mobilenetv2", "resnet18", "minilm_like"]


def main(names: list[str]) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="webgpu-bench-"))
    page = WebGPUPage(tmp / "root")
    try:
        print(f"{'model':20} {'webgpu ms':>10} {'wasm ms':>9} {'gpu/wasm':>9}  load ms  adapter")
        for name in names:
            bundle = package(model_path(name), target="web", out=tmp / name, verify=False)
            info = page.open(bundle)
            feeds = seeded_feeds(load_bundle(bundle).inputs, 0)
            r = page.bench(feeds, warmup_ms=3000, rounds=5)
            print(f"{name:20} {r['gpu_ms']:10.1f} {r['wasm_ms']:9.1f} {r['gpu_ms'] / r['wasm_ms']:9.2f}  {info['load_ms']:7.0f}  "
                  f"{info['features']['adapter']} (wasm {r['wasm_variant']})", flush=True)
    finally:
        page.close()


if __name__ == "__main__":
    main(sys.argv[1:] or MODELS)
