"""If, Loop and Scan: bodies are sub-plans the core runs (docs/plan-format.md, "Sub-plans").

The ONNX node cases packaged as a user would (inputs fed at run time, wasmtime, SIMD and scalar builds); hand-made
models whose If branches compute different things (and different shapes), Loops whose trip count is read at run
time (and capped), a constant-condition If folded away; hostile plans with bad ranges, deep nesting, huge counts."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from packager import load_bundle, package
from packager.errors import PackagerError, RuntimeFailure
from packager.passes import subgraphs as sg
from packager.plan import layout
from packager.plan.opcodes import Op
from packager.runtime.wasm import WasmPlan
from packager.toolchain import BUILD

from .conformance.runner import check_outputs, collect, package_case
from .test_hostile_plan import _mutants, _run_asan, asan_driver  # noqa: F401 - a fixture, used by name

from .conftest import PORTABLE_AND_VECTOR

F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
# Every case of onnx.backend.test.case.node with If, Loop or Scan whose body ops edgepack supports (the others:
# test_if_seq, test_if_opt, test_loop13_seq, test_loop16_seq_none and the sequence_map ones use sequences or
# optionals, the bfloat16 range one bfloat16; the affine_grid and linear_attention ones: docs/plan-format.md, "Sub-plans").
CASES = ["test_if", "test_loop11", "test_scan_sum", "test_scan9_sum", "test_scan9_scalar", "test_scan9_multi_state",
         "test_range_float_type_positive_delta_expanded", "test_range_float16_type_positive_delta_expanded",
         "test_range_int32_type_negative_delta_expanded"]


@pytest.fixture(scope="module")
def node_cases():
    return {c.name: c for c, _ in collect({"If", "Loop", "Scan", "Sub"}) if c.name in CASES}


@pytest.mark.parametrize("name", CASES)
def test_onnx_node_case(name: str, node_cases, tmp_path: Path) -> None:
    case = node_cases[name]
    feeds = package_case(case, tmp_path / "b")
    _, expected = case.data_sets[0]
    outs = [o.name for o in case.model.graph.output]
    for variant in PORTABLE_AND_VECTOR:
        got = load_bundle(tmp_path / "b", variant).run(feeds)
        assert check_outputs(got, expected, outs) == ("pass", ""), variant


def _model(nodes, inputs, outputs, inits=(), opset=17) -> onnx.ModelProto:
    g = helper.make_graph(nodes, "cf", inputs, outputs, list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _ops(bundle: Path) -> list[int]:
    return [n.op for n in layout.decode((bundle / "model.plan").read_bytes()).nodes]


def _if_model() -> onnx.ModelProto:
    """then: x * w (2x3; w an outer initializer read only inside the branch); else: x[0:1] + b (1x3; b the branch's
    own initializer). Different computations, different shapes, a condition only the run knows."""
    then = helper.make_graph([helper.make_node("Mul", ["x", "w"], ["t"])], "then", [],
                             [helper.make_tensor_value_info("t", F, [2, 3])])
    els = helper.make_graph([
        helper.make_node("Constant", [], ["st"], value=numpy_helper.from_array(np.array([0], np.int64))),
        helper.make_node("Constant", [], ["en"], value=numpy_helper.from_array(np.array([1], np.int64))),
        helper.make_node("Slice", ["x", "st", "en"], ["s"]),
        helper.make_node("Add", ["s", "b"], ["e"])], "else", [],
        [helper.make_tensor_value_info("e", F, [1, 3])],
        [numpy_helper.from_array(np.array([10, 20, 30], np.float32), "b")])
    return _model([helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=els)],
                  [helper.make_tensor_value_info("c", B, []), helper.make_tensor_value_info("x", F, [2, 3])],
                  [helper.make_tensor_value_info("y", F, ["rows", 3])],
                  [numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), "w")])


def test_if_branches_of_different_shapes_both_run(tmp_path: Path) -> None:
    out = package(_if_model(), out=tmp_path / "if", verify=False)
    assert Op.IF in _ops(out)
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    for variant in PORTABLE_AND_VECTOR:
        b = load_bundle(out, variant)
        for cond in (True, False, True):
            y = b.run({"c": np.array(cond), "x": x})["y"]
            want = x * w if cond else x[0:1] + np.array([10, 20, 30], np.float32)
            assert y.shape == want.shape and np.allclose(y, want), (variant, cond)


def test_if_of_different_shapes_read_by_a_node_is_refused(tmp_path: Path) -> None:
    m = _if_model()
    m.graph.node[0].output[0] = "y0"
    m.graph.node.append(helper.make_node("Relu", ["y0"], ["y"]))
    with pytest.raises(PackagerError, match=r"branches give 'y0' shapes \[2, 3\] and \[1, 3\].*only a graph output"):
        package(m, out=tmp_path / "r", verify=False)


def _loop_model(stop_above: float | None = None) -> onnx.ModelProto:
    """y <- y * 1.5 + c (c an outer-scope initializer) while i < M and cond; with stop_above, cond_out is
    sum(y) < stop_above (the body decides when to stop)."""
    nodes = [helper.make_node("Mul", ["y_in", "k"], ["m"]), helper.make_node("Add", ["m", "c"], ["y_out"])]
    if stop_above is None:
        nodes.append(helper.make_node("Identity", ["cond_in"], ["cond_out"]))
    else:
        nodes += [helper.make_node("ReduceSum", ["y_out"], ["s"], keepdims=0),
                  helper.make_node("Less", ["s", "lim"], ["cond_out"])]
    body = helper.make_graph(
        nodes, "body",
        [helper.make_tensor_value_info("i", I64, []), helper.make_tensor_value_info("cond_in", B, []),
         helper.make_tensor_value_info("y_in", F, [3])],
        [helper.make_tensor_value_info("cond_out", B, []), helper.make_tensor_value_info("y_out", F, [3])],
        [numpy_helper.from_array(np.array(1.5, np.float32), "k")])
    inits = [numpy_helper.from_array(np.array([1, 2, 3], np.float32), "c")]
    if stop_above is not None:
        inits.append(numpy_helper.from_array(np.array(stop_above, np.float32), "lim"))
    return _model([helper.make_node("Loop", ["M", "cond", "y0"], ["y"], body=body)],
                  [helper.make_tensor_value_info("M", I64, []), helper.make_tensor_value_info("cond", B, []),
                   helper.make_tensor_value_info("y0", F, [3])],
                  [helper.make_tensor_value_info("y", F, [3])], inits)


def _loop_ref(m: int, cond: bool, y: np.ndarray, stop_above: float | None) -> np.ndarray:
    y = y.copy()
    i = 0
    while cond and i < m:
        y = y * np.float32(1.5) + np.array([1, 2, 3], np.float32)
        cond = True if stop_above is None else bool(y.sum() < stop_above)
        i += 1
    return y


@pytest.mark.parametrize("stop_above", [None, 100.0])
def test_loop_trip_count_and_condition_read_at_run_time(stop_above, tmp_path: Path) -> None:
    out = package(_loop_model(stop_above), out=tmp_path / "loop", verify=False)
    assert Op.LOOP in _ops(out)
    y0 = np.array([0.5, -1, 2], np.float32)
    for variant in PORTABLE_AND_VECTOR:
        b = load_bundle(out, variant)
        for m, cond in ((0, True), (1, True), (7, True), (7, False), (40, True)):
            got = b.run({"M": np.array(m, np.int64), "cond": np.array(cond), "y0": y0})["y"]
            assert np.allclose(got, _loop_ref(m, cond, y0, stop_above), rtol=1e-5), (variant, m, cond)


def test_huge_trip_count_stops_with_a_limit_error(tmp_path: Path) -> None:
    """A trip count of 2^40 with a condition that stays true: the core stops at its iteration cap (EP_E_LIMIT)."""
    out = package(_loop_model(None), out=tmp_path / "loop", verify=False)
    b = load_bundle(out, "simd")
    with pytest.raises(RuntimeFailure, match="status 14"):
        b.run({"M": np.array(1 << 40, np.int64), "cond": np.array(True), "y0": np.zeros(3, np.float32)})
    y = b.run({"M": np.array(2, np.int64), "cond": np.array(True), "y0": np.zeros(3, np.float32)})["y"]   # still usable
    assert np.allclose(y, _loop_ref(2, True, np.zeros(3, np.float32), None))


def test_scan_axes_and_directions(tmp_path: Path) -> None:
    """Scan-9 over axis 1 of x[2, 4, 3], reversed, two scan outputs on axes 1 and 0 (the second reversed), a
    running sum state and an outer-scope scale (onnx's reference evaluator has no reverse Scan: numpy)."""
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "xs"], ["s_out"]), helper.make_node("Mul", ["s_out", "scale"], ["y1"]),
         helper.make_node("Neg", ["xs"], ["y2"])], "body",
        [helper.make_tensor_value_info("s_in", F, [2, 3]), helper.make_tensor_value_info("xs", F, [2, 3])],
        [helper.make_tensor_value_info("s_out", F, [2, 3]), helper.make_tensor_value_info("y1", F, [2, 3]),
         helper.make_tensor_value_info("y2", F, [2, 3])])
    m = _model([helper.make_node("Scan", ["s0", "x"], ["s", "ys1", "ys2"], body=body, num_scan_inputs=1,
                                 scan_input_axes=[1], scan_input_directions=[1], scan_output_axes=[1, 0],
                                 scan_output_directions=[0, 1])],
               [helper.make_tensor_value_info("s0", F, [2, 3]), helper.make_tensor_value_info("x", F, [2, 4, 3])],
               [helper.make_tensor_value_info("s", F, [2, 3]), helper.make_tensor_value_info("ys1", F, [2, 4, 3]),
                helper.make_tensor_value_info("ys2", F, [4, 2, 3])],
               [numpy_helper.from_array(np.array(0.5, np.float32), "scale")])
    out = package(m, out=tmp_path / "scan", verify=False)
    rng = np.random.default_rng(1)
    feeds = {"s0": rng.standard_normal((2, 3)).astype(np.float32), "x": rng.standard_normal((2, 4, 3)).astype(np.float32)}
    st, ys1, ys2 = feeds["s0"].copy(), np.zeros((2, 4, 3), np.float32), np.zeros((4, 2, 3), np.float32)
    for t in range(4):
        xs = feeds["x"][:, 3 - t, :]
        st = st + xs
        ys1[:, t, :] = st * np.float32(0.5)
        ys2[3 - t] = -xs
    want = {"s": st, "ys1": ys1, "ys2": ys2}
    for variant in PORTABLE_AND_VECTOR:
        got = load_bundle(out, variant).run(feeds)
        for k, w in want.items():
            assert got[k].shape == w.shape and np.allclose(got[k], w, rtol=1e-5, atol=1e-6), (variant, k)


def _const_if_model() -> onnx.ModelProto:
    then = helper.make_graph([helper.make_node("Relu", ["x"], ["t"])], "then", [],
                             [helper.make_tensor_value_info("t", F, [4])])
    els = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [],
                            [helper.make_tensor_value_info("e", F, [4])])
    return _model([helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=els)],
                  [helper.make_tensor_value_info("c", B, []), helper.make_tensor_value_info("x", F, [4])],
                  [helper.make_tensor_value_info("y", F, [4])])


@pytest.mark.parametrize("cond", [True, False])
def test_constant_condition_if_is_folded_away(cond: bool, tmp_path: Path) -> None:
    out = package(_const_if_model(), out=tmp_path / "c", constants={"c": np.array(cond)}, verify=True)
    plan = layout.decode((out / "model.plan").read_bytes())
    assert Op.IF not in [n.op for n in plan.nodes] and plan.version == layout.VERSION
    x = np.array([-1, 2, -3, 4], np.float32)
    assert np.array_equal(load_bundle(out).run({"x": x})["y"], np.maximum(x, 0) if cond else -x)


def test_if_condition_folded_from_constants(tmp_path: Path) -> None:
    """The condition is Greater of two initializers: constant folding decides it, the If disappears."""
    m = _const_if_model()
    m.graph.input.pop(0)
    m.graph.initializer.extend([numpy_helper.from_array(np.array(2.0, np.float32), "a"),
                                numpy_helper.from_array(np.array(1.0, np.float32), "b")])
    m.graph.node.insert(0, helper.make_node("Greater", ["a", "b"], ["c"]))
    out = package(m, out=tmp_path / "g", verify=True)
    assert Op.IF not in _ops(out)


def test_inline_branch_renames_and_binds_outputs() -> None:
    node = _const_if_model().graph.node[0]
    nodes = sg.inline_branch(node, False, "p/")
    assert [n.op_type for n in nodes] == ["Neg", "Identity"]
    assert list(nodes[0].input) == ["x"] and list(nodes[0].output) == ["p/e"]
    assert list(nodes[1].input) == ["p/e"] and list(nodes[1].output) == ["y"]
    assert sg.outer_refs(node.attribute[0].g) == {"x"}


def test_unroll_loop_computes_what_the_loop_does() -> None:
    """Loop-11's node case unrolled 3 times: onnx's reference evaluator gives the same outputs as for the Loop."""
    from onnx.reference import ReferenceEvaluator
    case = next(c for c, _ in collect({"Loop"}) if c.name == "test_loop11")
    loop = case.model.graph.node[0]
    assert sg.can_unroll(loop, 3, True) and not sg.can_unroll(loop, 3, False) and not sg.can_unroll(loop, 10**6, True)
    g = case.model.graph
    flat = helper.make_graph(sg.unroll_loop(loop, 3, "u/", 11), "flat", list(g.input), list(g.output))
    feeds = {"trip_count": np.array(3, np.int64), "cond": np.array(True), "y": np.array([-2], np.float32)}
    want = ReferenceEvaluator(case.model).run(None, feeds)
    got = ReferenceEvaluator(helper.make_model(flat, opset_imports=case.model.opset_import)).run(None, feeds)
    assert all(np.array_equal(a, b) for a, b in zip(got, want))


def _nested_if_model(depth: int) -> onnx.ModelProto:
    """depth Ifs, each inside the then branch of the one above, on one run-time condition: y = x + depth, or x."""
    inner = None
    for d in range(depth, 0, -1):
        then_nodes = [helper.make_node("Add", ["x", "one"], [f"t{d}"])] if inner is None else \
            [inner, helper.make_node("Add", [f"r{d + 1}", "one"], [f"t{d}"])]
        then = helper.make_graph(then_nodes, f"then{d}", [], [helper.make_tensor_value_info(f"t{d}", F, [2])])
        els = helper.make_graph([helper.make_node("Identity", ["x"], [f"e{d}"])], f"else{d}", [],
                                [helper.make_tensor_value_info(f"e{d}", F, [2])])
        inner = helper.make_node("If", ["c"], [f"r{d}"], then_branch=then, else_branch=els)
    return _model([inner, helper.make_node("Identity", ["r1"], ["y"])],
                  [helper.make_tensor_value_info("c", B, []), helper.make_tensor_value_info("x", F, [2])],
                  [helper.make_tensor_value_info("y", F, [2])],
                  [numpy_helper.from_array(np.array(1, np.float32), "one")])


def test_nested_bodies_run_and_too_deep_is_refused(tmp_path: Path, monkeypatch) -> None:
    out = package(_nested_if_model(3), out=tmp_path / "n3", verify=False)
    x = np.array([1, 2], np.float32)
    b = load_bundle(out)
    assert np.array_equal(b.run({"c": np.array(True), "x": x})["y"], x + 3)
    assert np.array_equal(b.run({"c": np.array(False), "x": x})["y"], x)
    assert np.array_equal(load_bundle(package(_nested_if_model(7), out=tmp_path / "n7", verify=False)).run(
        {"c": np.array(True), "x": x})["y"], x + 7)
    with pytest.raises(PackagerError, match="nested"):
        package(_nested_if_model(8), out=tmp_path / "n8", verify=False)
    from packager.ops import control
    monkeypatch.setattr(control, "MAX_DEPTH", 100)   # a plan nesting deeper than the core allows: refused at open
    deep = package(_nested_if_model(8), out=tmp_path / "n8", verify=False)
    with pytest.raises(RuntimeFailure, match="opening the plan"):
        load_bundle(deep).run({"c": np.array(True), "x": x})


# -- hostile plans ----------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def cf_plans(tmp_path_factory) -> dict[str, layout.Plan]:
    tmp = tmp_path_factory.mktemp("cf")
    out = {"if": package(_if_model(), out=tmp / "if", verify=False),
           "loop": package(_loop_model(100.0), out=tmp / "loop", verify=False)}
    scan = next(c for c, _ in collect({"Scan"}) if c.name == "test_scan9_multi_state")
    package_case(scan, tmp / "scan")
    out["scan"] = tmp / "scan"
    return {k: layout.decode((p / "model.plan").read_bytes()) for k, p in out.items()}


def _opens(plan: layout.Plan) -> bool:
    """Opened and resolved at the plan's input dims (all fixed here)."""
    try:
        s = WasmPlan(BUILD / "edgepack.wasm", layout.encode(plan))
        s.set_shapes([tuple(plan.tensors[t].dims) for t in plan.inputs])
        return True
    except RuntimeFailure:
        return False


def _ctrl(plan: layout.Plan) -> layout.NodeEntry:
    return next(n for n in plan.nodes if n.op in (Op.IF, Op.LOOP, Op.SCAN))


def _copy(plan: layout.Plan) -> layout.Plan:
    return layout.decode(layout.encode(plan))


def test_bad_body_ranges_are_refused(cf_plans) -> None:
    for name, plan in cf_plans.items():
        assert _opens(plan), name
        n_main, n_nodes = plan.dynamic.n_main, len(plan.nodes)
        edits = {
            "range past the end": lambda p: p.__setitem__(1, n_nodes + 1),
            "range into the main sequence": lambda p: p.__setitem__(0, 0),
            "the whole plan, itself included": lambda p: (p.__setitem__(0, 0), p.__setitem__(1, n_nodes)),
            "reversed": lambda p: (p.__setitem__(0, p[1]), p.__setitem__(1, p[0] - 1) if p[0] > 0 else None),
            "negative": lambda p: p.__setitem__(0, -5),
            "a node left out of every body": lambda p: p.__setitem__(1, p[1] - 1) if p[1] > p[0] else p.__setitem__(1, p[1] + 1),
        }
        for why, edit in edits.items():
            bad = _copy(plan)
            edit(_ctrl(bad).params)
            assert not _opens(bad), f"{name}: {why}"
        for n_main_bad in (n_nodes + 1, n_main + 1, max(n_main - 1, 1)):
            bad = _copy(plan)
            bad.dynamic.n_main = n_main_bad
            if n_main_bad != n_main:
                assert not _opens(bad), f"{name}: n_main {n_main_bad}"


def test_bad_body_words_are_refused(cf_plans) -> None:
    for name, plan in cf_plans.items():
        node = _ctrl(plan)
        head = 4 if node.op in (Op.IF, Op.LOOP) else 5
        for k in range(head - 2 if node.op != Op.IF else 4, len(node.params)):
            for v in (-7, len(plan.tensors), 1 << 30):
                bad = _copy(plan)
                _ctrl(bad).params[k] = v
                assert not _opens(bad) or (node.op == Op.LOOP and k in (4, 5) and v == -1), f"{name} word {k} = {v}"
        bad = _copy(plan)
        _ctrl(bad).params.append(0)
        assert not _opens(bad), f"{name}: one word too many"
        for j in range(len(node.inputs)):   # an absent input where the node needs one (Loop's M and cond may be)
            bad = _copy(plan)
            _ctrl(bad).inputs[j] = -1
            if not (node.op == Op.LOOP and j < 2):
                assert not _opens(bad), f"{name}: input {j} absent"


def test_corrupted_control_flow_plans_under_asan(cf_plans, asan_driver: Path, tmp_path: Path) -> None:
    plans = []
    for name, plan in cf_plans.items():
        encoded = layout.encode(plan)
        plans += [encoded] + _mutants(encoded, 150, seed=len(name))
    lines = _run_asan(asan_driver, plans, tmp_path)
    assert len(lines) == len(plans)
    assert lines[0].startswith("0 ") and lines[151].startswith("0 ") and lines[302].startswith("0 ")


def test_corrupted_control_flow_plans_never_trap_in_wasm(cf_plans) -> None:
    import wasmtime
    for name, plan in cf_plans.items():
        for m in _mutants(layout.encode(plan), 60, seed=7):
            try:
                s = WasmPlan(BUILD / "edgepack.wasm", m)
                if s.dynamic:
                    s.set_shapes([tuple(max(d, 1) for d in layout.decode(m).tensors[t].dims) for t in layout.decode(m).inputs])
                s.run()
            except RuntimeFailure:
                pass
            except wasmtime.Trap as e:
                pytest.fail(f"{name}: wasm trap on a corrupted plan: {e}")
            except Exception:  # noqa: BLE001 - the Python-side decode of a mutant may fail: not the core's concern
                pass
