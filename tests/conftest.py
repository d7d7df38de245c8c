"""Shared fixtures: the benchmark models (built by scripts/setup.sh) and small hand-made models."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

REPO = Path(__file__).resolve().parent.parent
MODELS = REPO / ".cache" / "models"

# The single-threaded wasm builds wasmtime runs (packager/bundle.py WASM_VARIANTS; the threaded ones run in Node
# and browsers only). PORTABLE_AND_VECTOR: the two that bracket every kernel path (portable C, SIMD128), for
# the long parameter matrices where a third build would only repeat the SIMD path.
VARIANTS = ("simd", "relaxed", "scalar")
PORTABLE_AND_VECTOR = ("simd", "scalar")


def build_models(outdir: Path, *names: str) -> None:
    """The project's model script (bench/models), in a child process: torch stays out of the test process."""
    import sys
    subprocess.run([sys.executable, "-m", "bench.models", str(outdir), *names], check=True, capture_output=True,
                   cwd=REPO)


def model_path(name: str) -> Path:
    p = MODELS / f"{name}.onnx"
    if not p.exists():
        build_models(MODELS, name)
    return p


def plan_ops(bundle: Path) -> list[int]:
    """The kernel ids of a bundle's plan nodes, in order (compare with packager.plan.opcodes.Op)."""
    from packager.plan import layout
    return [n.op for n in layout.decode((bundle / "model.plan").read_bytes()).nodes]


def seeded_feeds(specs: list[dict], seed: int) -> dict[str, np.ndarray]:
    """Seeded feeds for input specs (a manifest's "inputs"): int64 inputs (token ids) in [0, 8192), the others
    standard-normal float32. One rule for the tests that run the benchmark models, so their inputs agree."""
    rng = np.random.default_rng(seed)
    return {s["name"]: (rng.integers(0, 8192, s["shape"]).astype(np.int64) if s["dtype"] == "int64"
                        else rng.standard_normal(s["shape"]).astype(np.float32)) for s in specs}


def make_model(nodes, inputs, outputs, initializers=(), opset: int = 17) -> onnx.ModelProto:
    g = helper.make_graph(nodes, "test", inputs, outputs, list(initializers))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def f32(name: str, shape) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


@pytest.fixture
def reshape_model() -> onnx.ModelProto:
    """x[2,3] -> Reshape -> y[3,2]: runs with the plan machinery alone (aliasing, no kernel)."""
    shape = numpy_helper.from_array(np.array([3, 2], dtype=np.int64), "s")
    return make_model([helper.make_node("Reshape", ["x", "s"], ["y"], name="reshape0")],
                      [f32("x", [2, 3])], [f32("y", [3, 2])], [shape])


def have_libfuzzer(tmp: Path) -> bool:
    """clang-19 links a libFuzzer + ASan + UBSan harness here (Debian: libclang-rt-19-dev)."""
    if not shutil.which("clang-19"):
        return False
    (tmp / "f.c").write_text("int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { return 0; }\n")
    return subprocess.run(["clang-19", "-fsanitize=fuzzer,address,undefined", str(tmp / "f.c"), "-o", str(tmp / "f")],
                          capture_output=True).returncode == 0
