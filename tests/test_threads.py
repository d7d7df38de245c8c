"""The threaded wasm builds (edgepack-threads.wasm, edgepack-threads-relaxed.wasm; web/src/threads.js) in Node
with worker threads: the five benchmark models give the single-threaded build's answers and stay within 1e-4 of onnxruntime; odd thread
counts and plans whose per-thread scratch holds fewer threads than are running still give the right answer."""
from __future__ import annotations

import functools
import http.server
import json
import shutil
import subprocess
import threading
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from packager import load_bundle, package
from packager.reference import reference_run

from .conftest import model_path, seeded_feeds
from .test_web_node import RELAXED_FLAG, REPO, RUNTIME, _node_major, _node_run, _outputs

pytestmark = pytest.mark.skipif(_node_major() < 20, reason="needs Node >= 20")

MODELS = ["cifar10net", "cifar10net_unfused", "mobilenetv2", "resnet18", "minilm_like"]
TOL = 1e-4


def _inputs(bundle: Path, seed: int) -> dict[str, np.ndarray]:
    return seeded_feeds(load_bundle(bundle).inputs, seed)


def _check(tmp: Path, bundle: Path, threads: int, seed: int = 1, isa: str = "simd") -> None:
    """isa 'simd': edgepack-threads.wasm against edgepack.wasm; 'relaxed': edgepack-threads-relaxed.wasm against
    edgepack-relaxed.wasm (Node 20 needs the relaxed-SIMD flag)."""
    feeds = _inputs(bundle, seed)
    flags = (RELAXED_FLAG,) if isa == "relaxed" else ()
    res = _node_run(tmp / f"t{threads}{isa}", bundle, feeds, isa, options={"threads": threads}, node_flags=flags)
    assert res.get("variant") == {"simd": "threads", "relaxed": "threads-relaxed"}[isa], res
    got = _outputs(res)
    single = _outputs(_node_run(tmp / f"t1{isa}", bundle, feeds, variant=isa, node_flags=flags))
    want = reference_run(onnx.load(str(bundle / "model.onnx")), feeds)
    # the same arithmetic split differently: the single-threaded build's answer (relaxed FMA may be fused or
    # not depending on V8's tier, so that build agrees to rounding only)
    same = 1e-6 if isa == "simd" else 1e-5
    for k, w in want.items():
        np.testing.assert_allclose(got[k], w, rtol=TOL, atol=TOL, err_msg=f"{bundle.name} threads={threads} output {k}")
        np.testing.assert_allclose(got[k], single[k], rtol=same, atol=same, err_msg=f"{bundle.name}: threads vs single")


@pytest.mark.parametrize("name", MODELS)
def test_model_two_threads(name: str, tmp_path: Path) -> None:
    bundle = package(model_path(name), out=tmp_path / name, dynamic=False, emit_onnx=True)
    _check(tmp_path, bundle, 2)


def _convnet() -> onnx.ModelProto:
    """Every threaded kernel on odd sizes: CONV (im2col split by columns, direct 1x1, grouped: chunks of rows per
    thread), POOL, WINOGRAD_CONV_F4 (or WINOGRAD_CONV) with a residual (several blocks: split by blocks),
    DEPTHWISE_CONV (stride 1 and 2), Gemm, MatMul."""
    rng = np.random.default_rng(0)

    def w(name, *shape):
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.2).astype(np.float32), name)
    inits = [w("w0", 24, 3, 3, 3), w("b0", 24), w("w1", 24, 24, 3, 3), w("wd", 24, 1, 3, 3), w("wg", 24, 8, 3, 3),
             w("w2", 40, 24, 1, 1),
             w("wd2", 40, 1, 3, 3), w("wf", 40, 10), w("m", 10, 7)]
    nodes = [
        helper.make_node("Conv", ["x", "w0", "b0"], ["c0"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c0"], ["r0"]),
        helper.make_node("MaxPool", ["r0"], ["q0"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["q0", "w1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["c1", "q0"], ["a1"]),
        helper.make_node("Conv", ["a1", "wd"], ["d1"], group=24, pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["d1", "wg"], ["e1"], group=3, pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["e1", "w2"], ["p2"]),
        helper.make_node("Conv", ["p2", "wd2"], ["d2"], group=40, pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("GlobalAveragePool", ["d2"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("MatMul", ["f", "wf"], ["h"]),
        helper.make_node("MatMul", ["h", "m"], ["y"]),
    ]
    g = helper.make_graph(nodes, "threads", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 71, 67])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 7])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def _streaming_net() -> onnx.ModelProto:
    """The kernels split across threads since session 14, on sizes that split: UNARY (a Tanh: SiLU after a Conv fuses into its epilogue), BINARY (one long
    row; rows of a per-channel broadcast), CONCAT (byte ranges), SOFTMAX (rows), and after quantize_static (QDQ): QCONV
    (3x3 gathered, 1x1 copied), QDEPTHWISE_CONV, QMAXPOOL, QUANTIZE_LINEAR and DEQUANTIZE_LINEAR."""
    rng = np.random.default_rng(3)

    def w(name, *shape):
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.3).astype(np.float32), name)
    inits = [w("w0", 32, 8, 3, 3), w("wd", 32, 1, 3, 3), w("w1", 32, 32, 1, 1), w("bc", 32, 1, 1), w("wm", 112, 40)]
    nodes = [
        helper.make_node("Conv", ["x", "w0"], ["c0"], pads=[1, 1, 1, 1]),
        helper.make_node("Sigmoid", ["c0"], ["s0"]),
        helper.make_node("Mul", ["c0", "s0"], ["a0"]),
        helper.make_node("Conv", ["a0", "wd"], ["d0"], group=32, pads=[1, 1, 1, 1]),
        helper.make_node("MaxPool", ["d0"], ["mp"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["mp", "w1"], ["c1"]),
        helper.make_node("Add", ["c1", "bc"], ["b1"]),
        helper.make_node("Add", ["b1", "a0"], ["b2"]),
        helper.make_node("Concat", ["b2", "a0"], ["cc"], axis=-1),
        helper.make_node("Tanh", ["cc"], ["th"]),
        helper.make_node("Softmax", ["th"], ["sm"], axis=-1),
        helper.make_node("Reshape", ["sm", "shape"], ["r"]),
        helper.make_node("MatMul", ["r", "wm"], ["y"]),
    ]
    inits.append(numpy_helper.from_array(np.array([1, 32 * 56, 112], np.int64), "shape"))
    g = helper.make_graph(nodes, "split", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 56, 56])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 32 * 56, 40])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


SPLIT_KERNELS = {"UNARY", "BINARY", "CONCAT", "SOFTMAX", "QCONV", "QWINOGRAD_CONV", "QDEPTHWISE_CONV", "QMAXPOOL", "QMATMUL",
                 "QUANTIZE_LINEAR", "DEQUANTIZE_LINEAR"}
SPLIT_CASES = {"float32": {"UNARY", "BINARY", "CONCAT", "SOFTMAX"},
               "qdq": {"QCONV", "QDEPTHWISE_CONV", "QMAXPOOL", "QUANTIZE_LINEAR"},
               "qdq_winograd": {"QWINOGRAD_CONV", "QCONV"}}
# (the int8 MatMul by a constant weight runs as a pre-packed 1x1 QCONV since session 14: no QMATMUL in these plans)


def _tasks_per_node(tmp: Path, bundle: Path, feeds: dict[str, np.ndarray]) -> list[int]:
    """Tasks each node hands to the pool in a 2-thread session (the pool's counters, summed over its threads)."""
    (tmp / "x.bin").write_bytes(np.ascontiguousarray(feeds["x"]).tobytes())
    script = tmp / "tasks.mjs"
    script.write_text(f"""
import {{ readFileSync }} from 'node:fs';
import {{ load }} from {json.dumps(RUNTIME.as_uri())};
const s = await load({json.dumps(str(bundle))}, {{ threads: 2, variant: 'simd' }});
const b = readFileSync({json.dumps(str(tmp / "x.bin"))});
await s.run({{ x: {{ data: new Float32Array(b.buffer, b.byteOffset, b.byteLength / 4), dims: s.inputs[0].shape }} }});
const ex = s._threads.instance.exports, pooled = () => ex.ep_thread_tasks(0) + ex.ep_thread_tasks(1);
const tasks = [];
for (let k = 0; k < ex.ep_num_nodes(); k++) {{ const t0 = pooled(); ex.ep_run_node(k); tasks.push(pooled() - t0); }}
console.log(JSON.stringify(tasks));
await s.close();
""")
    r = subprocess.run(["node", str(script)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.mark.parametrize("case", list(SPLIT_CASES))
def test_split_kernels_bit_exact(case: str, tmp_path: Path, monkeypatch) -> None:
    """Elementwise, softmax and the int8 convolution (QCONV gathered and 1x1, QWINOGRAD_CONV) / matmul kernels split
    across 2 threads give the single-threaded build's bits, every one of them hands tasks to the pool, and the answer
    matches onnxruntime."""
    import packager.ops.conv as conv
    import packager.ops.quant as quant
    from bench.page_profile import kinds
    monkeypatch.setattr(quant, "QWINOGRAD", case == "qdq_winograd")
    monkeypatch.setattr(conv, "WINOGRAD_MIN_CHANNELS", 8)   # the 8-channel 3x3 conv
    int8 = case != "float32"
    p = tmp_path / "net.onnx"
    onnx.save(_streaming_net(), str(p))
    feeds = {"x": np.random.default_rng(5).standard_normal((1, 8, 56, 56)).astype(np.float32)}
    if int8:
        from onnxruntime.quantization import CalibrationDataReader, QuantFormat, quantize_static

        class Reader(CalibrationDataReader):
            def __init__(self) -> None:
                self.left = [feeds]

            def get_next(self) -> dict | None:
                return self.left.pop() if self.left else None
        q = tmp_path / "net_int8.onnx"
        quantize_static(str(p), str(q), Reader(), quant_format=QuantFormat.QDQ, per_channel=True)
        p = q
    bundle = package(p, out=tmp_path / "b", dynamic=False, verify=False)
    two = _outputs(_node_run(tmp_path / "t2", bundle, feeds, "simd", options={"threads": 2}))
    one = _outputs(_node_run(tmp_path / "t1", bundle, feeds, "simd"))
    want = reference_run(onnx.load(str(p)), feeds)["y"]
    np.testing.assert_array_equal(two["y"], one["y"])
    scale = float(np.abs(want).max())
    assert float(np.abs(one["y"] - want).max()) <= (0.1 * scale if int8 else 1e-4 + 1e-4 * scale)
    kind = kinds(bundle)
    tasks = _tasks_per_node(tmp_path, bundle, feeds)
    split = {k for k, t in zip(kind, tasks) if t > 0}
    expect = SPLIT_KERNELS & set(kind)
    assert expect >= SPLIT_CASES[case], kind
    assert expect <= split, f"not split across threads: {sorted(expect - split)}"


@pytest.mark.parametrize("name", ["mobilenetv2", "resnet18", "minilm_like"])
def test_model_two_threads_relaxed(name: str, tmp_path: Path) -> None:
    bundle = package(model_path(name), out=tmp_path / name, dynamic=False, emit_onnx=True)
    _check(tmp_path, bundle, 2, isa="relaxed")


@pytest.mark.parametrize("threads,isa,f4", [(3, "simd", True), (5, "simd", True), (3, "relaxed", True), (3, "simd", False)])
def test_odd_thread_counts(threads: int, isa: str, f4: bool, tmp_path: Path, monkeypatch) -> None:
    import packager.ops.conv as conv
    monkeypatch.setattr(conv, "WINOGRAD_F4", f4)
    monkeypatch.setattr(conv, "WINOGRAD_F4_MIN_CHANNEL_PAIRS", 1)   # its 24-channel Winograd layer
    p = tmp_path / "convnet.onnx"
    onnx.save(_convnet(), str(p))
    _check(tmp_path, package(p, out=tmp_path / "b", emit_onnx=True), threads, isa=isa)


def test_plan_with_one_scratch_slot(tmp_path: Path, monkeypatch) -> None:
    """A plan sized for one thread's scratch (an older packager) runs right with more threads: the kernels
    use only as many threads as their scratch holds slices."""
    import packager.ops.conv as conv
    monkeypatch.setattr(conv, "THREAD_SLOTS", 1)
    p = tmp_path / "convnet.onnx"
    onnx.save(_convnet(), str(p))
    _check(tmp_path, package(p, out=tmp_path / "b", emit_onnx=True), 4)


def test_bad_thread_count(tmp_path: Path) -> None:
    p = tmp_path / "convnet.onnx"
    onnx.save(_convnet(), str(p))
    bundle = package(p, out=tmp_path / "b")
    res = _node_run(tmp_path / "bad", bundle, _inputs(bundle, 1), options={"threads": 17})
    assert not res["ok"] and "threads must be an integer in 1..16" in res["error"]


def test_workers_take_tasks(tmp_path: Path) -> None:
    """The workers really run tasks (a threaded session whose workers never woke would still be right). Between the
    jobs of a run they poll (RUN_SPINS), with spinning runs (threads.js `spin`, ep_set_spin) for the whole run, but
    only while a run is in flight (parallel.c, ep_pool_hot from ep_run): both modes give the same bits, and once the
    runs end the workers sleep, so an idle session costs no CPU. A worker left polling would burn a core for its
    whole bound (RUN_SPINS / HOT_SPINS polls: a millisecond / tens of milliseconds) after every run."""
    bundle = package(model_path("cifar10net"), out=tmp_path / "b", dynamic=False)
    script = tmp_path / "count.mjs"
    script.write_text(f"""
import {{ load }} from {json.dumps(RUNTIME.as_uri())};
const s = await load({json.dumps(str(bundle))}, {{ threads: 2 }});
const x = s.inputs[0];
const feeds = {{ [x.name]: {{ data: new Float32Array(x.shape.reduce((a, b) => a * b, 1)).fill(0.5), dims: x.shape }} }};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const ex = s._threads.instance.exports;
const bits = (r) => Object.values(r).map((t) => Array.from(t.data).join()).join();
const quiet = bits(s.runSync(feeds));
const idle = [];
for (let round = 0; round < 6; round++) {{
  ex.ep_set_spin(round & 1);   // the default polling between jobs, then spinning runs
  for (let i = 0; i < 20; i++) if (bits(s.runSync(feeds)) !== quiet) throw new Error(`run ${{i}} (spin ${{round & 1}}) differs`);
  await sleep(30);   // a worker's short spin after the last job (SPINS) ends long before
  const u0 = process.cpuUsage();
  await sleep(300);
  const u = process.cpuUsage(u0);
  idle.push((u.user + u.system) / 1000);
}}
// per mode, its quietest round (a loaded machine adds other threads' CPU to some)
const quietest = (m) => Math.min(...idle.filter((_, r) => (r & 1) === m));
console.log(JSON.stringify([ex.ep_thread_tasks(0), ex.ep_thread_tasks(1), ex.ep_thread_tasks(2), Math.max(quietest(0), quietest(1))]));
await s.close();
""")
    r = subprocess.run(["node", str(script)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    caller, worker, absent, idle_ms = json.loads(r.stdout)
    assert caller > 0 and worker > 0 and absent == 0, (caller, worker, absent)
    assert idle_ms < 15, f"{idle_ms:.1f} ms of CPU in 300 ms with no run in flight: a worker kept spinning"


PAGE = """<!doctype html><script type="module">
import { load } from './src/index.js';
try {
  const one = await load('bundle/', { variant: 'simd' }), two = await load('bundle/', { threads: 2 });
  const x = one.inputs[0];
  const feeds = { [x.name]: { data: Float32Array.from({ length: x.shape.reduce((a, b) => a * b, 1) }, (_, i) => Math.sin(i)), dims: x.shape } };
  const a = await one.run(feeds);
  // several runs: on a loaded machine the caller may finish a whole run's tasks before a worker wakes
  let diff = 0;
  for (let r = 0; r < 20; r++) {
    const b = await two.run(feeds);
    for (const k in a) for (let i = 0; i < a[k].data.length; i++) diff = Math.max(diff, Math.abs(a[k].data[i] - b[k].data[i]));
  }
  const ex = two._threads.instance.exports;
  window.result = { ok: true, isolated: crossOriginIsolated, diff, worker_tasks: ex.ep_thread_tasks(1) };
  await two.close();
} catch (e) { window.result = { ok: false, error: String((e && e.stack) || e) }; }
</script>"""


class _IsolatedHandler(http.server.SimpleHTTPRequestHandler):
    """COOP + COEP: the page is crossOriginIsolated, so it has SharedArrayBuffer and shared wasm memory."""

    def end_headers(self) -> None:
        self.send_header("Cross-Origin-Opener-Policy", "same-origin")
        self.send_header("Cross-Origin-Embedder-Policy", "require-corp")
        super().end_headers()

    def log_message(self, *args) -> None:
        pass


@pytest.mark.skipif(not Path("/usr/bin/chromium").exists(), reason="needs Debian's chromium")
def test_chromium_two_threads(tmp_path: Path) -> None:
    """A crossOriginIsolated page in Chromium: browser Workers from a Blob URL, same answer as the SIMD build."""
    playwright = pytest.importorskip("playwright.sync_api")
    root = tmp_path / "www"
    shutil.copytree(REPO / "web" / "src", root / "src")
    package(model_path("cifar10net"), out=root / "bundle", dynamic=False)
    (root / "index.html").write_text(PAGE)
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_IsolatedHandler, directory=str(root)))
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        with playwright.sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=[
                "--no-sandbox", "--disable-background-networking", "--disable-component-update", "--no-first-run", "--disable-sync"])
            page = browser.new_page()
            page.goto(f"http://127.0.0.1:{srv.server_port}/index.html")
            page.wait_for_function("window.result !== undefined", timeout=120_000)
            res = page.evaluate("window.result")
            browser.close()
    finally:
        srv.shutdown()
    assert res["ok"], res.get("error")
    assert res["isolated"] and res["diff"] <= 1e-6 and res["worker_tasks"] > 0, res
