"""Graph inputs of 1 and 5 GiB (issue 21): sizes are unsigned end to end, and what a wasm32 memory cannot hold is
refused at package time with the figure.

A Relu on float32[2^28] (1 GiB in, 1 GiB out) has a 2 GiB arena: 0x80000000, which an i32 reads as -2147483648.
Each runtime must bind it at its real size. Running it end to end takes 3-6 GB of memory per runtime (measured in
docs/security.md, "Graph inputs over 2 GiB"), too much for CI: here each runtime opens the real bundle and binds
the arena. Python and Node grow wasm memory without touching it; `edgepack-run --info` maps it from the kernel's
zero pages (nothing of it becomes resident)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from packager.api import package
from packager.bundle import load_bundle

REPO = Path(__file__).resolve().parent.parent
GIB_ELEMENTS = 1 << 28   # float32: 1 GiB


def _relu(n: int) -> onnx.ModelProto:
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu")], "big_io",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


@pytest.fixture(scope="module")
def gib_bundle(tmp_path_factory) -> Path:
    return package(_relu(GIB_ELEMENTS), out=tmp_path_factory.mktemp("bigio") / "b", verify=False)


def test_five_gib_input_refused_with_the_figure(tmp_path: Path) -> None:
    onnx.save(_relu(5 * GIB_ELEMENTS), tmp_path / "m.onnx")
    r = subprocess.run([sys.executable, "-m", "packager.cli", str(tmp_path / "m.onnx"), "-o", str(tmp_path / "b")],
                       capture_output=True, text=True, cwd=REPO, timeout=120)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert "error: tensor 'x' [1342177280] needs 5.0 GiB: more than a wasm32 memory holds (4 GiB)" in r.stderr, r.stderr
    assert not (tmp_path / "b").exists()


def test_dimension_over_i32_is_a_clean_error(tmp_path: Path) -> None:
    """uint8[2^31] is 2 GiB, which wasm32 holds, but its dim does not fit a plan's i32 dims (a struct.error traceback
    from plan/layout.py before)."""
    g = helper.make_graph([helper.make_node("Shape", ["x"], ["y"], name="shape")], "big_dim",
                          [helper.make_tensor_value_info("x", TensorProto.UINT8, [1 << 31])],
                          [helper.make_tensor_value_info("y", TensorProto.INT64, [1])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, tmp_path / "m.onnx")
    r = subprocess.run([sys.executable, "-m", "packager.cli", str(tmp_path / "m.onnx"), "-o", str(tmp_path / "b")],
                       capture_output=True, text=True, cwd=REPO, timeout=120)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert "error: tensor 'x' [2147483648]: a dimension of 2^31 or more does not fit a plan's 32-bit dims" in r.stderr
    assert not (tmp_path / "b").exists()


def test_manifest_states_the_2gib_arena(gib_bundle: Path) -> None:
    m = json.loads((gib_bundle / "manifest.json").read_text())
    assert m["plan"]["arena_bytes"] == 1 << 31
    assert m["inputs"][0]["shape"] == [GIB_ELEMENTS]


def test_python_binds_the_2gib_arena(gib_bundle: Path) -> None:
    b = load_bundle(gib_bundle)
    s = b.session()
    assert s.ex["ep_arena_bytes"](s.store) == 1 << 31   # an i32 read: -2147483648, and nothing was grown
    assert s.memory_bound == s.arena_ptr + (1 << 31)
    assert s.mem.data_len(s.store) >= s.memory_bound
    x, y = b.inputs[0]["tensor"], b.outputs[0]["tensor"]
    assert s.ex["ep_tensor_nbytes"](s.store, x) == s.ex["ep_tensor_nbytes"](s.store, y) == 1 << 30
    # the output lies past the input, its last byte inside the grown memory, and reads back what is written there
    at = s.ex["ep_tensor_data"](s.store, y)
    assert at >= s.arena_ptr + (1 << 30) and at + (1 << 30) <= s.memory_bound
    s._put(at + (1 << 30) - 4, b"\x01\x02\x03\x04")
    assert s._bytes(at + (1 << 30) - 4, 4).tobytes() == b"\x01\x02\x03\x04"


def test_node_binds_the_2gib_arena(gib_bundle: Path, tmp_path: Path) -> None:
    script = tmp_path / "t.mjs"
    script.write_text("""
const [runtime, dir] = process.argv.slice(2);
const { load } = await import(runtime);
const s = await load(dir, { variant: 'simd' });
console.log(JSON.stringify({ arena: s.ex.ep_arena_bytes() >>> 0, ptr: s.arenaPtr, have: s.memory.buffer.byteLength,
  y: s.ex.ep_tensor_data(s.outputs[0].tensor) >>> 0 }));
""")
    r = subprocess.run(["node", str(script), (REPO / "web" / "src" / "index.js").as_uri(), str(gib_bundle)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["arena"] == 1 << 31 and got["have"] >= got["ptr"] + (1 << 31), got
    assert got["y"] + (1 << 30) <= got["have"], got


def test_edgepack_run_reads_the_2gib_arena(gib_bundle: Path) -> None:
    subprocess.run(["make", "-s", "-C", str(REPO / "edge"), "build/host/edgepack-run"], check=True, capture_output=True)
    r = subprocess.run([str(REPO / "edge" / "build" / "host" / "edgepack-run"), str(gib_bundle), "--info"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "arena 2147483648 bytes" in r.stdout and f"input  x: float32[{GIB_ELEMENTS}]" in r.stdout, r.stdout
