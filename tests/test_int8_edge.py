"""int8 on the edge targets: the same integer kernels built for aarch64 NEON (pi5: armv8.2-a+dotprod,
android: armv8-a baseline), run under qemu-aarch64, against onnxruntime on the same QDQ / dynamic models,
with the tolerance of the wasm tests (tests/test_int8.py); and the int8 node conformance cases on aarch64."""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto

from packager import package
from packager.targets import edge as E

from .conftest import model_path
from .test_int8 import INT8_OPS, _feeds, _ort

pytestmark = [pytest.mark.skipif(shutil.which("aarch64-linux-gnu-gcc") is None, reason="gcc-aarch64-linux-gnu missing"),
              pytest.mark.skipif(shutil.which("qemu-aarch64") is None, reason="qemu-user missing")]


def _qdq(name: str, placement: str) -> Path:
    model_path(name)
    from bench.qdq_models import make
    return make(name, placement)


def _check(got: dict, want: dict, top1: bool, what: str) -> None:
    for k, w in want.items():
        rng = float(np.abs(w).max())
        d = float(np.abs(got[k].astype(np.float64) - w).max())
        assert d <= 0.02 * rng, (what, k, d, rng)
        if top1:
            assert got[k].argmax() == w.argmax(), what


CASES = [("cifar10net", "fusion"), ("mobilenetv2", "fusion"), ("resnet18", "fusion"), ("minilm_like", "dynamic")]


@pytest.mark.parametrize("name,placement", CASES, ids=[f"{n}-{p}" for n, p in CASES])
def test_pi5_cli_int8_matches_onnxruntime(name: str, placement: str, tmp_path: Path) -> None:
    path = _qdq(name, placement)
    b = package(path, target="pi5", out=tmp_path / name, verify=False, dynamic=False)
    m = json.loads((b / "manifest.json").read_text())
    feeds = _feeds(onnx.load(str(path)), seed=1)
    got = E.run_cli(b, feeds, m["outputs"], qemu=E.qemu_cmd("pi5"))
    _check(got, _ort(path, feeds, optimized=False), name != "minilm_like", f"{name} pi5 CLI")


@pytest.mark.parametrize("target,cpu", [("pi5", "cortex-a76"), ("android", "cortex-a53"), ("android", "cortex-a76")])
def test_int8_library_under_qemu(target: str, cpu: str, tmp_path: Path) -> None:
    """The shared libraries, dlopen()ed by the harness: pi5 (SDOT compiled in), android on a core without
    the dot product (portable int8 GEMM) and with it (SDOT after the runtime check)."""
    path = _qdq("cifar10net", "fusion")
    b = package(path, target=target, out=tmp_path / target, verify=False, dynamic=False)
    m = json.loads((b / "manifest.json").read_text())
    lib = b / "libedgepack.so" if target == "pi5" else b / "jniLibs" / "arm64-v8a" / "libedgepack.so"
    plan = b / "model.plan" if target == "pi5" else b / "assets" / "edgepack" / "model.plan"
    feeds = _feeds(onnx.load(str(path)), seed=2)
    qemu = ["qemu-aarch64", "-cpu", cpu, "-L", E.QEMU_SYSROOT]
    got = E.run_harness(lib, plan, [feeds[s["name"]] for s in m["inputs"]], m["outputs"], qemu)
    _check(got, _ort(path, feeds, optimized=False), True, f"{target} library")


# (build flavour, qemu CPU, kernel ep_qgemm must dispatch to)
SDOT_RUNS = [("pi5", "cortex-a76", "neon-sdot-8x8"), ("android", "cortex-a76", "neon-sdot-8x8"),
             ("android", "cortex-a53", "portable-4x8")]


@pytest.mark.parametrize("flavour,cpu,kernel", SDOT_RUNS, ids=[f"{f}-{c}" for f, c, _ in SDOT_RUNS])
def test_sdot_qgemm_matches_portable_bits(flavour: str, cpu: str, kernel: str) -> None:
    """edge/neon/qgemm_i8_neon.c against the portable integer GEMM: the same output bytes over shapes,
    zero points, epilogues and output dtypes (edge/tests/qgemm_sdot_test.c)."""
    goal = f"build/aarch64/qgemm_sdot_test_{flavour}"
    r = subprocess.run(["make", "-s", "-C", str(E.EDGE), "-j2", goal], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    r = subprocess.run(["qemu-aarch64", "-cpu", cpu, str(E.EDGE / goal)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"qgemm={kernel} " in r.stdout and " 0 mismatches" in r.stdout, r.stdout


def test_int8_conformance_aarch64_matches_wasm() -> None:
    from .conformance.runner_aarch64 import run_all
    results = run_all(set(INT8_OPS), "cortex-a76")
    diff = [(r["case"], r["wasm"], r["aarch64"], r["aarch64_why"]) for r in results if r["wasm"] != r["aarch64"]]
    assert not diff, diff
    assert not [r for r in results if r["aarch64"] in ("fail", "crash")]
    assert sum(r["aarch64"] == "pass" for r in results) >= 15


DW5_CASES = [  # _qdq_conv_model's group, cin, cout, k, stride, dil, pad, act, x dtype, zero point, hw
    (5, 5, 5, 5, 1, 1, 2, "clip", TensorProto.INT8, 0, 16),       # 5x5 stride 1: dw5_channel's even/odd pairs
    (6, 6, 6, 5, 2, 1, 2, "relu", TensorProto.UINT8, 128, 17),    # 5x5 stride 2: unphased plane, rows of 9
]


@pytest.mark.parametrize("case", DW5_CASES, ids=[f"s{c[4]}" for c in DW5_CASES])
def test_pi5_depthwise_5x5_same_bytes_as_wasm(case, tmp_path: Path) -> None:
    """QDEPTHWISE_CONV's 5-wide channel loop built for aarch64 NEON (pi5 CLI under qemu) writes the wasm SIMD
    build's bytes."""
    from packager import load_bundle
    from .test_int8 import _qdq_conv_model
    m = _qdq_conv_model(*case)
    x = np.random.default_rng(3).uniform(-3, 3, (1, case[1], case[10], case[10])).astype(np.float32)
    b = package(m, target="pi5", out=tmp_path / "pi5", verify=False, dynamic=False)
    got = E.run_cli(b, {"x": x}, json.loads((b / "manifest.json").read_text())["outputs"], qemu=E.qemu_cmd("pi5"))
    want = load_bundle(package(m, out=tmp_path / "web", verify=False), "simd").run({"x": x})["y"]
    assert got["y"].tobytes() == want.tobytes()
