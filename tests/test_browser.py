"""The web runtime in headless Chromium (Playwright, Debian's /usr/bin/chromium, pages from a local server):
backends {wasm SIMD, wasm scalar, wasm relaxed, wasm threads, WebGPU} x the benchmark models x precisions.
Each cell loads the bundle over HTTP (SHA-256 checked), runs it on seeded inputs and compares every output with
onnxruntime (Python) on the same inputs: a mismatch fails. A cell whose backend or precision has not landed in
this build (no threaded wasm in the bundle, no WebGPU backend, a precision the packager does not know) is
reported "n/a" with the reason, never faked. The matrix is printed at the end of the module.

Adding a precision is one line in PRECISIONS (package() keyword arguments + tolerance)."""
from __future__ import annotations

import base64
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
import pytest

from packager import package
from packager.reference import random_inputs, reference_run
from packager.errors import PackagerError

from .browser_env import ISOLATED, chromium, chromium_missing, serving
from .conftest import model_path

REPO = Path(__file__).resolve().parent.parent
MODELS = ["cifar10net", "cifar10net_unfused", "mobilenetv2", "resnet18", "minilm_like"]


@dataclass(frozen=True)
class Backend:
    options: dict              # load() options
    isolated: bool = False     # page served with COOP/COEP (crossOriginIsolated)
    tol: str = "wasm"          # which tolerance of the precision applies


BACKENDS = {
    "wasm-simd": Backend({"backend": "wasm", "variant": "simd", "threads": 1}),
    "wasm-scalar": Backend({"backend": "wasm", "variant": "scalar", "threads": 1}),
    "wasm-relaxed": Backend({"backend": "wasm", "variant": "relaxed", "threads": 1}),
    "wasm-threads": Backend({"backend": "wasm", "threads": 2}, isolated=True),
    "webgpu": Backend({"backend": "webgpu", "threads": 1}, tol="webgpu"),
}


@dataclass(frozen=True)
class Precision:
    package_kwargs: dict       # what package() needs for this precision (calibration=RANDOM_CALIBRATION: see _bundle)
    tol: dict = field(default_factory=dict)   # backend kind -> (rtol, atol) against onnxruntime on the bundle's model.onnx
    range_tol: float | None = None   # instead: max abs diff <= range_tol * max |reference| (int8 rounding)


RANDOM_CALIBRATION = "random"   # 8 seeded random samples of the model's inputs, written as a .npz


# One line per precision. fp16 bundles store float16 weights widened once at load; the reference runs the bundle's
# model.onnx, which holds the same float16 weights, so the fp32 tolerances apply.
PRECISIONS = {
    "fp32": Precision({"quantize": "none"}, {"wasm": (1e-4, 1e-4), "webgpu": (1e-3, 1e-3)}),
    "fp16": Precision({"quantize": "fp16"}, {"wasm": (1e-4, 1e-4), "webgpu": (1e-3, 1e-3)}),
    # the packager's auto mode with calibration data: int8 static for the CNNs, int8-dynamic for minilm_like. The
    # reference runs the QDQ model.onnx as written; a requantization may round the other way at a .5: 2% of the range
    # (as tests/test_int8.py). WebGPU has no int8 shaders: those nodes run on its wasm fallback.
    "int8": Precision({"quantize": "auto", "calibration": RANDOM_CALIBRATION}, range_tol=0.02),
}

pytestmark = pytest.mark.skipif(chromium_missing() is not None, reason=str(chromium_missing()))

# In the page: load the bundle with the options, run it on the inputs (raw files), return outputs as base64.
RUN_CELL = """async ({ bundle, options, inputs }) => {
  const { load } = await import('/edgepack/index.js');
  const res = { crossOriginIsolated: globalThis.crossOriginIsolated };
  let s;
  try { s = await load(bundle, options); } catch (e) { return { ...res, loadError: `${e.name}: ${e.message}` }; }
  try {
    Object.assign(res, { backend: s.backend, variant: s.variant, vec: s.vec, features: { ...s.features }, notes: [...s.notes], adapter: s.adapter });
    if (options.threads > 1 && s.features.threads < 2) return res;   // threads not available: nothing to compare
    const ctors = { float32: Float32Array, int64: BigInt64Array, int32: Int32Array, int8: Int8Array, uint8: Uint8Array, bool: Uint8Array };
    const feeds = {};
    for (const x of inputs) {
      const buf = await (await fetch(x.url)).arrayBuffer();
      feeds[x.name] = { data: new ctors[x.dtype](buf), dims: x.dims };
    }
    const t0 = performance.now();
    const out = await s.run(feeds);
    res.ms = performance.now() - t0;
    res.outputs = {};
    for (const [name, t] of Object.entries(out)) {
      const b = new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength);
      let bin = '';
      for (let i = 0; i < b.length; i += 0x8000) bin += String.fromCharCode.apply(null, b.subarray(i, i + 0x8000));
      res.outputs[name] = { dims: t.dims, dtype: t.dtype, b64: btoa(bin) };
    }
  } catch (e) { res.runError = `${e.name}: ${e.message}`; }
  finally { s.destroy(); }
  return res;
}"""

NOT_BUILT = ("has no WebGPU backend", "WebGPU is not available here")

MATRIX: dict[tuple[str, str, str], str] = {}
REASONS: dict[str, str] = {}   # backend or precision -> why its cells are n/a


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """Server (web runtime at /edgepack, bundles at /bundles, inputs at /data) + one Chromium for the module."""
    root = tmp_path_factory.mktemp("site")
    (root / "index.html").write_text("<!doctype html><meta charset=utf-8><title>edgepack tests</title>\n")
    (root / "bundles").mkdir()
    (root / "data").mkdir()
    with serving({"/": root, "/edgepack": REPO / "web" / "src"}) as url, chromium() as browser:
        yield {"root": root, "url": url, "browser": browser, "bundles": {}}


@pytest.fixture(scope="module", autouse=True)
def print_matrix(request):
    yield
    if not MATRIX:
        return
    cols = list(BACKENDS)
    rows = [(m, p) for m in MODELS for p in PRECISIONS if any((m, c, p) in MATRIX for c in cols)]
    w = max(len(f"{m} {p}") for m, p in rows) + 2
    lines = ["", "browser matrix, Chromium headless: max abs diff vs onnxruntime and one run's time (n/a: why below)",
             "".ljust(w) + "".join(c.ljust(20) for c in cols)]
    lines += [f"{m} {p}".ljust(w) + "".join(MATRIX.get((m, c, p), "-").ljust(20) for c in cols) for m, p in rows]
    lines += [f"  n/a {what}: {why}" for what, why in sorted(REASONS.items())]
    capture = request.config.pluginmanager.getplugin("capturemanager")
    tr = request.config.pluginmanager.getplugin("terminalreporter")
    with capture.global_and_fixture_disabled():   # fd capture would swallow it during teardown
        for line in lines:
            tr.write_line(line) if tr is not None else print(line)


def _bundle(site, name: str, precision: str) -> Path | str:
    """The bundle for (model, precision), packaged once per module, or why it cannot be made."""
    key = (name, precision)
    if key not in site["bundles"]:
        out = site["root"] / "bundles" / f"{name}-{precision}"
        kwargs = dict(PRECISIONS[precision].package_kwargs)
        if kwargs.get("calibration") == RANDOM_CALIBRATION:
            kwargs["calibration"] = _random_calibration(name, site["root"] / "data" / f"{name}-calibration.npz")
        try:
            try:
                site["bundles"][key] = package(model_path(name), out=out, verify=False, dynamic=False, emit_onnx=True, **kwargs)
            except TypeError as e:
                if precision != "fp32" or "unexpected keyword argument" not in str(e):
                    raise
                site["bundles"][key] = package(model_path(name), out=out, verify=False, dynamic=False, emit_onnx=True)   # fp32 is all it makes
        except TypeError as e:   # package() does not take this precision's arguments: not landed yet
            if "unexpected keyword argument" not in str(e):
                raise
            site["bundles"][key] = f"precision {precision} not in this packager ({e})"
        except PackagerError as e:
            if precision == "fp32":
                raise
            site["bundles"][key] = f"precision {precision}: {str(e).splitlines()[0]}"
    return site["bundles"][key]


def _random_calibration(name: str, path: Path) -> Path:
    graph_inputs = onnx.load(str(model_path(name)), load_external_data=False).graph
    inits = {i.name for i in graph_inputs.initializer}
    specs = [{"name": i.name, "shape": [d.dim_value or 1 for d in i.type.tensor_type.shape.dim],
              "dtype": onnx.helper.tensor_dtype_to_np_dtype(i.type.tensor_type.elem_type).name}
             for i in graph_inputs.input if i.name not in inits]
    feeds = [random_inputs(specs, seed=100 + k) for k in range(8)]
    np.savez(path, **{sp["name"]: np.stack([f[sp["name"]] for f in feeds]) for sp in specs})
    return path


def _inputs(site, bundle: Path) -> tuple[dict[str, np.ndarray], list[dict]]:
    import json
    manifest = json.loads((bundle / "manifest.json").read_text())
    feeds = random_inputs(manifest["inputs"], seed=11)
    spec = []
    for i, (k, a) in enumerate(feeds.items()):
        f = site["root"] / "data" / f"{bundle.name}-{i}.bin"
        f.write_bytes(np.ascontiguousarray(a).tobytes())
        spec.append({"name": k, "dtype": a.dtype.name, "dims": list(a.shape), "url": f"/data/{f.name}"})
    return feeds, spec


def _run_cell(site, bundle: Path, backend: Backend, inputs: list[dict]) -> dict:
    page = site["browser"].new_page()
    try:
        page.set_default_timeout(300_000)
        page.goto(site["url"] + (ISOLATED if backend.isolated else "") + "/index.html")
        base = (ISOLATED if backend.isolated else "")
        return page.evaluate(RUN_CELL, {"bundle": f"{base}/bundles/{bundle.name}/", "options": backend.options,
                                        "inputs": [dict(x, url=base + x["url"]) for x in inputs]})
    finally:
        page.close()


def _unavailable(backend_name: str, res: dict) -> str | None:
    """Why this cell's backend did not run (not built / not available here), or None when it did."""
    if backend_name == "webgpu" and "loadError" in res and any(s in res["loadError"] for s in NOT_BUILT):
        return res["loadError"].split(": ", 2)[-1]
    if backend_name == "wasm-threads" and "features" in res and res["features"]["threads"] < 2:
        return "; ".join(res["notes"]) or "single-threaded"
    return None


@pytest.mark.parametrize("precision", list(PRECISIONS))
@pytest.mark.parametrize("backend_name", list(BACKENDS))
@pytest.mark.parametrize("name", MODELS)
def test_cell(name: str, backend_name: str, precision: str, site) -> None:
    key = (name, backend_name, precision)
    bundle = _bundle(site, name, precision)
    if isinstance(bundle, str):
        MATRIX[key], REASONS[precision] = "n/a", bundle
        pytest.skip(bundle)
    backend = BACKENDS[backend_name]
    feeds, inputs = _inputs(site, bundle)
    res = _run_cell(site, bundle, backend, inputs)
    why = _unavailable(backend_name, res)
    if why:
        MATRIX[key], REASONS[backend_name] = "n/a", why
        pytest.skip(f"{backend_name} not available: {why}")
    MATRIX[key] = "FAIL"
    assert "loadError" not in res and "runError" not in res, res
    if backend_name == "wasm-threads":
        assert res["crossOriginIsolated"] and res["features"]["threads"] >= 2
        assert res["variant"] == "threads-relaxed" and res["features"]["relaxed"], res["variant"]   # Chromium has relaxed SIMD
    elif backend_name == "webgpu":
        assert res["backend"] == "webgpu" and res["features"]["webgpu"]
    else:
        assert res["backend"] == "wasm" and res["variant"] == backend.options["variant"]
        assert res["features"]["simd"] == (res["variant"] != "scalar") and res["features"]["relaxed"] == (res["variant"] == "relaxed")
    want = reference_run(onnx.load(str(bundle / "model.onnx")), feeds)
    prec = PRECISIONS[precision]
    worst = 0.0
    assert set(res["outputs"]) == set(want)
    for k, w in want.items():
        o = res["outputs"][k]
        got = np.frombuffer(base64.b64decode(o["b64"]), dtype=np.dtype(o["dtype"])).reshape(o["dims"])
        assert got.dtype == w.dtype and got.shape == w.shape, k
        what = f"{name} {backend_name} {precision} output {k}"
        if prec.range_tol is not None:
            bound = prec.range_tol * float(np.abs(w).max())
            assert float(np.abs(got.astype(np.float64) - w).max()) <= bound, (what, bound)
        else:
            rtol, atol = prec.tol[backend.tol]
            np.testing.assert_allclose(got, w, rtol=rtol, atol=atol, err_msg=what)
        worst = max(worst, float(np.max(np.abs(got.astype(np.float64) - w.astype(np.float64)))) if w.size else 0.0)
    MATRIX[key] = f"ok {worst:.0e} {res['ms']:.0f}ms"


AUTO_AND_ERRORS = """async ({ bundle }) => {
  const { load, EdgepackError } = await import('/edgepack/index.js');
  const gpu = await navigator.gpu?.requestAdapter();
  const s = await load(bundle);   // all defaults: backend 'auto', threads 'auto', variant 'auto'
  const res = { backend: s.backend, variant: s.variant, features: { ...s.features }, notes: [...s.notes],
    softwareAdapter: !!gpu?.info?.isFallbackAdapter, errors: [] };
  const x = { data: new Float32Array(3072), dims: [1, 3, 32, 32] };
  for (const feeds of [{ img: x }, { image: { data: new Float64Array(3072), dims: x.dims } }, { image: { data: x.data, dims: [1, 3, 32, 31] } }]) {
    try { await s.run(feeds); res.errors.push('accepted'); } catch (e) { res.errors.push(`${e instanceof EdgepackError}: ${e.message}`); }
  }
  for (const options of [{ backend: 'cuda' }, { threads: 0 }, { variant: 'scalar', threads: 4 }]) {
    try { await load(bundle, options); res.errors.push('accepted'); } catch (e) { res.errors.push(`${e instanceof EdgepackError}: ${e.message}`); }
  }
  s.destroy();
  return res;
}"""


def test_auto_defaults_and_clear_errors_in_browser(site) -> None:
    """Defaults pick the best wasm build Chromium validates (relaxed SIMD), wasm over SwiftShader's software
    WebGPU adapter, single-threaded on a page without COOP/COEP (saying why); wrong inputs/options are refused."""
    bundle = _bundle(site, "cifar10net", "fp32")
    page = site["browser"].new_page()
    try:
        page.goto(site["url"] + "/index.html")
        res = page.evaluate(AUTO_AND_ERRORS, {"bundle": f"/bundles/{bundle.name}/"})
    finally:
        page.close()
    assert res["backend"] == "wasm" and res["variant"] == "relaxed", res
    assert res["features"].pop("int8Dot") in ("pair", "fused")   # the relaxed build's int8 dot on this engine
    assert res["features"] == {"simd": True, "relaxed": True, "threads": 1, "webgpu": False, "f16": False}
    assert res["softwareAdapter"]   # a WebGPU adapter exists, but a software one: 'auto' stays on wasm
    assert any(n.startswith("threads: single-threaded") for n in res["notes"]), res["notes"]
    e = res["errors"]
    assert e[0].startswith("true: unknown input(s) 'img'; this model takes 'image'")
    assert e[1] == "true: input 'image': data is Float64Array, expected Float32Array (dtype float32)"
    assert e[2] == "true: input 'image': shape [1,3,32,31], expected [1,3,32,32]"
    assert e[3].startswith("true: unknown backend 'cuda'")
    assert e[4].startswith("true: threads must be 'auto' or an integer")
    assert e[5].startswith("true: threads: 4 uses a threaded SIMD build; it cannot be combined with variant 'scalar'")
