"""The web runtime (web/src/runtime.js) under Node: same answers as the Python runner and onnxruntime,
clear errors for wrong inputs, and refusal of tampered bundles.

Models are tried from a list: each is packaged, and one the packager rejects (its kernels have not landed
yet) is skipped, so the test covers more as kernel families arrive."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from packager import load_bundle, package
from packager.reference import reference_run
from packager.errors import UnsupportedError

REPO = Path(__file__).resolve().parent.parent
RUNTIME = REPO / "web" / "src" / "index.js"
RELAXED_FLAG = "--experimental-wasm-relaxed-simd"


def _node_major() -> int:
    node = shutil.which("node")
    if not node:
        return 0
    out = subprocess.run([node, "--version"], capture_output=True, text=True).stdout.strip()
    return int(out.lstrip("v").split(".")[0]) if out.startswith("v") else 0


pytestmark = pytest.mark.skipif(_node_major() < 20, reason="needs Node >= 20")

# One generic driver: reads a job (bundle, variant, feeds as raw files + TypedArray kind), prints a JSON result.
DRIVER = r"""
import { readFileSync, writeFileSync } from 'node:fs';
const job = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const { load, detectVariant } = await import(job.runtime);
const res = { best: detectVariant() };
try {
  const s = await load(job.bundle, job.options);
  res.variant = s.variant; res.vec = s.vec; res.backend = s.backend; res.features = s.features; res.notes = s.notes;
  const feeds = {};
  for (const [name, f] of Object.entries(job.feeds)) {
    const b = readFileSync(f.file);
    const ab = b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength);
    feeds[name] = { data: new globalThis[f.ctor](ab), dims: f.dims };
  }
  const runs = [];
  for (let i = 0; i < (job.repeat ?? 1); i++) runs.push(await s.run(feeds));
  const out = runs[runs.length - 1];
  res.outputs = {};
  for (const [name, t] of Object.entries(out)) {
    const file = `${job.out_dir}/${name.replace(/[^A-Za-z0-9_.-]/g, '_')}.bin`;
    writeFileSync(file, new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength));
    res.outputs[name] = { file, dims: t.dims, dtype: t.dtype, ctor: t.data.constructor.name };
  }
  s.destroy();
  res.ok = true;
} catch (e) {
  res.ok = false; res.error = e.message; res.error_name = e.name; res.status = e.status ?? null;
}
console.log(JSON.stringify(res));
"""

CTORS = {"float32": "Float32Array", "int64": "BigInt64Array", "int32": "Int32Array", "bool": "Uint8Array"}


def _node_run(tmp: Path, bundle: Path | str | dict, feeds: dict[str, np.ndarray], variant: str = "auto",
              ctor: dict[str, str] | None = None, dims: dict[str, list] | None = None,
              options: dict | None = None, node_flags: tuple[str, ...] = (), repeat: int = 1) -> dict:
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "driver.mjs").write_text(DRIVER)
    job_feeds = {}
    for name, a in feeds.items():
        f = tmp / f"in_{len(job_feeds)}.bin"
        f.write_bytes(np.ascontiguousarray(a).tobytes())
        job_feeds[name] = {"file": str(f), "ctor": (ctor or {}).get(name) or CTORS[a.dtype.name],
                           "dims": (dims or {}).get(name, list(a.shape))}
    job = {"runtime": RUNTIME.as_uri(), "bundle": bundle if isinstance(bundle, dict) else str(bundle), "options": dict(options or {}, variant=variant),
           "feeds": job_feeds, "out_dir": str(tmp), "repeat": repeat}
    (tmp / "job.json").write_text(json.dumps(job))
    r = subprocess.run(["node", *node_flags, str(tmp / "driver.mjs"), str(tmp / "job.json")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def _outputs(res: dict) -> dict[str, np.ndarray]:
    assert res["ok"], res.get("error")
    return {k: np.fromfile(v["file"], dtype=np.dtype(v["dtype"])).reshape(v["dims"]) for k, v in res["outputs"].items()}


# ---- candidate models, simplest first; each names the ops it needs -------------------------------------------

def _model(nodes, inputs, outputs, inits=()) -> onnx.ModelProto:
    g = helper.make_graph(nodes, "web_node", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def _f32(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _i64(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.INT64, shape)


def _views() -> onnx.ModelProto:
    """Two inputs (float32, int64), three outputs: only view ops (no kernel runs)."""
    s1 = numpy_helper.from_array(np.array([6, 4], np.int64), "s1")
    s2 = numpy_helper.from_array(np.array([8], np.int64), "s2")
    return _model([helper.make_node("Reshape", ["x", "s1"], ["r"]), helper.make_node("Identity", ["r"], ["y"]),
                   helper.make_node("Flatten", ["x"], ["z"], axis=1), helper.make_node("Reshape", ["ids", "s2"], ["w"])],
                  [_f32("x", [2, 3, 4]), _i64("ids", [2, 4])], [_f32("y", [6, 4]), _f32("z", [2, 12]), _i64("w", [8])],
                  [s1, s2])


def _add_relu() -> onnx.ModelProto:
    b = numpy_helper.from_array(np.linspace(-1, 1, 4).astype(np.float32), "b")
    return _model([helper.make_node("Add", ["x", "b"], ["a"]), helper.make_node("Relu", ["a"], ["r"]),
                   helper.make_node("Add", ["r", "x2"], ["y"])],
                  [_f32("x", [2, 3, 4]), _f32("x2", [2, 3, 4])], [_f32("y", [2, 3, 4])], [b])


def _pool() -> onnx.ModelProto:
    return _model([helper.make_node("MaxPool", ["x"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
                   helper.make_node("GlobalAveragePool", ["p"], ["g"]), helper.make_node("Flatten", ["g"], ["y"])],
                  [_f32("x", [2, 3, 8, 8])], [_f32("y", [2, 3])])


def _mlp() -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((16, 8)).astype(np.float32), "w")
    c = numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), "c")
    return _model([helper.make_node("Gemm", ["x", "w", "c"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
                   helper.make_node("Softmax", ["r"], ["y"], axis=-1)], [_f32("x", [3, 16])], [_f32("y", [3, 8])], [w, c])


def _cnn() -> onnx.ModelProto:
    rng = np.random.default_rng(1)
    w = numpy_helper.from_array((rng.standard_normal((4, 3, 3, 3)) * 0.3).astype(np.float32), "w")
    return _model([helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["r"]),
                   helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
                   helper.make_node("GlobalAveragePool", ["p"], ["y"])], [_f32("x", [1, 3, 8, 8])], [_f32("y", [1, 4, 1, 1])], [w])


MODELS = {"views": _views, "add_relu": _add_relu, "pool": _pool, "mlp": _mlp, "cnn": _cnn}


@pytest.fixture(scope="module")
def bundles(tmp_path_factory) -> dict[str, Path | str]:
    """name -> bundle dir, or the packager's reason for rejecting it (ops not landed yet). Any other
    packaging failure (a broken runtime build, ...) is an error, not a skip."""
    out: dict[str, Path | str] = {}
    for name, make in MODELS.items():
        try:
            out[name] = package(make(), out=tmp_path_factory.mktemp(name) / "bundle", verify=False, emit_onnx=True)
        except UnsupportedError as e:
            out[name] = str(e).splitlines()[0]
    return out


def _bundle(bundles, name) -> Path:
    b = bundles[name]
    if isinstance(b, str):
        pytest.skip(f"{name}: not packageable yet: {b}")
    return b


def _feeds(bundle: Path, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    feeds = {}
    for s in load_bundle(bundle).inputs:
        dt = np.dtype(s["dtype"])
        feeds[s["name"]] = (rng.standard_normal(s["shape"]).astype(dt) if dt.kind == "f"
                            else rng.integers(-5, 100, s["shape"]).astype(dt))
    return feeds


@pytest.mark.parametrize("variant", ["simd", "scalar", "relaxed", "auto"])
@pytest.mark.parametrize("name", list(MODELS))
def test_matches_python_runner_and_onnxruntime(name, variant, bundles, tmp_path) -> None:
    bundle = _bundle(bundles, name)
    feeds = _feeds(bundle, seed=3)
    flags = (RELAXED_FLAG,) if variant == "relaxed" else ()
    res = _node_run(tmp_path, bundle, feeds, variant, node_flags=flags, repeat=2)
    got = _outputs(res)
    if variant != "auto":
        assert res["variant"] == variant
    # 'auto' may run a threaded build: the same kernels as the single-threaded build of its ISA
    threaded_isa = {"threads": "simd", "threads-relaxed": "relaxed"}
    b = load_bundle(bundle, variant if variant != "auto" else threaded_isa.get(res["variant"], res["variant"]))
    py = b.run(feeds)
    want = reference_run(onnx.load(str(bundle / "model.onnx")), feeds)
    assert set(got) == set(py) == set(want)
    for k in want:
        assert got[k].dtype == want[k].dtype and got[k].shape == want[k].shape, k
        if variant != "relaxed":   # the same wasm on the same bytes: bit-identical to the wasmtime runner
            np.testing.assert_array_equal(got[k], py[k], err_msg=k)
        np.testing.assert_allclose(got[k], want[k], rtol=1e-4, atol=1e-5, err_msg=k)


def test_auto_picks_best_variant(bundles, tmp_path) -> None:
    """Single-threaded (threads 'auto' may pick the threaded build, which is its own variant)."""
    bundle = _bundle(bundles, "views")
    feeds = _feeds(bundle)
    plain = _node_run(tmp_path / "a", bundle, feeds, "auto", options={"threads": 1})
    relaxed = _node_run(tmp_path / "b", bundle, feeds, "auto", options={"threads": 1}, node_flags=(RELAXED_FLAG,))
    assert plain["variant"] == plain["best"] and plain["variant"] in ("simd", "relaxed")
    assert relaxed["variant"] == "relaxed"


def _err(res: dict) -> str:
    assert not res["ok"], "expected an error"
    assert res["error_name"] == "EdgepackError", res
    return res["error"]


def test_wrong_inputs_are_refused_clearly(bundles, tmp_path) -> None:
    bundle = _bundle(bundles, "views")
    feeds = _feeds(bundle)
    x, ids = feeds["x"], feeds["ids"]
    e = _err(_node_run(tmp_path / "1", bundle, {"X": x, "ids": ids}))
    assert "unknown input(s) 'X'" in e and "'x'" in e
    e = _err(_node_run(tmp_path / "2", bundle, {"x": x}))
    assert "missing input(s) 'ids'" in e
    e = _err(_node_run(tmp_path / "3", bundle, {"x": x.astype(np.float64), "ids": ids}, ctor={"x": "Float64Array"}))
    assert "input 'x'" in e and "Float64Array" in e and "expected Float32Array" in e
    e = _err(_node_run(tmp_path / "4", bundle, {"x": x, "ids": ids.astype(np.float32)}, ctor={"ids": "Float32Array"}))
    assert "input 'ids'" in e and "expected BigInt64Array" in e and "int64" in e
    e = _err(_node_run(tmp_path / "5", bundle, {"x": x.reshape(6, 4), "ids": ids}))
    assert "input 'x': shape [6,4], expected [2,3,4]" in e
    e = _err(_node_run(tmp_path / "6", bundle, {"x": x.ravel()[:20], "ids": ids}, dims={"x": [2, 3, 4]}))
    assert "input 'x'" in e and "20 elements" in e
    e = _err(_node_run(tmp_path / "7", bundle, feeds, "avx512"))
    assert "unknown wasm variant 'avx512'" in e


def _copy(bundle: Path, dst: Path) -> Path:
    shutil.copytree(bundle, dst)
    return dst


def _tampered(bundles, tmp_path: Path, file: str, edit: Callable[[bytes], bytes]) -> tuple[Path, dict]:
    """A copy of the 'views' bundle (in tmp_path/bad) whose `file` is edit(its bytes), and feeds for it."""
    src = _bundle(bundles, "views")
    feeds = _feeds(src)
    bundle = _copy(src, tmp_path / "bad")
    (bundle / file).write_bytes(edit((bundle / file).read_bytes()))
    return bundle, feeds


def _flip(data: bytes, i: int) -> bytes:
    """data with the low bit of byte i flipped."""
    b = bytearray(data)
    b[i] ^= 0x01
    return bytes(b)


def test_tampered_plan_is_refused(bundles, tmp_path) -> None:
    bundle, feeds = _tampered(bundles, tmp_path, "model.plan", lambda b: _flip(b, len(b) // 2))
    e = _err(_node_run(tmp_path / "r", bundle, feeds))
    assert "model.plan does not match its SHA-256" in e


def test_tampered_wasm_is_refused(bundles, tmp_path) -> None:
    bundle, feeds = _tampered(bundles, tmp_path, "edgepack.wasm", lambda b: _flip(b, -1))
    e = _err(_node_run(tmp_path / "r", bundle, feeds, "simd"))
    assert "edgepack.wasm does not match its SHA-256" in e


def test_hostile_plan_refused_by_core_with_status_text(bundles, tmp_path) -> None:
    """A plan whose hash was updated too (or verify off) still meets ep_open's validation."""
    bundle, feeds = _tampered(bundles, tmp_path, "model.plan", lambda b: b"XXXX" + b[4:])   # magic
    res = _node_run(tmp_path / "r", bundle, feeds, options={"verify": False})
    e = _err(res)
    assert "edgepack runtime refused opening the plan" in e and res["status"] == 2, e


def test_manifest_not_matching_plan_is_refused(bundles, tmp_path) -> None:
    src = _bundle(bundles, "views")
    feeds = _feeds(src)
    bundle = _copy(src, tmp_path / "bad")
    m = json.loads((bundle / "manifest.json").read_text())
    m["inputs"][0]["shape"] = [2, 3, 5]
    (bundle / "manifest.json").write_text(json.dumps(m))
    feeds["x"] = np.zeros((2, 3, 5), np.float32)   # what the (edited) manifest asks for
    assert "do not match model.plan" in _err(_node_run(tmp_path / "r", bundle, feeds))


def test_loads_over_http_like_a_browser(bundles, tmp_path) -> None:
    """A URL source goes through fetch (the browser path), served from 127.0.0.1 only."""
    import functools
    import http.server
    import threading
    bundle = _bundle(bundles, "views")
    feeds = _feeds(bundle)
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *a) -> None:
            pass
    handler = functools.partial(Quiet, directory=str(bundle.parent))
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{srv.server_address[1]}/{bundle.name}"
        got = _outputs(_node_run(tmp_path / "ok", url, feeds, "simd"))
        want = load_bundle(bundle).run(feeds)
        for k in want:
            np.testing.assert_array_equal(got[k], want[k])
        e = _err(_node_run(tmp_path / "404", url + "-missing", feeds, "simd"))
        assert "manifest.json: HTTP 404" in e
    finally:
        srv.shutdown()
        srv.server_close()


def test_bundle_for_another_target_is_refused(bundles, tmp_path) -> None:
    """Every runtime names the target a bundle was made for when it is not its own."""
    from packager import load_bundle
    from packager.errors import BundleError
    src = _bundle(bundles, "views")
    feeds = _feeds(src)
    for target in ("pi5", "android"):
        bundle = _copy(src, tmp_path / target)
        m = json.loads((bundle / "manifest.json").read_text())
        m["target"] = target
        (bundle / "manifest.json").write_text(json.dumps(m))
        assert f"packaged for target '{target}', not 'web'" in _err(_node_run(tmp_path / f"r{target}", bundle, feeds))
        with pytest.raises(BundleError, match=f"packaged for target '{target}'"):
            load_bundle(bundle)
    cli = REPO / "edge" / "build" / "host" / "edgepack-run"
    r = subprocess.run([str(cli), str(tmp_path / "android"), "--info"], capture_output=True, text=True)
    assert r.returncode == 3 and "packaged for target 'android'" in r.stderr


def test_backend_features_and_notes_in_node(bundles, tmp_path) -> None:
    """Defaults: wasm (Node has no WebGPU), the features the core reports, threads where the bundle has a threaded
    build (Node always has shared memory), else single-threaded with a note saying why."""
    bundle = _bundle(bundles, "add_relu")
    feeds = _feeds(bundle)
    res = _node_run(tmp_path, bundle, feeds, "auto", options={"backend": "auto", "threads": "auto"})
    got = _outputs(res)
    np.testing.assert_array_equal(got["y"], load_bundle(bundle).run(feeds)["y"])
    f = res["features"]
    assert res["backend"] == "wasm" and f["webgpu"] is False and f["f16"] is False
    assert f["simd"] == (res["variant"] != "scalar")
    assert f["relaxed"] == res["variant"].endswith("relaxed")
    threaded = "edgepack-threads.wasm" in json.loads((bundle / "manifest.json").read_text())["files"]
    if threaded:
        assert f["threads"] >= 2 or (os.cpu_count() or 1) == 1, res   # 'auto' = the cores there are (at most 4)
    else:
        assert f["threads"] == 1 and any("no threaded build" in n for n in res["notes"]), res["notes"]
    one = _node_run(tmp_path / "one", bundle, feeds, "simd", options={"threads": 1})
    assert one["features"]["threads"] == 1 and one["notes"] == []


def test_backend_and_threads_options_refused_clearly(bundles, tmp_path) -> None:
    bundle = _bundle(bundles, "views")
    feeds = _feeds(bundle)
    e = _err(_node_run(tmp_path / "1", bundle, feeds, options={"backend": "webgpu"}))
    assert e.startswith("backend 'webgpu': ") and ("no WebGPU backend" in e or "not available here" in e), e
    assert "unknown backend 'cuda'" in _err(_node_run(tmp_path / "2", bundle, feeds, options={"backend": "cuda"}))
    assert "threads must be 'auto' or an integer" in _err(_node_run(tmp_path / "3", bundle, feeds, options={"threads": 0}))
    e = _err(_node_run(tmp_path / "4", bundle, feeds, "scalar", options={"threads": 4}))
    assert "cannot be combined with variant 'scalar'" in e


def test_file_map_source(bundles, tmp_path) -> None:
    """What an npm-packaged bundle's index.js passes: each file by URL."""
    bundle = _bundle(bundles, "views")
    feeds = _feeds(bundle)
    files = {n: (bundle / n).as_uri() for n in ("manifest.json", "model.plan", "edgepack.wasm", "edgepack-scalar.wasm")}
    got = _outputs(_node_run(tmp_path / "ok", files, feeds, "simd"))
    for k, want in load_bundle(bundle).run(feeds).items():
        np.testing.assert_array_equal(got[k], want)
    del files["model.plan"]
    assert "model.plan: not in the bundle's file map" in _err(_node_run(tmp_path / "bad", files, feeds, "simd"))
