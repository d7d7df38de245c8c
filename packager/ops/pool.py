"""Pooling: MaxPool, AveragePool, LpPool -> POOL; GlobalAveragePool, GlobalMaxPool -> GLOBAL_POOL.

All ONNX attribute defaults and auto_pad are resolved here into explicit per-dim (kernel, stride, dilation,
pad_begin, pad_end), then ceil_mode as a last word: the kernel takes output sizes from the output shape, the core's
shape function (wasm_kernels/src/shape/shape_conv.c, ep_shape_POOL) computes them from those words."""
from __future__ import annotations

import numpy as np
import onnx

from ..lowering import LowerCtx, lowers
from ..plan.opcodes import Op
from . import conv   # THREAD_SLOTS, read when lowering (tests vary it)
from .pool_indices import emit_max_indices

POOL_MAX, POOL_AVG, POOL_LP = 0, 1, 2
LIMIT = 1 << 24   # the kernel's bound on kernel/stride/dilation/pads


def _s(v: object) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def pool_geometry(ctx: LowerCtx, node: onnx.NodeProto, in_sp: list[int], kernel: list[int], strides: list[int],
                  dil: list[int], pads: list[int], auto_pad: str, ceil_mode: int) -> tuple[list[int], list[int], list[int]]:
    """(out sizes, pad_begin, pad_end) per spatial dim, as ONNX (and onnxruntime) define them."""
    nsp = len(in_sp)
    outs, pb, pe = [], [], []
    for i in range(nsp):
        ext = (kernel[i] - 1) * dil[i] + 1
        if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            if strides[i] > 1 and not ctx.fixed(node.input[0], 2 + i):   # the pads would depend on a run-time dim
                raise ctx.unsupported(node, f"auto_pad={auto_pad} with stride {strides[i]} along a dim known only "
                                            "at run time")
            if ceil_mode:
                raise ctx.unsupported(node, "ceil_mode=1 together with auto_pad SAME_* is not supported")
            o = -(-in_sp[i] // strides[i])
            total = max(0, (o - 1) * strides[i] + ext - in_sp[i])
            small = total // 2
            b = small if auto_pad == "SAME_UPPER" else total - small
            outs.append(o); pb.append(b); pe.append(total - b)
            continue
        b, e = (0, 0) if auto_pad == "VALID" else (pads[i], pads[i + nsp])
        span = in_sp[i] + b + e - ext
        if span < 0:
            raise ctx.unsupported(node, f"kernel extent {ext} larger than the padded input along spatial dim {i}")
        if ceil_mode:
            o = -(-span // strides[i]) + 1
            if (o - 1) * strides[i] >= in_sp[i] + b:   # the last window must start inside the input or left pad
                o -= 1
        else:
            o = span // strides[i] + 1
        outs.append(o); pb.append(b); pe.append(e)
    return outs, pb, pe


@lowers("MaxPool", "AveragePool", "LpPool")
def lower_pool(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    x, y = node.input[0], node.output[0]
    if len(node.output) > 1 and node.output[1] and node.op_type != "MaxPool":
        raise ctx.unsupported(node, f"{node.op_type} has one output")
    ctx.check_dtypes(node, [np.float32], [x, y])
    a = ctx.attrs(node)
    xs, ys = ctx.shape(x), ctx.shape(y)
    nsp = len(xs) - 2
    if not 1 <= nsp <= 3:
        raise ctx.unsupported(node, f"input rank {len(xs)}: only 1 to 3 spatial dims are supported")
    if "kernel_shape" not in a or len(a["kernel_shape"]) != nsp:
        raise ctx.unsupported(node, "kernel_shape missing or not matching the input rank")
    kernel = [int(k) for k in a["kernel_shape"]]
    strides = [int(s) for s in a.get("strides", [1] * nsp)]
    dil = [int(d) for d in a.get("dilations", [1] * nsp)]
    pads = [int(p) for p in a.get("pads", [0] * 2 * nsp)]
    auto_pad = _s(a.get("auto_pad", "NOTSET"))
    ceil_mode = int(a.get("ceil_mode", 0))
    cip = int(a.get("count_include_pad", 0))
    if len(strides) != nsp or len(dil) != nsp or len(pads) != 2 * nsp:
        raise ctx.unsupported(node, "strides/dilations/pads length does not match the input rank")
    if auto_pad not in ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"):
        raise ctx.unsupported(node, f"auto_pad={auto_pad}")
    if min(kernel + strides + dil) < 1 or min(pads) < 0 or max(kernel + strides + dil + pads) > LIMIT:
        raise ctx.unsupported(node, "kernel/strides/dilations must be >= 1 and pads >= 0 (and all < 2^24)")
    kind = {"MaxPool": POOL_MAX, "AveragePool": POOL_AVG, "LpPool": POOL_LP}[node.op_type]
    p = 0
    if kind == POOL_LP:
        p = a.get("p", 2)
        if not isinstance(p, int) or not 1 <= p <= 64:
            raise ctx.unsupported(node, f"p={p}: only integer p in 1..64 is supported")
        p = int(p)
        cip = 0
    if cip not in (0, 1):
        raise ctx.unsupported(node, f"count_include_pad={cip}")
    if node.op_type == "MaxPool" and a.get("storage_order", 0) not in (0, 1):
        raise ctx.unsupported(node, "storage_order must be 0 or 1")
    outs, pb, pe = pool_geometry(ctx, node, list(xs[2:]), kernel, strides, dil, pads, auto_pad, ceil_mode)
    if tuple(ys) != (xs[0], xs[1], *outs):
        raise ctx.unsupported(node, f"output shape {ys} differs from the computed {(xs[0], xs[1], *outs)}")
    params: list[int] = [kind, nsp, cip, p]
    for i in range(nsp):
        params += [kernel[i], strides[i], dil[i], pb[i], pe[i]]
    params.append(ceil_mode)   # (0 with SAME_*: the resolved pads give its size)
    # a row per thread (pool.c ep_scratch_POOL)
    ctx.emit(Op.POOL, [x], [y], params, scratch_bytes=4 * (xs[-1] + 8) * conv.THREAD_SLOTS)
    if len(node.output) > 1 and node.output[1]:   # MaxPool's Indices
        emit_max_indices(ctx, node, kernel, strides, dil, pb, outs, int(a.get("storage_order", 0)))


@lowers("GlobalAveragePool", "GlobalMaxPool")
def lower_global_pool(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    x, y = node.input[0], node.output[0]
    ctx.check_dtypes(node, [np.float32], [x, y])
    xs = ctx.shape(x)
    if len(xs) < 2:
        raise ctx.unsupported(node, "input rank must be at least 2")
    ctx.emit(Op.GLOBAL_POOL, [x], [y], [POOL_MAX if node.op_type == "GlobalMaxPool" else POOL_AVG])
