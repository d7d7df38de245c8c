"""Packaging never loses a user's files: an output folder is replaced only when it holds an edgepack
bundle, and then only the files its manifest lists go; a failed run leaves the earlier bundle as it was."""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import onnx
import pytest

from packager import api
from packager.api import package
from packager.bundle import write_bundle
from packager.errors import PackagerError
from packager.targets.web import WebTarget


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "packager.cli", *args], capture_output=True, text=True)


def snapshot(folder: Path) -> dict[str, str]:
    """Every file under `folder` (relative name -> SHA-256): compares trees byte for byte."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_repackaging_keeps_unlisted_files(tmp_path: Path, reshape_model: onnx.ModelProto) -> None:
    out = tmp_path / "b"
    package(reshape_model, out=out, verify=False)
    tarball = out / "edgepack-model-1.0.0.tgz"   # what `npm pack` leaves in the bundle folder
    tarball.write_bytes(b"npm pack output")
    (out / "notes").mkdir()
    (out / "notes" / "todo.txt").write_text("mine")
    package(reshape_model, out=out, verify=False)
    assert tarball.read_bytes() == b"npm pack output"
    assert (out / "notes" / "todo.txt").read_text() == "mine"
    assert (out / "model.plan").is_file() and (out / "manifest.json").is_file()
    assert [p.name for p in tmp_path.iterdir()] == ["b"]   # no staging folder left beside it


def test_old_bundle_files_not_in_new_bundle_are_removed(tmp_path: Path) -> None:
    out = tmp_path / "b"
    write_bundle(out, {"format": "edgepack-bundle"}, {"model.plan": b"1", "old.bin": b"x"})
    write_bundle(out, {"format": "edgepack-bundle"}, {"model.plan": b"2"})
    assert sorted(p.name for p in out.iterdir()) == ["manifest.json", "model.plan"]
    assert (out / "model.plan").read_bytes() == b"2"


def test_users_partial_folder_untouched(tmp_path: Path, reshape_model: onnx.ModelProto) -> None:
    partial = tmp_path / "b.partial"   # the old writer's fixed temp name: rmtree'd a user's folder
    partial.mkdir()
    (partial / "precious.txt").write_text("keep me")
    package(reshape_model, out=tmp_path / "b", verify=False)
    package(reshape_model, out=tmp_path / "b", verify=False)
    assert (partial / "precious.txt").read_text() == "keep me"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b", "b.partial"]


def test_output_is_a_file(tmp_path: Path, reshape_model: onnx.ModelProto) -> None:
    onnx.save(reshape_model, tmp_path / "m.onnx")
    f = tmp_path / "somefile"
    f.write_text("user data")
    before = sorted(p.name for p in tmp_path.iterdir())
    r = cli(str(tmp_path / "m.onnx"), "-o", str(f))
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert "error:" in r.stderr and "not a folder" in r.stderr, r.stderr
    assert f.read_text() == "user data"
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    r = cli(str(tmp_path / "m.onnx"), "-o", str(f / "sub"))   # a path under a file
    assert r.returncode != 0 and "error:" in r.stderr and "Traceback" not in r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_non_bundle_folder_refused_before_any_work(tmp_path: Path, reshape_model: onnx.ModelProto,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "docs"
    out.mkdir()
    (out / "thesis.tex").write_text("years of work")

    def no_work(*a, **k):
        raise AssertionError("the model was loaded before the output folder was checked")
    monkeypatch.setattr(api, "load_model", no_work)
    with pytest.raises(PackagerError, match="not an edgepack bundle"):
        package(reshape_model, out=out, verify=False)
    assert snapshot(out) == {"thesis.tex": hashlib.sha256(b"years of work").hexdigest()}
    # a folder with a manifest.json that is not an edgepack manifest is not a bundle either
    (out / "manifest.json").write_text('{"name": "my web app"}')
    with pytest.raises(PackagerError, match="not an edgepack bundle"):
        package(reshape_model, out=out, verify=False)


def test_failed_verification_keeps_previous_bundle(tmp_path: Path, reshape_model: onnx.ModelProto,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "b"
    package(reshape_model, out=out, verify=False)
    before = snapshot(out)

    def failing_verify(target, path: Path, *a, **k) -> None:
        assert path != out and (path / "model.plan").is_file()   # runs on the staged bundle, before the swap
        raise PackagerError("verification: forced failure")
    monkeypatch.setattr(WebTarget, "verify", failing_verify)
    with pytest.raises(PackagerError, match="forced failure"):
        package(reshape_model, out=out)
    assert snapshot(out) == before
    assert [p.name for p in tmp_path.iterdir()] == ["b"]
    # and a failure on a fresh output leaves nothing at all (not even parent folders we created)
    with pytest.raises(PackagerError, match="forced failure"):
        package(reshape_model, out=tmp_path / "new" / "deep" / "b")
    assert [p.name for p in tmp_path.iterdir()] == ["b"]


def test_failed_edge_consistency_keeps_previous_bundle(tmp_path: Path, reshape_model: onnx.ModelProto,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from packager.bundle import StagedBundle
    from packager.targets import edge
    monkeypatch.setattr(edge, "ensure_edge", lambda target: {"libedgepack.so": Path(os.devnull),
                                                             "edgepack-run": Path(os.devnull)})
    out = tmp_path / "b"
    pi5 = edge.EdgeTarget("pi5")
    manifest = {"format": "edgepack-bundle", "name": "m", "inputs": [], "outputs": []}
    staged = pi5.stage(out, manifest, reshape_model, b"plan")
    assert isinstance(staged, StagedBundle)
    staged.commit()
    before = snapshot(out)

    def failing(*a, **k):
        raise PackagerError("consistency: forced failure")
    monkeypatch.setattr(edge, "consistency", failing)
    with pytest.raises(PackagerError, match="forced failure"), pi5.stage(out, manifest, reshape_model, b"plan2") as staged:
        pi5.verify(staged.path, reshape_model, lambda s: None)   # as package(): verified before commit()
        staged.commit()
    assert snapshot(out) == before
    assert [p.name for p in tmp_path.iterdir()] == ["b"]


def test_new_file_colliding_with_user_file_refused(tmp_path: Path) -> None:
    out = tmp_path / "b"
    write_bundle(out, {"format": "edgepack-bundle"}, {"model.plan": b"1"})
    (out / "README.md").write_text("my readme")
    with pytest.raises(PackagerError, match="README.md"):
        write_bundle(out, {"format": "edgepack-bundle"}, {"model.plan": b"2", "README.md": b"generated"})
    assert (out / "README.md").read_text() == "my readme" and (out / "model.plan").read_bytes() == b"1"
    assert [p.name for p in tmp_path.iterdir()] == ["b"]
