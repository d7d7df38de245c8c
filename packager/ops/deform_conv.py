"""DeformConv (2-D) as existing kernels, the way onnx's reference defines it: every kernel tap of every output
position samples X bilinearly (zeros outside, align_corners) at its place on the regular grid plus the learned
offset. Per offset group, the places become one GridSample grid [N, taps * OH, OW, 2] (offsets moved into (x, y)
order and normalized by elementwise ops), GridSample's lowering samples that group's channels, the mask (when
given) scales them, and the sampled columns [N, C * taps, OH * OW] meet W in one MATMUL per conv group."""
from __future__ import annotations

import numpy as np
import onnx

from ..lowering import LowerCtx, lowers
from .builder import Builder


@lowers("DeformConv")
def lower_deform_conv(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    x, w, off = node.input[:3]
    bias = node.input[3] if len(node.input) > 3 and node.input[3] else ""
    mask = node.input[4] if len(node.input) > 4 and node.input[4] else ""
    y = node.output[0]
    ctx.check_dtypes(node, [np.float32])
    a = ctx.attrs(node)
    xs, ws, os_ = ctx.shape(x), ctx.shape(w), ctx.shape(off)
    if len(xs) != 4 or len(ws) != 4 or len(os_) != 4:
        raise ctx.unsupported(node, f"X of shape {list(xs)}: only 2-D DeformConv (X [N, C, H, W])")
    if not all(ctx.fixed(t) for t in (x, w, off, *(t for t in (bias, mask) if t))):
        raise ctx.unsupported(node, "every input's shape must be known at package time (give --input-shape)")
    n, c, h, wd = xs
    oc, cpg, kh, kw = ws
    group, og = int(a.get("group", 1)), int(a.get("offset_group", 1))
    sh, sw = [int(v) for v in a.get("strides", [1, 1])]
    dh, dw = [int(v) for v in a.get("dilations", [1, 1])]
    pt, pl = [int(v) for v in a.get("pads", [0, 0, 0, 0])][:2]
    k = kh * kw
    _, _, oh, ow = os_
    if list(a.get("kernel_shape", [kh, kw])) != [kh, kw] or c != cpg * group or oc % group or c % og or \
            os_[1] != og * 2 * k or min(h, wd) < 2:
        raise ctx.unsupported(node, f"X {list(xs)}, W {list(ws)}, offset {list(os_)}, group={group}, offset_group={og}: "
                                    "expected C = W's channels * group, offsets [N, offset_group * 2 * kH * kW, OH, OW] "
                                    "and an input plane of at least 2 x 2")
    b = Builder(ctx, node)
    i64 = lambda v: b.const(v, np.int64)  # noqa: E731
    # the regular grid: (h, w) of tap (ki, kj) at output (i, j), as [1, 1, K, OH, OW, 2]
    hh = -pt + sh * np.arange(oh).reshape(1, oh, 1) + dh * (np.arange(k) // kw).reshape(k, 1, 1)
    ww = -pl + sw * np.arange(ow).reshape(1, 1, ow) + dw * (np.arange(k) % kw).reshape(k, 1, 1)
    base = np.stack(np.broadcast_arrays(hh, ww), axis=-1).reshape(1, 1, k, oh, ow, 2).astype(np.float32)
    o6 = b.op("Reshape", [off, i64([n, og, k, 2, oh, ow])], (n, og, k, 2, oh, ow))
    pos = b.bin("Add", b.op("Transpose", [o6], (n, og, k, oh, ow, 2), perm=[0, 1, 2, 4, 5, 3]), b.const(base))
    scale = np.array([2.0 / (h - 1), 2.0 / (wd - 1)], np.float32).reshape(1, 1, 1, 1, 1, 2)
    norm = b.bin("Add", b.bin("Mul", pos, b.const(scale)), -1.0)
    grid = b.op("Gather", [norm, i64([1, 0])], (n, og, k, oh, ow, 2), axis=5)   # GridSample reads (x, y)
    cg = c // og
    m5 = b.op("Reshape", [mask, i64([n, og, k, oh, ow])], (n, og, k, oh, ow)) if mask else ""
    cols = []
    for g in range(og):
        gg = b.op("Reshape", [b.op("Gather", [grid, i64([g])], (n, 1, k, oh, ow, 2), axis=1), i64([n, k * oh, ow, 2])],
                  (n, k * oh, ow, 2))
        xg = x if og == 1 else b.op("Slice", [x, i64([g * cg]), i64([(g + 1) * cg]), i64([1])], (n, cg, h, wd))
        s = b.op("GridSample", [xg, gg], (n, cg, k * oh, ow), mode="linear", padding_mode="zeros", align_corners=1)
        if mask:
            mg = b.op("Reshape", [b.op("Gather", [m5, i64([g])], (n, 1, k, oh, ow), axis=1), i64([n, 1, k * oh, ow])],
                      (n, 1, k * oh, ow))
            s = b.bin("Mul", s, mg)
        cols.append(s)
    sampled = cols[0] if og == 1 else b.op("Concat", cols, (n, c, k * oh, ow), axis=1)
    cols4 = b.op("Reshape", [sampled, i64([n, group, cpg * k, oh * ow])], (n, group, cpg * k, oh * ow))
    w3 = b.op("Reshape", [w, i64([group, oc // group, cpg * k])], (group, oc // group, cpg * k))
    out = b.op("MatMul", [w3, cols4], (n, group, oc // group, oh * ow))
    if bias:
        out = b.bin("Add", b.op("Reshape", [out, i64([n, oc, oh * ow])], (n, oc, oh * ow)),
                    b.op("Reshape", [bias, i64([1, oc, 1])], (1, oc, 1)))
    b.op("Reshape", [out, i64([n, oc, oh, ow])], (n, oc, oh, ow), out=y)
