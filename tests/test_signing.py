"""Signed bundles: a valid one loads; flipping any single byte of any file is refused (Python runtime)."""
from __future__ import annotations

import random
import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest

from packager import load_bundle, package
from packager.errors import BundleError
from packager.signing import generate_keypair

from .test_cli import cli


@pytest.fixture(scope="module")
def signed(tmp_path_factory, request) -> tuple[Path, str]:
    from .conftest import make_model, f32
    from onnx import helper, numpy_helper
    d = tmp_path_factory.mktemp("signed")
    generate_keypair(d / "k.pem", d / "k.pub")
    shape = numpy_helper.from_array(np.array([3, 2], dtype=np.int64), "s")
    m = make_model([helper.make_node("Reshape", ["x", "s"], ["y"])], [f32("x", [2, 3])], [f32("y", [3, 2])], [shape])
    path = package(m, out=d / "b", sign=d / "k.pem")
    return path, (d / "k.pub").read_text().strip()


def test_signed_bundle_loads_and_runs(signed) -> None:
    path, pub = signed
    b = load_bundle(path, public_key=pub)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(b.run({"x": x})["y"], x.reshape(3, 2))


def test_unsigned_bundle_refused_when_key_required(signed, tmp_path: Path) -> None:
    path, pub = signed
    copy = shutil.copytree(path, tmp_path / "c")
    (copy / "manifest.sig").unlink()
    with pytest.raises(BundleError, match="not signed"):
        load_bundle(copy, public_key=pub)


def test_other_key_refused(signed, tmp_path: Path) -> None:
    path, _ = signed
    generate_keypair(tmp_path / "o.pem", tmp_path / "o.pub")
    with pytest.raises(BundleError, match="signature does not verify"):
        load_bundle(path, public_key=(tmp_path / "o.pub").read_text().strip())


def test_extra_file_refused(signed, tmp_path: Path) -> None:
    path, pub = signed
    copy = shutil.copytree(path, tmp_path / "c")
    (copy / "evil.js").write_text("alert(1)")
    with pytest.raises(BundleError, match="not covered by the signed manifest"):
        load_bundle(copy, public_key=pub)


def test_any_single_byte_flip_refused(signed, tmp_path: Path) -> None:
    path, pub = signed
    rng = random.Random(3)
    copy = tmp_path / "c"
    files = sorted(p.relative_to(path).as_posix() for p in path.rglob("*") if p.is_file())   # runtime/ too
    tried = 0
    for name in files:
        size = (path / name).stat().st_size
        positions = set(range(min(size, 64))) | {size - 1} | {rng.randrange(size) for _ in range(24)}
        for pos in sorted(positions):
            if copy.exists():
                shutil.rmtree(copy)
            shutil.copytree(path, copy)
            data = bytearray((copy / name).read_bytes())
            data[pos] ^= 1 << rng.randrange(8)
            (copy / name).write_bytes(bytes(data))
            with pytest.raises(BundleError):
                load_bundle(copy, public_key=pub).run({"x": np.zeros((2, 3), np.float32)})
            tried += 1
    assert tried > 200


def test_cli_sign_and_verify(tmp_path: Path, reshape_model: onnx.ModelProto) -> None:
    onnx.save(reshape_model, tmp_path / "m.onnx")
    assert cli("keygen", "--out", str(tmp_path / "key")).returncode == 0
    r = cli(str(tmp_path / "m.onnx"), "-o", str(tmp_path / "b"), "--sign", str(tmp_path / "key.pem"))
    assert r.returncode == 0, r.stderr
    np.save(tmp_path / "x.npy", np.zeros((2, 3), np.float32))
    r = cli("run", str(tmp_path / "b"), "--input", f"x={tmp_path / 'x.npy'}", "--public-key", str(tmp_path / "key.pub"))
    assert r.returncode == 0, r.stderr
    (tmp_path / "b" / "manifest.json").write_text((tmp_path / "b" / "manifest.json").read_text().replace("edgepack", "edgepacK", 1))
    r = cli("run", str(tmp_path / "b"), "--input", f"x={tmp_path / 'x.npy'}", "--public-key", str(tmp_path / "key.pub"))
    assert r.returncode == 1 and "signature does not verify" in r.stderr
