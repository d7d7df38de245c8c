"""Regenerate the fuzzer's seed corpus (fuzz/corpus/): small plans covering every kernel of the core.

    python wasm_kernels/fuzz/make_corpus.py [--out wasm_kernels/fuzz/corpus]

Seeds come from the ONNX backend node test cases (tiny models with fixed inputs): each is packaged as
tests/conformance/runner.py does, and its model.plan kept if it is small (<= MAX_PLAN bytes) and adds
a kernel parameter set not seen yet; at most PER_KERNEL seeds per kernel id, total under 1 MB. Fails
if some kernel id of wasm_kernels/include/ep_ops.h has no seed. Seeds named regress_* (the inputs of past
fuzzing findings, added by hand) are kept."""
from __future__ import annotations

import argparse
import hashlib
import struct
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
MAX_PLAN = 20 * 1024   # the smallest Winograd plan (16x16 channels) is ~19 KB
PER_KERNEL = 16
MAX_TOTAL = 900 * 1024


def plan_nodes(plan: bytes) -> list[tuple[int, bytes]]:
    """(kernel id, node entry + its param words) per node: what makes two seeds different to the core."""
    n_nodes, nodes_off = struct.unpack_from("<I", plan, 20)[0], struct.unpack_from("<I", plan, 36)[0]
    return [(struct.unpack_from("<H", plan, nodes_off + 32 * i)[0], plan[nodes_off + 32 * i: nodes_off + 32 * i + 32])
            for i in range(n_nodes)]


def extra_models() -> list:
    """Hand-made tiny models for kernels the node tests barely reach (multi-channel and fused Conv, Gemm, norms)."""
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(0)

    def model(nodes, ins, outs, inits):
        import onnx
        probe = helper.make_model(helper.make_graph(nodes, "p", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in ins],
                                                    [], [numpy_helper.from_array(v, n) for n, v in inits.items()]),
                                  opset_imports=[helper.make_opsetid("", 17)])
        shapes = {vi.name: [d.dim_value for d in vi.type.tensor_type.shape.dim]
                  for vi in onnx.shape_inference.infer_shapes(probe).graph.value_info}
        outs = [(n, shapes[n]) for n in outs]
        g = helper.make_graph(nodes, "seed", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in ins],
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outs],
                              [numpy_helper.from_array(rng.standard_normal(v.shape).astype(np.float32)
                                                       if not v.any() else v, n) for n, v in inits.items()])
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])

    w = lambda *s: np.zeros(s, np.float32)  # noqa: E731 - shapes only; values are drawn in model()
    return [
        model([helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["r"]),
               helper.make_node("Add", ["r", "x2"], ["y"])], [("x", [1, 3, 6, 6]), ("x2", [1, 4, 6, 6])], ["y"],
              {"w": w(4, 3, 3, 3), "b": w(4)}),
        model([helper.make_node("Conv", ["x", "w"], ["y"], strides=[2, 2], dilations=[1, 1], group=2)],
              [("x", [1, 4, 7, 7])], ["y"], {"w": w(6, 2, 3, 3)}),
        model([helper.make_node("Conv", ["x", "w", "b"], ["y"])], [("x", [2, 8, 3, 3])], ["y"], {"w": w(16, 8, 1, 1), "b": w(16)}),
        # depthwise 3x3 with 6 channels (4 as lanes + 2 phased), stride 1 with a fused residual + clip, stride 2 with pads
        model([helper.make_node("Conv", ["x", "w", "b"], ["c"], group=6, pads=[1, 1, 1, 1]), helper.make_node("Add", ["c", "x"], ["a"]),
               helper.make_node("Clip", ["a", "lo", "hi"], ["y"])], [("x", [1, 6, 9, 7])], ["y"],
              {"w": w(6, 1, 3, 3), "b": w(6), "lo": np.float32(0.0), "hi": np.float32(6.0)}),
        model([helper.make_node("Conv", ["x", "w"], ["y"], group=6, strides=[2, 2], pads=[1, 0, 1, 1])], [("x", [2, 6, 9, 8])], ["y"],
              {"w": w(6, 1, 3, 3)}),
        # 3x3 stride 1 with >= 16 channels: the Winograd kernel, with fused residual + relu
        model([helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Add", ["c", "x"], ["a"]),
               helper.make_node("Relu", ["a"], ["y"])], [("x", [1, 16, 5, 5])], ["y"], {"w": w(16, 16, 3, 3), "b": w(16)}),
        model([helper.make_node("Conv", ["x", "w"], ["y"], pads=[2, 1], dilations=[2])], [("x", [1, 3, 9])], ["y"], {"w": w(5, 3, 3)}),
        model([helper.make_node("Gemm", ["x", "w", "b"], ["y"], transB=1, alpha=0.5)], [("x", [3, 10])], ["y"],
              {"w": w(7, 10), "b": w(7)}),
        model([helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Add", ["m", "b"], ["y"])],
              [("x", [2, 3, 10])], ["y"], {"w": w(10, 9), "b": w(9)}),
        model([helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"])], [("x", [2, 3, 4, 4])], ["y"],
              {"s": w(3), "b": w(3), "m": w(3), "v": np.ones(3, np.float32)}),
        model([helper.make_node("LayerNormalization", ["x", "s", "b"], ["y"], axis=-1)], [("x", [2, 5, 8])], ["y"],
              {"s": w(8), "b": w(8)}),
        model([helper.make_node("MaxPool", ["x"], ["p"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
               helper.make_node("GlobalAveragePool", ["p"], ["y"])], [("x", [1, 3, 8, 8])], ["y"], {}),
        *qdq_models(),
        # a transformer FFN block: MatMul + bias + GELU (the Erf chain), MatMul + bias + residual: fused MATMULs
        model([helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Add", ["h", "b1"], ["hb"]),
               helper.make_node("Div", ["hb", "r2"], ["d"]), helper.make_node("Erf", ["d"], ["e"]),
               helper.make_node("Add", ["e", "one"], ["p"]), helper.make_node("Mul", ["hb", "p"], ["m"]),
               helper.make_node("Mul", ["m", "half"], ["g"]), helper.make_node("MatMul", ["g", "w2"], ["o"]),
               helper.make_node("Add", ["o", "b2"], ["ob"]), helper.make_node("Add", ["ob", "x"], ["y"])],
              [("x", [1, 5, 8])], ["y"], {"w1": w(8, 12), "b1": w(12), "w2": w(12, 8), "b2": w(8),
                                          "r2": np.float32(np.sqrt(2.0)), "one": np.float32(1.0), "half": np.float32(0.5)}),
        # M >= 16 rows: constant B stored in 16-column panels (MATMUL's 5th param), with and without an epilogue
        model([helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Add", ["h", "b1"], ["hb"]),
               helper.make_node("MatMul", ["hb", "w2"], ["y"])],
              [("x", [1, 17, 8])], ["y"], {"w1": w(8, 20), "b1": w(20), "w2": w(20, 6)}),
        # attention: MatMul(Q, Kt) -> Softmax -> MatMul(., V) as one ATTENTION kernel (query rows in blocks)
        model([helper.make_node("MatMul", ["q", "kt"], ["s"]), helper.make_node("Softmax", ["s"], ["p"], axis=-1),
               helper.make_node("MatMul", ["p", "v"], ["y"])], [("q", [1, 2, 5, 4])], ["y"], {"kt": w(1, 2, 4, 7), "v": w(1, 2, 7, 3)}),
        # 16 tiles of 4x4: Winograd F(4x4, 3x3) (main() lifts its channel threshold), its U made by a
        # WINOGRAD_FILTER prologue node
        model([helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 0, 1]), helper.make_node("Relu", ["c"], ["y"])],
              [("x", [1, 16, 15, 14])], ["y"], {"w": w(16, 16, 3, 3), "b": w(16)}),
        # masked attention: a causal constant (the kernel's causal words) and a mask fed at run time (its 4th input)
        model([helper.make_node("MatMul", ["q", "kt"], ["s"]), helper.make_node("Add", ["s", "tri"], ["st"]),
               helper.make_node("Add", ["st", "m"], ["sm"]), helper.make_node("Softmax", ["sm"], ["p"], axis=-1),
               helper.make_node("MatMul", ["p", "v"], ["y"])], [("q", [1, 2, 5, 4]), ("m", [1, 1, 1, 7])], ["y"],
              {"kt": w(1, 2, 4, 7), "v": w(1, 2, 7, 3),
               "tri": np.triu(np.full((5, 7), np.finfo(np.float32).min, np.float32), 3).reshape(1, 1, 5, 7)}),
    ]


def qdq_models() -> list:
    """QDQ graphs for the int8 kernels the node tests do not produce: a depthwise conv with relu
    (QDEPTHWISE_CONV), a residual add (QADD) and a max pool (QMAXPOOL), between Q and DQ nodes; a 3x3 conv
    (QWINOGRAD_CONV); a SiLU as onnxruntime exports it (QLUT)."""
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(1)
    c = lambda a, n: numpy_helper.from_array(np.asarray(a), n)  # noqa: E731
    q = lambda x, s, z, y: [helper.make_node("QuantizeLinear", [x, s, z], [y + "q"]),  # noqa: E731
                            helper.make_node("DequantizeLinear", [y + "q", s, z], [y])]
    inits = [c(np.float32(0.02), "s"), c(np.int8(0), "z"), c(rng.integers(-127, 128, (4, 1, 3, 3)).astype(np.int8), "wq"),
             c(np.full(4, 0.01, np.float32), "ws"), c(np.zeros(4, np.int8), "wz")]
    nodes = [*q("x", "s", "z", "xd"), helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["w"], axis=0),
             helper.make_node("Conv", ["xd", "w"], ["cv"], group=4, pads=[1, 1, 1, 1]), helper.make_node("Relu", ["cv"], ["r"]),
             *q("r", "s", "z", "rd"), helper.make_node("Add", ["rd", "xd"], ["a"]), *q("a", "s", "z", "ad"),
             helper.make_node("MaxPool", ["ad"], ["mp"], kernel_shape=[2, 2], pads=[0, 0, 1, 1]), *q("mp", "s", "z", "y")]
    g = helper.make_graph(nodes, "qdq", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 5, 5])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 5, 5])], inits)
    # a 16 -> 16 channel 3x3 conv with relu (QWINOGRAD_CONV: the float path's Winograd threshold is 16 channels)
    winits = [c(np.float32(0.02), "s"), c(np.uint8(128), "z"), c(rng.integers(-127, 128, (16, 16, 3, 3)).astype(np.int8), "wq"),
              c(np.full(16, 0.01, np.float32), "ws"), c(np.zeros(16, np.int8), "wz")]
    wnodes = [*q("x", "s", "z", "xd"), helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["w"], axis=0),
              helper.make_node("Conv", ["xd", "w"], ["cv"], pads=[1, 0, 1, 1]), helper.make_node("Relu", ["cv"], ["r"]),
              *q("r", "s", "z", "y")]
    wg = helper.make_graph(wnodes, "qwino", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 5, 4])],
                           [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 5, 3])], winits)
    snodes = [*q("x", "s", "z", "xd"), helper.make_node("Sigmoid", ["xd"], ["sg"]), *q("sg", "s", "z", "sgd"),
              helper.make_node("Mul", ["xd", "sgd"], ["m"]), *q("m", "s", "z", "y")]
    sg = helper.make_graph(snodes, "qsilu", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 5, 5])],
                           [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 5, 5])], inits[:2])
    return [helper.make_model(x, opset_imports=[helper.make_opsetid("", 17)]) for x in (g, wg, sg)]


def v2_kernel_plans() -> dict[str, bytes]:
    """Hand-built static plans for the plan v2 kernels (SHAPE, VIEW, RANGE, CONSTANT_OF_SHAPE) and EXPAND with its
    shape input, which no packaged model holds yet: their shape inputs are weights, so check() validates the
    output dims against the values as in a resolved plan."""
    from packager.plan import layout
    from packager.plan.opcodes import Op
    A, W = layout.ARENA, layout.WEIGHTS
    F32, I64 = 1, 7
    weights = bytearray()

    def weight(a: np.ndarray) -> tuple[int, int]:
        at = len(weights)
        weights.extend(a.tobytes() + b"\0" * (-a.nbytes % 64))
        return at, a.nbytes

    def t(dtype: int, storage: int, offset: int, dims: tuple, size: int = 4) -> layout.TensorEntry:
        return layout.TensorEntry(dtype, storage, offset, int(np.prod(dims, dtype=np.int64)) * size, dims)

    # x [2,3,4] -> SHAPE, Flatten(axis 2), Unsqueeze(1) -> Squeeze(all 1s), Reshape to (4, -1) by a weight
    shp = weight(np.array([4, -1], np.int64))
    tensors = [t(F32, A, 0, (2, 3, 4)), t(I64, A, 128, (3,), 8), t(F32, A, 256, (6, 4)), t(F32, A, 384, (2, 1, 3, 4)),
               t(F32, A, 512, (2, 3, 4)), layout.TensorEntry(I64, W, shp[0], shp[1], (2,)), t(F32, A, 640, (4, 6))]
    nodes = [layout.NodeEntry(Op.SHAPE, [0], [1], [0, 2**31 - 1]), layout.NodeEntry(Op.VIEW, [0], [2], [1, 2, 0]),
             layout.NodeEntry(Op.VIEW, [0], [3], [3, 0, 1, 1]), layout.NodeEntry(Op.VIEW, [3], [4], [2, 0, 0]),
             layout.NodeEntry(Op.VIEW, [0, 5], [6], [0, 0, 0])]
    views = layout.encode(layout.Plan(tensors, nodes, [0], [1, 2, 4, 6], bytes(weights), 768))
    # RANGE int64 (2, 11, 3) and float32 (1, 2, 0.25); CONSTANT_OF_SHAPE [2, 3] of 1.5; EXPAND x [3,1] to [2, 3, 4]
    weights.clear()
    r = [weight(np.array(v, dt)) for v, dt in ((2, np.int64), (11, np.int64), (3, np.int64),
                                                (1, np.float32), (2, np.float32), (0.25, np.float32))]
    cs, es = weight(np.array([2, 3], np.int64)), weight(np.array([2, 3, 4], np.int64))
    tensors = [t(F32, A, 0, (3, 1))] + [layout.TensorEntry(I64 if i < 3 else F32, W, o, n, ()) for i, (o, n) in enumerate(r)]
    tensors += [layout.TensorEntry(I64, W, cs[0], cs[1], (2,)), layout.TensorEntry(I64, W, es[0], es[1], (3,)),
                t(I64, A, 64, (3,), 8), t(F32, A, 128, (4,)), t(F32, A, 192, (2, 3)), t(F32, A, 256, (2, 3, 4))]
    nodes = [layout.NodeEntry(Op.RANGE, [1, 2, 3], [9], []), layout.NodeEntry(Op.RANGE, [4, 5, 6], [10], []),
             layout.NodeEntry(Op.CONSTANT_OF_SHAPE, [7], [11], [layout.f32_bits(1.5), 0]),
             layout.NodeEntry(Op.EXPAND, [0, 8], [12], [])]
    ranges = layout.encode(layout.Plan(tensors, nodes, [0], [9, 10, 11, 12], bytes(weights), 384))
    return {"v2_shape_view.plan": views, "v2_range_fill_expand.plan": ranges}


class _Case:
    """A hand-made model with the shape of an ONNX backend test case."""
    def __init__(self, name: str, m) -> None:
        self.name, self.model = name, m
        init = {i.name for i in m.graph.initializer}
        ins = [np.zeros([d.dim_value for d in vi.type.tensor_type.shape.dim], np.float32)
               for vi in m.graph.input if vi.name not in init]
        self.data_sets = [(ins, [])]


def package_case(case, out: Path) -> bytes | None:
    """The case's plan, packaged exactly as the conformance runner does; None when it is refused."""
    from tests.conformance.runner import package_case as package_like_runner
    if not case.data_sets:
        return None
    try:
        package_like_runner(case, out)
    except Exception:  # noqa: BLE001 - refused cases are simply not seeds
        return None
    return (out / "model.plan").read_bytes()


def dynamic_plans(tmp: Path) -> dict[str, bytes]:
    """Version-2 plans (shapes resolved at run time), packaged: free and bounded dims, shape arithmetic run while
    resolving (SHAPE -> GATHER -> CONCAT -> VIEW), views of run-time dims, nodes after a data-dependent one (their
    dims re-derived while running)."""
    from packager.api import package
    from tests.test_data_dependent import _detector, _nonzero_chain
    from tests.test_dynamic_shapes import _elementwise_model, _reshape_model
    out = {}
    for name, model, kw in [("dyn_elementwise", _elementwise_model(), {"dynamic": True}),
                            ("dyn_bounded", _elementwise_model(), {"input_shapes": {"x": ((1, 4), (1, 64), 8)}}),
                            ("dyn_reshape", _reshape_model(), {"dynamic": True}),
                            ("dd_nms_gather", _detector(run_time_limits=True), {}),
                            ("dd_nonzero_unique", _nonzero_chain(), {})]:
        plan = (package(model, "web", tmp / name, verify=False, **kw) / "model.plan").read_bytes()
        out[f"{name}-{hashlib.sha1(plan).hexdigest()[:16]}.plan"] = plan
    return out


def value_input_plans(tmp: Path) -> dict[str, bytes]:
    """Version-2 plans with value inputs (their values decide shapes; the harness writes them before resolving): the
    kernels' forms that read them (REDUCE's axes, VIEW's Squeeze/Unsqueeze axes, SLICE, PAD, SPLIT, AXIS's CumSum
    axis), packaged from tests/test_value_inputs.py's models."""
    from packager.api import package
    from tests.test_value_inputs import CASES
    out = {}
    for name in ("reduce_sum", "unsqueeze", "slice", "pad", "split", "cumsum"):
        plan = (package(CASES[name][0](), "web", tmp / name, dynamic=True, verify=False) / "model.plan").read_bytes()
        out[f"values_{name}-{hashlib.sha1(plan).hexdigest()[:16]}.plan"] = plan
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=ROOT / "wasm_kernels" / "fuzz" / "corpus")
    a = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    import packager.ops.conv as conv
    from packager.plan.opcodes import Op
    conv.WINOGRAD_F4_MIN_CHANNEL_PAIRS = 1   # F(4x4) on 16 channels: a seed under MAX_PLAN
    from tests.conformance.runner import collect
    per_kernel: dict[int, int] = defaultdict(int)
    seen_nodes: set[bytes] = set()
    seeds: dict[str, bytes] = {}
    total = 0
    with tempfile.TemporaryDirectory() as tmp:
        cases = [_Case(f"test_extra{i}_seed", m) for i, m in enumerate(extra_models())] + [c for c, _ in collect(None)]
        for case in cases:
            plan = package_case(case, Path(tmp) / "b")
            if plan is None or len(plan) > MAX_PLAN or total + len(plan) > MAX_TOTAL:
                continue
            nodes = plan_nodes(plan)
            # node entries differ in ids/offsets too; key on kernel id + param word count + the case's op
            keys = {(k, case.name.split("_")[1], e[12:16]) for k, e in nodes}
            if not [key for key in keys if per_kernel[key[0]] < PER_KERNEL and key not in seen_nodes]:
                continue
            seen_nodes |= keys
            for k in {k for k, _ in nodes}:
                per_kernel[k] += 1
            name = hashlib.sha1(plan).hexdigest()[:16]
            seeds[f"{case.name[5:40]}-{name}.plan"] = plan
            total += len(plan)
        # a plan with prologue nodes (node flag bit 0: float16 weights widened once in ep_bind)
        from packager.api import package
        from tests.test_control_flow import _loop_model   # a LOOP read at run time (the node cases' Loops unroll or fold)
        loop = (package(_loop_model(100.0), "web", Path(tmp) / "loop", verify=False) / "model.plan").read_bytes()
        seeds[f"control_loop-{hashlib.sha1(loop).hexdigest()[:16]}.plan"] = loop
        fp16 = (package(extra_models()[5], "web", Path(tmp) / "fp16", quantize="fp16", verify=False) / "model.plan").read_bytes()
        seeds[f"fp16_prologue-{hashlib.sha1(fp16).hexdigest()[:16]}.plan"] = fp16
        total += len(fp16)
        for name, plan in {**dynamic_plans(Path(tmp)), **value_input_plans(Path(tmp))}.items():   # version 2
            seeds[name] = plan
            total += len(plan)
        for name, plan in v2_kernel_plans().items():   # kernels no packaged model holds yet
            seeds[name] = plan
            total += len(plan)
            for k, _ in plan_nodes(plan):
                per_kernel[k] += 1
    from packager.plan.opspec import NO_KERNEL
    missing = [op.name for op in Op if op.value not in per_kernel and op not in NO_KERNEL]
    a.out.mkdir(parents=True, exist_ok=True)
    for old in a.out.glob("*.plan"):
        if not old.name.startswith("regress_"):   # hand-made regression seeds (past findings) stay
            old.unlink()
    for name, plan in sorted(seeds.items()):
        (a.out / name).write_bytes(plan)
    print(f"{len(seeds)} seeds, {total} bytes in {a.out}; per kernel: "
          + ", ".join(f"{Op(k).name}={n}" for k, n in sorted(per_kernel.items())))
    if missing:
        print(f"no seed for kernel(s): {', '.join(missing)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
