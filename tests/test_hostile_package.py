"""Hostile or careless use of the packager and its CLI: a closed pipe, wrong run() arguments, a manifest
nested to blow the stack, hostile external data, constants folded to gigabytes, manifests that lie about the
plan, files swapped after a signed bundle's checks. Each gives an `error:` line (a PackagerError), never a
traceback, a hang, unbounded memory or another model's answer (issue 21)."""
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


# ---------------------------------------------------------------- hostile models (packager/model_load.py)

def _ext(name: str, location: str, dims: list[int], offset: int = 0, length: int | None = None) -> onnx.TensorProto:
    t = onnx.TensorProto(name=name, data_type=onnx.TensorProto.FLOAT, dims=dims)
    t.data_location = onnx.TensorProto.EXTERNAL
    for k, v in {"location": location, "offset": str(offset), **({"length": str(length)} if length is not None else {})}.items():
        e = t.external_data.add()
        e.key, e.value = k, v
    return t


def _load_in_subprocess(model: Path, timeout: float = 60) -> subprocess.CompletedProcess:
    code = ("import sys\nfrom packager.model_load import load_model\nfrom packager.errors import PackagerError\n"
            "try:\n    load_model(sys.argv[1])\nexcept PackagerError as e:\n    print('error:', e)\n")
    return subprocess.run([sys.executable, "-c", code, str(model)], capture_output=True, text=True, timeout=timeout,
                          cwd=Path(__file__).resolve().parent.parent)


def test_external_data_fifo_does_not_block(tmp_path: Path) -> None:
    from onnx import helper
    from .conftest import f32, make_model
    os.mkfifo(tmp_path / "w.bin")   # open() on a FIFO waits for a writer: forever
    m = make_model([helper.make_node("Add", ["x", "w"], ["y"])], [f32("x", [4])], [f32("y", [4])],
                   [_ext("w", "w.bin", [4], length=16)])
    (tmp_path / "model.onnx").write_bytes(m.SerializeToString())
    r = _load_in_subprocess(tmp_path / "model.onnx", timeout=60)   # the old loader hangs: TimeoutExpired
    assert "error:" in r.stdout and "not a regular file" in r.stdout, (r.stdout, r.stderr)
    os.remove(tmp_path / "model.onnx")
    os.mkfifo(tmp_path / "model.onnx")   # the model file itself
    r = _load_in_subprocess(tmp_path / "model.onnx", timeout=60)
    assert "error:" in r.stdout and "not a regular file" in r.stdout, (r.stdout, r.stderr)


def test_external_data_read_once_per_file(tmp_path: Path) -> None:
    # 64 initializers each naming all of one 16 MiB file would materialize 1 GiB from 16 MiB of input
    from onnx import helper
    from packager.model_load import load_model
    from packager.errors import ModelLoadError
    from .conftest import f32, make_model
    n = 4 << 20
    with open(tmp_path / "w.bin", "wb") as f:
        f.truncate(n * 4)
    inits = [_ext(f"w{k}", "w.bin", [n]) for k in range(64)]
    nodes = [helper.make_node("Add", ["x", f"w{k}"], [f"y{k}"]) for k in range(64)]
    m = make_model(nodes, [f32("x", [n])], [f32(f"y{k}", [n]) for k in range(64)], inits)
    (tmp_path / "model.onnx").write_bytes(m.SerializeToString())
    with pytest.raises(ModelLoadError, match=r"more than their files hold \(16777216 bytes"):
        load_model(tmp_path / "model.onnx")
    # disjoint slices of one file are fine
    half = [_ext("a", "w.bin", [n // 2], 0, n * 2), _ext("b", "w.bin", [n // 2], n * 2, n * 2)]
    m = make_model([helper.make_node("Add", ["a", "b"], ["y"])], [], [f32("y", [n // 2])], half)
    (tmp_path / "model.onnx").write_bytes(m.SerializeToString())
    assert len(load_model(tmp_path / "model.onnx").graph.initializer) == 2


def _sparse(values: onnx.TensorProto) -> onnx.SparseTensorProto:
    from onnx import helper, numpy_helper
    return helper.make_sparse_tensor(values, numpy_helper.from_array(np.array([2], np.int64), "i"), [4])


def test_sparse_constant_is_a_clean_error(tmp_path: Path) -> None:
    from onnx import helper, numpy_helper
    from .conftest import f32, make_model
    sp = _sparse(numpy_helper.from_array(np.array([1.0], np.float32), "v"))
    m = make_model([helper.make_node("Constant", [], ["c"], sparse_value=sp), helper.make_node("Add", ["x", "c"], ["y"])],
                   [f32("x", [4])], [f32("y", [4])])
    with pytest.raises(PackagerError, match="sparse tensors are not supported"):
        package(m, out=tmp_path / "b", verify=False)
    assert not (tmp_path / "b").exists()


def test_sparse_external_values_never_read_from_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from onnx import helper
    from .conftest import f32, make_model
    (tmp_path / "model").mkdir()
    (tmp_path / "cwd").mkdir()
    (tmp_path / "cwd" / "secret.bin").write_bytes(np.float32(42).tobytes())   # onnx's own loader read this
    sp = _sparse(_ext("v", "secret.bin", [1], length=4))
    for graph_sparse in (False, True):
        if graph_sparse:
            m = make_model([helper.make_node("Add", ["x", "v"], ["y"])], [f32("x", [4])], [f32("y", [4])])
            m.graph.sparse_initializer.append(sp)
        else:
            m = make_model([helper.make_node("Constant", [], ["c"], sparse_value=sp),
                            helper.make_node("Add", ["x", "c"], ["y"])], [f32("x", [4])], [f32("y", [4])])
        (tmp_path / "model" / "m.onnx").write_bytes(m.SerializeToString())
        monkeypatch.chdir(tmp_path / "cwd")
        with pytest.raises(PackagerError, match="external data file 'secret.bin' not found"):
            package(tmp_path / "model" / "m.onnx", out=tmp_path / "b", verify=False)
        with pytest.raises(PackagerError, match="references external data"):   # a ModelProto: no folder to read
            package(m, out=tmp_path / "b", verify=False)
        (tmp_path / "model" / "secret.bin").write_bytes(np.float32(1).tobytes())   # read safely, then refused
        with pytest.raises(PackagerError, match="sparse tensors are not supported"):
            package(tmp_path / "model" / "m.onnx", out=tmp_path / "b", verify=False)
        os.remove(tmp_path / "model" / "secret.bin")


def _sparse_constant_nested(sp: onnx.SparseTensorProto, where: str) -> onnx.ModelProto:
    """A Constant with sparse_value inside an If branch or a model-local function's body, added to x."""
    from onnx import TensorProto, helper
    from .conftest import f32, make_model
    const = helper.make_node("Constant", [], ["c"], sparse_value=sp)
    if where == "if_branch":
        then = helper.make_graph([const], "then", [], [f32("c", [4])])
        other = helper.make_graph([helper.make_node("Constant", [], ["c"], value_floats=[0.0] * 4)], "else", [],
                                  [f32("c", [4])])
        cond = helper.make_tensor("cond", TensorProto.BOOL, [], [True])
        return make_model([helper.make_node("If", ["cond"], ["k"], then_branch=then, else_branch=other),
                           helper.make_node("Add", ["x", "k"], ["y"])], [f32("x", [4])], [f32("y", [4])], [cond])
    fn = helper.make_function("local", "AddSparse", ["a"], ["b"], [const, helper.make_node("Add", ["a", "c"], ["b"])],
                              [helper.make_opsetid("", 17)])
    m = make_model([helper.make_node("AddSparse", ["x"], ["y"], domain="local")], [f32("x", [4])], [f32("y", [4])])
    m.opset_import.append(helper.make_opsetid("local", 1))
    m.functions.append(fn)
    return m


@pytest.mark.parametrize("where", ["if_branch", "function"])
def test_nested_sparse_external_values_never_read_from_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           where: str) -> None:
    """The same in an If branch and in a function body: every place a tensor can live goes through the safe reader."""
    (tmp_path / "model").mkdir()
    (tmp_path / "cwd").mkdir()
    (tmp_path / "cwd" / "secret.bin").write_bytes(np.float32(42).tobytes())
    m = _sparse_constant_nested(_sparse(_ext("v", "secret.bin", [1], length=4)), where)
    (tmp_path / "model" / "m.onnx").write_bytes(m.SerializeToString())
    monkeypatch.chdir(tmp_path / "cwd")
    with pytest.raises(PackagerError, match="external data file 'secret.bin' not found"):
        package(tmp_path / "model" / "m.onnx", out=tmp_path / "b", verify=False)
    with pytest.raises(PackagerError, match="references external data"):
        package(m, out=tmp_path / "b", verify=False)
    (tmp_path / "model" / "secret.bin").write_bytes(np.float32(1).tobytes())
    with pytest.raises(PackagerError, match="Constant node 'c' attribute 'sparse_value': sparse tensors are not supported"):
        package(tmp_path / "model" / "m.onnx", out=tmp_path / "b", verify=False)
    # inline values: the same clean refusal (onnx's evaluator raised a TypeError on them)
    from onnx import numpy_helper
    m = _sparse_constant_nested(_sparse(numpy_helper.from_array(np.array([1.0], np.float32), "v")), where)
    with pytest.raises(PackagerError, match="sparse tensors are not supported"):
        package(m, out=tmp_path / "b", verify=False)
    assert not (tmp_path / "b").exists()


@pytest.mark.parametrize("extra", [16, -4])
def test_raw_data_not_matching_dims(tmp_path: Path, extra: int) -> None:
    from onnx import helper, numpy_helper
    from .conftest import f32, make_model
    t = numpy_helper.from_array(np.ones(4, np.float32), "c")
    t.raw_data = t.raw_data + b"\0" * extra if extra > 0 else t.raw_data[:extra]
    m = make_model([helper.make_node("Add", ["x", "c"], ["y"])], [f32("x", [4])], [f32("y", [4])], [t])
    with pytest.raises(PackagerError, match=r"raw_data holds \d+ bytes; its dims \[4\] and type FLOAT need 16"):
        package(m, out=tmp_path / "b", verify=False)
    # the same inside a Constant node's value
    m = make_model([helper.make_node("Constant", [], ["c"], value=t), helper.make_node("Add", ["x", "c"], ["y"])],
                   [f32("x", [4])], [f32("y", [4])])
    with pytest.raises(PackagerError, match="raw_data holds"):
        package(m, out=tmp_path / "b", verify=False)
    t2 = onnx.TensorProto(name="d", data_type=onnx.TensorProto.FLOAT, dims=[4], float_data=[1.0, 2.0, 3.0])
    m = make_model([helper.make_node("Add", ["x", "d"], ["y"])], [f32("x", [4])], [f32("y", [4])], [t2])
    with pytest.raises(PackagerError, match="float_data holds 3 values"):
        package(m, out=tmp_path / "b", verify=False)


# ---------------------------------------------------------------- constant folding (packager/analyze.py)

@pytest.fixture
def evaluated(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Op types the folder hands to onnx's reference evaluator (which would then allocate the output)."""
    import onnx.reference
    seen: list[str] = []

    def spy(model, *a, **k):   # never really evaluates: on a regression, fail instead of allocating 16 GiB
        seen.append(model.graph.node[0].op_type)
        raise MemoryError(f"{model.graph.node[0].op_type} evaluated")
    monkeypatch.setattr(onnx.reference, "ReferenceEvaluator", spy)
    return seen


@pytest.mark.parametrize("op,inputs", [
    ("ConstantOfShape", [np.array([2 ** 31], np.int64)]),
    ("Expand", [np.ones((1, 1), np.float32), np.array([65536, 65536], np.int64)]),
    ("Tile", [np.ones((1, 4), np.float32), np.array([1 << 20, 1 << 10], np.int64)]),
    ("Range", [np.array(0, np.float32), np.array(1e12, np.float32), np.array(1, np.float32)]),
    ("Pad", [np.ones((2, 2), np.float32), np.array([0, 0, 1 << 20, 1 << 20], np.int64)]),
])
def test_fold_size_checked_before_evaluating(op: str, inputs: list, evaluated: list[str]) -> None:
    from onnx import helper
    from packager.analyze import _eval_node
    node = helper.make_node(op, [f"i{k}" for k in range(len(inputs))], ["o"], name="big")
    with pytest.raises(PackagerError, match="exceed the folding limit"):
        _eval_node(node, inputs, 18)
    assert evaluated == []


def test_small_folds_still_evaluated() -> None:
    from onnx import helper
    from packager.analyze import _eval_node
    node = helper.make_node("ConstantOfShape", ["s"], ["o"])
    assert _eval_node(node, [np.array([4], np.int64)], 18)[0].shape == (4,)
    node = helper.make_node("Expand", ["c", "s"], ["o"])
    assert _eval_node(node, [np.ones((1, 1), np.float32), np.array([3, 5], np.int64)], 18)[0].shape == (3, 5)


def test_analyze_leaves_huge_expand_unfolded(evaluated: list[str]) -> None:
    from onnx import helper, numpy_helper
    from packager.analyze import analyze
    from .conftest import f32, make_model
    c = numpy_helper.from_array(np.ones((1, 1), np.float32), "c")
    sh = numpy_helper.from_array(np.array([16384, 8192], np.int64), "sh")   # 512 MiB: over the fold limit
    m = make_model([helper.make_node("Expand", ["c", "sh"], ["e"]), helper.make_node("Add", ["x", "e"], ["y"])],
                   [f32("x", [1])], [f32("y", [16384, 8192])], [c, sh])
    g = analyze(m)
    assert "Expand" not in evaluated
    assert [n.op_type for n in g.nodes] == ["Expand", "Add"] and "e" not in g.consts


def test_edge_python_runtime_deeply_nested_manifest(tmp_path: Path) -> None:
    import importlib.util
    path = Path(__file__).resolve().parent.parent / "edge" / "python" / "edgepack_runtime.py"
    spec = importlib.util.spec_from_file_location("edgepack_runtime_under_test", path)
    rt = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(rt)
    (tmp_path / "manifest.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(rt.EdgepackError, match="nested too deeply"):
        rt.Session(tmp_path)
    (tmp_path / "manifest.json").write_text("[1, 2]")
    with pytest.raises(rt.EdgepackError, match="not an edgepack bundle"):
        rt.Session(tmp_path)


@pytest.mark.parametrize("op,shape,dtype", [("ConstantOfShape", [2**31], None), ("Expand", [65536, 65536], np.float32)])
def test_huge_constant_shapes_refused_before_inference(tmp_path: Path, op: str, shape: list, dtype) -> None:
    """A 174-byte model naming 8 or 16 GiB: refused with the figure, before onnx's shape inference could
    materialize it (it used to grow until the machine killed it)."""
    from onnx import TensorProto, helper, numpy_helper
    inits = [numpy_helper.from_array(np.array(shape, np.int64), "s")]
    ins = ["s"]
    if dtype is not None:
        inits.append(numpy_helper.from_array(np.ones((1, 1), dtype), "c"))
        ins = ["c", "s"]
    g = helper.make_graph([helper.make_node(op, ins, ["y"], name="n0")], "t", [],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["a"] * len(shape))], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    with pytest.raises(PackagerError, match="GiB: more than a bundle can hold"):
        package(m, out=tmp_path / "b", verify=False)


def test_tensor_over_wasm32_memory_is_a_clean_error(tmp_path: Path) -> None:
    """An input of 2^31 floats (8 GiB) is refused at package time with the figure, not a struct.error."""
    from onnx import TensorProto, helper
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "t",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2**16, 2**15])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2**16, 2**15])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    with pytest.raises(PackagerError, match="more than a wasm32 memory holds"):
        package(m, out=tmp_path / "b", verify=False)


def test_python_runs_the_bytes_it_verified(bundle: Path) -> None:
    """load_bundle checks the plan's and the wasm's SHA-256; swapping either file afterwards (before the first
    run) must not change what runs: the runner executes the bytes it hashed."""
    b = load_bundle(bundle)
    feeds = {s["name"]: np.ones(s["shape"], np.dtype(s["dtype"])) for s in b.example_inputs()}
    want = load_bundle(bundle).run(feeds)
    plan = (bundle / "model.plan").read_bytes()
    wasm = (bundle / "edgepack.wasm").read_bytes()
    try:
        (bundle / "model.plan").write_bytes(plan[:-64] + bytes(64))   # other weights
        (bundle / "edgepack.wasm").write_bytes((bundle / "edgepack-scalar.wasm").read_bytes())
        got = b.run(feeds)
    finally:
        (bundle / "model.plan").write_bytes(plan)
        (bundle / "edgepack.wasm").write_bytes(wasm)
    assert b.session().vec == load_bundle(bundle).session().vec
    for k in want:
        np.testing.assert_array_equal(got[k], want[k])


@pytest.fixture(scope="module")
def signed_pair(tmp_path_factory) -> tuple[Path, Path, str]:
    """A signed bundle of y = x @ W and an unsigned one of y = x @ -W (another valid plan, same shapes)."""
    from onnx import helper, numpy_helper
    from packager.signing import generate_keypair
    from .conftest import f32, make_model
    d = tmp_path_factory.mktemp("swap")
    generate_keypair(d / "k.pem", d / "k.pub")
    w = np.arange(12, dtype=np.float32).reshape(4, 3) - 5

    def model(weight: np.ndarray) -> onnx.ModelProto:
        return make_model([helper.make_node("MatMul", ["x", "w"], ["y"])], [f32("x", [1, 4])], [f32("y", [1, 3])],
                          [numpy_helper.from_array(weight, "w")])
    good = package(model(w), out=d / "good", sign=d / "k.pem", verify=False)
    other = package(model(-w), out=d / "other", verify=False)
    return good, other, (d / "k.pub").read_text().strip()


@pytest.mark.parametrize("swap", ["model.plan", "edgepack.wasm", "manifest.json"])
def test_signed_python_runs_the_bytes_it_verified(signed_pair, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  swap: str) -> None:
    """load_bundle(path, public_key=...) checks the signature and every hash; a file swapped on disk after a check
    (before the first run(), or between the signature check and the manifest's parsing) must not change what runs:
    another valid plan (the weights negated), the scalar build, another (unsigned) manifest and its plan."""
    import shutil
    from packager import signing
    from packager.errors import BundleError
    good, other, pub = signed_pair
    b = tmp_path / "b"
    shutil.copytree(good, b)
    x = np.array([[1, -2, 3, 0.5]], np.float32)
    want = x @ (np.arange(12, dtype=np.float32).reshape(4, 3) - 5)
    if swap == "manifest.json":   # swapped just after the signature was checked
        check = signing.verify_signature

        def swapped(path, key):
            verified = check(path, key)
            for f in ("manifest.json", "model.plan"):
                shutil.copyfile(other / f, b / f)
            return verified
        monkeypatch.setattr(signing, "verify_signature", swapped)
        with pytest.raises(BundleError, match="model.plan does not match its SHA-256"):
            load_bundle(b, public_key=pub)
        return
    loaded = load_bundle(b, public_key=pub)
    src = other / swap if swap == "model.plan" else good / "edgepack-scalar.wasm"
    shutil.copyfile(src, b / swap)
    np.testing.assert_array_equal(loaded.run({"x": x})["y"], want)
    assert loaded.session().vec == load_bundle(good, public_key=pub).session().vec
    with pytest.raises(BundleError):   # the swapped file is refused by a fresh load
        load_bundle(b, public_key=pub)


@pytest.mark.parametrize("lie", [("inputs", "shape", [3, 2]), ("inputs", "dtype", "int32"), ("outputs", "shape", [2, 3]),
                                 ("inputs", "shape", [4, 3]), ("inputs", "dtype", "float16"), ("outputs", "shape", [7]),
                                 ("outputs", "dtype", "int64")])
def test_manifest_lying_about_io_is_refused(bundle: Path, lie: tuple) -> None:
    """An unsigned bundle whose manifest gives an input/output another shape or dtype, of the same byte count (it
    would run and return reinterpreted data) or not (a ValueError deep in the runner): the plan's tensors are checked
    first, fed what the manifest claims."""
    import json
    from packager.errors import BundleError

    kind, field, value = lie
    m = json.loads((bundle / "manifest.json").read_text())
    m[kind][0][field] = value
    (bundle / "manifest.json").write_text(json.dumps(m))
    b = load_bundle(bundle)
    x = np.ones(m["inputs"][0]["shape"], np.dtype(m["inputs"][0]["dtype"]))
    with pytest.raises(BundleError, match="but the plan holds"):
        b.run({"x": x})


WEIRD = [None, -1, 0, 1, 2, 3, 6, 2 ** 31, 2 ** 32, 1e300, -0.5, "x", "y", "", "batch", [], {}, [1], [2, 3], [3, 2], [6],
         [4, 3], [2, 3, 1], [-1, 3], ["batch", 3], [2 ** 31, 1], [True, 3], True, "float32", "int32", "int64", "bool",
         "float16", "bfloat16", "object", "V8", ">f4", "<f4", {"min": 5, "max": 1}]


def test_mutated_manifest_io_fails_cleanly_or_runs_right(bundle: Path) -> None:
    """The Python runtime's property test (the JS one: tests/test_web_api.py): an unsigned manifest with its inputs,
    outputs and dims mutated (sizes changed or not, wrong types, ids of other tensors) either runs and gives the
    unmutated answer or is refused with a PackagerError, never another exception."""
    import copy
    import json
    import random
    rng = random.Random(21)
    base = json.loads((bundle / "manifest.json").read_text())
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    counts = {"ran": 0, "refused": 0}
    for case in range(200):
        m = copy.deepcopy(base)
        for _ in range(rng.randint(1, 3)):
            io = m[rng.choice(["inputs", "outputs"])]
            if not isinstance(io, list):   # an earlier mutation replaced the list itself
                continue
            spec = io[0] if io and isinstance(io[0], dict) else None
            op = rng.randrange(9)
            if op < 5 and spec is not None:
                spec[rng.choice(["dtype", "shape", "tensor", "name", "shape"])] = copy.deepcopy(rng.choice(WEIRD))
            elif op == 5 and spec is not None and isinstance(spec.get("shape"), list) and spec["shape"]:
                spec["shape"][rng.randrange(len(spec["shape"]))] = copy.deepcopy(rng.choice(WEIRD))
            elif op == 6:
                io.append(copy.deepcopy(io[0]) if io else {}) if rng.random() < 0.5 else (io.pop() if io else None)
            elif op == 7:
                m["dims"] = copy.deepcopy(rng.choice(WEIRD))
            else:
                m[rng.choice(["inputs", "outputs", "plan", "dims"])] = copy.deepcopy(rng.choice(WEIRD))
        (bundle / "manifest.json").write_text(json.dumps(m))
        feeds = [{"x": x}]
        spec = m["inputs"][0] if isinstance(m.get("inputs"), list) and m["inputs"] and isinstance(m["inputs"][0], dict) else {}
        try:   # also what the mutated manifest claims, where numpy can make it
            feeds.append({str(spec.get("name")): np.zeros([int(d) for d in spec.get("shape")], np.dtype(spec.get("dtype")))})
        except Exception:
            pass
        for f in feeds:
            try:
                got = load_bundle(bundle).run(f)
            except PackagerError:
                counts["refused"] += 1
                continue
            except Exception as e:   # what this test exists to catch
                raise AssertionError(f"case {case}: {type(e).__name__}: {e}\nmanifest inputs {m.get('inputs')} "
                                     f"outputs {m.get('outputs')} dims {m.get('dims')}") from e
            fed = next(iter(f.values()))
            out = list(got.values())   # (names are the manifest's to give: a renamed output is still the output)
            assert len(out) == 1 and np.array_equal(out[0], fed.reshape(3, 2)), (case, m.get("inputs"), m.get("outputs"))
            counts["ran"] += 1
    assert counts["refused"] > 100 and counts["ran"] > 0, counts
