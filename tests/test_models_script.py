"""The project builds its own models (bench/models, `python3 -m bench.models OUTDIR [NAME ...]`): nothing in the
repository reads a folder outside it, and what the script writes runs in onnxruntime like the torch module."""
from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import onnx
import pytest

from .conftest import REPO, build_models

# a path outside the repository (the sibling reference folder: relative, absolute, or joined as a path part);
# written so this file does not match itself
OUTSIDE = re.compile(r"\.\./shared|shared[/]models|/work[/]shared|/\s*[\"']shared[\"']")
SKIP_DIRS = {".git", ".cache", "node_modules", "__pycache__", ".pytest_cache", "build"}


def repo_files() -> list[Path]:
    files = []
    for root, dirs, names in os.walk(REPO):   # symlinked folders (.cache, node_modules) are not entered
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.endswith(".egg-info")]
        files += [Path(root) / n for n in names]
    return files


def test_no_file_reads_outside_the_repo():
    hits = []
    for f in repo_files():
        if f.is_symlink() or f.stat().st_size > 2_000_000:
            continue
        text = f.read_bytes().decode("utf-8", errors="ignore")
        hits += [f"{f.relative_to(REPO)}:{text.count(chr(10), 0, m.start()) + 1}" for m in OUTSIDE.finditer(text)]
    assert not hits, "the project must build its own models (python3 -m bench.models): " + ", ".join(hits)


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """The small original and the dynamic encoder, built once for this module into a tmp folder."""
    out = tmp_path_factory.mktemp("models")
    build_models(out, "cifar10net", "minilm_like_dyn")
    return out


def torch_module(name: str):
    pytest.importorskip("torch")
    from bench.models.export import seeded_model
    from bench.models.registry import MODELS
    return seeded_model(MODELS[name])


def ort_run(path: Path, feeds: dict[str, np.ndarray]) -> np.ndarray:
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"]).run(None, feeds)[0]


def dims(vi: onnx.ValueInfoProto) -> list:
    return [d.dim_param or d.dim_value for d in vi.type.tensor_type.shape.dim]


def test_cifar10net_matches_torch(built):
    import torch
    path = built / "cifar10net.onnx"
    g = onnx.load(str(path)).graph
    assert dims(g.input[0]) == ["batch", 3, 32, 32] and g.input[0].name == "image"
    assert dims(g.output[0]) == ["batch", 10] and g.output[0].name == "logits"
    x = np.random.default_rng(0).standard_normal((3, 3, 32, 32)).astype(np.float32)   # batch 3: the axis is symbolic
    with torch.no_grad():
        want = torch_module("cifar10net")(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(ort_run(path, {"image": x}), want, rtol=1e-4, atol=1e-5)


def test_build_is_deterministic(built, tmp_path):
    build_models(tmp_path, "cifar10net")
    assert (tmp_path / "cifar10net.onnx").read_bytes() == (built / "cifar10net.onnx").read_bytes()


# docs/models.md lists these: what a runtime with run-time shapes has to compute shapes with
MINILM_DYN_OPS = {"Add", "Cast", "Concat", "Constant", "Div", "Erf", "Gather", "Identity", "LayerNormalization",
                  "MatMul", "Mul", "Range", "ReduceMean", "Reshape", "Shape", "Softmax", "Transpose", "Unsqueeze"}


def test_minilm_like_dyn_runs_at_two_shapes(built):
    import torch
    path = built / "minilm_like_dyn.onnx"
    g = onnx.load(str(path)).graph
    assert dims(g.input[0]) == ["batch", "sequence"] and dims(g.output[0]) == ["batch", 384]
    assert {n.op_type for n in g.node} == MINILM_DYN_OPS
    model = torch_module("minilm_like_dyn")
    rng = np.random.default_rng(1)
    for batch, seq in ((1, 7), (3, 40)):
        ids = rng.integers(0, 8192, (batch, seq)).astype(np.int64)
        got = ort_run(path, {"input_ids": ids})
        with torch.no_grad():
            want = model(torch.from_numpy(ids)).numpy()
        assert got.shape == (batch, 384)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
