"""NonZero, NonMaxSuppression and Unique: outputs whose extent the run sets (docs/plan-format.md, "Data-dependent
output dims"), end to end: the ONNX node cases (fed at run time, SIMD and scalar wasm); a detector-like model
(boxes + scores -> NMS -> Gather of the kept boxes, scores and classes) packaged by the CLI, run several times with
different counts under wasmtime and in Node (the web runtime) and compared with onnxruntime; nodes reading a NonZero /
Unique output at the count of each run (zero included); edgepack-run under qemu-aarch64, the pi5 Python module and
the Java wrapper return the actual dims; refusals name the op; the core refuses such a kernel in a version-1 plan."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from packager import load_bundle, package
from packager.errors import PackagerError
from packager.plan import layout
from packager.plan.opcodes import Op
from packager.reference import reference_run
from packager.runtime.wasm import WasmPlan
from packager.toolchain import BUILD

from .conformance.runner import check_outputs, collect, package_case
from .conftest import PORTABLE_AND_VECTOR
from .test_hostile_plan import _mutants, _run_asan, asan_driver  # noqa: F401 - a fixture, used by name

F, I64 = TensorProto.FLOAT, TensorProto.INT64
REPO = Path(__file__).resolve().parent.parent
OPS = {"NonZero", "NonMaxSuppression", "Unique"}
# Every node case of these ops (18 with onnx 1.23: NonMaxSuppression 10, NonZero 1, Unique 7): all pass.
CASES = sorted(c.name for c, _ in collect(OPS))


@pytest.fixture(scope="module")
def node_cases():
    return {c.name: c for c, _ in collect(OPS)}


@pytest.mark.parametrize("name", CASES)
def test_onnx_node_case_fed_at_run_time(name: str, node_cases, tmp_path: Path) -> None:
    case = node_cases[name]
    feeds = package_case(case, tmp_path / "b", mode="runtime")
    _, expected = case.data_sets[0]
    outs = [o.name for o in case.model.graph.output]
    for variant in PORTABLE_AND_VECTOR:
        got = load_bundle(tmp_path / "b", variant).run(feeds)
        assert check_outputs(got, expected, outs) == ("pass", ""), variant


# ---- a detector-like model ----------------------------------------------------------------------------------------

N_BOXES, N_CLASSES = 24, 3


def _detector(run_time_limits: bool = False, center: int = 0) -> onnx.ModelProto:
    """boxes [1, N, 4], scores [1, C, N] -> NonMaxSuppression -> the kept boxes (Gather), their scores (GatherND) and
    classes. run_time_limits: max_output_boxes_per_class, iou_threshold and score_threshold are inputs."""
    lim = ["max_out", "iou", "score_min"]
    nodes = [
        helper.make_node("NonMaxSuppression", ["boxes", "scores", *lim], ["selected"], center_point_box=center),
        helper.make_node("Gather", ["selected", "col2"], ["box_col"], axis=1),
        helper.make_node("Squeeze", ["box_col", "ax1"], ["box_idx"]),
        helper.make_node("Squeeze", ["boxes", "ax0"], ["boxes2"]),
        helper.make_node("Gather", ["boxes2", "box_idx"], ["det_boxes"], axis=0),
        helper.make_node("GatherND", ["scores", "selected"], ["det_scores"]),
        helper.make_node("Gather", ["selected", "col1"], ["det_classes"], axis=1),
    ]
    inits = [numpy_helper.from_array(np.array([2], np.int64), "col2"),
             numpy_helper.from_array(np.array([1], np.int64), "col1"),
             numpy_helper.from_array(np.array([1], np.int64), "ax1"),
             numpy_helper.from_array(np.array([0], np.int64), "ax0")]
    inputs = [helper.make_tensor_value_info("boxes", F, [1, N_BOXES, 4]),
              helper.make_tensor_value_info("scores", F, [1, N_CLASSES, N_BOXES])]
    limits = [np.array([4], np.int64), np.array([0.4], np.float32), np.array([0.25], np.float32)]
    if run_time_limits:
        inputs += [helper.make_tensor_value_info(n, TensorProto.INT64 if k == 0 else F, [1]) for k, n in enumerate(lim)]
    else:
        inits += [numpy_helper.from_array(v, n) for n, v in zip(lim, limits)]
    outputs = [helper.make_tensor_value_info("det_boxes", F, ["n", 4]), helper.make_tensor_value_info("det_scores", F, ["n"]),
               helper.make_tensor_value_info("det_classes", I64, ["n", 1]),
               helper.make_tensor_value_info("selected", I64, ["n", 3])]
    m = helper.make_model(helper.make_graph(nodes, "detector", inputs, outputs, inits),
                          opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m


def _detections(seed: int, run_time_limits: bool = False) -> dict[str, np.ndarray]:
    """Boxes in a few overlapping clusters (corners in either order), scores with ties and some below the threshold."""
    rng = np.random.default_rng(seed)
    centers = rng.uniform(0.2, 0.8, (4, 2))[rng.integers(0, 4, N_BOXES)] + rng.normal(0, 0.03, (N_BOXES, 2))
    size = rng.uniform(0.1, 0.3, (N_BOXES, 2))
    lo, hi = centers - size / 2, centers + size / 2
    boxes = np.concatenate([lo, hi], axis=1)
    flip = rng.random(N_BOXES) < 0.2
    boxes[flip] = boxes[flip][:, [2, 3, 0, 1]]
    scores = np.round(rng.random((1, N_CLASSES, N_BOXES)), 2)   # ties
    feeds = {"boxes": boxes[None].astype(np.float32), "scores": scores.astype(np.float32)}
    if run_time_limits:
        feeds.update(max_out=np.array([int(rng.integers(0, 8))], np.int64),
                     iou=np.array([rng.uniform(0.1, 0.7)], np.float32),
                     score_min=np.array([rng.uniform(0.0, 0.6)], np.float32))
    return feeds


def _same(got: dict, want: dict) -> None:
    for k, w in want.items():
        assert got[k].shape == w.shape and got[k].dtype == w.dtype, (k, got[k].shape, w.shape)
        np.testing.assert_array_equal(got[k], w, err_msg=k)


def _cli_package(model: onnx.ModelProto, tmp: Path, target: str = "web", *extra: str) -> Path:
    src, out = tmp / "model.onnx", tmp / f"bundle_{target}"
    onnx.save(model, src)
    r = subprocess.run([sys.executable, "-m", "packager.cli", str(src), "--target", target, "-o", str(out), *extra],
                       capture_output=True, text=True, cwd=REPO, timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    return out


@pytest.fixture(scope="module")
def detector(tmp_path_factory) -> Path:
    return _cli_package(_detector(run_time_limits=True), tmp_path_factory.mktemp("det"))


def test_detector_manifest_says_the_counts_are_run_time_dims(detector: Path) -> None:
    m = json.loads((detector / "manifest.json").read_text())
    assert m["plan"]["version"] == 2
    shapes = {o["name"]: o["shape"] for o in m["outputs"]}
    assert isinstance(shapes["det_boxes"][0], str) and shapes["det_boxes"][1] == 4
    assert isinstance(shapes["selected"][0], str) and shapes["selected"][1] == 3
    assert Op.NON_MAX_SUPPRESSION in [n.op for n in layout.decode((detector / "model.plan").read_bytes()).nodes]


@pytest.mark.parametrize("center", [0, 1])
def test_detector_constant_limits_under_wasmtime(center: int, tmp_path: Path) -> None:
    model = _detector(center=center)
    out = package(model, target="web", out=tmp_path / "b")
    for variant in PORTABLE_AND_VECTOR:
        b = load_bundle(out, variant)
        for seed in range(5):   # one session: each run sets its own count
            feeds = _detections(seed)
            _same(b.run(feeds), reference_run(model, feeds))


def test_detector_run_time_limits_under_wasmtime(detector: Path) -> None:
    model = _detector(run_time_limits=True)
    counts = set()
    for variant in PORTABLE_AND_VECTOR:
        b = load_bundle(detector, variant)
        for seed in range(8):
            feeds = _detections(seed, run_time_limits=True)
            want = reference_run(model, feeds)
            _same(b.run(feeds), want)
            counts.add(want["selected"].shape[0])
    assert 0 in counts and len(counts) >= 4, counts   # max_out 0 keeps nothing; the counts differ run to run


def test_detector_in_node(detector: Path, tmp_path: Path) -> None:
    from .test_web_dynamic import _node_runs, _outputs
    model = _detector(run_time_limits=True)
    runs = [_detections(seed, run_time_limits=True) for seed in range(4)]
    for build in ("simd", "scalar"):
        res = _node_runs(tmp_path / build, detector, runs, build)
        for feeds, run in zip(runs, res["runs"]):
            _same(_outputs(run), reference_run(model, feeds))


def test_nms_above_its_planned_capacity_stops_the_run(tmp_path: Path) -> None:
    """A run-time max_output_boxes_per_class is planned for every box: an iou_threshold outside [0, 1] is refused."""
    model = _detector(run_time_limits=True)
    b = load_bundle(package(model, target="web", out=tmp_path / "b", verify=False), "simd")
    feeds = _detections(0, run_time_limits=True)
    feeds["iou"] = np.array([1.5], np.float32)
    with pytest.raises(Exception, match="(?i)index"):
        b.run(feeds)
    feeds["iou"] = np.array([0.5], np.float32)
    _same(b.run(feeds), reference_run(model, feeds))   # usable after the refusal


# ---- nodes reading NonZero's and Unique's outputs -------------------------------------------------------------------

def _nonzero_chain() -> onnx.ModelProto:
    """x[nonzero(x)] * 2 (NonZero -> Transpose -> GatherND -> Mul) and the Unique values of x, + 1, with all four
    of Unique's outputs."""
    nodes = [helper.make_node("NonZero", ["x"], ["nz"]),
             helper.make_node("Transpose", ["nz"], ["nzt"], perm=[1, 0]),
             helper.make_node("GatherND", ["x", "nzt"], ["vals"]),
             helper.make_node("Mul", ["vals", "two"], ["vals2"]),
             helper.make_node("Unique", ["x"], ["u", "first", "inverse", "counts"], sorted=0),
             helper.make_node("Add", ["u", "one"], ["u1"])]
    out = [helper.make_tensor_value_info("nz", I64, [2, "n"]), helper.make_tensor_value_info("vals2", F, ["n"]),
           helper.make_tensor_value_info("u1", F, ["u"]), helper.make_tensor_value_info("first", I64, ["u"]),
           helper.make_tensor_value_info("inverse", I64, [20]), helper.make_tensor_value_info("counts", I64, ["u"])]
    m = helper.make_model(helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", F, [4, 5])], out,
                                            [numpy_helper.from_array(np.array(2, np.float32), "two"),
                                             numpy_helper.from_array(np.array(1, np.float32), "one")]),
                          opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m


def test_nodes_after_nonzero_and_unique_run_at_each_count(tmp_path: Path) -> None:
    model = _nonzero_chain()
    out = package(model, target="web", out=tmp_path / "b")
    rng = np.random.default_rng(3)
    xs = [np.zeros((4, 5), np.float32), np.full((4, 5), -0.0, np.float32),
          np.round(rng.standard_normal((4, 5)), 0).astype(np.float32), rng.standard_normal((4, 5)).astype(np.float32),
          np.zeros((4, 5), np.float32)]
    for variant in PORTABLE_AND_VECTOR:
        b = load_bundle(out, variant)
        for x in xs:   # zero non-zeros, all, some, all again, none: the nodes after follow each count
            _same(b.run({"x": x}), reference_run(model, {"x": x}))


# ---- the edge runtimes --------------------------------------------------------------------------------------------

needs_edge = pytest.mark.skipif(shutil.which("aarch64-linux-gnu-gcc") is None or shutil.which("qemu-aarch64") is None,
                                reason="gcc-aarch64-linux-gnu / qemu-user missing")


@needs_edge
def test_edgepack_run_under_qemu_and_the_python_module(tmp_path: Path) -> None:
    import importlib.util
    from packager.targets import edge as E
    from .test_edge_dynamic import _make
    model = _detector(run_time_limits=True)
    bundle = _cli_package(model, tmp_path, "pi5", "--no-verify")   # its own runs below are the check (qemu is slow)
    outs = json.loads((bundle / "manifest.json").read_text())["outputs"]
    feeds = [_detections(seed, run_time_limits=True) for seed in (1, 2)]
    for f in feeds:
        _same(E.run_cli(bundle, f, outs, qemu=E.qemu_cmd("pi5")), reference_run(model, f))
    lib = _make("build/host/libedgepack.so")
    spec = importlib.util.spec_from_file_location("edgepack_runtime", bundle / "edgepack_runtime.py")
    rt = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(rt)
    s = rt.Session(bundle, lib=lib)
    for seed in range(4):
        f = _detections(seed, run_time_limits=True)
        _same(s.run(f), reference_run(model, f))


def test_java_wrapper_returns_the_run_s_dims(tmp_path: Path) -> None:
    if shutil.which("javac") is None or shutil.which("aarch64-linux-gnu-gcc") is None:
        pytest.skip("no JDK or aarch64 toolchain")
    from .test_edge_dynamic import _make, java_case, run_dynamic_session_test
    model = _detector(run_time_limits=True)
    bundle = package(model, target="android", out=tmp_path / "and", verify=False)
    lib = _make("build/host/libedgepack.so")
    names = [o.name for o in model.graph.output]
    cases = []
    for seed in (0, 3):
        feeds = _detections(seed, run_time_limits=True)
        want = reference_run(model, feeds)
        cases.append(java_case(tmp_path / f"case{seed}", list(feeds.values()), [want[n] for n in names]))
    r = run_dynamic_session_test(tmp_path, lib.parent, bundle, *cases)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "OK" in r.stdout


# ---- refusals -----------------------------------------------------------------------------------------------------

def test_inside_a_body_is_refused_naming_the_op(tmp_path: Path) -> None:
    then = helper.make_graph([helper.make_node("NonZero", ["x"], ["t"])], "then", [],
                             [helper.make_tensor_value_info("t", I64, [2, "n"])])
    els = helper.make_graph([helper.make_node("NonZero", ["x"], ["e"])], "else", [],
                            [helper.make_tensor_value_info("e", I64, [2, "n"])])
    g = helper.make_graph([helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=els)], "g",
                          [helper.make_tensor_value_info("c", TensorProto.BOOL, []),
                           helper.make_tensor_value_info("x", F, [2, 3])],
                          [helper.make_tensor_value_info("y", I64, [2, "n"])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    with pytest.raises(PackagerError, match=r"NonZero .*not inside an If/Loop/Scan body"):
        package(m, target="web", out=tmp_path / "b", verify=False)


def test_symbolic_input_dims_are_refused_or_fixed(tmp_path: Path) -> None:
    m = _detector()
    m.graph.input[0].type.tensor_type.shape.dim[1].dim_param = "boxes"
    m.graph.input[1].type.tensor_type.shape.dim[2].dim_param = "boxes"
    with pytest.raises(PackagerError, match=r"NonMaxSuppression .*fixed input shapes only"):
        package(m, target="web", out=tmp_path / "d", dynamic=True, verify=False)
    out = package(m, target="web", out=tmp_path / "f", input_shapes={"boxes": (1, N_BOXES, 4),
                                                                      "scores": (1, N_CLASSES, N_BOXES)})
    feeds = _detections(4)
    _same(load_bundle(out, "simd").run(feeds), reference_run(_detector(), feeds))


def test_a_version_1_plan_with_such_a_kernel_is_refused_at_open() -> None:
    """The kernel sets dims only a version-2 core re-derives: in a static plan it would leave stale dims."""
    t = [layout.TensorEntry(TensorProto.FLOAT, layout.ARENA, 0, 24, (2, 3)),
         layout.TensorEntry(TensorProto.INT64, layout.ARENA, 64, 96, (2, 6))]
    plan = layout.Plan(t, [layout.NodeEntry(int(Op.NONZERO), [0], [1], [], 0, 0)], [0], [1], b"", 192)
    with pytest.raises(Exception, match="(?i)op"):
        WasmPlan(BUILD / "edgepack.wasm", layout.encode(plan))


def test_corrupted_data_dependent_plans_under_asan(asan_driver: Path, tmp_path: Path) -> None:   # noqa: F811
    """Single-byte mutants of two such plans (their kernels' words, capacities, lifetimes, the nodes after them) run
    by the core under ASan/UBSan: refused or run, never a memory error."""
    plans = []
    for name, model in (("nms", _detector()), ("chain", _nonzero_chain())):
        plan = (package(model, target="web", out=tmp_path / name, verify=False) / "model.plan").read_bytes()
        plans += [plan] + _mutants(plan, 200, seed=len(name))
    lines = _run_asan(asan_driver, plans, tmp_path, timeout=900)
    assert len(lines) == len(plans) and lines[0].startswith("0 ") and lines[201].startswith("0 "), lines[:3]


def test_shapes_of_counts_are_read_at_run_time_or_refused(tmp_path: Path) -> None:
    """Shape(NonZero(x)) is the run's count, never the capacity folded at package time; a shape computed from it
    while resolving (ConstantOfShape) is refused."""
    x = helper.make_tensor_value_info("x", F, [3, 4])
    shape = [helper.make_node("NonZero", ["x"], ["nz"]), helper.make_node("Shape", ["nz"], ["s"])]
    m = helper.make_model(helper.make_graph(shape, "g", [x], [helper.make_tensor_value_info("s", I64, [2])]),
                          opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    b = load_bundle(package(m, target="web", out=tmp_path / "s", verify=False), "simd")
    for x_ in (np.eye(3, 4, dtype=np.float32), np.zeros((3, 4), np.float32)):
        _same(b.run({"x": x_}), reference_run(m, {"x": x_}))
    fill = helper.make_node("ConstantOfShape", ["s"], ["y"], value=helper.make_tensor("v", F, [1], [1.0]))
    m = helper.make_model(helper.make_graph(shape + [fill], "g", [x], [helper.make_tensor_value_info("y", F, [2, "n"])]),
                          opset_imports=[helper.make_opsetid("", 13)])
    with pytest.raises(PackagerError, match=r"ConstantOfShape .*known only at run time"):
        package(m, target="web", out=tmp_path / "c", verify=False)
