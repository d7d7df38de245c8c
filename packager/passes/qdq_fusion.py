"""QDQ pattern matching: the DequantizeLinear -> op -> QuantizeLinear groups of a QDQ model become single
integer kernels (packager/ops/quant.py emits them).

  DQ(x), DQ(w) [, DQ(b)] -> Conv / Gemm / MatMul [-> Relu | Clip | LeakyRelu] [-> Q]
      QCONV / QDEPTHWISE_CONV / QMATMUL with the activation in the requantization epilogue; without
      a Q the kernel writes float32 (e.g. a classifier's last Gemm).
  DQ(a) + DQ(b) [-> activation] -> Q      QADD (a residual Add between quantized tensors)
  DQ(x) -> MaxPool -> Q (same scale/zp)   QMAXPOOL on the 8-bit values (max commutes with DQ)
  DQ(x) -> Reshape/Flatten/... -> Q (same scale/zp)   the same view of the 8-bit tensor (no kernel)
  DQ(x) -> elementwise float ops [-> Q -> DQ ...] -> Q   QLUT, a 256-entry table (a SiLU; qdq_lut.py)

The weights' DequantizeLinear nodes were folded by analyze (Graph.dq_sources keeps them), so the integer
weights and scales are recovered from there. x must come from a runtime DequantizeLinear with a
per-tensor scale. A DQ whose every consumer was fused disappears; anything else (GlobalAveragePool, ...
between a DQ and a Q) runs as standalone DEQUANTIZE_LINEAR -> float kernel -> QUANTIZE_LINEAR.

Groups are returned as QStep records at the position of their last node; lower() calls their emit_plan.
They carry op_type/input/output like a NodeProto so the epilogue fusion pass can look past them."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import onnx
from onnx import helper

from ..analyze import Graph
from ..ort_isolated import OrtFailure
from ..passes.fuse_epilogue import ACT_CLIP, ACT_LEAKY_RELU, ACT_RELU, activation_of
from ..ops.quant import QOut, QParams, emit_qadd, emit_qconv, emit_qlut, emit_qmatmul, emit_qmaxpool
from .qdq_lut import find_regions, tables
from .uses import consumers_of

FUSABLE_ACTS = (ACT_RELU, ACT_LEAKY_RELU, ACT_CLIP)
VIEWS = ("Reshape", "Flatten", "Squeeze", "Unsqueeze")   # DQ -> view -> Q with one quantization: a view of the bytes
Q8 = (np.dtype(np.uint8), np.dtype(np.int8))


@dataclass
class QStep:
    op_type: str
    name: str
    input: list[str]
    output: list[str]
    head: onnx.NodeProto
    emit_plan: Callable = field(repr=False, default=None)
    domain: str = ""
    attribute: tuple = ()


@dataclass
class _ConstQ:
    values: np.ndarray
    scale: np.ndarray
    zp: np.ndarray | None
    axis: int


def fuse_qdq(nodes: list, graph: Graph) -> list:
    consts = graph.consts
    producers = {o: n for n in nodes for o in getattr(n, "output", [])}
    consumers = consumers_of(nodes)
    graph_out = set(graph.outputs)

    def attrs(n: onnx.NodeProto) -> dict:
        return {a.name: helper.get_attribute_value(a) for a in n.attribute}

    def scalar_const(name: str) -> np.ndarray | None:
        if not name:
            return None
        c = consts.get(name)
        return np.asarray(c).reshape(()) if c is not None and np.asarray(c).size == 1 else None

    def scalar_q(n: onnx.NodeProto) -> bool:
        """A Q or DQ with constant per-tensor float32 scale and zero point, its quantized side 8-bit."""
        s = scalar_const(n.input[1]) if len(n.input) > 1 else None
        z = scalar_const(n.input[2]) if len(n.input) > 2 and n.input[2] else np.zeros((), np.uint8)
        q8 = graph.dtypes.get(n.input[0] if n.op_type == "DequantizeLinear" else n.output[0]) in (2, 3)
        return s is not None and z is not None and s.dtype == np.float32 and q8

    def runtime_dq(name: str) -> tuple[str, QParams] | None:
        p = producers.get(name)
        if p is None or not isinstance(p, onnx.NodeProto) or p.op_type != "DequantizeLinear":
            return None
        x = p.input[0]
        s = scalar_const(p.input[1])
        zname = p.input[2] if len(p.input) > 2 else ""
        z = scalar_const(zname) if zname else np.zeros((), np.uint8)
        dt = graph.dtypes.get(x)
        if s is None or z is None or s.dtype != np.float32 or dt not in (2, 3) or x in consts:
            return None
        return x, QParams(float(s), int(z), np.dtype(np.uint8 if dt == 2 else np.int8))

    def const_dq(name: str) -> _ConstQ | None:
        src = graph.dq_sources.get(name)
        if src is None or src.input[0] not in consts or src.input[1] not in consts:
            return None
        v = np.asarray(consts[src.input[0]])
        s = np.asarray(consts[src.input[1]])
        z = np.asarray(consts[src.input[2]]) if len(src.input) > 2 and src.input[2] in consts else None
        if v.dtype not in Q8 or s.dtype != np.float32 or int(attrs(src).get("block_size", 0)):
            return None
        axis = int(attrs(src).get("axis", 1))
        return _ConstQ(v, s.reshape(-1), None if z is None else z.reshape(-1), axis + v.ndim if axis < 0 else axis)

    def sole(name: str):
        c = consumers.get(name, [])
        return c[0] if len(c) == 1 and name not in graph_out and isinstance(c[0], onnx.NodeProto) else None

    def q_after(name: str) -> tuple[onnx.NodeProto, QParams] | None:
        q = sole(name)
        if q is None or q.op_type != "QuantizeLinear":
            return None
        s = scalar_const(q.input[1])
        z = scalar_const(q.input[2]) if len(q.input) > 2 and q.input[2] else np.zeros((), np.uint8)
        dt = graph.dtypes.get(q.output[0])
        if s is None or z is None or s.dtype != np.float32 or dt not in (2, 3):
            return None
        return q, QParams(float(s), int(z), np.dtype(np.uint8 if dt == 2 else np.int8))

    def tail(y: str) -> tuple[list, tuple, QOut]:
        """The activation and Q after value y: (absorbed nodes, activation, output)."""
        absorbed, act = [], (0, [])
        a = sole(y)
        if a is not None and len(a.output) == 1:
            spec = activation_of(a, consts, graph.opset)
            if spec is not None and spec[0] in FUSABLE_ACTS:
                absorbed.append(a)
                act = spec
                y = a.output[0]
        q = q_after(y)
        if q is not None:
            absorbed.append(q[0])
            return absorbed, act, QOut(q[0].output[0], q[1])
        return absorbed, act, QOut(y)

    steps: dict[int, QStep] = {}        # id(last node) -> step
    taken: set[int] = set()

    def group(head: onnx.NodeProto, extra: list, inputs: list[str], out: QOut, emit: Callable) -> None:
        members = [head, *extra]
        step = QStep("QDQ:" + head.op_type, head.name or head.output[0], [i for i in inputs if i], [out.name], head)
        step.emit_plan = emit
        steps[id(members[-1])] = step
        taken.update(id(m) for m in members)

    regions = find_regions(nodes, graph, producers, consumers, scalar_q)
    try:
        luts = tables(regions, graph) if regions else []
    except OrtFailure:   # the regions then run as their float ops, slower but the same
        luts = []
    for r, t in zip(regions, luts):
        def emit(ctx, r=r, t=t):
            emit_qlut(ctx, r.x, t, r.out)
        q = r.members[0]   # the final Q: the region's last node
        step = QStep("QDQ:QLUT", q.name or r.out, [r.x], [r.out], q)
        step.emit_plan = emit
        steps[id(q)] = step
        taken.update(id(m) for m in r.members)

    for n in nodes:
        if not isinstance(n, onnx.NodeProto) or id(n) in taken or n.domain not in ("", "ai.onnx"):
            continue
        if n.op_type == "Conv" and len(n.input) >= 2:
            xd, wd = runtime_dq(n.input[0]), const_dq(n.input[1])
            if xd is None or wd is None or wd.values.ndim not in (3, 4):
                continue
            if wd.scale.size != 1 and wd.axis != 0:
                continue
            bias = consts.get(n.input[2]) if len(n.input) > 2 and n.input[2] else None
            if len(n.input) > 2 and n.input[2] and bias is None:
                continue
            extra, act, out = tail(n.output[0])
            conv = onnx.NodeProto()
            conv.CopyFrom(n)
            conv.output[0] = out.name

            def emit(ctx, conv=conv, xd=xd, wd=wd, bias=bias, out=out, act=act):
                emit_qconv(ctx, conv, xd[0], xd[1], wd.values, wd.scale, wd.zp, bias, out, act)
            group(n, extra, [xd[0]], out, emit)
        elif n.op_type in ("Gemm", "MatMul") and len(n.input) >= 2:
            xd = runtime_dq(n.input[0])
            if xd is None:
                continue
            a = attrs(n)
            bias = None
            if n.op_type == "Gemm":
                if int(a.get("transA", 0)) or float(a.get("alpha", 1.0)) != 1.0:
                    continue
                if len(n.input) > 2 and n.input[2]:
                    bias = consts.get(n.input[2])
                    if bias is None or float(a.get("beta", 1.0)) != 1.0 or np.asarray(bias).size not in (1, graph.shapes[n.output[0]][-1]):
                        continue
            trans_b = n.op_type == "Gemm" and int(a.get("transB", 0))
            wd = const_dq(n.input[1])
            wrt = None
            if wd is not None:
                if wd.values.ndim != 2 or (wd.scale.size != 1 and wd.axis != (0 if trans_b else 1)):
                    continue
                wvals = wd.values.T if trans_b else wd.values
                w_arg, wscale, wzp = np.ascontiguousarray(wvals), wd.scale, wd.zp
            else:
                wrt = runtime_dq(n.input[1])
                if wrt is None or trans_b:
                    continue
                w_arg, wscale, wzp = wrt[0], np.array([wrt[1].scale]), np.array([wrt[1].zp])
            extra, act, out = tail(n.output[0])
            node = onnx.NodeProto()
            node.CopyFrom(n)
            node.output[0] = out.name

            def emit(ctx, node=node, xd=xd, w_arg=w_arg, wscale=wscale, wzp=wzp, bias=bias, out=out, act=act):
                b = None if bias is None else np.broadcast_to(np.asarray(bias, np.float32).reshape(-1),
                                                               (ctx.shape(out.name)[-1],))
                emit_qmatmul(ctx, node, xd[0], xd[1], w_arg, wscale, wzp, b, out, act)
            group(n, extra, [xd[0], wrt[0] if wrt else ""], out, emit)
        elif n.op_type == "MaxPool" and (len(n.output) == 1 or not n.output[1]):
            xd = runtime_dq(n.input[0])
            q = q_after(n.output[0])
            if xd is None or q is None or len(graph.shapes.get(n.input[0], ())) != 4:
                continue
            if (q[1].scale, q[1].zp, q[1].dtype) != (xd[1].scale, xd[1].zp, xd[1].dtype):
                continue   # Q(max(DQ(x))) == max(x) needs the same quantization on both sides

            def emit(ctx, n=n, xd=xd, out=q[0].output[0]):
                emit_qmaxpool(ctx, n, xd[0], out)
            group(n, [q[0]], [xd[0]], QOut(q[0].output[0], q[1]), emit)
        elif n.op_type in VIEWS and n.input and len(n.output) == 1:
            xd = runtime_dq(n.input[0])
            q = q_after(n.output[0])
            if xd is None or q is None or (q[1].scale, q[1].zp, q[1].dtype) != (xd[1].scale, xd[1].zp, xd[1].dtype):
                continue
            view = onnx.NodeProto()   # the same view of the 8-bit tensor: no kernel, the bytes are aliased
            view.CopyFrom(n)
            view.input[0], view.output[0] = xd[0], q[0].output[0]

            def emit(ctx, view=view):
                from ..ops.identity import lower_view
                lower_view(ctx, view)
            group(n, [q[0]], [xd[0], *view.input[1:]], QOut(q[0].output[0], q[1]), emit)
        elif n.op_type == "Add" and len(n.input) == 2:
            ad, bd = runtime_dq(n.input[0]), runtime_dq(n.input[1])
            shp = graph.shapes.get(n.output[0])
            if ad is None or bd is None or graph.shapes.get(ad[0]) != shp or graph.shapes.get(bd[0]) != shp:
                continue
            extra, act, out = tail(n.output[0])
            if out.q is None:
                continue

            def emit(ctx, ad=ad, bd=bd, out=out, act=act):
                emit_qadd(ctx, ad[0], ad[1], bd[0], bd[1], out, act)
            group(n, extra, [ad[0], bd[0]], out, emit)

    if not steps:
        return nodes
    # Drop the DQ nodes nothing reads any more.
    kept = [n for n in nodes if id(n) not in taken]
    used = set(graph_out)
    for n in kept:
        used.update(i for i in n.input if i)
    for s in steps.values():
        used.update(s.input)
    out = []
    for n in nodes:
        if id(n) in steps:
            out.append(steps[id(n)])
        elif id(n) in taken:
            continue
        elif isinstance(n, onnx.NodeProto) and n.op_type == "DequantizeLinear" and not (set(n.output) & used):
            continue
        else:
            out.append(n)
    return out
