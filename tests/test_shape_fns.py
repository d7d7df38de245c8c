"""The kernels' shape and scratch functions (wasm_kernels/src/ep_shape.h) against static plans.

Every conformance case and benchmark model the packager accepts is packaged as a static (v1) plan, whose dims
and scratch sizes the packager computed and onnxruntime's shapes confirm. The C core then re-derives every
node's output dims and scratch bytes through the kernel's shape functions (`ep_shapes_consistent`, host
build) and must agree exactly: the run-time shape resolution of plan v2 uses these same functions. The same models
lowered as dynamic plans (every dim marked as known only at run time) check the block sizes such a plan leaves to
the kernels (nt, nb = 0) against the packager's."""
from __future__ import annotations

import ctypes
import tempfile
from collections import Counter
from pathlib import Path

import pytest

from packager.plan import layout
from packager.plan.opcodes import Op
from packager.toolchain import ensure_host_lib

from .conftest import model_path

CTX_BYTES = 4096   # >= sizeof(ep_ctx)

# Kernels that must have a shape function, each seen in a plan whose every node agreed (a missing or
# unregistered function fails here). RESIZE stays static: its tables are per output coordinate.
SHAPE_OPS = [Op.UNARY, Op.BINARY, Op.WHERE, Op.CAST, Op.CONCAT, Op.SPLIT, Op.SLICE, Op.GATHER, Op.TRANSPOSE,
             Op.COPY, Op.PAD, Op.EXPAND, Op.SOFTMAX, Op.LAYERNORM, Op.REDUCE, Op.BATCHNORM, Op.GLOBAL_POOL,
             Op.QUANTIZE_LINEAR, Op.DEQUANTIZE_LINEAR, Op.DYNAMIC_QUANTIZE_LINEAR, Op.QADD, Op.QMAXPOOL,
             Op.AXIS, Op.SCATTER, Op.GATHER_ND]
# Plan v2 kernels, absent from packaged plans: the fuzzer's hand-built seeds hold them (wasm_kernels/fuzz/
# make_corpus.py, v2_kernel_plans), and tests/test_dims_kernels.py tests them in C.
V2_OPS = [Op.SHAPE, Op.VIEW, Op.RANGE, Op.CONSTANT_OF_SHAPE]
V2_SEEDS = Path(__file__).resolve().parents[1] / "wasm_kernels" / "fuzz" / "corpus"


# Kernels that must have a shape function (and, where they use scratch, a scratch function); each must appear in a
# checked plan node of the conformance cases or the models below.
CONV_LINALG_POOL = [Op.CONV, Op.DEPTHWISE_CONV, Op.WINOGRAD_CONV, Op.WINOGRAD_CONV_F4, Op.WINOGRAD_FILTER,
                    Op.CONV_TRANSPOSE, Op.GEMM, Op.MATMUL, Op.POOL, Op.QCONV, Op.QDEPTHWISE_CONV, Op.QMATMUL,
                    Op.QWINOGRAD_CONV, Op.ATTENTION]
MUST_HAVE_SHAPE = [*CONV_LINALG_POOL]


class ShapeChecker:
    def __init__(self) -> None:
        self.lib = ctypes.CDLL(str(ensure_host_lib("host")))
        self.lib.ep_open.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint32]
        self.lib.ep_shapes_consistent.argtypes = [ctypes.c_void_p] + [ctypes.POINTER(ctypes.c_uint32)] * 3
        self.lib.ep_shape_for.argtypes = [ctypes.c_uint32]
        self.lib.ep_shape_for.restype = ctypes.POINTER(ctypes.c_void_p)   # {shape, scratch}

    def has_shape_fn(self, op: int) -> bool:
        entry = self.lib.ep_shape_for(op)
        return bool(entry) and bool(entry[0])

    def check(self, plan: bytes) -> tuple[int, int, int, int]:
        """(status, node, what, nodes checked) for one plan."""
        buf = ctypes.create_string_buffer(len(plan) + 64)
        base = ctypes.addressof(buf)
        p = (base + 63) // 64 * 64
        ctypes.memmove(p, plan, len(plan))
        ctx = ctypes.create_string_buffer(CTX_BYTES)
        s = self.lib.ep_open(ctx, p, len(plan))
        assert s == 0, f"plan refused: status {s}"
        node, what, checked = ctypes.c_uint32(), ctypes.c_uint32(), ctypes.c_uint32()
        s = self.lib.ep_shapes_consistent(ctx, ctypes.byref(node), ctypes.byref(what), ctypes.byref(checked))
        return s, node.value, what.value, checked.value


def _describe(plan: layout.Plan, node: int, what: int) -> str:
    n = plan.nodes[node]
    outs = [plan.tensors[t].dims for t in n.outputs]
    kind = {1: "dims differ", 2: "scratch differs", 3: "shape() refused"}.get(what, f"what={what}")
    return f"node {node} {Op(n.op).name}: {kind}; plan outputs {outs}, scratch {n.scratch_bytes}, params {n.params}"


@pytest.fixture(scope="module")
def checker() -> ShapeChecker:
    return ShapeChecker()


def _conformance_plans():
    from .conformance.runner import collect, package_case
    from packager.errors import PackagerError
    with tempfile.TemporaryDirectory() as d:
        for case, op in collect():
            out = Path(d) / "b"
            try:
                package_case(case, out)
            except PackagerError:
                continue
            except Exception:   # noqa: BLE001 - the conformance tests report these
                continue
            yield case.name, (out / "model.plan").read_bytes()


def test_listed_ops_have_shape_functions(checker: ShapeChecker) -> None:
    assert [op.name for op in MUST_HAVE_SHAPE if not checker.has_shape_fn(op)] == []


@pytest.fixture(scope="module")
def conformance(checker: ShapeChecker) -> tuple[list[str], Counter]:
    """(disagreements, kernel -> nodes in plans whose every node agreed) over the conformance plans."""
    bad, per_op = [], Counter()
    for name, plan in _conformance_plans():
        dec = layout.decode(plan)
        if dec.version != layout.VERSION:   # If/Loop/Scan plans: version 2, the core resolves them itself
            continue
        s, node, what, checked = checker.check(plan)
        if s != 0:
            bad.append(f"{name}: {_describe(dec, node, what)}")
            continue
        for n in dec.nodes:
            per_op[Op(n.op)] += 1
    return bad, per_op


def test_shape_functions_agree_on_conformance_plans(conformance: tuple[list[str], Counter]) -> None:
    bad, per_op = conformance
    assert not bad, "\n".join(bad[:40])
    assert sum(per_op.values()) > 500
    # the conformance cases' share of CONV_LINALG_POOL (the models below bring the rest; CONV too: every
    # conformance Conv has one channel, which is lowered to DEPTHWISE_CONV; QCONV and QMATMUL too: the integer
    # cases give weights, scales and zero points as graph inputs, which take the exact float32 path)
    want = [Op.DEPTHWISE_CONV, Op.CONV_TRANSPOSE, Op.GEMM, Op.MATMUL, Op.POOL]
    assert [op.name for op in want if not per_op[op]] == []


# (name, quantization): the float benchmark models, and int8 ones (bench/qdq_models.py) for the integer kernels
MODELS = [("cifar10net", None), ("mobilenetv2", None), ("resnet18", None), ("minilm_like", None),
          ("cifar10net", "fusion"), ("mobilenetv2", "fusion"), ("minilm_like", "dynamic")]


def _int8_plans(tmp: Path) -> list[bytes]:
    """QDQ models whose plans hold QADD (resnet18's residual adds) and QMAXPOOL (cifar10net's pools, and one in
    ceil mode with uneven pads)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    from bench.qdq_models import make
    from packager import package
    plans = []
    for name in ("cifar10net", "resnet18"):
        model_path(name)
        out = package(str(make(name, "fusion")), out=tmp / name, verify=False, dynamic=False)
        plans.append((out / "model.plan").read_bytes())
    inits = [numpy_helper.from_array(np.array(0.05, np.float32), "s"), numpy_helper.from_array(np.array(3, np.int8), "z")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "s", "z"], ["xd"]),
             helper.make_node("MaxPool", ["xd"], ["p"], kernel_shape=[3, 2], strides=[2, 3], pads=[1, 0, 0, 1], ceil_mode=1),
             helper.make_node("QuantizeLinear", ["p", "s", "z"], ["yq"]),
             helper.make_node("DequantizeLinear", ["yq", "s", "z"], ["y"])]
    g = helper.make_graph(nodes, "qmaxpool", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 9, 13])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    m = onnx.shape_inference.infer_shapes(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
    plans.append((package(m, out=tmp / "qmp", verify=False) / "model.plan").read_bytes())
    return plans


def test_every_listed_kernel_has_a_checked_shape_function(checker: ShapeChecker, conformance, tmp_path: Path) -> None:
    """Each kernel of SHAPE_OPS has a registered shape function that agreed with the packager on some plan."""
    seen = Counter(conformance[1])
    for plan in _int8_plans(tmp_path) + [p.read_bytes() for p in sorted(V2_SEEDS.glob("v2_*.plan"))]:
        s, node, what, _ = checker.check(plan)
        dec = layout.decode(plan)
        assert s == 0, _describe(dec, node, what)
        seen.update(Op(n.op) for n in dec.nodes)
    missing = [op.name for op in SHAPE_OPS + V2_OPS if not checker.has_shape_fn(op)]
    assert not missing, f"no shape function registered for {missing}"
    unseen = [op.name for op in SHAPE_OPS + V2_OPS if not seen[op]]
    assert not unseen, f"never checked on a plan: {unseen}"


def _package_model(name: str, quant: str | None, out: Path) -> bytes:
    from packager import package
    kw = {"input_shapes": {"input_ids": (1, 128)}} if name == "minilm_like" else {}
    path = model_path(name)
    if quant:
        from bench.qdq_models import make
        path = make(name, quant)
    return (package(str(path), target="web", out=out, verify=False, dynamic=False, **kw) / "model.plan").read_bytes()


@pytest.fixture(scope="module")
def model_plans(tmp_path_factory) -> dict[tuple[str, str | None], bytes]:
    tmp = tmp_path_factory.mktemp("models")
    return {m: _package_model(*m, tmp / f"{m[0]}_{m[1]}") for m in MODELS}


@pytest.mark.parametrize("model", MODELS, ids=[f"{n}-{q}" if q else n for n, q in MODELS])
def test_shape_functions_agree_on_models(checker: ShapeChecker, model_plans, model) -> None:
    plan = model_plans[model]
    s, node, what, checked = checker.check(plan)
    assert s == 0, _describe(layout.decode(plan), node, what)


def test_models_use_every_listed_kernel(model_plans) -> None:
    ops = {n.op for plan in model_plans.values() for n in layout.decode(plan).nodes}
    want = set(CONV_LINALG_POOL) - {Op.CONV_TRANSPOSE}   # (ConvTranspose: the conformance cases)
    assert [op.name for op in want if op not in ops] == []


# ------------------------------------------------------------------------------- dynamic (plan v2) lowering
# A dynamic plan leaves the block sizes derived from the shapes to the core (CONV's, WINOGRAD's, QCONV's, QWINOGRAD's
# nt, QMATMUL's nb and ATTENTION's block_rows written as 0) and picks kernels by channels and windows only. Lowered
# with every dim marked as known only at run time (at the static shapes of the model), its scratch sizes, computed
# by the packager from its own block sizes, must equal what the C scratch functions derive: the same rule in C and
# in Python.

@pytest.fixture()
def all_dynamic(monkeypatch) -> None:
    """Every dim known only at run time but the innermost (channels / hidden size, which no dynamic plan varies:
    LayerNormalization refuses run-time normalized dims, its scale and bias being stored for them)."""
    from packager.lowering import LowerCtx

    def fixed(self, name, axis=None):
        rank = len(self.shape(name))
        return axis is not None and rank > 0 and axis % rank == rank - 1

    monkeypatch.setattr(LowerCtx, "dynamic", property(lambda self: True))
    monkeypatch.setattr(LowerCtx, "fixed", fixed)
    # these plans stay version 1 (the v1 assembly, every dim in the plan): views stay plain aliases
    monkeypatch.setattr("packager.ops.identity._runtime_view", lambda ctx, node: False)


DERIVED = {Op.CONV: 12, Op.WINOGRAD_CONV: 11, Op.WINOGRAD_CONV_F4: 11, Op.QCONV: 11, Op.QWINOGRAD_CONV: 10, Op.QMATMUL: 5,
           Op.ATTENTION: 2}


@pytest.mark.parametrize("model", [("cifar10net", None), ("mobilenetv2", None), ("resnet18", None),
                                   ("cifar10net", "fusion"), ("minilm_like", None), ("minilm_like", "dynamic")],
                         ids=lambda m: "-".join(filter(None, m)))
def test_dynamic_lowering_derives_block_sizes_in_c(checker: ShapeChecker, all_dynamic, model, tmp_path: Path) -> None:
    plan = _package_model(*model, tmp_path / "b")
    s, node, what, checked = checker.check(plan)
    dec = layout.decode(plan)
    assert s == 0, _describe(dec, node, what)
    words = [(Op(n.op), n.params[DERIVED[n.op]]) for n in dec.nodes if n.op in DERIVED and n.params[DERIVED[n.op]] == 0]
    assert words, "no block size left to the core"


@pytest.mark.parametrize("name", ["cifar10net", "resnet18"])
def test_dynamic_lowering_runs_like_onnxruntime(all_dynamic, name: str, tmp_path: Path) -> None:
    """The models lowered as dynamic plans (derived block sizes, F(4x4) by channel pairs) run as onnxruntime does."""
    import json
    from packager import package
    out = package(str(model_path(name)), target="web", out=tmp_path / "b", verify=True, dynamic=False)
    assert json.loads((out / "manifest.json").read_text())["verification"]["max_abs_diff"] < 1e-4


def _attention(lq: int, lk: int):
    """softmax(Q Kt / 4) V on inputs Q [1, 2, Lq, 8], Kt [1, 2, 8, Lk], V [1, 2, Lk, 8]: one ATTENTION."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper
    f32 = lambda n, s: helper.make_tensor_value_info(n, TensorProto.FLOAT, s)   # noqa: E731
    nodes = [helper.make_node("MatMul", ["q", "kt"], ["s"]), helper.make_node("Div", ["s", "c"], ["d"]),
             helper.make_node("Softmax", ["d"], ["p"], axis=-1), helper.make_node("MatMul", ["p", "v"], ["y"])]
    g = helper.make_graph(nodes, "att", [f32("q", [1, 2, lq, 8]), f32("kt", [1, 2, 8, lk]), f32("v", [1, 2, lk, 8])],
                          [f32("y", [1, 2, lq, 8])], [numpy_helper.from_array(np.array(4, np.float32), "c")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("lq,lk", [(1, 1), (7, 5), (40, 40), (3, 3000), (1500, 1500), (700, 47), (5000, 4)])
def test_attention_block_rows_rule_in_c(checker: ShapeChecker, all_dynamic, lq: int, lk: int, tmp_path: Path) -> None:
    """ATTENTION's block_rows left to the core (0) sizes the scratch as the packager's block_rows(Lq, Lk) does."""
    from packager import package
    out = package(_attention(lq, lk), target="web", out=tmp_path / "b", verify=False, dynamic=False)
    plan = (out / "model.plan").read_bytes()
    dec = layout.decode(plan)
    assert [n.params[2] for n in dec.nodes if n.op == Op.ATTENTION] == [0]
    s, node, what, _ = checker.check(plan)
    assert s == 0, _describe(dec, node, what)


def test_shape_functions_survive_hostile_nodes() -> None:
    """Random ranks, dims, dtypes, absent inputs and parameter words through the shape and scratch functions of
    CONV_LINALG_POOL (wasm_kernels/tests/shape_hostile.c, ASan + UBSan): the core calls them before any check()."""
    import subprocess
    from packager.toolchain import BUILD, KERNELS
    subprocess.run(["make", "-s", "-C", str(KERNELS), "build/asan/shape_hostile"], check=True, capture_output=True)
    r = subprocess.run([str(BUILD / "asan" / "shape_hostile"), "300000"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    calls, accepted = map(int, r.stdout.split())
    assert calls == 300000 and accepted > 1000   # (some random nodes are valid: their dims were computed)
