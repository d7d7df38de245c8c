"""`package --target web` bundles are npm packages: `npm pack` + `npm install` of the tarball (and of the
directory) into a fresh project, imported by name in Node, run and compared with onnxruntime; the generated
index.d.ts types THIS model's inputs/outputs (tsc accepts a right program, rejects wrong names, dtypes and
shapes); a signed npm bundle loads with its public key and a tampered one is refused. The runtime's own JSDoc
types check too (tsc -p web/jsconfig.json)."""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from packager import package
from packager.reference import reference_run
from packager.signing import generate_keypair
from packager.targets.web_npm import npm_name

from .conftest import model_path

REPO = Path(__file__).resolve().parent.parent
TSC = REPO / "web" / "node_modules" / ".bin" / "tsc"
NPM_FLAGS = ("--no-audit", "--no-fund", "--offline", "--loglevel=error")

pytestmark = pytest.mark.skipif(not shutil.which("npm"), reason="needs node + npm")


def _tsc() -> Path:
    if not TSC.exists():
        pytest.fail("typescript is not installed: run scripts/setup.sh (npm install in web/)")
    return TSC


def _two_io_model() -> onnx.ModelProto:
    """float32 + int64 inputs (one name not a JS identifier), two outputs."""
    s = numpy_helper.from_array(np.array([8], np.int64), "s")
    b = numpy_helper.from_array(np.linspace(-1, 1, 4).astype(np.float32), "b")
    g = helper.make_graph(
        [helper.make_node("Add", ["pixel-values", "b"], ["a"]), helper.make_node("Relu", ["a"], ["y"]),
         helper.make_node("Reshape", ["ids", "s"], ["w"])], "two_io",
        [helper.make_tensor_value_info("pixel-values", TensorProto.FLOAT, [2, 3, 4]),
         helper.make_tensor_value_info("ids", TensorProto.INT64, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 4]),
         helper.make_tensor_value_info("w", TensorProto.INT64, [8])], [s, b])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("npm")


@pytest.fixture(scope="module")
def key(work) -> tuple[Path, str]:
    generate_keypair(work / "k.pem", work / "k.pub")
    return work / "k.pem", (work / "k.pub").read_text().strip()


@pytest.fixture(scope="module")
def project(work, key) -> Path:
    """A fresh npm project with three bundle packages installed: cifar10net and two_io from `npm pack`
    tarballs, a signed copy of two_io (renamed) from its directory."""
    bundles = {"cifar10net": package(model_path("cifar10net"), out=work / "b" / "cifar10net", dynamic=False,
                                     emit_onnx=True),
               "two_io": package(_two_io_model(), out=work / "b" / "two_io", emit_onnx=True)}
    signed = package(_two_io_model(), out=work / "b" / "signed", sign=key[0])
    proj = work / "proj"
    proj.mkdir()
    (proj / "package.json").write_text(json.dumps({"name": "app", "private": True, "type": "module"}))
    tarballs = []
    for b in bundles.values():
        r = subprocess.run(["npm", "pack", "--pack-destination", str(work), *NPM_FLAGS], cwd=b, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        tarballs.append(str(work / r.stdout.strip().splitlines()[-1]))
    # the signed copy is installed from its directory under another name (npm links it)
    pj = json.loads((signed / "package.json").read_text())
    assert pj["name"] == "two_io"
    r = subprocess.run(["npm", "install", *NPM_FLAGS, *tarballs, f"signed-two-io@file:{signed}"], cwd=proj,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return proj


DRIVER = r"""
import { readFileSync, writeFileSync } from 'node:fs';
const job = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const mod = await import(job.pkg);
const res = { name: mod.name, inputs: mod.inputs, outputs: {} };
try {
  const s = await mod.default(job.options);
  Object.assign(res, { backend: s.backend, features: s.features, notes: s.notes, variant: s.variant });
  const feeds = {};
  for (const [name, f] of Object.entries(job.feeds)) {
    const b = readFileSync(f.file);
    feeds[name] = { data: new globalThis[f.ctor](b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength)), dims: f.dims };
  }
  const out = await s.run(feeds);
  for (const [name, t] of Object.entries(out)) {
    const file = `${job.out}/${name}.bin`;
    writeFileSync(file, new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength));
    res.outputs[name] = { file, dims: t.dims, dtype: t.dtype };
  }
  res.ok = true;
} catch (e) { res.ok = false; res.error = `${e.name}: ${e.message}`; }
console.log(JSON.stringify(res));
"""

CTORS = {"float32": "Float32Array", "int64": "BigInt64Array"}


def _run(proj: Path, pkg: str, feeds: dict[str, np.ndarray], tmp: Path, options: dict | None = None) -> tuple[dict, dict]:
    tmp.mkdir(parents=True, exist_ok=True)
    (proj / "driver.mjs").write_text(DRIVER)
    jf = {}
    for i, (k, a) in enumerate(feeds.items()):
        (tmp / f"in{i}.bin").write_bytes(a.tobytes())
        jf[k] = {"file": str(tmp / f"in{i}.bin"), "ctor": CTORS[a.dtype.name], "dims": list(a.shape)}
    job = {"pkg": pkg, "feeds": jf, "out": str(tmp), "options": options or {}}
    (tmp / "job.json").write_text(json.dumps(job))
    r = subprocess.run(["node", "driver.mjs", str(tmp / "job.json")], cwd=proj, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout.strip().splitlines()[-1])
    outs = {k: np.fromfile(v["file"], np.dtype(v["dtype"])).reshape(v["dims"]) for k, v in res["outputs"].items()}
    return res, outs


def test_npm_name() -> None:
    assert npm_name("CIFAR10 Net") == "cifar10-net" and npm_name("_x.") == "x" and npm_name("..") == "model"


@pytest.mark.parametrize("pkg", ["cifar10net", "two_io"])
def test_installed_package_runs_like_onnxruntime(pkg, project, tmp_path) -> None:
    installed = project / "node_modules" / pkg
    assert (installed / "index.js").is_file() and not installed.is_symlink()   # extracted from the tarball
    manifest = json.loads((installed / "manifest.json").read_text())
    rng = np.random.default_rng(5)
    feeds = {s["name"]: (rng.standard_normal(s["shape"]).astype(np.float32) if s["dtype"] == "float32"
                         else rng.integers(0, 100, s["shape"]).astype(np.int64)) for s in manifest["inputs"]}
    res, got = _run(project, pkg, feeds, tmp_path, {"backend": "auto", "threads": "auto"})
    assert res["ok"], res.get("error")
    assert res["name"] == manifest["name"] and [s["name"] for s in res["inputs"]] == list(feeds)
    assert res["backend"] == "wasm" and res["features"]["simd"] and res["features"]["webgpu"] is False
    # model.onnx (asked for: emit_onnx) stays in the bundle folder, out of the tarball (package.json "files"): nothing
    # loads it
    assert not (installed / "model.onnx").exists()
    assert (project.parent / "b" / pkg / "model.onnx").is_file()
    want = reference_run(onnx.load(str(project.parent / "b" / pkg / "model.onnx")), feeds)
    assert set(got) == set(want)
    for k, w in want.items():
        assert got[k].dtype == w.dtype and got[k].shape == w.shape
        np.testing.assert_allclose(got[k], w, rtol=1e-4, atol=1e-4, err_msg=k)


def test_installed_package_refuses_wrong_inputs(project, tmp_path) -> None:
    bad = {"image": np.zeros((1, 3, 32, 31), np.float32)}
    res, _ = _run(project, "cifar10net", bad, tmp_path)
    assert not res["ok"] and "EdgepackError: input 'image': shape [1,3,32,31], expected [1,3,32,32]" in res["error"]


def test_signed_package_loads_with_key_and_tamper_is_refused(project, key, tmp_path) -> None:
    installed = project / "node_modules" / "signed-two-io"
    feeds = {"pixel-values": np.ones((2, 3, 4), np.float32), "ids": np.arange(8, dtype=np.int64).reshape(2, 4)}
    res, got = _run(project, "signed-two-io", feeds, tmp_path / "ok", {"publicKey": key[1]})
    assert res["ok"], res.get("error")
    np.testing.assert_array_equal(got["w"], np.arange(8))
    plan = installed.resolve() / "model.plan"
    data = plan.read_bytes()
    plan.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    try:
        res, _ = _run(project, "signed-two-io", feeds, tmp_path / "bad", {"publicKey": key[1]})
        assert not res["ok"] and "model.plan does not match its SHA-256" in res["error"]
    finally:
        plan.write_bytes(data)


GOOD_TS = """
import load, { inputs, type Outputs, EdgepackError } from 'cifar10net';
import loadTwo from 'two_io';
const s = await load({ backend: 'auto', threads: 'auto' });
const out: Outputs = await s.run({ image: { data: new Float32Array(3072), dims: [1, 3, 32, 32] } });
const logits: Float32Array = out.logits.data;
const dims: [1, 10] = out.logits.dims;
const t = await loadTwo({ variant: 'simd', threads: 1 });
const o2 = await t.run({ 'pixel-values': { data: new Float32Array(24), dims: [2, 3, 4] }, ids: { data: new BigInt64Array(8), dims: [2, 4] } });
const w: BigInt64Array = o2.w.data;
const f: boolean = s.features.simd && !s.features.webgpu;
console.log(logits, dims, w, f, inputs[0].shape, s.backend, s.notes, EdgepackError);
"""

BAD_TS = {
    "name": ("await s.run({ img: { data: new Float32Array(3072), dims: [1, 3, 32, 32] } });", "'img' does not exist"),
    "dtype": ("await s.run({ image: { data: new Float64Array(3072), dims: [1, 3, 32, 32] } });", "Float64Array"),
    "shape": ("await s.run({ image: { data: new Float32Array(3072), dims: [1, 3, 32, 31] } });", "'31' is not assignable to type '32'"),
    "output": ("const x: Int32Array = (await s.run({ image: { data: new Float32Array(3072), dims: [1, 3, 32, 32] } })).logits.data;",
               "Int32Array"),
    "int64": ("await t.run({ 'pixel-values': { data: new Float32Array(24), dims: [2, 3, 4] }, ids: { data: new Int32Array(8), dims: [2, 4] } });",
              "Int32Array"),
    "option": ("await load({ backend: 'cuda' });", "cuda"),
}


@pytest.fixture(scope="module")
def tsc_errors(project) -> dict[str, str]:
    """One tsc run (it is slow to start) over good.ts and one bad_<case>.ts per case: file -> its errors."""
    names = ["good.ts"]
    (project / "good.ts").write_text(GOOD_TS)
    head = "import load from 'cifar10net';\nimport loadTwo from 'two_io';\nconst s = await load();\nconst t = await loadTwo();\n"
    for case, (line, _) in BAD_TS.items():
        (project / f"bad_{case}.ts").write_text(head + line + "\n")
        names.append(f"bad_{case}.ts")
    r = subprocess.run([str(_tsc()), "--strict", "--noEmit", "--target", "es2022", "--module", "nodenext",
                        "--moduleResolution", "nodenext", "--lib", "es2022,dom", "--types", "node",
                        "--typeRoots", str(REPO / "web" / "node_modules" / "@types"), *names],
                       cwd=project, capture_output=True, text=True, timeout=300)
    errors = {n: "" for n in names}
    current = None
    for line in r.stdout.splitlines():   # "file.ts(3,15): error TS...", continuation lines indented
        head_file = line.split("(", 1)[0]
        current = head_file if head_file in errors else current
        assert current is not None, r.stdout
        errors[current] += line + "\n"
    return errors


def test_generated_types_accept_right_program(tsc_errors) -> None:
    assert tsc_errors["good.ts"] == ""


@pytest.mark.parametrize("case", list(BAD_TS))
def test_generated_types_reject_wrong_program(case, tsc_errors) -> None:
    _, msg = BAD_TS[case]
    err = tsc_errors[f"bad_{case}.ts"]
    assert "error TS" in err and msg in err, err


def test_runtime_jsdoc_typechecks() -> None:
    r = subprocess.run([str(_tsc()), "-p", str(REPO / "web" / "jsconfig.json")], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr


def test_bundle_package_browser_and_node_entries(project, tmp_path) -> None:
    """A bundle's package.json has the `edgepack` package's conditions: Node resolves its node.js; an esbuild build
    for the browser holds none of Node's built-ins; one for Node carries them and runs from its one file (written
    into the package's folder, where the `new URL('./model.plan', import.meta.url)` files are), like onnxruntime."""
    esbuild = REPO / "web" / "node_modules" / ".bin" / "esbuild"
    if not esbuild.exists():
        pytest.fail("esbuild is not installed: run scripts/setup.sh (npm ci in web/)")
    r = subprocess.run(["node", "--input-type=module", "-e", "console.log(import.meta.resolve('cifar10net'))"],
                       cwd=project, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip().endswith("/node_modules/cifar10net/node.js"), r.stdout + r.stderr
    x = np.random.default_rng(6).standard_normal((1, 3, 32, 32)).astype(np.float32)
    (project / "entry.mjs").write_text(f"""
import load from 'cifar10net';
const s = await load({{ threads: 2 }});
const o = await s.run({{ image: {{ data: Float32Array.from({json.dumps(x.ravel().tolist())}), dims: [1, 3, 32, 32] }} }});
console.log(JSON.stringify({{ logits: Array.from(o.logits.data), threads: s.features.threads }}));
await s.destroy();
""")
    built = {}
    out = {"browser": tmp_path / "browser.mjs", "node": project / "node_modules" / "cifar10net" / "app-node.mjs"}
    try:
        for platform, file in out.items():
            r = subprocess.run([str(esbuild), "entry.mjs", "--bundle", "--format=esm", f"--platform={platform}",
                                "--target=es2022", "--log-level=warning", f"--outfile={file}"], cwd=project,
                               capture_output=True, text=True, timeout=120)
            assert r.returncode == 0 and not r.stderr.strip(), r.stderr
            built[platform] = file.read_text()
        for name in ("node:crypto", "node:fs", "node:os", "registerNode({"):
            assert name not in built["browser"], name
            assert name in built["node"], name
        r = subprocess.run(["node", str(out["node"])], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    finally:
        out["node"].unlink(missing_ok=True)
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads(r.stdout.strip().splitlines()[-1])
    want = reference_run(onnx.load(str(project.parent / "b" / "cifar10net" / "model.onnx")), {"image": x})["logits"]
    assert res["threads"] == 2
    np.testing.assert_allclose(np.array(res["logits"], np.float32).reshape(want.shape), want, rtol=1e-4, atol=1e-4)
