"""Hostile or careless use of the packager and its CLI: a closed pipe, wrong run() arguments, a manifest
nested to blow the stack, hostile external data, constants folded to gigabytes. Each gives an `error:`
line (a PackagerError), never a traceback, a hang or unbounded memory."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

from packager.api import package
from packager.bundle import load_bundle
from packager.errors import PackagerError


def cli(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "packager.cli", *args], capture_output=True, text=True, **kw)


@pytest.fixture
def bundle(tmp_path: Path, reshape_model: onnx.ModelProto) -> Path:
    return package(reshape_model, out=tmp_path / "b", verify=False)


def test_inspect_into_closed_pipe_is_quiet(bundle: Path) -> None:
    # `package inspect B | head -1`: the reader leaves early; no BrokenPipeError traceback
    p = subprocess.run(f"{sys.executable} -m packager.cli inspect {bundle} | head -1", shell=True,
                       capture_output=True, text=True, cwd=Path(__file__).resolve().parent.parent)
    assert p.stdout.startswith("bundle"), p.stdout
    assert "Traceback" not in p.stderr and "BrokenPipe" not in p.stderr, p.stderr
    # a reader that takes nothing at all, for --json too and for --help
    for args in (f"inspect {bundle}", f"inspect {bundle} --json", "--help"):
        r, w = os.pipe()
        os.close(r)
        proc = subprocess.run([sys.executable, "-m", "packager.cli", *args.split()], stdout=w, stderr=subprocess.PIPE,
                              text=True, cwd=Path(__file__).resolve().parent.parent)
        os.close(w)
        assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr, (args, proc.stderr)


def test_help_lists_every_verb() -> None:
    from packager.cli import VERBS
    r = cli("--help")
    assert r.returncode == 0
    verbs = r.stdout[r.stdout.index("other verbs"):]   # the list of verbs, not a mention elsewhere
    for verb in VERBS:
        assert f"package {verb}" in verbs or f"|{verb}" in verbs, verb


@pytest.mark.parametrize("feeds", [None, "x", 3])
def test_run_with_wrong_feeds_type(bundle: Path, feeds) -> None:
    b = load_bundle(bundle)
    with pytest.raises(PackagerError, match="dict of input name"):
        b.run(feeds)
    with pytest.raises(PackagerError, match="dict of input name"):
        b.run([np.zeros((2, 3), np.float32)])


def test_deeply_nested_manifest(bundle: Path) -> None:
    (bundle / "manifest.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(PackagerError, match="nested too deeply"):
        load_bundle(bundle)
    r = cli("inspect", str(bundle))
    assert r.returncode == 1 and "error:" in r.stderr and "Traceback" not in r.stderr, r.stderr
