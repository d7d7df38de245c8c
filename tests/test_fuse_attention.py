"""Attention fusion (packager/passes/fuse_attention.py, ATTENTION in matmul.c): MatMul(Q, Kt) -> [Mul|Div by a scalar]
-> Softmax(last axis) -> MatMul(., V) runs as one kernel, a block of query rows at a time, on every wasm build and in
Node, against onnxruntime; what does not match lowers node by node as before."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from packager import load_bundle, package
from packager.passes.fuse_attention import block_rows
from packager.plan import layout
from packager.plan.opcodes import Op
from packager.reference import reference_run

from .conftest import f32, make_model

TOL = 1e-4


def _attention(b: int, h: int, lq: int, lk: int, d: int, dv: int, scale: str = "div", axis: int = -1,
               extra_use: bool = False) -> onnx.ModelProto:
    """q [b,h,lq,d], k [b,h,lk,d] (transposed in the graph, as exporters write it), v [b,h,lk,dv] -> attention."""
    nodes = [helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
             helper.make_node("MatMul", ["q", "kt"], ["s"])]
    inits, scores = [], "s"
    if scale != "none":
        inits.append(numpy_helper.from_array(np.asarray(np.sqrt(d) if scale == "div" else 1 / np.sqrt(d), np.float32), "c"))
        nodes.append(helper.make_node("Div" if scale == "div" else "Mul", ["s", "c"] if scale != "mul_first" else ["c", "s"],
                                      ["ss"]))
        scores = "ss"
    nodes += [helper.make_node("Softmax", [scores], ["p"], axis=axis), helper.make_node("MatMul", ["p", "v"], ["y"])]
    outs = [f32("y", [b, h, lq, dv])]
    if extra_use:   # the probabilities are also an output: they must be materialized
        outs.append(f32("p", [b, h, lq, lk]))
    return make_model(nodes, [f32("q", [b, h, lq, d]), f32("k", [b, h, lk, d]), f32("v", [b, h, lk, dv])], outs, inits)


def _feeds(m: onnx.ModelProto) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(5)
    return {i.name: (rng.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim]) * 2).astype(np.float32)
            for i in m.graph.input}


def _kernels(path) -> list[str]:
    return [Op(n.op).name for n in layout.decode((path / "model.plan").read_bytes()).nodes]


@pytest.mark.parametrize("shape,scale", [((1, 3, 19, 23, 20, 9), "div"), ((2, 2, 30, 3000, 8, 16), "mul"),
                                         ((1, 2, 5, 7, 4, 5), "none"), ((1, 1, 13, 17, 6, 3), "mul_first"),
                                         # one query row (matmul.c row_times): GPT-2's step; 32 + 4 + 1 keys and
                                         # 32 + 3 values; 3 keys (element loop only)
                                         ((1, 12, 1, 128, 64, 64), "div"), ((2, 3, 1, 37, 9, 35), "mul"),
                                         ((1, 2, 1, 3, 5, 3), "none"),
                                         ((1, 1, 5000, 4, 8, 8), "div")])
@pytest.mark.parametrize("optimize", [True, False])
def test_attention_is_one_kernel(shape: tuple, scale: str, optimize: bool, tmp_path) -> None:
    # (19, 23): odd sizes, partial tiles and panels; (30, 3000): three blocks of 12 + 12 + 6 query rows;
    # (5000, 4): a key length under 8, whose blocks are capped at the kernel's 4092 rows.
    # Optimized, the scale moves onto Q (passes/scale.py); unoptimized the kernel scales the scores.
    m = _attention(*shape, scale=scale)
    path = package(m, target="web", out=tmp_path / "b", optimize=optimize)   # verify: the bundle against onnxruntime
    scaled_q = optimize and scale != "none"
    assert _kernels(path) == ["TRANSPOSE", *(["BINARY"] if scaled_q else []), "ATTENTION"]
    node = layout.decode((path / "model.plan").read_bytes()).nodes[-1]
    assert node.params[0] == (0 if scaled_q else {"none": 0, "mul": 1, "mul_first": 1, "div": 2}[scale])
    assert node.params[2] == block_rows(shape[2], shape[3])
    feeds = _feeds(m)
    want = reference_run(m, feeds)["y"]
    for variant in ("simd", "relaxed", "scalar"):
        got = load_bundle(path, variant).run(feeds)["y"]
        np.testing.assert_allclose(got, want, rtol=TOL, atol=TOL, err_msg=variant)


@pytest.mark.parametrize("variant, options", [("simd", {}), ("relaxed", {}), ("auto", {"threads": 2})])
def test_attention_in_node(variant: str, options: dict, tmp_path) -> None:
    # the threaded build splits the tiles' panels and the blocks' softmax rows across 2 threads
    from .test_web_node import RELAXED_FLAG, _node_major, _node_run, _outputs
    if _node_major() < 20:
        pytest.skip("needs Node >= 20")
    m = _attention(1, 2, 30, 1500, 8, 16, scale="none")   # two blocks (24 + 6 rows)
    path = package(m, out=tmp_path / "b", verify=False)
    assert "ATTENTION" in _kernels(path)
    feeds = _feeds(m)
    want = reference_run(m, feeds)["y"]
    res = _node_run(tmp_path / "n", path, feeds, variant, options=options,
                    node_flags=(RELAXED_FLAG,) if variant != "simd" else ())
    assert res["variant"].startswith("threads") if options else res["variant"] == variant
    np.testing.assert_allclose(_outputs(res)["y"], want, rtol=TOL, atol=TOL, err_msg=res["variant"])


@pytest.mark.parametrize("kw", [{"axis": 2}, {"extra_use": True}])
def test_what_does_not_match_runs_unfused(kw: dict, tmp_path) -> None:
    # softmax over the query axis, or probabilities used elsewhere: the nodes run one by one
    m = _attention(1, 2, 9, 11, 4, 5, **kw)
    path = package(m, target="web", out=tmp_path / "b")
    kernels = _kernels(path)
    assert "ATTENTION" not in kernels and "SOFTMAX" in kernels and kernels.count("MATMUL") == 2
    feeds = _feeds(m)
    want = reference_run(m, feeds)
    got = load_bundle(path, "relaxed").run(feeds)
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=TOL, atol=TOL, err_msg=k)


def _masked(mask: str, values) -> onnx.ModelProto:
    """Exporters' forms around the softmax: an additive mask ("add"), a Where mask ("where", fill where True),
    float32 Casts ("cast"), with constant values."""
    lq, lk = 6, 9
    nodes = [helper.make_node("MatMul", ["q", "kt"], ["s"])]
    inits = []
    if mask == "add":
        inits.append(numpy_helper.from_array(np.asarray(values, np.float32).reshape(1, 1, 1, lk), "m"))
        nodes.append(helper.make_node("Add", ["s", "m"], ["sm_in"]))
    elif mask == "where":
        inits += [numpy_helper.from_array(np.asarray(values, bool).reshape(1, 1, 1, lk), "m"),
                  numpy_helper.from_array(np.asarray(-3.4e38, np.float32), "fill")]
        nodes.append(helper.make_node("Where", ["m", "fill", "s"], ["sm_in"]))
    else:
        nodes.append(helper.make_node("Cast", ["s"], ["sm_in"], to=onnx.TensorProto.FLOAT))
    nodes += [helper.make_node("Softmax", ["sm_in"], ["p"], axis=-1),
              helper.make_node("Cast", ["p"], ["pc"], to=onnx.TensorProto.FLOAT), helper.make_node("MatMul", ["pc", "v"], ["y"])]
    return make_model(nodes, [f32("q", [1, 2, lq, 4]), f32("kt", [1, 2, 4, lk]), f32("v", [1, 2, lk, 5])],
                      [f32("y", [1, 2, lq, 5])], inits)


@pytest.mark.parametrize("mask,values,inputs", [("add", np.zeros(9), 3), ("add", [0.0] * 8 + [-1e9], 4),
                                                ("where", np.zeros(9), 3), ("where", [0] * 8 + [1], 4),
                                                ("cast", None, 3)])
def test_pass_through_nodes(mask: str, values, inputs: int, tmp_path) -> None:
    # a mask that masks nothing (and float32 Casts) is looked past; a constant one that masks something is the
    # kernel's mask input (the Where's as the additive mask it is)
    m = _masked(mask, values)
    path = package(m, target="web", out=tmp_path / "b")
    assert "SOFTMAX" not in _kernels(path)
    assert len(next(n for n in layout.decode((path / "model.plan").read_bytes()).nodes if n.op == Op.ATTENTION).inputs) == inputs
    feeds = _feeds(m)
    want = reference_run(m, feeds)["y"]
    np.testing.assert_allclose(load_bundle(path, "relaxed").run(feeds)["y"], want, rtol=TOL, atol=TOL)


def test_hostile_params_rejected(tmp_path) -> None:
    from packager.errors import RuntimeFailure
    from packager.runtime.wasm import WasmPlan
    from packager.toolchain import ensure_wasm
    path = package(_attention(1, 1, 5, 7, 4, 5), target="web", out=tmp_path / "b", verify=False)
    good = (path / "model.plan").read_bytes()
    wasm = ensure_wasm()["edgepack.wasm"]
    WasmPlan(wasm, good)
    mutations = [
        lambda n: n.params.__setitem__(0, 3),            # scale kind
        lambda n: n.params.__setitem__(2, -1),           # negative rows per block (0: derived, as in dynamic plans)
        lambda n: n.params.__setitem__(2, 5000),         # more than the kernel takes
        lambda n: n.params.pop(),
        lambda n: setattr(n, "scratch_bytes", 16),
        lambda n: n.inputs.__setitem__(2, n.inputs[0]),  # Q as V: Lk rows wanted, Lq given
        lambda n: n.params.extend([2, 0, 0]),            # causal is 0 or 1
        lambda n: n.params.extend([1, 0]),               # 5 words
        lambda n: n.inputs.append(n.inputs[0]),          # Q as the mask: its last dim is D, not Lk
    ]
    for k, mutate in enumerate(mutations):
        p = layout.decode(good)
        mutate(next(n for n in p.nodes if n.op == Op.ATTENTION))
        with pytest.raises(RuntimeFailure):
            WasmPlan(wasm, layout.encode(p))
            pytest.fail(f"mutation {k} accepted")


def _graph_masked(masks: list[tuple], lq: int = 6, lk: int = 9, scale: bool = True) -> onnx.ModelProto:
    """q [2,2,lq,4] kt [2,2,4,lk] v [2,2,lk,5]; after the scores (scaled by 0.5), each mask in turn: ("add", name,
    array or shape: a constant or a graph input), ("where", cond name, shape or bool array, fill, keep_true: a bool
    condition, fed as a float input x > 0 when a shape), ("expand", ...): the Where's condition Expanded first."""
    ins = [f32("q", [2, 2, lq, 4]), f32("kt", [2, 2, 4, lk]), f32("v", [2, 2, lk, 5])]
    nodes = [helper.make_node("MatMul", ["q", "kt"], ["s0"])]
    inits = [numpy_helper.from_array(np.float32(0), "zero")]
    x = "s0"
    if scale:
        inits.append(numpy_helper.from_array(np.float32(0.5), "half"))
        nodes.append(helper.make_node("Mul", [x, "half"], ["s1"]))
        x = "s1"
    for k, (kind, name, spec, *rest) in enumerate(masks):
        out = f"m{k}"
        if kind == "add":
            if isinstance(spec, np.ndarray):
                inits.append(numpy_helper.from_array(spec.astype(np.float32), name))
            else:
                ins.append(f32(name, list(spec)))
            nodes.append(helper.make_node("Add", [x, name], [out]))
        else:
            fill, keep = rest[0], rest[1]
            cond = name
            if isinstance(spec, np.ndarray):
                inits.append(numpy_helper.from_array(spec, name))
            else:
                ins.append(f32(name + "_x", list(spec)))
                nodes.append(helper.make_node("Greater", [name + "_x", "zero"], [name]))
            if kind == "expand":
                inits.append(numpy_helper.from_array(np.asarray([2, 2, lq, lk], np.int64), name + "_shape"))
                nodes.append(helper.make_node("Expand", [name, name + "_shape"], [name + "_e"]))
                cond = name + "_e"
            inits.append(numpy_helper.from_array(np.float32(fill), name + "_fill"))
            nodes.append(helper.make_node("Where", [cond, x, name + "_fill"] if keep else [cond, name + "_fill", x], [out]))
        x = out
    nodes += [helper.make_node("Softmax", [x], ["p"], axis=-1), helper.make_node("MatMul", ["p", "v"], ["y"])]
    return make_model(nodes, ins, [f32("y", [2, 2, lq, 5])], inits)


LOWEST = float(np.finfo(np.float32).min)


def _tri(lq: int, lk: int, diag: int, fill: float) -> np.ndarray:
    """The additive causal constant: fill for key j > query i + lk - lq + diag."""
    j, i = np.arange(lk)[None, :], np.arange(lq)[:, None]
    return np.where(j > i + lk - lq + diag, np.float32(fill), np.float32(0)).reshape(1, 1, lq, lk)


def _run_all(m: onnx.ModelProto, path) -> None:
    feeds = _feeds(m)
    want = reference_run(m, feeds)["y"]
    for variant in ("simd", "relaxed", "scalar"):
        got = load_bundle(path, variant).run(feeds)["y"]
        np.testing.assert_allclose(got, want, rtol=TOL, atol=TOL, err_msg=variant)


@pytest.mark.parametrize("form,diag,fill", [("add", 0, LOWEST), ("add", 2, float("-inf")), ("add", -4, LOWEST),
                                            ("add", -4, float("-inf")), ("where", -1, LOWEST), ("where", 0, float("-inf"))])
def test_causal_constant_is_the_causal_words(form: str, diag: int, fill: float, tmp_path) -> None:
    # diag -4 at Lq 6, Lk 9: row 0 masks every key (lowest: a uniform row; -inf: NaN, as onnxruntime)
    lq, lk = 6, 9
    tri = _tri(lq, lk, diag, fill)
    mask = ("add", "tri", tri) if form == "add" else ("where", "tri", tri.reshape(lq, lk) == 0, fill, True)
    m = _graph_masked([mask], lq, lk)
    path = package(m, target="web", out=tmp_path / "b", verify=False)
    node = next(n for n in layout.decode((path / "model.plan").read_bytes()).nodes if n.op == Op.ATTENTION)
    assert "SOFTMAX" not in _kernels(path) and len(node.inputs) == 3
    assert node.params[3:5] == [1, diag] and np.asarray(node.params[5] & 0xFFFFFFFF, np.uint32).view(np.float32) == np.float32(fill)
    _run_all(m, path)


@pytest.mark.parametrize("masks,mask_dims", [
    ([("add", "pad", (2, 1, 1, 9))], [2, 1, 1, 9]),                       # BERT's padding mask, fed
    ([("add", "full", (1, 2, 6, 9))], [1, 2, 6, 9]),
    ([("add", "row", (9,))], [1, 1, 1, 9]),                              # viewed at the scores' rank
    ([("add", "tri", _tri(6, 9, 0, LOWEST)), ("add", "pad", (2, 1, 1, 9))], [2, 1, 1, 9]),   # causal + padding
    ([("where", "keep", (2, 1, 1, 9), LOWEST, True)], [2, 1, 1, 9]),      # a Where on a bool computed at run time
    ([("where", "masked", (2, 1, 6, 9), float("-inf"), False)], [2, 1, 6, 9]),   # masked_fill's order
    ([("expand", "keep", (2, 1, 1, 9), LOWEST, True)], [2, 1, 1, 9]),     # an Expanded condition: read at its size
])
def test_mask_input(masks: list, mask_dims: list, tmp_path) -> None:
    m = _graph_masked(masks)
    path = package(m, target="web", out=tmp_path / "b", verify=False)
    plan = layout.decode((path / "model.plan").read_bytes())
    kernels = _kernels(path)
    assert "SOFTMAX" not in kernels and "EXPAND" not in kernels
    node = next(n for n in plan.nodes if n.op == Op.ATTENTION)
    assert len(node.inputs) == 4 and list(plan.tensors[node.inputs[3]].dims) == mask_dims
    assert len(node.params) == (6 if any(k[1] == "tri" for k in masks) else 3)
    _run_all(m, path)


@pytest.mark.parametrize("masks", [
    [("add", "pad", (2, 1, 1, 37))],                                      # a padding mask, fed
    [("add", "tri", _tri(1, 37, -3, LOWEST)), ("add", "pad", (2, 1, 1, 37))],   # causal past the diagonal + padding
    [("add", "tri", _tri(1, 37, -37, float("-inf")))],                    # every key masked: NaN, as onnxruntime
])
def test_one_query_row_masked(masks: list, tmp_path) -> None:
    # a token step against a KV cache (Lq = 1: matmul.c row_times, no panels), with the masks it can carry
    m = _graph_masked(masks, lq=1, lk=37)
    path = package(m, target="web", out=tmp_path / "b", verify=False)
    assert "SOFTMAX" not in _kernels(path) and "ATTENTION" in _kernels(path)
    _run_all(m, path)


@pytest.mark.parametrize("masks", [
    [("where", "keep", (2, 1, 1, 9), -1e4, True)],                        # a fill scores are not lost in: stays a Where
    [("add", "a", (2, 1, 1, 9)), ("add", "b", (2, 1, 1, 9))],            # two masks fed: one input only
    [("add", "col", (2, 2, 6, 1))],                                       # broadcast along the keys
])
def test_masks_the_kernel_does_not_take(masks: list, tmp_path) -> None:
    m = _graph_masked(masks)
    path = package(m, target="web", out=tmp_path / "b", verify=False)
    assert "ATTENTION" not in _kernels(path) and "SOFTMAX" in _kernels(path)
    _run_all(m, path)


def test_masked_hostile_params_under_asan(tmp_path) -> None:
    # hostile words (causal, diag, fill, block_rows) and dims (the mask's among them) of a masked, causal ATTENTION:
    # refused or run cleanly under ASan + UBSan, never a wasm trap
    from .param_mutants import check_hostile_params
    m = _graph_masked([("add", "tri", _tri(6, 9, 0, LOWEST)), ("add", "pad", (2, 1, 1, 9))], scale=False)
    plan = (package(m, target="web", out=tmp_path / "b", verify=False) / "model.plan").read_bytes()
    assert any(n.op == Op.ATTENTION and len(n.params) == 6 for n in layout.decode(plan).nodes)
    check_hostile_params([plan], tmp_path, seed=61, min_op=Op.ATTENTION)
