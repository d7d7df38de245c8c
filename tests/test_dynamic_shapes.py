"""Plan version 2: one bundle, every input shape the model allows (issue 17).

Bundles are built by `package(...)` (run-time shapes are the default for symbolic dims; dynamic=True insists, bounds
too) and run by the bundle's own wasm under wasmtime at several shapes, compared with onnxruntime on the original
model at the same shapes. Where the default cannot give run-time shapes it packages the static plan (dims 1) and
says why in one notice."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from packager import load_bundle, package
from packager.errors import InputError, PackagerError
from packager.plan import layout
from packager.plan.opcodes import Op

from .conftest import VARIANTS


def _reference(model: onnx.ModelProto):
    s = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return lambda feeds: dict(zip([o.name for o in s.get_outputs()], s.run(None, feeds)))


def _elementwise_model() -> onnx.ModelProto:
    """x[batch, seq, 8] -> Relu -> + b -> Softmax(-1) -> Transpose -> y[8, seq, batch]."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, "seq", "batch"])
    b = numpy_helper.from_array(np.linspace(-1, 1, 8, dtype=np.float32), "b")
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Add", ["r", "b"], ["a"]),
             helper.make_node("Softmax", ["a"], ["s"], axis=-1), helper.make_node("Transpose", ["s"], ["y"], perm=[2, 1, 0])]
    m = helper.make_model(helper.make_graph(nodes, "elementwise", [x], [y], [b]),
                          opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def _reshape_model() -> onnx.ModelProto:
    """Shape arithmetic as exporters write it: x[batch, seq, 12] -> Reshape to [batch, seq, 3, 4] through
    Shape -> Gather -> Unsqueeze -> Concat, then MatMul-free math and a Reshape back with -1."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", 12])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq", 12])
    i0 = numpy_helper.from_array(np.array(0, np.int64), "i0")
    i1 = numpy_helper.from_array(np.array(1, np.int64), "i1")
    ax = numpy_helper.from_array(np.array([0], np.int64), "ax")
    heads = numpy_helper.from_array(np.array([3, 4], np.int64), "heads")
    back = numpy_helper.from_array(np.array([0, 0, -1], np.int64), "back")
    nodes = [helper.make_node("Shape", ["x"], ["sh"]),
             helper.make_node("Gather", ["sh", "i0"], ["b"], axis=0), helper.make_node("Gather", ["sh", "i1"], ["s"], axis=0),
             helper.make_node("Unsqueeze", ["b", "ax"], ["bu"]), helper.make_node("Unsqueeze", ["s", "ax"], ["su"]),
             helper.make_node("Concat", ["bu", "su", "heads"], ["target"], axis=0),
             helper.make_node("Reshape", ["x", "target"], ["h"]),
             helper.make_node("Softmax", ["h"], ["p"], axis=-1),
             helper.make_node("Reshape", ["p", "back"], ["y"])]
    m = helper.make_model(helper.make_graph(nodes, "reshape", [x], [y], [i0, i1, ax, heads, back]),
                          opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


@pytest.fixture(scope="module")
def elementwise_bundle(tmp_path_factory) -> Path:
    return package(_elementwise_model(), target="web", out=tmp_path_factory.mktemp("dyn") / "b", dynamic=True)


@pytest.mark.parametrize("variant", VARIANTS)
def test_one_bundle_runs_every_shape(elementwise_bundle: Path, variant: str) -> None:
    b = load_bundle(elementwise_bundle, variant)
    assert b.manifest["plan"]["version"] == 2
    assert b.manifest["inputs"][0]["shape"] == ["batch", "seq", 8]
    assert b.manifest["outputs"][0]["shape"] == [8, "seq", "batch"]
    ref = _reference(_elementwise_model())
    rng = np.random.default_rng(0)
    grew = []
    for shape in [(1, 1, 8), (2, 7, 8), (4, 300, 8), (1, 7, 8), (2, 7, 8)]:
        x = rng.standard_normal(shape).astype(np.float32)
        got = b.run({"x": x})["y"]
        want = ref({"x": x})["y"]
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        grew.append(b.session().memory_bound)
    assert grew[2] > grew[1] >= grew[0]   # memory follows the shape


def test_shape_arithmetic_runs_in_the_core(tmp_path: Path) -> None:
    """Shape -> Gather -> Unsqueeze -> Concat -> Reshape stays in the plan (it varies with the input), runs while
    resolving (its nodes flagged RESOLVE, its tensors in the values region), and the Reshape is a VIEW."""
    m = _reshape_model()
    out = package(m, target="web", out=tmp_path / "b", dynamic=True)
    plan = layout.decode((out / "model.plan").read_bytes())
    names = [Op(n.op).name for n in plan.nodes]
    assert "SHAPE" in names and "VIEW" in names, names
    assert any(n.flags & layout.NODE_RESOLVE for n in plan.nodes)
    assert plan.dynamic.values_bytes > 0
    b = load_bundle(out)
    ref = _reference(m)
    rng = np.random.default_rng(1)
    for shape in [(1, 5, 12), (3, 64, 12), (2, 1, 12)]:
        x = rng.standard_normal(shape).astype(np.float32)
        np.testing.assert_allclose(b.run({"x": x})["y"], ref({"x": x})["y"], rtol=1e-5, atol=1e-6)


def test_bounds_are_enforced_and_memory_is_stated(tmp_path: Path) -> None:
    out = package(_elementwise_model(), target="web", out=tmp_path / "b",
                  input_shapes={"x": ((1, 4), (1, 512), 8)})
    b = load_bundle(out)
    assert b.manifest["dims"]["batch"] == {"min": 1, "max": 4, "example": 1}
    most = b.manifest["plan"]["max_memory_bytes"]
    assert b.manifest["plan"]["max_arena_bytes"] > 0
    for shape in [(4, 512, 8), (1, 1, 8), (3, 200, 8), (4, 511, 8)]:
        b.run({"x": np.ones(shape, np.float32)})
        assert b.session().memory_bound <= most
    with pytest.raises(InputError, match=r"dimension 1 \('seq'\) is 513, outside this bundle's bounds \[1..512\]"):
        b.run({"x": np.ones((1, 513, 8), np.float32)})
    with pytest.raises(InputError, match=r"dimension 0 \('batch'\) is 5"):
        b.run({"x": np.ones((5, 2, 8), np.float32)})
    with pytest.raises(InputError, match="shape"):
        b.run({"x": np.ones((1, 2, 9), np.float32)})   # a fixed dim


def test_core_refuses_dims_above_the_plan_bound(tmp_path: Path) -> None:
    """The core checks the bounds itself (a host that skips the manifest's check still cannot go past them)."""
    from packager.errors import RuntimeFailure
    from packager.runtime.wasm import WasmPlan
    from packager.bundle import WASM_VARIANTS
    out = package(_elementwise_model(), target="web", out=tmp_path / "b", input_shapes={"x": ((1, 4), (1, 16), 8)})
    s = WasmPlan(out / WASM_VARIANTS["simd"], (out / "model.plan").read_bytes())
    s.set_shapes([(4, 16, 8)])
    with pytest.raises(RuntimeFailure, match="above the plan's bound"):
        s.set_shapes([(4, 17, 8)])
    with pytest.raises(RuntimeFailure, match="inconsistent with the plan"):
        s.set_shapes([(4, 16, 7)])


def test_a_fixed_input_shape_still_gives_a_static_plan(tmp_path: Path) -> None:
    out = package(_elementwise_model(), target="web", out=tmp_path / "b", input_shapes={"x": (2, 5, 8)})
    assert layout.decode((out / "model.plan").read_bytes()).dynamic is None
    assert load_bundle(out).manifest["inputs"][0]["shape"] == [2, 5, 8]


def test_default_is_run_time_shapes(tmp_path: Path) -> None:
    """No dynamic=, no input_shapes: a version-2 plan, no notice, the same bundle at several shapes."""
    lines: list[str] = []
    out = package(_reshape_model(), target="web", out=tmp_path / "b", log=lines.append)
    b = load_bundle(out)
    assert b.manifest["plan"]["version"] == 2 and b.manifest["notices"] == []
    assert not [x for x in lines if x.startswith("notice:")], lines
    ref = _reference(_reshape_model())
    rng = np.random.default_rng(2)
    for shape in [(1, 1, 12), (5, 33, 12)]:
        x = rng.standard_normal(shape).astype(np.float32)
        np.testing.assert_allclose(b.run({"x": x})["y"], ref({"x": x})["y"], rtol=1e-5, atol=1e-6)
    static = package(_reshape_model(), target="web", out=tmp_path / "s", dynamic=False)
    assert layout.decode((static / "model.plan").read_bytes()).dynamic is None
    assert load_bundle(static).manifest["inputs"][0]["shape"] == [1, 1, 12]


@pytest.mark.parametrize("make", [_reshape_model, _elementwise_model], ids=["reshape", "elementwise"])
def test_shipped_model_runs_at_every_shape_too(make, tmp_path: Path) -> None:
    """The bundle's model.onnx (analyzed at a probe shape) declares the run-time dims again: onnxruntime runs it at
    other shapes, as the bundle does."""
    out = package(make(), target="web", out=tmp_path / "b", verify=False, emit_onnx=True)
    shipped = onnx.load(str(out / "model.onnx"))
    dims = lambda vi: [d.dim_param or d.dim_value for d in vi.type.tensor_type.shape.dim]  # noqa: E731
    assert dims(shipped.graph.input[0]) == load_bundle(out).manifest["inputs"][0]["shape"]
    ref, ship, b = _reference(make()), _reference(shipped), load_bundle(out)
    rng = np.random.default_rng(4)
    for shape in [(1, 3), (4, 17)]:
        x = rng.standard_normal(shape + (make().graph.input[0].type.tensor_type.shape.dim[2].dim_value,)).astype(np.float32)
        want = ref({"x": x})["y"]
        np.testing.assert_allclose(ship({"x": x})["y"], want, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(b.run({"x": x})["y"], want, rtol=1e-5, atol=1e-6)


def _loop_model() -> onnx.ModelProto:
    """y <- y * 1.5 + 1 for M iterations, y[batch, 4]: a body that would see the run-time batch."""
    F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
    body = helper.make_graph(
        [helper.make_node("Mul", ["y_in", "k"], ["m"]), helper.make_node("Add", ["m", "one"], ["y_out"]),
         helper.make_node("Identity", ["cond_in"], ["cond_out"])], "body",
        [helper.make_tensor_value_info("i", I64, []), helper.make_tensor_value_info("cond_in", B, []),
         helper.make_tensor_value_info("y_in", F, ["batch", 4])],
        [helper.make_tensor_value_info("cond_out", B, []), helper.make_tensor_value_info("y_out", F, ["batch", 4])],
        [numpy_helper.from_array(np.array(1.5, np.float32), "k"), numpy_helper.from_array(np.array(1, np.float32), "one")])
    m = helper.make_model(helper.make_graph(
        [helper.make_node("Loop", ["M", "cond", "y0"], ["y"], name="loop0", body=body)], "loop",
        [helper.make_tensor_value_info("M", I64, []), helper.make_tensor_value_info("cond", B, []),
         helper.make_tensor_value_info("y0", F, ["batch", 4])], [helper.make_tensor_value_info("y", F, ["batch", 4])]),
        opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def test_default_falls_back_to_fixed_shapes_with_one_notice(tmp_path: Path) -> None:
    """A Loop whose body would see the run-time batch has no version-2 lowering yet: the default gives the static
    plan at batch 1 with one notice naming the node and the reason (in the log and the manifest) and verifies it;
    dynamic=True refuses with the same reason."""
    lines: list[str] = []
    out = package(_loop_model(), target="web", out=tmp_path / "b", log=lines.append)
    notices = [x for x in lines if x.startswith("notice:")]
    assert len(notices) == 1, lines
    assert "run-time shapes not possible: unsupported: Loop (node 'loop0', opset 17): bodies with run-time input dims" \
        in notices[0], notices
    assert "y0[batch, 4]" in notices[0] and "--input-shape y0=1x4" in notices[0], notices
    b = load_bundle(out)
    assert b.manifest["plan"]["version"] == 2 and b.manifest["notices"] == [notices[0][len("notice: "):]]
    assert b.manifest["inputs"][2]["shape"] == [1, 4]   # a sub-plan (version 2) of fixed shapes: batch set to 1
    assert b.manifest["verification"]["max_abs_diff"] < 1e-5
    feeds = {"M": np.array(3, np.int64), "cond": np.array(True), "y0": np.array([[1, -2, 3, 0.5]], np.float32)}
    np.testing.assert_allclose(b.run(feeds)["y"], _reference(_loop_model())(feeds)["y"], rtol=1e-6)
    with pytest.raises(PackagerError, match=r"Loop \(node 'loop0'.*bodies with run-time input dims"):
        package(_loop_model(), target="web", out=tmp_path / "d", dynamic=True)


def test_quantize_needs_fixed_shapes_so_the_default_falls_back(tmp_path: Path) -> None:
    lines: list[str] = []
    out = package(_elementwise_model(), target="web", out=tmp_path / "b", quantize="fp16", log=lines.append)
    notices = [x for x in lines if x.startswith("notice:")]
    assert len(notices) == 1 and "--quantize fp16 needs fixed shapes so far" in notices[0], lines
    assert load_bundle(out).manifest["inputs"][0]["shape"] == [1, 1, 8]
    with pytest.raises(PackagerError, match="--quantize fp16 needs fixed shapes so far"):
        package(_elementwise_model(), target="web", out=tmp_path / "d", quantize="fp16", dynamic=True)
    with pytest.raises(PackagerError, match="not with --static"):
        package(_elementwise_model(), target="web", out=tmp_path / "e", dynamic=False,
                input_shapes={"x": ((1, 4), 2, 8)})


def test_a_bug_in_the_v2_lowering_falls_back_and_is_named(tmp_path: Path, monkeypatch) -> None:
    """An unexpected exception in the version-2 lowering: the default still packages (static) and the notice names
    the exception; dynamic=True lets it through."""
    import packager.plan_build as plan_build

    def broken(*a, **k):
        raise KeyError("probe")
    monkeypatch.setattr(plan_build, "lower_run_time", broken)
    lines: list[str] = []
    out = package(_elementwise_model(), target="web", out=tmp_path / "b", log=lines.append)
    notices = [x for x in lines if x.startswith("notice:")]
    assert len(notices) == 1 and "the version-2 lowering failed (KeyError: 'probe')" in notices[0], lines
    assert load_bundle(out).manifest["plan"]["version"] == 1
    with pytest.raises(KeyError):
        package(_elementwise_model(), target="web", out=tmp_path / "d", dynamic=True)


def test_hostile_v2_plans_never_read_out_of_bounds(elementwise_bundle: Path, tmp_path: Path) -> None:
    """Byte mutations of a version-2 plan (header, tensor flags, lifetimes, bounds) run under ASan + UBSan."""
    import subprocess
    from packager.toolchain import KERNELS
    r = subprocess.run(["make", "-s", "-C", str(KERNELS), "build/asan/run_plan"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    plan = (elementwise_bundle / "model.plan").read_bytes()
    dec = layout.decode(plan)
    rng = np.random.default_rng(7)
    life_off = int.from_bytes(plan[64:68], "little")
    hot = list(range(0, 96)) + list(range(life_off, life_off + 12 * len(dec.tensors)))
    paths = []
    for k in range(150):
        b = bytearray(plan)
        for _ in range(int(rng.integers(1, 4))):
            at = int(rng.choice(hot)) if k % 2 else int(rng.integers(0, len(b)))
            b[at] = int(rng.integers(0, 256))
        p = tmp_path / f"m{k}.plan"
        p.write_bytes(bytes(b))
        paths.append(str(p))
    r = subprocess.run([str(KERNELS / "build/asan/run_plan"), *paths], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert len(r.stdout.splitlines()) == len(paths)


# issue 17's models: one bundle, packaged without --input-shape (the default), at every shape below (SIMD runs them all; the
# scalar and relaxed builds a subset, to keep CI's time)
MODEL_SHAPES = {
    "minilm_like_dyn": [(1, 7), (2, 128), (1, 512), (4, 1), (3, 128)],
    "resnet18_dyn": [(1, 3, 224, 224), (1, 3, 160, 320), (2, 3, 320, 480)],
    "mobilenetv2_dyn": [(1, 3, 224, 224), (1, 3, 160, 320), (2, 3, 320, 480)],
}


@pytest.fixture(scope="module")
def model_bundles(tmp_path_factory) -> dict[str, Path]:
    from .conftest import model_path
    d = tmp_path_factory.mktemp("models")
    return {m: package(str(model_path(m)), target="web", out=d / m) for m in MODEL_SHAPES}


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("name", list(MODEL_SHAPES))
def test_models_run_every_shape_from_one_bundle(model_bundles: dict[str, Path], name: str, variant: str) -> None:
    from .conftest import model_path
    b = load_bundle(model_bundles[name], variant)
    ref = _reference(onnx.load(str(model_path(name))))
    iname = b.inputs[0]["name"]
    rng = np.random.default_rng(3)
    shapes = MODEL_SHAPES[name] if variant == "simd" else MODEL_SHAPES[name][:2]
    for shape in shapes:
        x = (rng.integers(0, 8192, shape).astype(np.int64) if name.startswith("minilm")
             else rng.standard_normal(shape).astype(np.float32))
        got = b.run({iname: x})
        want = ref({iname: x})
        for k, w in want.items():
            assert got[k].shape == w.shape
            np.testing.assert_allclose(got[k], w, rtol=1e-4, atol=1e-4 * float(np.abs(w).max()))


@pytest.mark.parametrize("shape", [("batch", 4), (2, "4"), ((1, "a"), 4), (2.5, 4)])
def test_input_shape_of_wrong_kind_is_a_clear_error(shape, tmp_path) -> None:
    """A dim given as something other than a size, a (min, max) pair or None: an error naming input and dim (a
    string against a dim the model fixes was a TypeError from a comparison)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])
    m = helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y]),
                          opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(PackagerError, match=r"--input-shape x: dim \d is"):
        package(m, out=tmp_path / "b", input_shapes={"x": shape}, verify=False)
