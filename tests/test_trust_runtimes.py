"""Signed bundles in all three runtimes: Python (packager.load_bundle), Node (web/src/runtime.js, publicKey)
and edgepack-run (--public-key, host build). A signed bundle loads and gives the same answer in each; an
unsigned one, one signed by another key, one with an extra file, and one with ANY single byte flipped
(a few hundred positions sampled across every file, manifest.json and manifest.sig included) is refused
by every one of them.

A web-target bundle holds all that edgepack-run reads (manifest.json, model.plan), as in
tests/conformance/runner_aarch64.py; in strict mode edgepack-run hashes every listed file, wasm included."""
from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from packager import load_bundle, package
from packager.errors import BundleError, PackagerError
from packager.signing import generate_keypair

from .conftest import make_model

REPO = Path(__file__).resolve().parent.parent
RUNTIME = REPO / "web" / "src" / "index.js"
CLI = REPO / "edge" / "build" / "host" / "edgepack-run"

# Loads each bundle of a list with the key; prints one JSON line per bundle: {"ok": output[0..]} or {"err": msg}.
NODE_DRIVER = r"""
import { readFileSync } from 'node:fs';
const job = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const { load } = await import(job.runtime);
for (const b of job.bundles) {
  try {
    const s = await load(b, { publicKey: job.key, variant: 'simd' });
    const o = await s.run({ x: { data: new Float32Array(job.x), dims: job.dims } });
    console.log(JSON.stringify({ ok: Array.from(Object.values(o)[0].data) }));
  } catch (e) {
    console.log(JSON.stringify({ err: String(e.message), name: e.name }));
  }
}
"""


def _node_ok() -> bool:
    node = shutil.which("node")
    if not node:
        return False
    v = subprocess.run([node, "--version"], capture_output=True, text=True).stdout.strip()
    return v.startswith("v") and int(v[1:].split(".")[0]) >= 20


pytestmark = pytest.mark.skipif(not _node_ok(), reason="needs Node >= 20")


@pytest.fixture(scope="module")
def cli() -> Path:
    subprocess.run(["make", "-s", "-C", str(REPO / "edge"), "build/host/edgepack-run"], check=True, capture_output=True)
    return CLI


@pytest.fixture(scope="module")
def signed(tmp_path_factory) -> tuple[Path, str, Path]:
    d = tmp_path_factory.mktemp("trust")
    generate_keypair(d / "k.pem", d / "k.pub")
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w")
    m = make_model([helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["y"])],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 5, 5])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 5, 5])], [w])
    path = package(m, target="web", out=d / "b", sign=d / "k.pem")
    return path, (d / "k.pub").read_text().strip(), d / "k.pub"


X = (np.arange(75, dtype=np.float32).reshape(1, 3, 5, 5) / 40 - 0.9)


def _python(bundle: Path, pub: str) -> np.ndarray | str:
    try:
        return load_bundle(bundle, public_key=pub).run({"x": X})["y"]
    except PackagerError as e:
        return f"refused: {e}"


def _node(bundles: list[Path], pub: str, tmp: Path) -> list[dict]:
    (tmp / "drv.mjs").write_text(NODE_DRIVER)
    (tmp / "job.json").write_text(json.dumps({"runtime": RUNTIME.as_uri(), "bundles": [str(b) for b in bundles], "key": pub,
                                              "x": X.ravel().tolist(), "dims": list(X.shape)}))
    r = subprocess.run(["node", str(tmp / "drv.mjs"), str(tmp / "job.json")], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    lines = [json.loads(line) for line in r.stdout.splitlines()]
    assert len(lines) == len(bundles)
    return lines


def _cli(cli: Path, bundle: Path, key: str, tmp: Path) -> tuple[int, str, np.ndarray | None]:
    np.save(tmp / "x.npy", X)
    out = tmp / "y.npy"
    out.unlink(missing_ok=True)
    r = subprocess.run([str(cli), str(bundle), "--input", f"x={tmp / 'x.npy'}", "--output", str(out), "--public-key", key],
                       capture_output=True, text=True, timeout=60)
    return r.returncode, r.stderr, (np.load(out) if r.returncode == 0 else None)


def test_signed_bundle_runs_in_all_three(signed, cli: Path, tmp_path: Path) -> None:
    path, pub, pub_file = signed
    want = _python(path, pub)
    assert isinstance(want, np.ndarray)
    (node,) = _node([path], pub, tmp_path)
    assert "ok" in node, node
    np.testing.assert_allclose(np.array(node["ok"], np.float32), want.ravel(), rtol=1e-5, atol=1e-6)
    for key in (pub, str(pub_file)):   # hex on the command line, or the .pub file keygen writes
        code, err, got = _cli(cli, path, key, tmp_path)
        assert code == 0, err
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def _variant(path: Path, tmp: Path, name: str, change) -> Path:
    """A copy of the bundle (hard links for unchanged files) with `change(copy)` applied."""
    c = tmp / name
    shutil.copytree(path, c, copy_function=os.link)   # sub-directories too (the web runtime's runtime/)
    change(c)
    return c


def _replace(p: Path, data: bytes) -> None:
    p.unlink()          # never write through a hard link into the original
    p.write_bytes(data)


def test_unsigned_other_key_and_extra_file_refused_by_all(signed, cli: Path, tmp_path: Path) -> None:
    path, pub, _ = signed
    generate_keypair(tmp_path / "o.pem", tmp_path / "o.pub")
    cases = {
        "unsigned": (_variant(path, tmp_path, "u", lambda c: (c / "manifest.sig").unlink()), pub, "not signed"),
        "other key": (path, (tmp_path / "o.pub").read_text().strip(), "signature does not verify"),
        "extra file": (_variant(path, tmp_path, "e", lambda c: (c / "evil.js").write_text("alert(1)")), pub,
                       "not covered by the signed manifest"),
        "extra file in a subdir": (_variant(path, tmp_path, "s", lambda c: ((c / "d").mkdir(), (c / "d" / "x").write_text("1"))),
                                   pub, "not covered by the signed manifest"),
    }
    for (what, (bundle, key, msg)) in cases.items():
        py = _python(bundle, key)
        assert isinstance(py, str) and msg in py, (what, py)
        (nd,) = _node([bundle], key, tmp_path)
        assert "err" in nd and msg in nd["err"], (what, nd)
        code, err, _ = _cli(cli, bundle, key, tmp_path)
        assert code == 3 and msg in err, (what, code, err)


def test_any_single_byte_flip_refused_by_all(signed, cli: Path, tmp_path: Path) -> None:
    path, pub, _ = signed
    rng = random.Random(7)
    flips: list[tuple[str, int, int]] = []
    files = sorted(f.relative_to(path).as_posix() for f in path.rglob("*") if f.is_file())
    for name in files:
        size = (path / name).stat().st_size
        n = 48 if name.startswith("manifest") or name == "model.plan" else 30 if name.endswith(".wasm") else 8
        positions = {0, size - 1} | {rng.randrange(size) for _ in range(n)}
        flips += [(name, pos, 1 << rng.randrange(8)) for pos in sorted(positions)]
    assert len(flips) > 200 and {name for name, _, _ in flips} == set(files)
    bundles = []
    for k, (name, pos, bit) in enumerate(flips):
        def flip(c: Path, name=name, pos=pos, bit=bit) -> None:
            data = bytearray((c / name).read_bytes())
            data[pos] ^= bit
            _replace(c / name, bytes(data))
        bundles.append(_variant(path, tmp_path, f"f{k}", flip))
    accepted = []
    for (name, pos, _), b, nd in zip(flips, bundles, _node(bundles, pub, tmp_path)):
        py = _python(b, pub)
        code, err, _ = _cli(cli, b, pub, tmp_path)
        if not isinstance(py, str) or "err" not in nd or code != 3:
            accepted.append((name, pos, "python" if not isinstance(py, str) else "", nd, code, err[-200:]))
        else:
            assert "Sanitizer" not in err
    assert not accepted, accepted[:5]


def test_python_rejects_without_crypto_confusion(signed) -> None:
    """A bad key argument is a clear error, not a crash, in Python."""
    path, _, _ = signed
    with pytest.raises(BundleError):
        load_bundle(path, public_key="zz" * 32)
