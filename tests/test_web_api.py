"""The web runtime's API in real Node (bundles made by the `package` CLI, answers compared with onnxruntime):
onnxruntime-web Tensor inputs, run() after destroy(), manifests that lie about the plan, a property test that
mutates bundles (manifest fields, plan bytes) and expects a clean EdgepackError or the right answer, never a
crash or hang, the image/audio helpers, version errors, the publishable `edgepack` package (npm pack), and the
npm locks that `npm ci` installs as they are."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from packager.reference import reference_run

REPO = Path(__file__).resolve().parent.parent
WEB = REPO / "web"
RUNTIME = WEB / "src" / "index.js"
ORT_COMMON = REPO / "bench" / "node_modules" / "onnxruntime-common" / "dist" / "esm" / "index.js"
NPM_FLAGS = ("--no-audit", "--no-fund", "--loglevel=error")

pytestmark = pytest.mark.skipif(not shutil.which("node") or not shutil.which("npm"), reason="needs node + npm")


def cli_package(model: onnx.ModelProto | Path, out: Path, *args: str) -> Path:
    """A bundle made by the `package` command (what users run)."""
    src = model
    if isinstance(model, onnx.ModelProto):
        src = out.parent / f"{out.name}.onnx"
        onnx.save(model, src)
    r = subprocess.run([sys.executable, "-m", "packager.cli", "--target", "web", str(src), "-o", str(out), *args],
                       capture_output=True, text=True, cwd=REPO, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return out


def _two_in_model() -> onnx.ModelProto:
    """y = relu(a @ W + b) * s (float32 a[2,8], int32-free), z = a + 1: two inputs, two outputs, small plan."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((8, 6)).astype(np.float32), "W")
    b = numpy_helper.from_array(rng.standard_normal(6).astype(np.float32), "b")
    one = numpy_helper.from_array(np.ones(1, np.float32), "one")
    g = helper.make_graph(
        [helper.make_node("MatMul", ["a", "W"], ["m"]), helper.make_node("Add", ["m", "b"], ["mb"]),
         helper.make_node("Relu", ["mb"], ["r"]), helper.make_node("Mul", ["r", "s"], ["y"]),
         helper.make_node("Add", ["a", "one"], ["z"])], "two_in",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [2, 8]),
         helper.make_tensor_value_info("s", TensorProto.FLOAT, [2, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 6]),
         helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 8])], [w, b, one])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    return cli_package(_two_in_model(), tmp_path_factory.mktemp("api") / "two_in", "--emit-onnx")


def _two_in_dyn_model() -> onnx.ModelProto:
    m = _two_in_model()
    for vi in (*m.graph.input, *m.graph.output):   # batch symbolic: a version-2 plan
        vi.type.tensor_type.shape.dim[0].dim_param = "batch"
    return m


@pytest.fixture(scope="module")
def dyn_bundle(tmp_path_factory) -> Path:
    return cli_package(_two_in_dyn_model(), tmp_path_factory.mktemp("api") / "two_in_dyn", "--dynamic")


def node(script: str, tmp: Path, *args: str, timeout: int = 120) -> dict:
    """Runs an ES module in Node; its last stdout line is JSON."""
    f = tmp / "t.mjs"
    f.write_text(script)
    r = subprocess.run(["node", str(f), *args], capture_output=True, text=True, timeout=timeout, cwd=tmp)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def _feeds(seed: int = 1, batch: int = 2) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"a": rng.standard_normal((batch, 8)).astype(np.float32), "s": rng.standard_normal((batch, 6)).astype(np.float32)}


def test_onnxruntime_web_tensors_as_inputs(bundle, tmp_path) -> None:
    if not ORT_COMMON.exists():
        pytest.fail("onnxruntime-common is not installed: run scripts/setup.sh (npm ci in bench/)")
    feeds = _feeds()
    res = node(f"""
import {{ Tensor }} from {json.dumps(ORT_COMMON.as_uri())};
import {{ load }} from {json.dumps(RUNTIME.as_uri())};
const s = await load({json.dumps(str(bundle))});
const a = new Tensor('float32', Float32Array.from({json.dumps(feeds['a'].ravel().tolist())}), [2, 8]);
const sc = new Tensor('float32', Float32Array.from({json.dumps(feeds['s'].ravel().tolist())}), [2, 6]);
const out = await s.run({{ a, s: sc }});
let wrong = null;
try {{ await s.run({{ a: new Tensor('int32', new Int32Array(16), [2, 8]), s: sc }}); }} catch (e) {{ wrong = `${{e.name}}: ${{e.message}}`; }}
console.log(JSON.stringify({{ y: Array.from(out.y.data), ydims: out.y.dims, ydtype: out.y.dtype, z: Array.from(out.z.data), wrong }}));
""", tmp_path)
    want = reference_run(onnx.load(str(bundle / "model.onnx")), feeds)
    assert res["ydims"] == [2, 6] and res["ydtype"] == "float32"
    np.testing.assert_allclose(np.array(res["y"], np.float32).reshape(2, 6), want["y"], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.array(res["z"], np.float32).reshape(2, 8), want["z"], rtol=1e-6, atol=1e-6)
    assert res["wrong"] == "EdgepackError: input 'a': tensor type int32, expected float32"


def test_run_after_destroy_throws(bundle, tmp_path) -> None:
    res = node(f"""
import {{ load }} from {json.dumps(RUNTIME.as_uri())};
const s = await load({json.dumps(str(bundle))});
const feeds = {{ a: {{ data: new Float32Array(16), dims: [2, 8] }}, s: {{ data: new Float32Array(12), dims: [2, 6] }} }};
await s.run(feeds);
s.destroy();
const errs = [];
for (const f of [() => s.run(feeds), async () => s.runSync(feeds)]) {{
  try {{ await f(); errs.push(null); }} catch (e) {{ errs.push(`${{e.name}}: ${{e.message}}`); }}
}}
console.log(JSON.stringify({{ errs }}));
""", tmp_path)
    assert res["errs"] == ["EdgepackError: this session was destroyed (session.destroy()): load() the bundle again to run it"] * 2


@pytest.mark.parametrize("lie", ["dtype", "shape", "output", "swap"])
def test_manifest_lying_with_the_same_byte_count_is_refused(lie, bundle, tmp_path) -> None:
    """An unsigned bundle whose manifest gives an input or output the same byte count but another dtype or shape
    (or swaps two inputs' ids) would run and reinterpret data: the plan is the truth."""
    b = tmp_path / "b"
    shutil.copytree(bundle, b)
    m = json.loads((b / "manifest.json").read_text())
    if lie == "dtype":
        m["inputs"][0]["dtype"] = "int32"              # float32 -> int32: 4 bytes each
    elif lie == "shape":
        m["inputs"][0]["shape"] = [8, 2]               # [2, 8] -> [8, 2]: 16 elements
    elif lie == "output":
        m["outputs"][0]["shape"] = [3, 4]              # y [2, 6] -> [3, 4]: 12 elements
    else:
        m["inputs"][0]["tensor"], m["inputs"][1]["tensor"] = m["inputs"][1]["tensor"], m["inputs"][0]["tensor"]
    (b / "manifest.json").write_text(json.dumps(m))
    res = node(f"""
import {{ load }} from {json.dumps(RUNTIME.as_uri())};
try {{ await load({json.dumps(str(b))}); console.log(JSON.stringify({{ ok: true }})); }}
catch (e) {{ console.log(JSON.stringify({{ ok: false, err: `${{e.name}}: ${{e.message}}` }})); }}
""", tmp_path)
    assert not res["ok"] and res["err"].startswith("EdgepackError: manifest.json"), res
    if lie == "output":
        assert "output 'y' is float32[3,4], but model.plan holds float32[2,6]" in res["err"], res
    elif lie != "swap":
        assert "but model.plan holds float32[2,8]" in res["err"], res


# One Node process loads many mutated copies of a bundle from memory (through load()'s fetch option) and runs each
# that loads; it reports, per case, the outcome. A crash or hang fails the subprocess (timeout).
MUTATE = r"""
import { readFileSync } from 'node:fs';
const [runtime, dir, nCases, seed0, what] = process.argv.slice(2);
const { load, EdgepackError } = await import(runtime);
const files = {};
for (const f of ['manifest.json', 'model.plan', 'edgepack.wasm', 'edgepack-scalar.wasm', 'edgepack-relaxed.wasm'])
  files[f] = new Uint8Array(readFileSync(`${dir}/${f}`));
const base = JSON.parse(new TextDecoder().decode(files['manifest.json']));
let state = Number(seed0) >>> 0;
const rnd = () => {   // mulberry32
  state = (state + 0x6d2b79f5) >>> 0;
  let t = Math.imul(state ^ (state >>> 15), 1 | state);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
  return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
};
// a copy: a mutation must never edit the WEIRD values themselves (an array made to hold itself)
const pick = (a) => structuredClone(a[Math.floor(rnd() * a.length)]);
const WEIRD = [null, -1, 0, 1, 2, 3, 7, 2 ** 31, 2 ** 32, 1e300, -0.5, 'x', 'batch', '', [], {}, [1], [2, 8], [8, 2], true,
  'float32', 'int32', 'int64', 'bool', 'float16', '__proto__', { min: 5, max: 1 }, { min: 0, max: 2 ** 40 }];
function mutateManifest() {
  const m = structuredClone(base);
  const n = 1 + Math.floor(rnd() * 3);
  for (let k = 0; k < n; k++) {
    const io = pick([m.inputs, m.outputs].map((x) => (Array.isArray(x) ? x : [])));
    const s = io.length && io[0] && typeof io[0] === 'object' ? pick(io) : null;
    const op = Math.floor(rnd() * 12);
    if (op === 0 && s) s.dtype = pick(WEIRD);
    else if (op === 1 && s) s.shape = pick(WEIRD);
    else if (op === 2 && s && Array.isArray(s.shape) && s.shape.length) s.shape[Math.floor(rnd() * s.shape.length)] = pick(WEIRD);
    else if (op === 3 && s) s.tensor = pick(WEIRD);
    else if (op === 4 && s) s.name = pick(WEIRD);
    else if (op === 5) io.pop();
    else if (op === 6 && s) io.push(structuredClone(s));
    else if (op === 7) m.plan = { ...m.plan, version: pick(WEIRD) };
    else if (op === 8) m.dims = pick(WEIRD);
    else if (op === 9 && m.dims && typeof m.dims === 'object') { for (const d of Object.keys(m.dims)) m.dims[d] = pick(WEIRD); }
    else if (op === 10) m[pick(['format_version', 'target', 'files', 'inputs', 'outputs', 'format'])] = pick(WEIRD);
    else if (op === 11) m.files = { ...m.files, 'model.plan': { ...m.files?.['model.plan'], bytes: pick(WEIRD) } };   // files may be null (op 10)
  }
  return new TextEncoder().encode(JSON.stringify(m));
}
function mutatePlan() {
  const p = files['model.plan'].slice();
  const n = 1 + Math.floor(rnd() * 4);
  const head = Math.min(p.length, 4096);   // header, tensor and node tables: where the core's checks are
  for (let k = 0; k < n; k++) {
    const at = Math.floor(rnd() * (rnd() < 0.8 ? head : p.length)) & ~3;
    const dv = new DataView(p.buffer);
    if (at + 4 > p.length) continue;
    const op = Math.floor(rnd() * 4);
    if (op === 0) p[at + Math.floor(rnd() * 4)] ^= 1 << Math.floor(rnd() * 8);
    else if (op === 1) dv.setUint32(at, pick([0, 1, 2, 0x7fffffff, 0xffffffff, 0x80000000, 64, 65536]), true);
    else if (op === 2) dv.setInt32(at, dv.getInt32(at, true) + pick([-1, 1, -64, 64]), true);
    else dv.setUint32(at, Math.floor(rnd() * 2 ** 32), true);
  }
  return p;
}
const feeds = (s) => Object.fromEntries(s.inputs.map((x, i) => {
  const dims = x.shape.map((d) => (typeof d === 'number' ? d : 2));
  const n = dims.reduce((a, b) => a * b, 1);
  return [x.name, { data: Float32Array.from({ length: n }, (_, j) => Math.sin(j + 7 * i)), dims }];
}));
const digest = (out, s) => s.outputs.map((o) => Array.from(out[o.name].data, (v) => Math.fround(v)).join(','));
const good = await load('http://bundle.test/', { fetch: async (u) => new Response(files[new URL(u).pathname.slice(1)]), variant: 'simd' });
const want = digest(await good.run(feeds(good)), good);
const counts = { ran: 0, refused: 0 };
const bad = [];
for (let c = 0; c < Number(nCases); c++) {
  const mode = what === 'both' ? (c % 2 ? 'plan' : 'manifest') : what;
  const served = { ...files, [mode === 'plan' ? 'model.plan' : 'manifest.json']: mode === 'plan' ? mutatePlan() : mutateManifest() };
  const fetch = async (u) => {
    const b = served[new URL(u).pathname.slice(1)];
    return b ? new Response(b) : new Response('no', { status: 404 });
  };
  const t0 = Date.now();
  try {
    // a mutated plan with verify: true stops at its SHA-256: verify off reaches the core's own checks
    const s = await load('http://bundle.test/', { fetch, variant: 'simd', verify: mode !== 'plan' });
    const out = await s.run(feeds(s));
    counts.ran++;
    // the manifest cannot change what the plan computes: a run that passes gives the unmutated answer
    if (mode === 'manifest' && JSON.stringify(digest(out, s)) !== JSON.stringify(want)) bad.push({ c, mode, why: 'different output' });
  } catch (e) {
    if (e instanceof EdgepackError) counts.refused++;
    else bad.push({ c, mode, why: `${e?.name}: ${e?.message}` });
  }
  if (Date.now() - t0 > 5000) bad.push({ c, mode, why: `took ${Date.now() - t0} ms` });
}
console.log(JSON.stringify({ counts, bad: bad.slice(0, 10), nbad: bad.length }));
"""


@pytest.mark.parametrize("which", ["bundle", "dyn_bundle"])
def test_mutated_bundles_fail_cleanly_or_run_right(which, request, tmp_path) -> None:
    b = request.getfixturevalue(which)
    res = {}
    for what, seed in (("manifest", 11), ("plan", 23)):
        r = node(MUTATE, tmp_path, RUNTIME.as_uri(), str(b), "300", str(seed), what, timeout=180)
        assert r["nbad"] == 0, (what, r)
        res[what] = r["counts"]
    # both kinds of case occur: mutations refused (with EdgepackError) and harmless ones that run
    assert res["manifest"]["refused"] > 50 and res["manifest"]["ran"] > 0, res
    assert res["plan"]["refused"] > 50, res


def test_dynamic_bundle_runs_at_two_batches(dyn_bundle, tmp_path) -> None:
    """The plan/manifest agreement check accepts a version-2 plan's run-time dims (symbol <-> -1)."""
    src = onnx.load(str(dyn_bundle.parent / "two_in_dyn.onnx"))   # the model given to the packager (batch symbolic)
    want = {n: reference_run(src, _feeds(3, n)) for n in (1, 3)}
    res = node(f"""
import {{ load }} from {json.dumps(RUNTIME.as_uri())};
const s = await load({json.dumps(str(dyn_bundle))});
const out = {{}};
for (const [n, a, sc] of {json.dumps([[n, _feeds(3, n)['a'].ravel().tolist(), _feeds(3, n)['s'].ravel().tolist()] for n in (1, 3)])}) {{
  const o = await s.run({{ a: {{ data: Float32Array.from(a), dims: [n, 8] }}, s: {{ data: Float32Array.from(sc), dims: [n, 6] }} }});
  out[n] = {{ y: Array.from(o.y.data), dims: o.y.dims }};
}}
console.log(JSON.stringify({{ dynamic: s.dynamic, out }}));
""", tmp_path)
    assert res["dynamic"]
    for n in (1, 3):
        assert res["out"][str(n)]["dims"] == [n, 6]
        np.testing.assert_allclose(np.array(res["out"][str(n)]["y"], np.float32).reshape(n, 6), want[n]["y"], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("field,value,expect", [
    ("format_version", 2, "manifest.json: bundle format 2 is not supported by this runtime (edgepack {v} reads format 1); "
                          "it was made by edgepack 9.1.0: load it with that runtime (npm install edgepack@9.1.0) or "
                          "package the model again with edgepack {v}"),
    ("plan", 3, "model.plan: version 3 is not supported by this runtime (edgepack {v} reads plan versions 1 and 2); "
                "it was made by edgepack 9.1.0"),
], ids=["format", "plan"])
def test_version_mismatch_says_which_runtime(field, value, expect, bundle, tmp_path) -> None:
    b = tmp_path / "b"
    shutil.copytree(bundle, b)
    m = json.loads((b / "manifest.json").read_text())
    m["created_by"] = "edgepack 9.1.0"
    if field == "plan":
        m["plan"]["version"] = value
    else:
        m[field] = value
    (b / "manifest.json").write_text(json.dumps(m))
    res = node(f"""
import {{ load, VERSION }} from {json.dumps(RUNTIME.as_uri())};
try {{ await load({json.dumps(str(b))}); console.log(JSON.stringify({{ VERSION }})); }}
catch (e) {{ console.log(JSON.stringify({{ VERSION, err: `${{e.name}}: ${{e.message}}` }})); }}
""", tmp_path)
    assert res["VERSION"] == json.loads((WEB / "package.json").read_text())["version"]
    assert res["err"].startswith("EdgepackError: " + expect.format(v=res["VERSION"])), res["err"]


def test_audio_frames_and_image_pixels_in_node(tmp_path) -> None:
    rng = np.random.default_rng(2)
    pcm = rng.standard_normal(1000).astype(np.float32)
    px = rng.integers(0, 256, (5, 7, 4), dtype=np.uint8)
    res = node(f"""
import {{ audioFrames, imageToTensor }} from {json.dumps(RUNTIME.as_uri())};
const pcm = Float32Array.from({json.dumps(pcm.tolist())});
const a = audioFrames(pcm, {{ frameLength: 400, hop: 160 }});
const b = audioFrames(pcm, {{ frameLength: 400, hop: 160, pad: false, window: 'hann' }});
const img = {{ data: Uint8ClampedArray.from({json.dumps(px.ravel().tolist())}), width: 7, height: 5 }};
const nchw = imageToTensor(img, {{ mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225] }});
const nhwc = imageToTensor(img, {{ layout: 'NHWC', channels: 1, scale: 1 }});
const errs = [];
for (const f of [() => imageToTensor(img, {{ width: 3, height: 3 }}), () => audioFrames([1, 2], {{ frameLength: 2 }}), () => imageToTensor(img, {{ mean: [1, 2] }})])
  try {{ f(); errs.push(null); }} catch (e) {{ errs.push(`${{e.name}}: ${{e.message}}`); }}
console.log(JSON.stringify({{ a: [a.dims, Array.from(a.data)], b: [b.dims, Array.from(b.data)], nchw: [nchw.dims, Array.from(nchw.data)], nhwc: [nhwc.dims, Array.from(nhwc.data)], errs }}));
""", tmp_path)
    # frames at 0, 160, ..., 640: the last (640..1040) zero-padded; without padding 4 frames (last starts at 480)
    frames = np.zeros((5, 400), np.float32)
    for f in range(5):
        seg = pcm[f * 160:f * 160 + 400]
        frames[f, :len(seg)] = seg
    assert res["a"][0] == [5, 400]
    np.testing.assert_array_equal(np.array(res["a"][1], np.float32).reshape(5, 400), frames)
    hann = (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(400) / 400)).astype(np.float32)
    assert res["b"][0] == [4, 400]
    np.testing.assert_allclose(np.array(res["b"][1], np.float32).reshape(4, 400), frames[:4] * hann, rtol=1e-6, atol=1e-6)
    mean, std = np.array([0.485, 0.456, 0.406]), np.array([0.229, 0.224, 0.225])
    want = ((px[..., :3] / 255.0 - mean) / std).transpose(2, 0, 1)[None].astype(np.float32)
    assert res["nchw"][0] == [1, 3, 5, 7]
    np.testing.assert_allclose(np.array(res["nchw"][1], np.float32).reshape(want.shape), want, rtol=1e-5, atol=1e-5)
    luma = (0.299 * px[..., 0] + 0.587 * px[..., 1] + 0.114 * px[..., 2])[None, ..., None]
    assert res["nhwc"][0] == [1, 5, 7, 1]
    np.testing.assert_allclose(np.array(res["nhwc"][1]).reshape(luma.shape), luma, rtol=1e-5)
    assert res["errs"][0].startswith("EdgepackError: image: resizing or decoding an image needs a canvas")
    assert res["errs"][1].startswith("EdgepackError: audioFrames: pcm must be a Float32Array")
    assert res["errs"][2] == "EdgepackError: imageToTensor: mean has 2 values for 3 channels"


def test_runtime_package_packs_and_works(bundle, tmp_path) -> None:
    """`npm pack` of web/ is the publishable `edgepack` package: installed from the tarball into a fresh project,
    it loads a bundle folder, its types check a TypeScript program (tsc), and its README ships."""
    r = subprocess.run(["npm", "pack", "--pack-destination", str(tmp_path), *NPM_FLAGS], cwd=WEB, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    tgz = tmp_path / r.stdout.strip().splitlines()[-1]
    listing = subprocess.run(["tar", "tzf", str(tgz)], capture_output=True, text=True).stdout.split()
    assert {"package/README.md", "package/package.json", "package/src/index.d.ts", "package/src/index.js",
            "package/src/helpers.js", "package/src/sha256.js"} <= set(listing), listing
    assert not any("node_modules" in f for f in listing)
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "package.json").write_text(json.dumps({"name": "app", "private": True, "type": "module"}))
    r = subprocess.run(["npm", "install", "--offline", *NPM_FLAGS, str(tgz)], cwd=proj, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    (proj / "main.mjs").write_text(f"""
import {{ load, VERSION, imageToTensor }} from 'edgepack';
const s = await load({json.dumps(str(bundle))});
const o = await s.run({{ a: {{ data: new Float32Array(16).fill(1), dims: [2, 8] }}, s: {{ data: new Float32Array(12).fill(1), dims: [2, 6] }} }});
console.log(JSON.stringify({{ VERSION, z: Array.from(o.z.data), backend: s.backend }}));
""")
    r = subprocess.run(["node", "main.mjs"], cwd=proj, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert res["z"] == [2.0] * 16 and res["backend"] == "wasm"
    assert res["VERSION"] == json.loads((WEB / "package.json").read_text())["version"]
    (proj / "main.ts").write_text("""
import { load, imageToTensor, audioFrames, EdgepackError, type Progress, type OutputTensor } from 'edgepack';
const seen: Progress[] = [];
const s = await load('bundle/', { onProgress: (p) => seen.push(p), cache: 'models-v1', verify: true });
const t = imageToTensor({ data: new Uint8ClampedArray(4 * 32 * 32), width: 32, height: 32 }, { layout: 'NHWC', mean: [0.5, 0.5, 0.5] });
const f = audioFrames(new Float32Array(16000), { frameLength: 400, hop: 160, window: 'hann' });
const ort = { type: 'float32', data: t.data, dims: t.dims, location: 'cpu' };
const out: Record<string, OutputTensor> = await s.run({ image: ort, frames: f });
const e: EdgepackError | null = null;
console.log(out, e, seen.length, s.notes);
""")
    (proj / "tsconfig.json").write_text(json.dumps({"compilerOptions": {
        "strict": True, "noEmit": True, "target": "es2022", "module": "nodenext", "moduleResolution": "nodenext",
        "lib": ["es2022", "dom"], "types": []}, "files": ["main.ts"]}))
    r = subprocess.run([str(WEB / "node_modules" / ".bin" / "tsc"), "-p", "tsconfig.json"], cwd=proj, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    (proj / "bad.ts").write_text("import { load } from 'edgepack';\nawait load('b/', { onProgress: 3 });\n")
    r = subprocess.run([str(WEB / "node_modules" / ".bin" / "tsc"), "--strict", "--noEmit", "--module", "nodenext",
                        "--moduleResolution", "nodenext", "--target", "es2022", "--lib", "es2022,dom", "bad.ts"],
                       cwd=proj, capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and "(progress: Progress) => void" in r.stdout, r.stdout


def test_browser_and_node_entries(bundle, tmp_path) -> None:
    """package.json's conditional exports: a browser build of `import ... from 'edgepack'` (esbuild, the
    "browser" condition, what Vite resolves too) holds none of Node's built-ins, not even as names; a Node build
    (the "node" condition: src/node.js) carries them and runs a bundle folder from the one bundled file."""
    esbuild = WEB / "node_modules" / ".bin" / "esbuild"
    if not esbuild.exists():
        pytest.fail("esbuild is not installed: run scripts/setup.sh (npm ci in web/)")
    app = tmp_path / "app"
    (app / "node_modules").mkdir(parents=True)
    (app / "node_modules" / "edgepack").symlink_to(WEB)
    (app / "main.mjs").write_text(f"""
import {{ load }} from 'edgepack';
const s = await load({json.dumps(str(bundle))}, {{ threads: 2 }});
const o = await s.run({{ a: {{ data: new Float32Array(16).fill(1), dims: [2, 8] }}, s: {{ data: new Float32Array(12).fill(1), dims: [2, 6] }} }});
console.log(JSON.stringify({{ z: Array.from(o.z.data), threads: s.features.threads }}));
await s.destroy();
""")
    built = {}
    for platform in ("browser", "node"):
        out = tmp_path / f"{platform}.mjs"
        r = subprocess.run([str(esbuild), "main.mjs", "--bundle", "--format=esm", f"--platform={platform}",
                            "--target=es2022", "--log-level=warning", f"--outfile={out}"], cwd=app, capture_output=True,
                           text=True, timeout=120)
        assert r.returncode == 0 and not r.stderr.strip(), r.stderr
        built[platform] = out.read_text()
    for name in ("node:crypto", "node:fs", "node:os", "registerNode({"):
        assert name not in built["browser"], name
        assert name in built["node"], name
    (tmp_path / "node.mjs").rename(tmp_path / "elsewhere.mjs")   # nothing of web/src next to it
    r = subprocess.run(["node", "elsewhere.mjs"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert res == {"z": [2.0] * 16, "threads": 2}, res


def test_setup_installs_npm_locks_as_they_are(tmp_path) -> None:
    """scripts/setup.sh installs with `npm ci` (never rewrites a lock); web/'s lock installs on a fresh linux-x64
    folder (the optional platform packages esbuild and rollup need are recorded) and stays byte for byte."""
    setup = (REPO / "scripts" / "setup.sh").read_text()
    commands = [ln.split("#", 1)[0] for ln in setup.splitlines()]
    assert not any(re.search(r"npm install\b", c) for c in commands), "setup.sh must use npm ci"
    for d in ("web", "wasm_kernels", "bench"):
        assert f"(cd {d} && npm ci" in setup
        lock = REPO / d / "package-lock.json"
        tracked = subprocess.run(["git", "ls-files", "--error-unmatch", str(lock)], cwd=REPO, capture_output=True)
        assert tracked.returncode == 0, f"{d}/package-lock.json is not tracked"
    fresh = tmp_path / "web"
    fresh.mkdir()
    for f in ("package.json", "package-lock.json"):
        shutil.copy(WEB / f, fresh / f)
    r = subprocess.run(["npm", "ci", "--prefer-offline", *NPM_FLAGS], cwd=fresh, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert (fresh / "package-lock.json").read_bytes() == (WEB / "package-lock.json").read_bytes()
    for b in ("tsc", "esbuild", "vite"):
        assert (fresh / "node_modules" / ".bin" / b).exists(), b
    r = subprocess.run([str(fresh / "node_modules" / ".bin" / "esbuild"), "--version"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr   # the platform binary is there, not only the JS shim
