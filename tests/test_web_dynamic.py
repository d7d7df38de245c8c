"""Run-time shapes in the web runtime (plan version 2, issue 17): one bundle packaged by default (no --input-shape) runs at
several shapes in Node on every wasm build (simd, relaxed, scalar, threads), agreeing with onnxruntime; a repeated
shape resolves nothing; a larger shape grows the memory (the threaded build's shared memory too); inputs outside
the bundle's bounds are refused naming the input, dimension and bound; in Chromium one bundle at two shapes (and
backend 'webgpu' runs it on wasm, saying why); the per-model index.d.ts types symbolic dims as number. Control flow
(If with a run-time condition and branches of different shapes, Loop with a run-time trip count and condition and a
scan output, Scan) runs its sub-plans in Node as under wasmtime and onnxruntime.

Every model is packaged by default, as a user would (no --input-shape: run-time shapes); one the packager falls back
to fixed shapes for fails its cases with the packager's notice."""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from packager import load_bundle, package
from packager.reference import reference_run
from packager.plan import layout
from packager.plan.opcodes import Op

from .browser_env import ISOLATED, chromium, chromium_missing, serving
from .conftest import model_path
from .test_web_node import RELAXED_FLAG, RUNTIME, _node_major

REPO = Path(__file__).resolve().parent.parent
TSC = REPO / "web" / "node_modules" / ".bin" / "tsc"

pytestmark = pytest.mark.skipif(_node_major() < 20, reason="needs Node >= 20")

# One session, several runs (each its own feeds, or an error); counts ep_resolve calls by wrapping the export.
DRIVER = r"""
import { readFileSync, writeFileSync } from 'node:fs';
const job = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const { load } = await import(job.runtime);
const res = { runs: [] };
let s;
try {
  s = await load(job.bundle, job.options);
} catch (e) {
  console.log(JSON.stringify({ loadError: e.message, name: e.name }));
  process.exit(0);
}
Object.assign(res, { variant: s.variant, backend: s.backend, features: s.features, notes: s.notes, dynamic: s.dynamic, dims: s.dims });
let resolves = 0;
const resolve = s.ex.ep_resolve;
s.ex = { ...s.ex, ep_resolve: () => { resolves++; return resolve(); } };
for (const [r, run] of job.runs.entries()) {
  const one = {};
  try {
    const feeds = {};
    for (const [name, f] of Object.entries(run)) {
      const b = readFileSync(f.file);
      feeds[name] = { data: new globalThis[f.ctor](b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength)), dims: f.dims };
    }
    const out = await s.run(feeds);
    one.outputs = {};
    for (const [name, t] of Object.entries(out)) {
      const file = `${job.out_dir}/r${r}_${name.replace(/[^A-Za-z0-9_.-]/g, '_')}.bin`;
      writeFileSync(file, new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength));
      one.outputs[name] = { file, dims: t.dims, dtype: t.dtype };
    }
  } catch (e) {
    Object.assign(one, { error: e.message, name: e.name, status: e.status ?? null });
  }
  Object.assign(one, { resolves, memory: s.memory.buffer.byteLength });
  res.runs.push(one);
}
if (job.reserve) {   // what a shape needing that much memory meets when it grows (without feeding gigabytes)
  try { s._reserve(job.reserve, 'inputs (probe)'); res.reserved = s.memory.buffer.byteLength; } catch (e) { res.reserveError = `${e.name}: ${e.message}`; }
}
s.destroy();
console.log(JSON.stringify(res));
"""

CTORS = {"float32": "Float32Array", "int64": "BigInt64Array", "bool": "Uint8Array", "uint8": "Uint8Array"}

# variant name -> (load variant, load options, node flags)
BUILDS = {
    "simd": ("simd", {"threads": 1}, ()),
    "relaxed": ("relaxed", {"threads": 1}, (RELAXED_FLAG,)),
    "scalar": ("scalar", {"threads": 1}, ()),
    "threads": ("simd", {"threads": 2}, ()),
    "threads-relaxed": ("relaxed", {"threads": 2}, (RELAXED_FLAG,)),
}


def _node_runs(tmp: Path, bundle: Path, runs: list[dict[str, np.ndarray]], build: str = "simd",
               options: dict | None = None, dims: list[dict] | None = None, reserve: int = 0) -> dict:
    """Runs each feed set in turn on one session; dims[i] overrides run i's dims (to send inconsistent ones)."""
    variant, opts, flags = BUILDS[build]
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "driver.mjs").write_text(DRIVER)
    job_runs = []
    for r, feeds in enumerate(runs):
        jr = {}
        for i, (name, a) in enumerate(feeds.items()):
            f = tmp / f"r{r}_in{i}.bin"
            f.write_bytes(np.ascontiguousarray(a).tobytes())
            jr[name] = {"file": str(f), "ctor": CTORS[a.dtype.name], "dims": ((dims or [{}] * len(runs))[r]).get(name, list(a.shape))}
        job_runs.append(jr)
    job = {"runtime": RUNTIME.as_uri(), "bundle": str(bundle), "options": dict(opts, variant=variant, **(options or {})),
           "runs": job_runs, "out_dir": str(tmp), "reserve": reserve}
    (tmp / "job.json").write_text(json.dumps(job))
    r = subprocess.run(["node", *flags, str(tmp / "driver.mjs"), str(tmp / "job.json")], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def _outputs(run: dict) -> dict[str, np.ndarray]:
    assert "error" not in run, run
    return {k: np.fromfile(v["file"], dtype=np.dtype(v["dtype"])).reshape(v["dims"]) for k, v in run["outputs"].items()}


# ---- models -----------------------------------------------------------------------------------------------------

def _model(nodes, inputs, outputs, inits=()) -> onnx.ModelProto:
    m = helper.make_model(helper.make_graph(nodes, "dyn", inputs, outputs, list(inits)), opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def _elementwise() -> onnx.ModelProto:
    """Two inputs sharing 'batch' (x2 broadcasts over 'sequence'), two outputs: unary and binary kernels only."""
    b = numpy_helper.from_array(np.linspace(-1, 1, 8).astype(np.float32), "b")
    f32 = lambda n, s: helper.make_tensor_value_info(n, TensorProto.FLOAT, s)   # noqa: E731
    return _model([helper.make_node("Add", ["x", "b"], ["a"]), helper.make_node("Relu", ["a"], ["r"]),
                   helper.make_node("Mul", ["r", "x2"], ["y"]), helper.make_node("Sigmoid", ["x"], ["z"])],
                  [f32("x", ["batch", "sequence", 8]), f32("x2", ["batch", 1, 8])],
                  [f32("y", ["batch", "sequence", 8]), f32("z", ["batch", "sequence", 8])], [b])


def _softmax_transpose() -> onnx.ModelProto:
    """x[batch, seq, 8] -> Relu -> + b -> Softmax(-1) -> Transpose -> y[8, seq, batch]: output dims permuted."""
    b = numpy_helper.from_array(np.linspace(-1, 1, 8).astype(np.float32), "b")
    return _model([helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Add", ["r", "b"], ["a"]),
                   helper.make_node("Softmax", ["a"], ["s"], axis=-1), helper.make_node("Transpose", ["s"], ["y"], perm=[2, 1, 0])],
                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", 8])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, "seq", "batch"])], [b])


def _matmul() -> onnx.ModelProto:
    """MatMul + Add + Relu over [batch, sequence, 16] (one fused kernel with scratch sized per shape)."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((16, 8)).astype(np.float32), "w")
    c = numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), "c")
    return _model([helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Add", ["h", "c"], ["a"]),
                   helper.make_node("Relu", ["a"], ["y"])],
                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "sequence", 16])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "sequence", 8])], [w, c])


def _zoo(name: str):
    return lambda: onnx.load(str(model_path(name)))


# name -> (model, [input shapes per run, by input], builds to run on). Shapes keep the run time modest: the CNNs run
# on the SIMD builds only; the last elementwise shape needs tens of MiB, so every build grows its memory.
ELEMENTWISE_SHAPES = [{"x": (1, 7, 8), "x2": (1, 1, 8)}, {"x": (2, 128, 8), "x2": (2, 1, 8)}, {"x": (1, 512, 8), "x2": (1, 1, 8)},
                      {"x": (4, 65536, 8), "x2": (4, 1, 8)}, {"x": (1, 7, 8), "x2": (1, 1, 8)}]
SEQ_SHAPES = [(1, 7), (2, 128), (1, 512)]
IMAGE_SHAPES = [(1, 3, 224, 224), (1, 3, 160, 320), (2, 3, 320, 480)]
ALL = tuple(BUILDS)
MODELS = {
    "elementwise": (_elementwise, ELEMENTWISE_SHAPES, ALL),
    "softmax_transpose": (_softmax_transpose, [{"x": s + (8,)} for s in SEQ_SHAPES + [(3, 5)]], ("simd", "scalar", "threads-relaxed")),
    "matmul": (_matmul, [{"x": s + (16,)} for s in SEQ_SHAPES + [(1, 7)]], ALL),
    "minilm_like_dyn": (_zoo("minilm_like_dyn"), [{"input_ids": s} for s in SEQ_SHAPES], ("simd", "relaxed", "scalar", "threads")),
    "resnet18_dyn": (_zoo("resnet18_dyn"), [{"input": s} for s in IMAGE_SHAPES], ("simd", "threads-relaxed")),
    "mobilenetv2_dyn": (_zoo("mobilenetv2_dyn"), [{"input": s} for s in IMAGE_SHAPES], ("threads",)),
}


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("dyn")


_BUNDLES: dict[str, Path | str] = {}


def _bundle(work: Path, name: str) -> Path:
    """The model packaged as a user would, without input shapes (once per module): run-time shapes are the default.
    A fallback to the static plan fails every case that needs the bundle, with the packager's notice."""
    if name not in _BUNDLES:
        path = package(MODELS[name][0](), target="web", out=work / name)
        man = json.loads((path / "manifest.json").read_text())
        _BUNDLES[name] = path if man["plan"]["version"] == 2 and man.get("dims") else \
            f"{name}: the default gave fixed shapes: {man['notices']}"
    b = _BUNDLES[name]
    if isinstance(b, str):
        pytest.fail(b)
    return b


def _feeds(model: onnx.ModelProto, shapes: dict[str, tuple], seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    out = {}
    for i in model.graph.input:
        if i.name not in shapes:
            continue
        if i.type.tensor_type.elem_type == TensorProto.INT64:
            out[i.name] = rng.integers(0, 1000, shapes[i.name]).astype(np.int64)
        else:
            out[i.name] = rng.standard_normal(shapes[i.name]).astype(np.float32)
    return out


def _close(got: np.ndarray, want: np.ndarray, what: str) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape, (what, got.shape, want.shape)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(want).max(initial=0))), err_msg=what)


CASES = [(m, b) for m, (_, _, builds) in MODELS.items() for b in builds]


@pytest.mark.parametrize("name,build", CASES, ids=[f"{m}-{b}" for m, b in CASES])
def test_shapes_match_onnxruntime(name, build, work, tmp_path) -> None:
    bundle = _bundle(work, name)
    make, shapes, _ = MODELS[name]
    model = make()
    runs = [_feeds(model, s, seed) for seed, s in enumerate(shapes)]
    res = _node_runs(tmp_path, bundle, runs, build)
    assert "loadError" not in res, res
    assert res["dynamic"] is True and res["variant"] == build, res
    if build.startswith("threads"):
        assert res["features"]["threads"] == 2
    # the same .wasm under wasmtime (packager/bundle.py): bit-identical (the threaded builds split work, not sums)
    py = load_bundle(bundle, build) if build in ("simd", "scalar") else None
    for r, (feeds, run) in enumerate(zip(runs, res["runs"])):
        got = _outputs(run)
        want = reference_run(model, feeds)
        assert set(got) == set(want)
        same = py.run(feeds) if py else {}
        for k in want:
            _close(got[k], want[k], f"{name} {build} run {r} {[list(a.shape) for a in feeds.values()]}: {k}")
            if py:
                np.testing.assert_array_equal(got[k], same[k], err_msg=f"{name} {build} run {r}: {k} vs wasmtime")
    # a shape seen last time resolves nothing; a new one resolves once
    distinct = [i for i, s in enumerate(shapes) if i == 0 or s != shapes[i - 1]]
    assert [run["resolves"] for run in res["runs"]] == [sum(1 for d in distinct if d <= i) for i in range(len(shapes))]
    if name == "elementwise":   # 4x65536x8 floats: the memory grew for it, and never shrinks
        mem = [run["memory"] for run in res["runs"]]
        assert mem[3] > mem[2] and mem[4] == mem[3] and mem[3] >= 3 * 4 * 65536 * 8 * 4, mem


def test_repeated_shape_resolves_nothing_and_static_bundles_never_resolve(work, tmp_path) -> None:
    bundle = _bundle(work, "elementwise")
    a = {"x": np.ones((1, 7, 8), np.float32), "x2": np.ones((1, 1, 8), np.float32)}
    b = {"x": np.ones((2, 7, 8), np.float32), "x2": np.ones((2, 1, 8), np.float32)}
    res = _node_runs(tmp_path / "dyn", bundle, [a, a, a, b, b, a])
    assert [r["resolves"] for r in res["runs"]] == [1, 1, 1, 2, 2, 3]
    static = package(_elementwise(), target="web", out=work / "static", input_shapes={"x": (2, 7, 8), "x2": (2, 1, 8)}, verify=False)
    res = _node_runs(tmp_path / "static", static, [b, b])
    assert res["dynamic"] is False and res["dims"] == {} and [r["resolves"] for r in res["runs"]] == [0, 0]
    for r in res["runs"]:
        assert r["outputs"]["y"]["dims"] == [2, 7, 8]


@pytest.fixture(scope="module")
def bounded(work) -> Path:
    """The elementwise model with bounds: batch 1..4, sequence 1..512."""
    _bundle(work, "elementwise")   # skips like the others until its kernels resolve shapes
    return package(_elementwise(), target="web", out=work / "bounded", dynamic=True,
                   input_shapes={"x": ((1, 4), (1, 512), 8), "x2": ((1, 4), 1, 8)})


def test_inputs_outside_bounds_are_refused_naming_input_dimension_and_bound(bounded, tmp_path) -> None:
    man = json.loads((bounded / "manifest.json").read_text())
    assert man["dims"]["batch"]["max"] == 4 and man["dims"]["sequence"]["max"] == 512, man["dims"]
    f = lambda b, s, b2=None: {"x": np.ones((b, s, 8), np.float32), "x2": np.full((b if b2 is None else b2, 1, 8), 2, np.float32)}   # noqa: E731
    runs = [f(2, 100), f(1, 513), f(5, 7), f(2, 7, 3), {"x": np.ones((1, 7, 9), np.float32), "x2": np.ones((1, 1, 8), np.float32)},
            f(1, 7), f(2, 100), f(4, 512)]
    res = _node_runs(tmp_path, bounded, runs)
    e = [r.get("error") for r in res["runs"]]
    assert res["runs"][1]["name"] == "EdgepackError"
    assert e[1] == "input 'x': dimension 1 ('sequence') is 513, outside this bundle's bounds [1..512] (at most 512: package it with a larger bound)", e[1]
    assert e[2].startswith("input 'x': dimension 0 ('batch') is 5, outside this bundle's bounds [1..4]"), e[2]
    assert e[3] == "input 'x2': dimension 0 ('batch') is 3, but input 'x' gives 'batch' = 2", e[3]
    assert e[4] == "input 'x': shape [1,7,9], expected ['batch','sequence',8]", e[4]
    for i in (0, 5, 6, 7):   # refused shapes leave the session usable, at old and new shapes
        want = reference_run(_elementwise(), runs[i])
        for k, v in _outputs(res["runs"][i]).items():
            _close(v, want[k], f"run {i} {k}")
    assert [r["resolves"] for r in res["runs"]] == [1, 1, 1, 1, 1, 2, 3, 4]   # a refused shape never reaches the core


def test_element_count_must_match_the_dims(work, tmp_path) -> None:
    bundle = _bundle(work, "elementwise")
    feeds = {"x": np.ones((2, 7, 8), np.float32), "x2": np.ones((2, 1, 8), np.float32)}
    res = _node_runs(tmp_path, bundle, [feeds], dims=[{"x": [2, 6, 8]}])
    assert res["runs"][0]["error"] == "input 'x': 112 elements for shape [2,6,8], expected 96"


def test_threads_shared_memory_maximum_is_a_clear_error(work, tmp_path) -> None:
    """The threaded build's shared memory stops at 2 GiB: a shape needing more is an EdgepackError naming the need."""
    bundle = _bundle(work, "elementwise")
    feeds = {"x": np.ones((1, 3, 8), np.float32), "x2": np.ones((1, 1, 8), np.float32)}
    res = _node_runs(tmp_path, bundle, [feeds], "threads", reserve=2**31 + 2**20)
    assert res["reserveError"] == "EdgepackError: inputs (probe) needs 2049 MiB of WebAssembly memory, above this build's 2048 MiB maximum", res


def test_webgpu_backend_in_node_fails_as_for_static_bundles(work, tmp_path) -> None:
    """Node has no WebGPU: 'webgpu' is refused as for any bundle, 'auto' runs on wasm without a note."""
    bundle = _bundle(work, "elementwise")
    feeds = {"x": np.ones((1, 3, 8), np.float32), "x2": np.ones((1, 1, 8), np.float32)}
    res = _node_runs(tmp_path / "gpu", bundle, [feeds], options={"backend": "webgpu"})
    assert res["loadError"].startswith("backend 'webgpu': "), res
    res = _node_runs(tmp_path / "auto", bundle, [feeds], options={"backend": "auto"})
    assert res["backend"] == "wasm" and res["notes"] == [] and "error" not in res["runs"][0]


# ---- control flow (If, Loop, Scan: sub-plans, docs/plan-format.md) ---------------------------------------------------

def _if_model() -> onnx.ModelProto:
    """y = x * w (2x3) when c, else x[0:1] + b (1x3): the condition known only at run time, the output's dims set by
    the branch that runs."""
    F = TensorProto.FLOAT
    then = helper.make_graph([helper.make_node("Mul", ["x", "w"], ["t"])], "then", [], [helper.make_tensor_value_info("t", F, [2, 3])])
    els = helper.make_graph([
        helper.make_node("Constant", [], ["st"], value=numpy_helper.from_array(np.array([0], np.int64))),
        helper.make_node("Constant", [], ["en"], value=numpy_helper.from_array(np.array([1], np.int64))),
        helper.make_node("Slice", ["x", "st", "en"], ["s"]), helper.make_node("Add", ["s", "b"], ["e"])], "else", [],
        [helper.make_tensor_value_info("e", F, [1, 3])], [numpy_helper.from_array(np.array([10, 20, 30], np.float32), "b")])
    return _model([helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=els), helper.make_node("Sigmoid", ["x"], ["z"])],
                  [helper.make_tensor_value_info("c", TensorProto.BOOL, []), helper.make_tensor_value_info("x", F, [2, 3])],
                  [helper.make_tensor_value_info("y", F, ["rows", 3]), helper.make_tensor_value_info("z", F, [2, 3])],
                  [numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), "w")])


def _loop_model() -> onnx.ModelProto:
    """Loop M times while cond (the body computes it: sum(y) < 100): y <- y * 1.5 + c (an outer initializer); the
    iteration count i + 1 of the last iteration as a second loop-carried value (scan outputs, whose length is the
    trip count, need it known at package time: analyze refuses them)."""
    F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
    body = helper.make_graph(
        [helper.make_node("Mul", ["y_in", "k"], ["m"]), helper.make_node("Add", ["m", "c"], ["y_out"]),
         helper.make_node("ReduceSum", ["y_out"], ["s"], keepdims=0), helper.make_node("Less", ["s", "lim"], ["cond_out"]),
         helper.make_node("Add", ["i", "one"], ["n_out"])], "body",
        [helper.make_tensor_value_info("i", I64, []), helper.make_tensor_value_info("cond_in", B, []),
         helper.make_tensor_value_info("y_in", F, [3]), helper.make_tensor_value_info("n_in", I64, [])],
        [helper.make_tensor_value_info("cond_out", B, []), helper.make_tensor_value_info("y_out", F, [3]),
         helper.make_tensor_value_info("n_out", I64, [])],
        [numpy_helper.from_array(np.array(1.5, np.float32), "k"), numpy_helper.from_array(np.array(100, np.float32), "lim"),
         numpy_helper.from_array(np.array(1, np.int64), "one")])
    return _model([helper.make_node("Loop", ["M", "cond", "y0", "n0"], ["y", "n"], body=body)],
                  [helper.make_tensor_value_info("M", I64, []), helper.make_tensor_value_info("cond", B, []),
                   helper.make_tensor_value_info("y0", F, [3])],
                  [helper.make_tensor_value_info("y", F, [3]), helper.make_tensor_value_info("n", I64, [])],
                  [numpy_helper.from_array(np.array([1, 2, 3], np.float32), "c"), numpy_helper.from_array(np.array(0, np.int64), "n0")])


def _scan_model() -> onnx.ModelProto:
    """Scan-9 over axis 0 of x[5, 2, 3]: a running sum state and the negated running sums stacked."""
    F = TensorProto.FLOAT
    body = helper.make_graph([helper.make_node("Add", ["s_in", "xs"], ["s_out"]), helper.make_node("Neg", ["s_out"], ["y_t"])],
                             "body", [helper.make_tensor_value_info("s_in", F, [2, 3]), helper.make_tensor_value_info("xs", F, [2, 3])],
                             [helper.make_tensor_value_info("s_out", F, [2, 3]), helper.make_tensor_value_info("y_t", F, [2, 3])])
    return _model([helper.make_node("Scan", ["s0", "x"], ["s", "ys"], body=body, num_scan_inputs=1)],
                  [helper.make_tensor_value_info("s0", F, [2, 3]), helper.make_tensor_value_info("x", F, [5, 2, 3])],
                  [helper.make_tensor_value_info("s", F, [2, 3]), helper.make_tensor_value_info("ys", F, [5, 2, 3])])


def _if_runs() -> list[dict[str, np.ndarray]]:
    x = np.random.default_rng(5).standard_normal((2, 3)).astype(np.float32)
    return [{"c": np.array(c), "x": x * (i + 1)} for i, c in enumerate([True, False, True, False, False])]


def _loop_runs() -> list[dict[str, np.ndarray]]:
    y0 = np.array([0.5, -1, 2], np.float32)
    return [{"M": np.array(m, np.int64), "cond": np.array(c), "y0": y0 * (i + 1)}
            for i, (m, c) in enumerate([(3, True), (0, True), (40, True), (7, False), (1, True), (5, True)])]


def _scan_runs() -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(6)
    return [{"s0": rng.standard_normal((2, 3)).astype(np.float32), "x": rng.standard_normal((5, 2, 3)).astype(np.float32)}
            for _ in range(2)]


CONTROL = {"if": (_if_model, _if_runs, Op.IF), "loop": (_loop_model, _loop_runs, Op.LOOP), "scan": (_scan_model, _scan_runs, Op.SCAN)}
CONTROL_CASES = [(m, b) for m in CONTROL for b in ("simd", "scalar", "threads")]


@pytest.mark.parametrize("name,build", CONTROL_CASES, ids=[f"{m}-{b}" for m, b in CONTROL_CASES])
def test_control_flow_runs_in_node_like_onnxruntime(name, build, work, tmp_path) -> None:
    """One session, several runs: the If's branch and the Loop's trip count change from run to run (so do the dims
    of the outputs they set); outputs equal onnxruntime's and, on simd and scalar, the same wasm under wasmtime."""
    make, feeds_for, op = CONTROL[name]
    bundle = work / f"control_{name}"
    if not bundle.exists():
        bundle = package(make(), target="web", out=bundle)   # verified against onnxruntime at package time too
    man = json.loads((bundle / "manifest.json").read_text())
    assert man["plan"]["version"] == 2 and man["verification"]["max_abs_diff"] < 1e-5, man
    plan = layout.decode((bundle / "model.plan").read_bytes())
    assert op in [n.op for n in plan.nodes]
    runs = feeds_for()
    res = _node_runs(tmp_path, bundle, runs, build)
    assert "loadError" not in res, res
    assert res["dynamic"] is True, res
    py = load_bundle(bundle, build) if build in ("simd", "scalar") else None
    dims, counts = [], []
    for r, (feeds, run) in enumerate(zip(runs, res["runs"])):
        got = _outputs(run)
        want = reference_run(make(), feeds)
        assert set(got) == set(want), (got.keys(), want.keys())
        same = py.run(feeds) if py else {}
        for k in want:
            _close(got[k], want[k], f"{name} {build} run {r}: {k}")
            if py:
                np.testing.assert_array_equal(got[k], same[k], err_msg=f"{name} {build} run {r}: {k} vs wasmtime")
        dims.append({k: v.shape for k, v in got.items()})
        counts.append(int(got["n"]) if name == "loop" else None)
    if name == "if":   # the branch decides y's rows, run after run; the npm typing says a number, not a literal
        assert [d["y"] for d in dims] == [(2, 3), (1, 3), (2, 3), (1, 3), (1, 3)], dims
        d_ts = (bundle / "index.d.ts").read_text()
        assert "y: { data: Float32Array; dims: [number, 3];" in d_ts and "z: { data: Float32Array; dims: [2, 3];" in d_ts, d_ts
    if name == "loop":   # iterations run: M, none (M = 0 or cond false), or until the body's condition stops it
        assert counts == [3, 0, 5, 0, 1, 5], counts


# ---- Chromium ------------------------------------------------------------------------------------------------------

PAGE_RUNS = """async ({ bundle, options, runs }) => {
  const { load } = await import('/edgepack/index.js');
  const res = { crossOriginIsolated: globalThis.crossOriginIsolated, runs: [] };
  let s;
  try { s = await load(bundle, options); } catch (e) { return { ...res, loadError: `${e.name}: ${e.message}` }; }
  Object.assign(res, { backend: s.backend, variant: s.variant, features: { ...s.features }, notes: [...s.notes], dynamic: s.dynamic });
  for (const run of runs) {
    const feeds = {};
    for (const x of run) feeds[x.name] = { data: new Float32Array(await (await fetch(x.url)).arrayBuffer()), dims: x.dims };
    try {
      const out = await s.run(feeds);
      const one = {};
      for (const [name, t] of Object.entries(out)) {
        const b = new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength);
        let bin = '';
        for (let i = 0; i < b.length; i += 0x8000) bin += String.fromCharCode.apply(null, b.subarray(i, i + 0x8000));
        one[name] = { dims: t.dims, b64: btoa(bin) };
      }
      res.runs.push({ outputs: one, memory: s.memory.buffer.byteLength });
    } catch (e) { res.runs.push({ error: `${e.name}: ${e.message}` }); }
  }
  s.destroy();
  return res;
}"""


@pytest.mark.skipif(chromium_missing() is not None, reason=str(chromium_missing()))
def test_chromium_one_bundle_two_shapes(work, tmp_path) -> None:
    """simd/relaxed on a plain page, threads on a cross-origin isolated one (its shared memory grows for the
    second shape), and backend 'webgpu' (SwiftShader here) running the version-2 plan on wasm with a note."""
    import base64
    bundle = _bundle(work, "elementwise")
    site = tmp_path / "site"
    (site / "data").mkdir(parents=True)
    (site / "index.html").write_text("<!doctype html><meta charset=utf-8><title>dyn</title>\n")
    shutil.copytree(bundle, site / "bundle")
    shapes = [ELEMENTWISE_SHAPES[1], ELEMENTWISE_SHAPES[3]]   # 2x128 then 4x65536 (grows the memory)
    feeds = [_feeds(_elementwise(), s, seed) for seed, s in enumerate(shapes)]
    runs = []
    for r, fd in enumerate(feeds):
        run = []
        for k, a in fd.items():
            (site / "data" / f"r{r}_{k}.bin").write_bytes(a.tobytes())
            run.append({"name": k, "dims": list(a.shape), "url": f"/data/r{r}_{k}.bin"})
        runs.append(run)
    cells = {"wasm": ("", {"threads": 1}), "threads": (ISOLATED, {"threads": 2, "variant": "simd"}),
             "webgpu": ("", {"backend": "webgpu", "threads": 1})}
    with serving({"/": site, "/edgepack": REPO / "web" / "src"}) as url, chromium() as browser:
        results = {}
        for cell, (base, options) in cells.items():
            page = browser.new_page()
            try:
                page.set_default_timeout(120_000)
                page.goto(url + base + "/index.html")
                results[cell] = page.evaluate(PAGE_RUNS, {"bundle": f"{base}/bundle/", "options": options,
                                                          "runs": [[dict(x, url=base + x["url"]) for x in run] for run in runs]})
            finally:
                page.close()
    for cell, res in results.items():
        assert "loadError" not in res, (cell, res)
        assert res["dynamic"] is True and res["backend"] == "wasm", (cell, res)
        for fd, run in zip(feeds, res["runs"]):
            assert "error" not in run, (cell, run)
            want = reference_run(_elementwise(), fd)
            for k, o in run["outputs"].items():
                got = np.frombuffer(base64.b64decode(o["b64"]), np.float32).reshape(o["dims"])
                _close(got, want[k], f"{cell} {k} {o['dims']}")
    assert results["threads"]["crossOriginIsolated"] and results["threads"]["features"]["threads"] == 2
    mem = [r["memory"] for r in results["threads"]["runs"]]
    assert mem[1] > mem[0] >= 0, mem
    assert any("plan version 2" in n and "running on wasm" in n for n in results["webgpu"]["notes"]), results["webgpu"]


# ---- per-model npm typing -------------------------------------------------------------------------------------------

GOOD_TS = """
import load, { inputs, dims, type Inputs, type Outputs } from './b/index.js';
const s = await load({ variant: 'simd', threads: 1 });
const small: Outputs = await s.run({ x: { data: new Float32Array(56), dims: [1, 7, 8] }, x2: { data: new Float32Array(8), dims: [1, 1, 8] } });
const big: Inputs = { x: { data: new Float32Array(2 * 128 * 8), dims: [2, 128, 8] }, x2: { data: new Float32Array(16), dims: [2, 1, 8] } };
const o = s.runSync(big);
const d: [number, number, 8] = o.y.dims;
const sym: 'batch' = inputs[0].shape[0];
const max: number | null = dims['sequence'].max;
console.log(small.z.data, d, sym, max, s.dynamic, s.dims);
"""

BAD_TS = {
    "fixed": ("await s.run({ x: { data: new Float32Array(63), dims: [1, 7, 9] }, x2: { data: new Float32Array(8), dims: [1, 1, 8] } });",
              "'9' is not assignable to type '8'"),
    "rank": ("await s.run({ x: { data: new Float32Array(56), dims: [7, 8] }, x2: { data: new Float32Array(8), dims: [1, 1, 8] } });",
             "Source has 2 element(s) but target requires 3"),
}


def test_npm_types_symbolic_dims_as_number(work, tmp_path) -> None:
    if not TSC.exists():
        pytest.fail("typescript is not installed: run scripts/setup.sh (npm install in web/)")
    bundle = _bundle(work, "elementwise")
    d_ts = (bundle / "index.d.ts").read_text()
    assert "x: { data: Float32Array; dims: readonly [number, number, 8] }" in d_ts, d_ts
    assert 'shape: ["batch", "sequence", 8]' in d_ts, d_ts
    shutil.copytree(bundle, tmp_path / "b")
    (tmp_path / "package.json").write_text(json.dumps({"name": "app", "private": True, "type": "module"}))
    names = ["good.ts"]
    (tmp_path / "good.ts").write_text(GOOD_TS)
    head = "import load from './b/index.js';\nconst s = await load();\n"
    for case, (line, _) in BAD_TS.items():
        (tmp_path / f"bad_{case}.ts").write_text(head + line + "\n")
        names.append(f"bad_{case}.ts")
    out = {}
    for n in names:   # one tsc per file: errors attributed without parsing
        r = subprocess.run([str(TSC), "--strict", "--noEmit", "--target", "es2022", "--module", "nodenext",
                            "--moduleResolution", "nodenext", "--lib", "es2022,dom", "--types", "node",
                            "--typeRoots", str(REPO / "web" / "node_modules" / "@types"), n],
                           cwd=tmp_path, capture_output=True, text=True, timeout=300)
        out[n] = r.stdout
    assert out["good.ts"] == "", out["good.ts"]
    for case, (_, msg) in BAD_TS.items():
        assert "error TS" in out[f"bad_{case}.ts"] and msg in out[f"bad_{case}.ts"], out[f"bad_{case}.ts"]
