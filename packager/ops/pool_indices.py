"""MaxPool's Indices output as existing kernels (SegNet-style unpooling): each output position's window as a
package-time table of pixel positions, one GATHER of X's windows (padding reads -inf), ArgMax over the taps (the
first maximum, as onnxruntime), then the chosen tap's flat index (row-major, or column-major per plane with
storage_order 1) from a second table, plus each (n, c) plane's offset. The values still come from POOL."""
from __future__ import annotations

import itertools
import math

import numpy as np
import onnx

from ..lowering import LowerCtx
from .builder import Builder


def emit_max_indices(ctx: LowerCtx, node: onnx.NodeProto, kernel: list[int], strides: list[int], dil: list[int],
                     pads_begin: list[int], outs: list[int], storage_order: int) -> None:
    x, ind = node.input[0], node.output[1]
    xs = ctx.shape(x)
    if not ctx.fixed(x):
        raise ctx.unsupported(node, "the Indices output needs the input's shape at package time (give --input-shape)")
    n, c, sp = xs[0], xs[1], list(xs[2:])
    plane, n_out, taps = math.prod(sp), math.prod(outs), math.prod(kernel)
    where = np.full((n_out, taps), plane, np.int64)   # row-major pixel read by each tap; `plane`: padding (-inf)
    value = np.zeros((n_out, taps), np.int64)         # the index reported for it
    col_strides = [math.prod(sp[:i]) for i in range(len(sp))]   # storage_order 1: the first spatial dim fastest
    for o, out_at in enumerate(itertools.product(*map(range, outs))):
        for t, tap in enumerate(itertools.product(*map(range, kernel))):
            at = [q * s - p + k * d for q, s, p, k, d in zip(out_at, strides, pads_begin, tap, dil)]
            if all(0 <= v < e for v, e in zip(at, sp)):
                where[o, t] = np.ravel_multi_index(at, sp)
                value[o, t] = sum(v * s for v, s in zip(at, col_strides)) if storage_order else where[o, t]
    b = Builder(ctx, node)
    rows = b.op("Reshape", [x, b.const([n * c, plane], np.int64)], (n * c, plane))
    padded = b.op("Concat", [rows, b.const(np.full((n * c, 1), -np.inf, np.float32))], (n * c, plane + 1), axis=1)
    windows = b.op("Gather", [padded, b.const(where, np.int64)], (n * c, n_out, taps), axis=1)
    best = b.op("ArgMax", [windows], (n * c, n_out, 1), np.int64, axis=2, keepdims=1)
    flat = b.op("Add", [best, b.const(np.arange(n_out).reshape(1, n_out, 1) * taps, np.int64)], (n * c, n_out, 1),
                np.int64)
    chosen = b.op("Gather", [b.const(value.reshape(-1), np.int64), flat], (n * c, n_out, 1), np.int64, axis=0)
    offsets = b.const(np.arange(n * c).reshape(n * c, 1, 1) * plane, np.int64)
    total = b.op("Add", [chosen, offsets], (n * c, n_out, 1), np.int64)
    b.op("Reshape", [total, b.const([n, c, *outs], np.int64)], (n, c, *outs), np.int64, out=ind)
