"""Data movement and Resize kernels: random shapes against onnxruntime / numpy / the ONNX reference, and
hostile plans (corrupted parameters) that the runtime must refuse at load."""
from __future__ import annotations

import itertools

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from packager import PackagerError, load_bundle, package
from packager.errors import RuntimeFailure
from packager.plan import layout
from packager.plan.opcodes import Op
from packager.runtime.wasm import WasmPlan
from packager.toolchain import ensure_wasm

NP2ONNX = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.int64): TensorProto.INT64,
           np.dtype(np.int32): TensorProto.INT32, np.dtype(np.bool_): TensorProto.BOOL}
RNG = np.random.default_rng(0)


def model(op: str, feeds: dict[str, np.ndarray], consts: dict[str, np.ndarray], inputs: list[str],
          outputs: list[str], opset: int = 18, **attrs) -> onnx.ModelProto:
    node = helper.make_node(op, inputs, outputs, **attrs)
    g = helper.make_graph(
        [node], "t",
        [helper.make_tensor_value_info(n, NP2ONNX[v.dtype], v.shape) for n, v in feeds.items()],
        [helper.make_tensor_value_info(o, TensorProto.UNDEFINED, None) for o in outputs],
        [numpy_helper.from_array(v, n) for n, v in consts.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)
    return onnx.shape_inference.infer_shapes(m)   # typed outputs, as onnxruntime wants them


def run_edgepack(m: onnx.ModelProto, feeds: dict[str, np.ndarray], tmp_path, variant: str = "simd") -> list[np.ndarray]:
    out = package(m, out=tmp_path / "b", verify=False, input_shapes={k: v.shape for k, v in feeds.items()})
    got = load_bundle(out, variant).run(feeds)
    return [got[o.name] for o in m.graph.output]


def run_ort(m: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    import onnxruntime as ort
    s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return s.run(None, feeds)


def run_ref(m: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    from onnx.reference import ReferenceEvaluator
    return ReferenceEvaluator(m).run(None, feeds)


def check(m, feeds, tmp_path, ref=run_ort, rtol=1e-5, atol=1e-6):
    want = ref(m, feeds)
    for variant in ("simd", "scalar"):
        got = run_edgepack(m, feeds, tmp_path, variant)
        for g, w in zip(got, want):
            w = np.asarray(w)
            assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape, g.dtype, w.dtype)
            if w.dtype.kind == "f":
                np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
            else:
                np.testing.assert_array_equal(g, w)


def rand(shape, dtype=np.float32):
    if np.dtype(dtype) == np.bool_:
        return RNG.random(shape) > 0.5
    if np.dtype(dtype).kind == "i":
        return RNG.integers(-1000, 1000, shape).astype(dtype)
    return RNG.standard_normal(shape).astype(dtype)


# -- Transpose ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("perm", list(itertools.permutations(range(4))))
def test_transpose_rank4_all_perms(tmp_path, perm):
    x = rand((2, 3, 5, 7))
    check(model("Transpose", {"x": x}, {}, ["x"], ["y"], perm=list(perm)), {"x": x}, tmp_path)


@pytest.mark.parametrize("shape,perm,dtype", [
    ((67, 129), (1, 0), np.float32),              # tiled 2-D transpose, ragged tiles
    ((2, 33, 4, 17), (0, 2, 1, 3), np.float32),   # transformer head split
    ((1, 12, 3, 1, 5), (3, 0, 2, 1, 4), np.int64),  # only size-1 dims move except 12/3
    ((2, 3, 2, 3, 2, 3), (5, 3, 1, 4, 2, 0), np.bool_),
    ((2, 1, 3, 1, 2, 1, 2, 3), (7, 6, 5, 4, 3, 2, 1, 0), np.float32),
])
def test_transpose_misc(tmp_path, shape, perm, dtype):
    x = rand(shape, dtype)
    check(model("Transpose", {"x": x}, {}, ["x"], ["y"], perm=list(perm)), {"x": x}, tmp_path)


# -- Slice -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(12))
def test_slice_random(tmp_path, seed):
    rng = np.random.default_rng(seed)
    r = int(rng.integers(1, 5))
    shape = tuple(int(v) for v in rng.integers(1, 7, r))
    axes = list(rng.permutation(r)[: int(rng.integers(1, r + 1))])
    starts, ends, steps = [], [], []
    for a in axes:
        d = shape[a]
        step = int(rng.choice([-3, -2, -1, 1, 2, 3]))
        starts.append(int(rng.integers(-d - 2, d + 2)))
        ends.append(int(rng.choice([rng.integers(-d - 2, d + 2), 2**62, -2**62])))
        steps.append(step)
    axes = [a - r if rng.random() < 0.3 else a for a in axes]
    x = rand(shape, [np.float32, np.int64, np.bool_][seed % 3])
    c = {"s": np.array(starts, np.int64), "e": np.array(ends, np.int64), "a": np.array(axes, np.int64),
         "p": np.array(steps, np.int64)}
    check(model("Slice", {"x": x}, c, ["x", "s", "e", "a", "p"], ["y"]), {"x": x}, tmp_path)


def test_slice_opset1_attrs(tmp_path):
    x = rand((4, 6))
    m = model("Slice", {"x": x}, {}, ["x"], ["y"], opset=9, starts=[1, -4], ends=[100, -1], axes=[0, 1])
    check(m, {"x": x}, tmp_path)


# -- Concat / Split ----------------------------------------------------------------------------------

@pytest.mark.parametrize("n,axis,dtype", [(20, 1, np.float32), (40, 0, np.int64), (3, -1, np.bool_), (17, 2, np.float32)])
def test_concat_many(tmp_path, n, axis, dtype):
    feeds = {}
    for i in range(n):
        shape = [2, 3, 4]
        shape[axis] = int(RNG.integers(0 if i % 5 == 3 else 1, 4))
        feeds[f"x{i}"] = rand(tuple(shape), dtype)
    check(model("Concat", feeds, {}, list(feeds), ["y"], axis=axis), feeds, tmp_path)


@pytest.mark.parametrize("sizes,axis", [([1] * 20, 1), ([3, 0, 2, 5], 0), ([2] * 35, 2)])
def test_split_many(tmp_path, sizes, axis):
    shape = [6, 20, 70]
    shape[axis] = sum(sizes)
    x = rand(tuple(shape))
    outs = [f"y{i}" for i in range(len(sizes))]
    check(model("Split", {"x": x}, {"s": np.array(sizes, np.int64)}, ["x", "s"], outs, axis=axis), {"x": x}, tmp_path)


def test_split_num_outputs_uneven(tmp_path):
    x = rand((7, 3))
    check(model("Split", {"x": x}, {}, ["x"], ["a", "b", "c"], num_outputs=3), {"x": x}, tmp_path, ref=run_ref)


# -- Gather ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("axis,idx_dtype,dtype", [(0, np.int64, np.float32), (1, np.int32, np.int64),
                                                   (2, np.int64, np.bool_), (-1, np.int32, np.float32)])
def test_gather_runtime_negative_indices(tmp_path, axis, idx_dtype, dtype):
    x = rand((4, 5, 6), dtype)
    n = x.shape[axis]
    idx = RNG.integers(-n, n, (3, 2)).astype(idx_dtype)
    check(model("Gather", {"x": x, "i": idx}, {}, ["x", "i"], ["y"], axis=axis), {"x": x, "i": idx}, tmp_path)


def test_gather_out_of_range_is_a_runtime_error(tmp_path):
    x = rand((4, 5))
    idx = np.array([0, 4], np.int64)
    m = model("Gather", {"x": x, "i": idx}, {}, ["x", "i"], ["y"], axis=0)
    out = package(m, out=tmp_path / "b", verify=False)
    b = load_bundle(out)
    assert np.array_equal(b.run({"x": x, "i": np.array([0, -4], np.int64)})["y"], x[[0, 0]])
    for bad in ([0, 4], [-5, 0], [2**40, 1]):
        with pytest.raises(RuntimeFailure, match="index out of range"):
            b.run({"x": x, "i": np.array(bad, np.int64)})


def test_gather_elements(tmp_path):
    x = rand((3, 4, 5))
    idx = RNG.integers(-4, 4, (2, 6, 5)).astype(np.int64)
    check(model("GatherElements", {"x": x, "i": idx}, {}, ["x", "i"], ["y"], axis=1), {"x": x, "i": idx}, tmp_path)


# -- Pad ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
@pytest.mark.parametrize("seed", range(3))
def test_pad_modes(tmp_path, mode, seed):
    rng = np.random.default_rng(seed)
    r = int(rng.integers(1, 5))
    shape = tuple(int(v) for v in rng.integers(1, 6, r))
    hi = 8 if mode != "reflect" else 4
    pads = [int(v) for v in rng.integers(0, hi, 2 * r)]
    x = rand(shape)
    c = {"p": np.array(pads, np.int64), "v": np.array(1.5, np.float32)}
    m = model("Pad", {"x": x}, c, ["x", "p", "v"], ["y"], opset=19, mode=mode)
    width = [(pads[k], pads[r + k]) for k in range(r)]
    want = np.pad(x, width, mode=mode, **({"constant_values": 1.5} if mode == "constant" else {}))
    check(m, {"x": x}, tmp_path, ref=lambda m, f: [want])


def test_pad_negative_and_axes_int64(tmp_path):
    x = rand((5, 6, 7), np.int64)
    c = {"p": np.array([-2, 3, 1, -3], np.int64), "v": np.array(-7, np.int64), "a": np.array([2, 0], np.int64)}
    check(model("Pad", {"x": x}, c, ["x", "p", "v", "a"], ["y"], opset=18), {"x": x}, tmp_path)


def test_pad_opset2_attrs(tmp_path):
    x = rand((2, 3))
    check(model("Pad", {"x": x}, {}, ["x"], ["y"], opset=7, pads=[0, 2, 1, 1], value=2.0), {"x": x}, tmp_path)


# -- Expand / Tile -----------------------------------------------------------------------------------

@pytest.mark.parametrize("xs,shape,dtype", [((3, 1), (2, 3, 4), np.float32), ((1, 5, 1, 2), (3, 1, 4, 1), np.int64),
                                            ((1,), (7,), np.bool_), ((2, 3), (1, 1, 2, 3), np.float32)])
def test_expand(tmp_path, xs, shape, dtype):
    x = rand(xs, dtype)
    check(model("Expand", {"x": x}, {"s": np.array(shape, np.int64)}, ["x", "s"], ["y"]), {"x": x}, tmp_path)


@pytest.mark.parametrize("xs,reps", [((2, 3), (3, 2)), ((1, 4, 1), (2, 1, 5)), ((2, 3, 4, 5), (2, 2, 1, 3))])
def test_tile(tmp_path, xs, reps):
    x = rand(xs)
    check(model("Tile", {"x": x}, {"r": np.array(reps, np.int64)}, ["x", "r"], ["y"]), {"x": x}, tmp_path)


def test_tile_rank_too_high_rejected(tmp_path):
    x = rand((2, 2, 2, 2, 2))
    m = model("Tile", {"x": x}, {"r": np.array([2] * 5, np.int64)}, ["x", "r"], ["y"])
    with pytest.raises(PackagerError, match="Tile"):
        package(m, out=tmp_path / "b", verify=False)


@pytest.mark.parametrize("op,mode", [("DepthToSpace", "DCR"), ("DepthToSpace", "CRD"), ("SpaceToDepth", "DCR")])
def test_depth_space(tmp_path, op, mode):
    x = rand((2, 8, 4, 6))
    kw = {"mode": mode} if op == "DepthToSpace" else {}
    check(model(op, {"x": x}, {}, ["x"], ["y"], blocksize=2, **kw), {"x": x}, tmp_path)


# -- Resize / Upsample -------------------------------------------------------------------------------

COORDS = ["half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_half_pixel_for_nn",
          "half_pixel_symmetric"]


@pytest.mark.parametrize("coord", COORDS)
@pytest.mark.parametrize("nearest_mode", ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"])
def test_resize_nearest(tmp_path, coord, nearest_mode):
    x = rand((1, 2, 5, 7))
    c = {"s": np.array([1, 1, 2.5, 0.75], np.float32)}
    m = model("Resize", {"x": x}, c, ["x", "", "s"], ["y"], opset=19, mode="nearest",
              coordinate_transformation_mode=coord, nearest_mode=nearest_mode)
    # the ONNX reference lacks tf_half_pixel_for_nn; onnxruntime has it
    check(m, {"x": x}, tmp_path, ref=run_ort if coord == "tf_half_pixel_for_nn" else run_ref)


@pytest.mark.parametrize("coord", COORDS)
@pytest.mark.parametrize("mode", ["linear", "cubic"])
def test_resize_interp_sizes(tmp_path, coord, mode):
    if coord == "tf_half_pixel_for_nn":
        pytest.skip("nearest-only transformation")
    x = rand((2, 3, 6, 5))
    c = {"z": np.array([2, 3, 9, 3], np.int64)}
    m = model("Resize", {"x": x}, c, ["x", "", "", "z"], ["y"], opset=19, mode=mode,
              coordinate_transformation_mode=coord)
    check(m, {"x": x}, tmp_path, ref=run_ref, rtol=1e-4, atol=1e-5)


def test_resize_nearest_int64_and_axes(tmp_path):
    x = rand((3, 4, 5), np.int64)
    c = {"s": np.array([3.0, 0.5], np.float32)}
    m = model("Resize", {"x": x}, c, ["x", "", "s"], ["y"], opset=19, mode="nearest", axes=[2, 0])
    check(m, {"x": x}, tmp_path, ref=run_ref)


def test_resize_linear_int64_rejected(tmp_path):
    x = rand((1, 1, 4, 4), np.int64)
    m = model("Resize", {"x": x}, {"s": np.array([1, 1, 2, 2], np.float32)}, ["x", "", "s"], ["y"], mode="linear")
    with pytest.raises(PackagerError, match="float32"):
        package(m, out=tmp_path / "b", verify=False)


def test_resize_bilinear_against_ort(tmp_path):
    x = rand((1, 3, 17, 23))
    m = model("Resize", {"x": x}, {"s": np.array([1, 1, 2, 2], np.float32)}, ["x", "", "s"], ["y"], opset=13,
              mode="linear", coordinate_transformation_mode="half_pixel")
    check(m, {"x": x}, tmp_path, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_upsample_and_resize10_against_ort(tmp_path, mode):
    x = rand((1, 2, 3, 4))
    s = {"s": np.array([1, 1, 2, 3], np.float32)}
    check(model("Upsample", {"x": x}, s, ["x", "s"], ["y"], opset=9, mode=mode), {"x": x}, tmp_path, rtol=1e-4)
    check(model("Resize", {"x": x}, s, ["x", "s"], ["y"], opset=10, mode=mode), {"x": x}, tmp_path, rtol=1e-4)
    s = {"s": np.array([1, 1, 0.5, 0.6], np.float32)}
    check(model("Resize", {"x": x}, s, ["x", "s"], ["y"], opset=10, mode=mode), {"x": x}, tmp_path, rtol=1e-4)


# -- hostile plans -----------------------------------------------------------------------------------

def _plan_of(m: onnx.ModelProto, tmp_path) -> bytes:
    out = package(m, out=tmp_path / "b", verify=False)
    return (out / "model.plan").read_bytes()


def _open(plan: layout.Plan) -> None:
    WasmPlan(ensure_wasm()["edgepack.wasm"], layout.encode(plan))


def _corrupt(tmp_path, m: onnx.ModelProto, op: Op, edits) -> None:
    base = layout.decode(_plan_of(m, tmp_path))
    _open(base)   # the honest plan opens
    idx = [i for i, n in enumerate(base.nodes) if n.op == op][0]
    for edit in edits:
        p = layout.decode(_plan_of(m, tmp_path))
        edit(p.nodes[idx], p)
        with pytest.raises(RuntimeFailure, match="refused opening"):
            _open(p)


def _set(i, v):
    def f(node, plan):
        node.params[i] = v
    return f


def _params(words):
    def f(node, plan):
        node.params = list(words)
    return f


def test_hostile_slice(tmp_path):
    x = rand((4, 6))
    c = {"s": np.array([1, 5], np.int64), "e": np.array([3, 0], np.int64), "a": np.array([0, 1], np.int64),
         "p": np.array([1, -2], np.int64)}
    m = model("Slice", {"x": x}, c, ["x", "s", "e", "a", "p"], ["y"])
    assert layout.decode(_plan_of(m, tmp_path)).nodes[0].params == [1, 5, 3, 0, 1, -2]   # the ONNX (3r) form
    # 3r words that resolve to other extents than the plan's output, step 0, word counts of neither form; then
    # the normalized (2r) form reaching outside the input
    _corrupt(tmp_path, m, Op.SLICE, [_set(0, 3), _set(2, 4), _set(2, 2**31 - 1), _set(3, -3), _set(3, 2**31 - 1),
                                     _set(4, 0), _set(4, 2**31 - 1), _set(5, -1), _set(5, -2**31),
                                     _params([1, 5, 1]), _params([]), _params([1, 5, 3, 0, 1, -2, 0]),
                                     _params([3, 5, 1, -2]), _params([1, 6, 1, -2]), _params([1, 5, 1, -3])])


def test_hostile_transpose_concat_split_gather(tmp_path):
    x = rand((2, 3, 4))
    m = model("Transpose", {"x": x}, {}, ["x"], ["y"], perm=[2, 0, 1])
    _corrupt(tmp_path, m, Op.TRANSPOSE, [_params([2, 0, 0]), _params([2, 1, 0]), _params([3, 0, 1]),
                                         _params([2, 0]), _params([-1, 0, 1])])
    feeds = {"a": rand((2, 3)), "b": rand((2, 5))}
    m = model("Concat", feeds, {}, ["a", "b"], ["y"], axis=1)
    _corrupt(tmp_path, m, Op.CONCAT, [_params([0]), _params([2]), _params([-1]), _params([1, 0])])
    m = model("Split", {"x": rand((2, 8))}, {"s": np.array([3, 5], np.int64)}, ["x", "s"], ["a", "b"], axis=1)
    _corrupt(tmp_path, m, Op.SPLIT, [_params([0]), _params([5])])
    feeds = {"x": rand((5, 4)), "i": np.array([1, 2], np.int64)}
    m = model("Gather", feeds, {}, ["x", "i"], ["y"], axis=0)
    _corrupt(tmp_path, m, Op.GATHER, [_params([1, 0]), _params([0, 1]), _params([0, 2]), _params([0])])


def test_hostile_pad_expand_resize(tmp_path):
    x = rand((3, 4))
    m = model("Pad", {"x": x}, {"p": np.array([1, 2, 0, 1], np.int64)}, ["x", "p"], ["y"], mode="edge")
    _corrupt(tmp_path, m, Op.PAD, [_set(0, 7), _set(0, -1), _params([2, 0, 0, 1])])
    m = model("Expand", {"x": rand((3, 1))}, {"s": np.array([2, 3, 4], np.int64)}, ["x", "s"], ["y"])
    _corrupt(tmp_path, m, Op.EXPAND, [_params([1])])
    x = rand((1, 1, 3, 4))
    m = model("Resize", {"x": x}, {"s": np.array([1, 1, 2, 2], np.float32)}, ["x", "", "s"], ["y"], mode="nearest")
    base = layout.decode(_plan_of(m, tmp_path)).nodes[0].params
    last = len(base) - 1
    _corrupt(tmp_path, m, Op.RESIZE, [_set(last, 4), _set(last, -2), _set(0, 2), _params(base[:-1]),
                                      _params(base + [0]), _set(4, 2), _set(2, 2)])
    m = model("Resize", {"x": x}, {"s": np.array([1, 1, 2, 2], np.float32)}, ["x", "", "s"], ["y"], mode="linear")
    base = layout.decode(_plan_of(m, tmp_path)).nodes[0].params
    _corrupt(tmp_path, m, Op.RESIZE, [_set(0, 0), _set(5, 3), _set(4, 2000), _params(base[:-1])])


def test_hostile_tensor_dtype_mismatch(tmp_path):
    """Changing an output tensor's dtype (same byte size) must not pass for non-COPY kernels."""
    x = rand((2, 3))
    m = model("Transpose", {"x": x}, {}, ["x"], ["y"])
    p = layout.decode(_plan_of(m, tmp_path))
    out = p.nodes[0].outputs[0]
    p.tensors[out].dtype = 6   # int32, same size
    with pytest.raises(RuntimeFailure):
        _open(p)


# -- mutation fuzz under AddressSanitizer --------------------------------------------------------------

_FUZZ = r'''
import ctypes, random, sys, tempfile
from pathlib import Path
import numpy as np
from tests.test_data import model, rand
from packager import package
from packager.plan import layout

lib = ctypes.CDLL(sys.argv[3])
libc = ctypes.CDLL(None)
libc.aligned_alloc.restype = ctypes.c_void_p
libc.aligned_alloc.argtypes = [ctypes.c_size_t, ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
CTX = ctypes.create_string_buffer(512)
lib.ep_open.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint32]
lib.ep_bind.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint32]
lib.ep_arena_bytes.argtypes = [ctypes.c_void_p]
lib.ep_run.argtypes = [ctypes.c_void_p]

def try_plan(b: bytes):
    n = len(b)
    p = libc.aligned_alloc(64, (n + 63) // 64 * 64)
    ctypes.memmove(p, b, n)
    s = lib.ep_open(CTX, p, n)
    ran = None
    if s == 0:
        a = lib.ep_arena_bytes(CTX)
        ar = libc.aligned_alloc(64, max(64, (a + 63) // 64 * 64))
        ctypes.memset(ar, 0x41, a)
        assert lib.ep_bind(CTX, ar, a) == 0
        ran = lib.ep_run(CTX)
        libc.free(ar)
    libc.free(p)
    return s, ran

tmp = Path(tempfile.mkdtemp())
def plan_of(m):
    out = package(m, out=tmp / "b", verify=False)
    return layout.decode((out / "model.plan").read_bytes())

R = np.random
models = [
  model("Slice", {"x": rand((4, 6, 3))}, {"s": np.array([1, 5], np.int64), "e": np.array([3, 0], np.int64), "a": np.array([0, 1], np.int64), "p": np.array([1, -2], np.int64)}, ["x", "s", "e", "a", "p"], ["y"]),
  model("Transpose", {"x": rand((2, 3, 4, 5))}, {}, ["x"], ["y"], perm=[0, 2, 3, 1]),
  model("Transpose", {"x": rand((7, 9))}, {}, ["x"], ["y"]),
  model("Concat", {"a": rand((2, 3)), "b": rand((2, 5)), "c": rand((2, 1))}, {}, ["a", "b", "c"], ["y"], axis=1),
  model("Split", {"x": rand((2, 8))}, {"s": np.array([3, 5], np.int64)}, ["x", "s"], ["a", "b"], axis=1),
  model("Gather", {"x": rand((5, 4)), "i": np.array([1, 2], np.int64)}, {}, ["x", "i"], ["y"], axis=0),
  model("GatherElements", {"x": rand((5, 4)), "i": np.array([[1, 2], [0, 0]], np.int64)}, {}, ["x", "i"], ["y"], axis=1),
  model("Pad", {"x": rand((3, 4))}, {"p": np.array([1, 2, 0, 1], np.int64)}, ["x", "p"], ["y"], mode="reflect"),
  model("Pad", {"x": rand((3, 4))}, {"p": np.array([-1, 2, 0, 1], np.int64)}, ["x", "p"], ["y"], mode="constant"),
  model("Expand", {"x": rand((3, 1))}, {"s": np.array([2, 3, 4], np.int64)}, ["x", "s"], ["y"]),
  model("Resize", {"x": rand((1, 2, 3, 4))}, {"s": np.array([1, 1, 2, 2], np.float32)}, ["x", "", "s"], ["y"], mode="nearest"),
  model("Resize", {"x": rand((1, 2, 3, 4))}, {"s": np.array([1, 1, 2, 1.5], np.float32)}, ["x", "", "s"], ["y"], mode="linear"),
  model("Resize", {"x": rand((1, 2, 3, 4))}, {"r": np.array([0, 0, 0.2, 0.1, 1, 1, 0.9, 1.3], np.float32), "z": np.array([1, 2, 5, 5], np.int64)}, ["x", "r", "", "z"], ["y"], mode="cubic", coordinate_transformation_mode="tf_crop_and_resize"),
]
bases = [plan_of(m) for m in models]
INTERESTING = [0, 1, -1, 2, 3, 4, 5, 7, 8, 16, 2**31 - 1, -2**31, 2**16, 1000, -1000]
random.seed(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
stats = {"open_ok": 0, "rejected": 0, "run_err": 0}
N = int(sys.argv[2]) if len(sys.argv) > 2 else 3000
for it in range(N):
    base = random.choice(bases)
    p = layout.decode(layout.encode(base))
    node = random.choice(p.nodes)
    for _ in range(random.randint(1, 3)):
        what = random.random()
        if what < 0.55 and node.params:
            i = random.randrange(len(node.params))
            node.params[i] = random.choice(INTERESTING) if random.random() < 0.7 else max(-2**31, min(2**31 - 1, node.params[i] + random.randint(-3, 3)))
        elif what < 0.65:
            if random.random() < 0.5 and node.params: node.params.pop(random.randrange(len(node.params)))
            else: node.params.append(random.choice(INTERESTING))
        else:
            tid = random.choice(node.inputs + node.outputs)
            if tid < 0: continue
            t = p.tensors[tid]
            dims = list(t.dims)
            r = random.random()
            if r < 0.2 and len(dims) < 8: dims.insert(random.randrange(len(dims) + 1), random.choice([1, 2, 3]))
            elif r < 0.35 and dims: dims.pop(random.randrange(len(dims)))
            elif dims:
                k = random.randrange(len(dims)); dims[k] = max(0, random.choice([0, 1, 2, 3, 5, 8, dims[k] + 1, dims[k] - 1, 40]))
            esz = {1: 4, 7: 8, 9: 1, 6: 4}[t.dtype]
            t.dims = tuple(dims)
            t.nbytes = int(np.prod(dims, dtype=np.int64)) * esz
            if t.storage == 0:
                p.arena_bytes = max(p.arena_bytes, (t.offset + t.nbytes + 63) // 64 * 64)
    s, ran = try_plan(layout.encode(p))
    if s == 0:
        stats["open_ok"] += 1
        if ran: stats["run_err"] += 1
    else:
        stats["rejected"] += 1
print(stats)
'''


def test_fuzz_params_and_shapes_asan(tmp_path):
    """Random corruptions of parameter words and tensor dims: whatever ep_open accepts must run without
    touching memory outside the arena and the plan (host build with ASan + UBSan)."""
    import shutil
    import subprocess
    import sys
    from pathlib import Path
    from packager.toolchain import ensure_host_lib
    asan = subprocess.run(["gcc", "-print-file-name=libasan.so"], capture_output=True, text=True).stdout.strip()
    if not shutil.which("gcc") or not Path(asan).is_file():
        pytest.skip("no libasan")
    lib = ensure_host_lib("asan")
    script = tmp_path / "fuzz.py"
    script.write_text(_FUZZ)
    root = Path(__file__).resolve().parent.parent
    env = {"LD_PRELOAD": asan, "ASAN_OPTIONS": "detect_leaks=0", "PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"}
    import os
    env = {**os.environ, **env}
    r = subprocess.run([sys.executable, str(script), "11", "1500", str(lib)], capture_output=True, text=True,
                       env=env, cwd=root, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "open_ok" in r.stdout
