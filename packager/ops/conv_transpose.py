"""ConvTranspose -> CONV_TRANSPOSE. output_shape / auto_pad / output_padding are resolved here into
pad_begin and end_adjust (output_padding - pad_end) per spatial dim (the ONNX spec rule); the kernel reads output
sizes from Y's shape, the core's shape function computes them from those words (ep_shape_CONV_TRANSPOSE).
W keeps its ONNX layout [Cin, Cout/group, k...], which the scatter kernel reads directly."""
from __future__ import annotations

import numpy as np
import onnx

from ..lowering import LowerCtx, lowers
from ..plan.opcodes import Op

LIMIT = 1 << 24


def _s(v: object) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


@lowers("ConvTranspose")
def lower_conv_transpose(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    x, w = node.input[0], node.input[1]
    b = node.input[2] if len(node.input) > 2 and node.input[2] else None
    y = node.output[0]
    ctx.check_dtypes(node, [np.float32])
    a = ctx.attrs(node)
    xs, ws, ys = ctx.shape(x), ctx.shape(w), ctx.shape(y)
    nsp = len(xs) - 2
    if not 1 <= nsp <= 3:
        raise ctx.unsupported(node, f"input rank {len(xs)}: only 1 to 3 spatial dims are supported")
    if len(ws) != len(xs):
        raise ctx.unsupported(node, f"weight rank {len(ws)} does not match input rank {len(xs)}")
    group = int(a.get("group", 1))
    kernel = list(ws[2:])
    if "kernel_shape" in a and [int(k) for k in a["kernel_shape"]] != kernel:
        raise ctx.unsupported(node, f"kernel_shape {list(a['kernel_shape'])} differs from the weight shape {kernel}")
    strides = [int(v) for v in a.get("strides", [1] * nsp)]
    dil = [int(v) for v in a.get("dilations", [1] * nsp)]
    opad = [int(v) for v in a.get("output_padding", [0] * nsp)]
    pads = [int(v) for v in a.get("pads", [0] * 2 * nsp)]
    auto_pad = _s(a.get("auto_pad", "NOTSET"))
    if len(strides) != nsp or len(dil) != nsp or len(opad) != nsp or len(pads) != 2 * nsp:
        raise ctx.unsupported(node, "strides/dilations/output_padding/pads length does not match the input rank")
    if auto_pad not in ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"):
        raise ctx.unsupported(node, f"auto_pad={auto_pad}")
    if min(strides + dil) < 1 or max(strides + dil) > LIMIT or group < 1 or xs[1] % group or ws[0] != xs[1]:
        raise ctx.unsupported(node, "invalid strides/dilations/group for these shapes")
    full = [strides[i] * (xs[2 + i] - 1) + opad[i] + (kernel[i] - 1) * dil[i] + 1 for i in range(nsp)]
    if "output_shape" in a or auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        if "output_shape" in a:
            if not all(ctx.fixed(x, 2 + i) for i in range(nsp)):
                raise ctx.unsupported(node, "output_shape with an input size known only at run time")
            os_ = [int(v) for v in a["output_shape"]]
            os_ = os_[-nsp:] if len(os_) >= nsp else os_
            if len(os_) != nsp:
                raise ctx.unsupported(node, f"output_shape {os_} does not match the input rank")
        else:
            os_ = [xs[2 + i] * strides[i] for i in range(nsp)]
        begin = []
        for i in range(nsp):
            total = full[i] - os_[i]
            pb = total // 2 if auto_pad == "SAME_UPPER" else total - total // 2   # the spec's rule
            if total < 0 and pb != 0:
                # onnxruntime clamps a negative total padding to 0, the spec's rule gives a negative
                # begin pad: the runtimes disagree, so refuse rather than guess
                raise ctx.unsupported(node, f"output size {os_[i]} exceeds the full transposed extent {full[i]} "
                                            f"by more than the spec and onnxruntime agree on")
            begin.append(pb)
        out = os_
    else:
        if auto_pad == "VALID":
            pads = [0] * 2 * nsp
        begin = pads[:nsp]
        out = [full[i] - pads[i] - pads[nsp + i] for i in range(nsp)]
    if any(abs(p) > LIMIT for p in begin):
        raise ctx.unsupported(node, "pads beyond 2^24")
    want = (xs[0], ws[1] * group, *out)
    if tuple(ys) != want:
        raise ctx.unsupported(node, f"output shape {ys} differs from the computed {want}")
    if b is not None and int(np.prod(ctx.shape(b), dtype=np.int64)) != want[1]:
        raise ctx.unsupported(node, f"bias has shape {ctx.shape(b)}, expected {want[1]} values")
    params: list[int] = [nsp, group]
    for i in range(nsp):
        params += [strides[i], dil[i], begin[i]]
    # end_adjust: out - (stride (in - 1) + dilation (k - 1) + 1 - pad_begin), which no input size changes (SAME:
    # stride - dilation (k - 1) - 1 + pad_begin; explicit pads: output_padding - pad_end)
    adjust = [out[i] - (strides[i] * (xs[2 + i] - 1) + dil[i] * (kernel[i] - 1) + 1 - begin[i]) for i in range(nsp)]
    if any(abs(v) > LIMIT for v in adjust):
        raise ctx.unsupported(node, "output_padding / pads beyond 2^24")
    params += adjust
    sx = strides[-1]
    # phase-split accumulator for one output channel when the innermost stride is > 1 (ep_scratch_CONV_TRANSPOSE)
    scratch = 4 * sx * int(np.prod(out[:-1], dtype=np.int64)) * (-(-out[-1] // sx)) if sx > 1 else 0
    ctx.emit(Op.CONV_TRANSPOSE, [x, w, b] if b else [x, w], [y], params, scratch_bytes=scratch)
