"""Data movement: Concat, Split, Slice, Gather, GatherElements, Transpose, Pad, Expand, Tile,
DepthToSpace, SpaceToDepth. Every ONNX default and opset difference is resolved here; the kernels
(wasm_kernels/src/kernels/data.c) get explicit per-dimension parameters."""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import onnx

from ..errors import PackagerError
from ..lowering import LowerCtx, Tensor, lowers
from ..plan.opcodes import DTYPES, MAX_IO, MAX_RANK, Op
from ..plan.opspec import BinaryFn

# Data movement copies elements by size: every dtype of the plan moves exactly.
DATA_DTYPES = tuple(DTYPES.values())
PAD_MODES = {"constant": 0, "reflect": 1, "edge": 2, "wrap": 3}


# -- helpers ---------------------------------------------------------------------------------------

def _axis(ctx: LowerCtx, node: onnx.NodeProto, axis: int, rank: int) -> int:
    if not -rank <= axis < max(rank, 1):
        raise ctx.unsupported(node, f"axis {axis} out of range for rank {rank}")
    return axis + rank if axis < 0 else axis


def view(ctx: LowerCtx, src: str, shape: Sequence[int], hint: str = "view") -> str:
    """`src` reinterpreted with another shape of the same size (no kernel)."""
    shape = tuple(int(d) for d in shape)
    if ctx.shape(src) == shape:
        return src
    ctx._ensure(src)
    t = ctx.tensors[src]
    assert math.prod(shape) == math.prod(t.shape), (shape, t.shape)
    name = ctx._fresh(hint)
    if t.data is not None:   # a view of a weight is a weight
        ctx.tensors[name] = Tensor(name, t.dtype, shape, t.data)
    else:
        ctx.tensors[name] = Tensor(name, t.dtype, shape, alias=src)
    return name


def _const_ints(ctx: LowerCtx, node: onnx.NodeProto, name: str) -> list[int]:
    """A constant 1-D int input (sizes, shape, repeats) as Python ints; ctx refuses a non-constant one."""
    return [int(v) for v in ctx.require_const(node, name)[0].reshape(-1)]


def _run_time_values(ctx: LowerCtx, node: onnx.NodeProto, names: Sequence[str], dtypes=(np.int64,)) -> bool:
    """Whether some of these inputs (shape-deciding ones) are fed at run time in a version-2 plan: value inputs
    (packager/dynamic.VALUE_SLOTS) the kernel reads while the core resolves shapes. Their dtypes are checked."""
    if not ctx.dynamic or all(not n or ctx.const(n) is not None for n in names):
        return False
    ctx.check_dtypes(node, list(dtypes), [n for n in names if n])
    return True


def _out_or_temp(ctx: LowerCtx, name: str, shape: Sequence[int], like: str) -> str:
    return name if name else ctx.temp(shape, ctx.dtype(like), "unused")


def transpose_to(ctx: LowerCtx, src: str, perm: Sequence[int], dst: str | None = None) -> str:
    """`src` transposed by perm (into dst, else a new temporary); an alias when only size-1 dims move."""
    shape = ctx.shape(src)
    out_shape = [shape[p] for p in perm]
    moved = [p for p in perm if shape[p] != 1 or not ctx.fixed(src, p)]   # a run-time extent may not stay 1
    if moved == sorted(moved):
        if dst is None:
            return view(ctx, src, out_shape)
        ctx.alias(dst, src)
        return dst
    if dst is None:
        dst = ctx.temp(out_shape, ctx.dtype(src), "tr")
    ctx.emit(Op.TRANSPOSE, [src], [dst], list(perm))
    return dst


def emit_concat(ctx: LowerCtx, inputs: list[str], out: str, axis: int) -> None:
    """CONCAT of any number of inputs: groups of MAX_IO into temporaries first."""
    if len(inputs) <= MAX_IO:
        ctx.emit(Op.CONCAT, inputs, [out], [axis])
        return
    shape = list(ctx.shape(out))
    parts = []
    for i in range(0, len(inputs), MAX_IO):
        group = inputs[i:i + MAX_IO]
        s = shape.copy()
        s[axis] = sum(ctx.shape(g)[axis] for g in group)
        t = ctx.temp(s, ctx.dtype(out), "cat")
        ctx.emit(Op.CONCAT, group, [t], [axis])
        parts.append(t)
    emit_concat(ctx, parts, out, axis)


def emit_split(ctx: LowerCtx, src: str, outs: list[str], axis: int, equal: bool = False) -> None:
    """SPLIT into any number of outputs: first into groups of MAX_IO, then each group. The words carry the
    extents (docs/plan-format.md, SPLIT): `equal` (ONNX's parts of ceil(d / n)) as [axis, -1], so that the
    kernel cuts a run-time extent as ONNX would; else the sizes themselves."""
    if len(outs) <= MAX_IO:
        sizes = [-1] if equal else [ctx.shape(o)[axis] for o in outs]
        ctx.emit(Op.SPLIT, [src], outs, [axis, *sizes])
        return
    if equal and ctx.dynamic and not ctx.fixed(src, axis):
        raise PackagerError(f"a split of a run-time extent into more than {MAX_IO} equal parts")
    shape = list(ctx.shape(src))
    groups, parts = [], []
    for i in range(0, len(outs), MAX_IO):
        group = outs[i:i + MAX_IO]
        s = shape.copy()
        s[axis] = sum(ctx.shape(g)[axis] for g in group)
        groups.append(group)
        parts.append(ctx.temp(s, ctx.dtype(src), "split"))
    emit_split(ctx, src, parts, axis)
    for p, g in zip(parts, groups):
        emit_split(ctx, p, g, axis)


def _expect_shape(ctx: LowerCtx, node: onnx.NodeProto, name: str, shape: Sequence[int]) -> None:
    have = tuple(ctx.shape(name))
    if have != tuple(int(d) for d in shape):
        raise ctx.unsupported(node, f"inferred shape {have} of '{name}' disagrees with the computed {tuple(shape)}")


# -- Concat / Split ---------------------------------------------------------------------------------

@lowers("Concat")
def lower_concat(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    ins = [i for i in node.input if i]
    ctx.check_dtypes(node, DATA_DTYPES, [*ins, node.output[0]])
    out_shape = ctx.shape(node.output[0])
    axis = _axis(ctx, node, ctx.attrs(node).get("axis", 1 if ctx.opset < 4 else 0), len(out_shape))
    if any(len(ctx.shape(i)) != len(out_shape) for i in ins):
        raise ctx.unsupported(node, "inputs of different ranks")
    for i in ins:
        if ctx.dtype(i) != ctx.dtype(node.output[0]):
            raise ctx.unsupported(node, "inputs of different dtypes")
    # Empty inputs contribute nothing.
    ins = [i for i in ins if ctx.shape(i)[axis] != 0 or not ctx.fixed(i, axis)] or ins[:1]
    if len(ins) == 1 and ctx.shape(ins[0]) == out_shape:
        ctx.alias(node.output[0], ins[0])
        return
    emit_concat(ctx, ins, node.output[0], axis)


@lowers("Split")
def lower_split(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    x = node.input[0]
    ctx.check_dtypes(node, DATA_DTYPES, [x, *[o for o in node.output if o]])
    a = ctx.attrs(node)
    shape = ctx.shape(x)
    axis = _axis(ctx, node, a.get("axis", 0), len(shape))
    n = len(node.output)
    dim = shape[axis]
    equal = False   # ONNX's own rule for the extents (num_outputs, or no sizes at all): the kernel may apply it
    if len(node.input) > 1 and _run_time_values(ctx, node, node.input[1:2]):
        if n > MAX_IO:
            raise ctx.unsupported(node, f"split sizes fed at run time into more than {MAX_IO} outputs")
        outs = [_out_or_temp(ctx, o, ctx.shape(o) if o else shape, x) for o in node.output]
        ctx.emit(Op.SPLIT, [x, node.input[1]], outs, [axis])   # the kernel reads the sizes' values
        return
    if len(node.input) > 1 and node.input[1]:
        sizes = _const_ints(ctx, node, node.input[1])
    elif "split" in a:
        sizes = [int(v) for v in a["split"]]
    elif "num_outputs" in a:
        k = int(a["num_outputs"])
        if k != n:
            raise ctx.unsupported(node, f"num_outputs={k} but {n} outputs")
        chunk = -(-dim // k)
        sizes = [chunk] * (k - 1) + [dim - chunk * (k - 1)]
        equal = True
    else:
        if dim % n:
            raise ctx.unsupported(node, f"dimension {dim} does not split evenly into {n} outputs")
        sizes = [dim // n] * n
        equal = True
    if len(sizes) != n or sum(sizes) != dim or any(s < 0 for s in sizes):
        raise ctx.unsupported(node, f"split sizes {sizes} do not partition dimension {dim} into {n} outputs")
    outs = []
    for o, s in zip(node.output, sizes):
        oshape = list(shape)
        oshape[axis] = s
        if o:
            _expect_shape(ctx, node, o, oshape)
        outs.append(_out_or_temp(ctx, o, oshape, x))
    emit_split(ctx, x, outs, axis, equal)


# -- Slice -----------------------------------------------------------------------------------------

def slice_params(shape: Sequence[int], starts: Sequence[int], ends: Sequence[int], axes: Sequence[int],
                 steps: Sequence[int]) -> tuple[list[int], list[int], list[int]]:
    """Per-dim (start, step, length) after ONNX normalization and clamping."""
    r = len(shape)
    start = [0] * r
    step = [1] * r
    length = list(shape)
    for s, e, ax, st in zip(starts, ends, axes, steps):
        d = shape[ax]
        if s < 0:
            s += d
        if e < 0:
            e += d
        if st > 0:
            s = min(max(s, 0), d)
            e = min(max(e, 0), d)
            n = max(0, -(-(e - s) // st))
        else:
            s = min(max(s, 0), d - 1)
            e = min(max(e, -1), d - 1)
            n = max(0, -(-(s - e) // -st))
        start[ax], step[ax], length[ax] = s, st, n
    for k in range(r):
        if length[k] <= 1:   # the step never applies: keep the parameter small
            step[k] = 1
        if length[k] == 0:
            start[k] = 0
    return start, step, length


INT32_MIN, INT32_MAX = -2**31, 2**31 - 1


def slice_words(rank: int, starts: Sequence[int], ends: Sequence[int], axes: Sequence[int],
                steps: Sequence[int]) -> list[int]:
    """SLICE's ONNX form [start_0.., end_0.., step_0..]: the kernel resolves negative indices and clamping
    against the dims it runs with. Unsliced axes are 0:INT32_MAX:1; values are clamped to int32 (extents are
    below 2^31, so the clamped value resolves the same)."""
    words = [0] * rank + [INT32_MAX] * rank + [1] * rank
    for s, e, ax, st in zip(starts, ends, axes, steps):
        words[ax], words[rank + ax], words[2 * rank + ax] = (min(max(int(v), INT32_MIN), INT32_MAX) for v in (s, e, st))
    return words


def _whole_for_any_extent(s: int, e: int, st: int) -> bool:
    """start:end:step takes a whole axis, whatever its extent."""
    return st == 1 and (s == 0 or s <= INT32_MIN) and e >= INT32_MAX


@lowers("Slice")
def lower_slice(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    x, y = node.input[0], node.output[0]
    ctx.check_dtypes(node, DATA_DTYPES, [x, y])
    shape = ctx.shape(x)
    r = len(shape)
    if ctx.opset < 10:
        a = ctx.attrs(node)
        starts, ends = list(a["starts"]), list(a["ends"])
        axes = list(a.get("axes", range(len(starts))))
        steps = [1] * len(starts)
    elif _run_time_values(ctx, node, node.input[1:5], (np.int64, np.int32)):
        ctx.emit(Op.SLICE, list(node.input[:5]), [y], [])   # the kernel reads starts, ends, axes?, steps? values
        return
    else:
        ins = list(node.input) + [""] * (5 - len(node.input))
        st, en, ax, sp = ctx.require_const(node, ins[1], ins[2], ins[3], ins[4])
        starts = [int(v) for v in st.reshape(-1)]
        ends = [int(v) for v in en.reshape(-1)]
        axes = [int(v) for v in ax.reshape(-1)] if ax is not None else list(range(len(starts)))
        steps = [int(v) for v in sp.reshape(-1)] if sp is not None else [1] * len(starts)
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise ctx.unsupported(node, "starts, ends, axes and steps differ in length")
    axes = [_axis(ctx, node, v, r) for v in axes]
    if len(set(axes)) != len(axes):
        raise ctx.unsupported(node, "repeated axes")
    if any(s == 0 for s in steps):
        raise ctx.unsupported(node, "step 0")
    start, step, length = slice_params(shape, starts, ends, axes, steps)
    _expect_shape(ctx, node, y, length)
    whole = all(st == 0 and sp == 1 for st, sp in zip(start, step)) and tuple(length) == tuple(shape)
    if whole and all(ctx.fixed(x, ax) or _whole_for_any_extent(s, e, sp)
                     for s, e, ax, sp in zip(starts, ends, axes, steps)):
        ctx.alias(y, x)   # the whole tensor
        return
    ctx.emit(Op.SLICE, [x], [y], slice_words(r, starts, ends, axes, steps))


# -- Gather ----------------------------------------------------------------------------------------

@lowers("Gather", "GatherElements")
def lower_gather(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    x, idx, y = node.input[0], node.input[1], node.output[0]
    ctx.check_dtypes(node, DATA_DTYPES, [x, y])
    ctx.check_dtypes(node, (np.int32, np.int64), [idx])
    r = len(ctx.shape(x))
    if r == 0:
        raise ctx.unsupported(node, "scalar data")
    axis = _axis(ctx, node, ctx.attrs(node).get("axis", 0), r)
    mode = 0 if node.op_type == "Gather" else 1
    if mode == 1:
        xs, ids = ctx.shape(x), ctx.shape(idx)
        if len(ids) != r or any(ids[k] > xs[k] for k in range(r) if k != axis):
            raise ctx.unsupported(node, f"indices shape {ids} does not fit data shape {xs}")
    c = ctx.const(idx)
    if c is not None and c.size:   # constant indices: refuse out-of-range ones now, not at run time
        n = ctx.shape(x)[axis]
        if c.min() < -n or c.max() >= n:
            raise ctx.unsupported(node, f"constant indices out of range [-{n}, {n})")
    ctx.emit(Op.GATHER, [x, idx], [y], [axis, mode])


# -- Transpose / DepthToSpace / SpaceToDepth ---------------------------------------------------------

@lowers("Transpose")
def lower_transpose(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    x, y = node.input[0], node.output[0]
    ctx.check_dtypes(node, DATA_DTYPES, [x, y])
    r = len(ctx.shape(x))
    perm = [int(p) for p in ctx.attrs(node).get("perm", list(range(r))[::-1])]
    perm = [p + r if p < 0 else p for p in perm]
    if sorted(perm) != list(range(r)):
        raise ctx.unsupported(node, f"perm {perm} is not a permutation of rank {r}")
    _expect_shape(ctx, node, y, [ctx.shape(x)[p] for p in perm])
    transpose_to(ctx, x, perm, y)


@lowers("DepthToSpace", "SpaceToDepth")
def lower_depth_space(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    x, y = node.input[0], node.output[0]
    ctx.check_dtypes(node, DATA_DTYPES, [x, y])
    a = ctx.attrs(node)
    b = int(a["blocksize"])
    mode = a.get("mode", b"DCR")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    shape = ctx.shape(x)
    if len(shape) != 4 or b <= 0:
        raise ctx.unsupported(node, "only 4-D inputs with a positive blocksize")
    if not ctx.fixed(x):   # the 6-D views below are written with this run's dims
        raise ctx.unsupported(node, "an input whose shape is known only at run time")
    n, c, h, w = shape
    if node.op_type == "DepthToSpace":
        if c % (b * b):
            raise ctx.unsupported(node, "channels not divisible by blocksize^2")
        if mode == "DCR":
            tmp, perm = (n, b, b, c // (b * b), h, w), [0, 3, 4, 1, 5, 2]
        elif mode == "CRD":
            tmp, perm = (n, c // (b * b), b, b, h, w), [0, 1, 4, 2, 5, 3]
        else:
            raise ctx.unsupported(node, f"mode {mode}")
    else:
        if h % b or w % b:
            raise ctx.unsupported(node, "spatial dims not divisible by blocksize")
        tmp = (n, c, h // b, b, w // b, b)
        if mode == "DCR":
            perm = [0, 3, 5, 1, 2, 4]
        elif mode == "CRD":
            perm = [0, 1, 3, 5, 2, 4]
        else:
            raise ctx.unsupported(node, f"mode {mode}")
    src = view(ctx, x, tmp)
    ctx.alias(y, transpose_to(ctx, src, perm))


# -- Pad -------------------------------------------------------------------------------------------

def _value_words(dtype: np.dtype, value) -> tuple[int, int]:
    """The constant as raw little-endian bytes of the element type, in two signed 32-bit words."""
    raw = np.zeros(8, np.uint8)
    b = np.asarray(value).astype(dtype).reshape(1).tobytes()
    raw[:len(b)] = np.frombuffer(b, np.uint8)
    lo, hi = (int(v) for v in raw.view(np.int32))
    return lo, hi


@lowers("Pad")
def lower_pad(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    x, y = node.input[0], node.output[0]
    ctx.check_dtypes(node, DATA_DTYPES, [x, y])
    a = ctx.attrs(node)
    shape = ctx.shape(x)
    r = len(shape)
    mode = a.get("mode", b"constant")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    if mode not in PAD_MODES:
        raise ctx.unsupported(node, f"mode '{mode}'")
    if ctx.opset < 11:
        pads = [int(v) for v in a.get("pads", a.get("paddings", []))]
        value = float(a.get("value", 0.0))
        axes = list(range(r))
    elif _run_time_values(ctx, node, [node.input[1], *node.input[3:4]], (np.int64, np.int32)):
        ins = list(node.input) + [""] * (4 - len(node.input))
        if ins[2] and ctx.shape(ins[2]) not in ((), (1,)):
            raise ctx.unsupported(node, f"constant_value of shape {ctx.shape(ins[2])} is not a scalar")
        ctx.emit(Op.PAD, [x, *ins[1:4]], [y], [PAD_MODES[mode], 0, 0])   # the kernel reads pads, value?, axes?
        return
    else:
        ins = list(node.input) + [""] * (4 - len(node.input))
        p, v, ax = ctx.require_const(node, ins[1], ins[2], ins[3])
        pads = [int(t) for t in p.reshape(-1)]
        value = v.reshape(-1)[0] if v is not None and v.size else 0
        axes = [_axis(ctx, node, int(t), r) for t in ax.reshape(-1)] if ax is not None else list(range(r))
    if len(pads) != 2 * len(axes) or len(set(axes)) != len(axes):
        raise ctx.unsupported(node, f"{len(pads)} pads for {len(axes)} axes")
    begin, end = [0] * r, [0] * r
    for i, ax in enumerate(axes):
        begin[ax], end[ax] = pads[i], pads[len(axes) + i]
    if mode != "constant" and any(v < 0 for v in begin + end):
        raise ctx.unsupported(node, f"negative pads with mode '{mode}'")
    out = [shape[k] + begin[k] + end[k] for k in range(r)]
    if any(d < 0 for d in out):
        raise ctx.unsupported(node, "pads remove more than the whole dimension")
    if mode != "constant" and any(shape[k] == 0 and out[k] > 0 for k in range(r)):
        raise ctx.unsupported(node, f"mode '{mode}' cannot pad an empty dimension")
    _expect_shape(ctx, node, y, out)
    if all(v == 0 for v in begin + end):
        ctx.alias(y, x)
        return
    lo, hi = _value_words(ctx.dtype(x), value)
    ctx.emit(Op.PAD, [x], [y], [PAD_MODES[mode], lo, hi, *begin, *end])   # end pads: y's dims follow from x's


# -- Expand / Tile ---------------------------------------------------------------------------------

@lowers("Expand")
def lower_expand(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    x, y = node.input[0], node.output[0]
    ctx.check_dtypes(node, DATA_DTYPES, [x, y])
    if ctx.dynamic and ctx.const(node.input[1]) is None:   # a value input: the shape function reads it
        ctx.check_dtypes(node, [np.int64], [node.input[1]])
        ctx.emit(Op.EXPAND, [x, node.input[1]], [y], [])
        return
    shape = _const_ints(ctx, node, node.input[1])
    xs = list(ctx.shape(x))
    r = max(len(xs), len(shape))
    a = [1] * (r - len(xs)) + xs
    b = [1] * (r - len(shape)) + shape
    out = []
    for p, q in zip(a, b):
        if p != q and p != 1 and q != 1:
            raise ctx.unsupported(node, f"shape {shape} does not broadcast with input shape {xs}")
        out.append(q if p == 1 else p)
    _expect_shape(ctx, node, y, out)
    if math.prod(out) == math.prod(xs) and ctx.fixed(x):
        ctx.alias(y, x)    # only the rank or size-1 dims change
        return
    ctx.emit(Op.EXPAND, [x, node.input[1]], [y], [])   # the shape input: the kernel's shape function reads it


def _tile_run_time(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    """Tile whose repeats are a value input (a version-2 plan): x viewed as [1, d0, 1, d1, ...] is EXPANDed to
    [r0, d0, r1, d1, ...], whose shape is made while resolving (the repeats and x's dims as columns, CONCAT, VIEW to
    one row), then viewed as [r0*d0, r1*d1, ...] (BINARY MUL of the repeats and the dims, also while resolving)."""
    from .view_modes import VIEW_RESHAPE, VIEW_UNSQUEEZE
    x, reps, y = node.input[0], node.input[1], node.output[0]
    xs, ys = ctx.shape(x), ctx.shape(y)
    r = len(xs)
    if not ctx.fixed(x):
        raise ctx.unsupported(node, "repeats fed at run time of an input whose shape is known only at run time")
    if ctx.shape(reps) != (r,) or len(ys) != r or 2 * r > MAX_RANK:
        raise ctx.unsupported(node, f"repeats of shape {ctx.shape(reps)} for rank {r} (at most {MAX_RANK // 2})")
    i64 = np.dtype(np.int64)
    dims = ctx.weight(np.array(xs, i64).reshape(r, 1), "tile_dims")
    col, pairs, shape = ctx.temp((r, 1), i64, "tile_reps"), ctx.temp((r, 2), i64, "tile_pairs"), ctx.temp((2 * r,), i64, "tile_shape")
    ctx.emit(Op.VIEW, [reps], [col], [VIEW_UNSQUEEZE, 0, 1, 1])
    ctx.emit(Op.CONCAT, [col, dims], [pairs], [1])
    ctx.emit(Op.VIEW, [pairs, ctx.weight(np.array([2 * r], i64), "tile_row")], [shape], [VIEW_RESHAPE, 0, 0])
    wide = ctx.temp([v for k in range(r) for v in (ys[k], xs[k])], ctx.dtype(x), "tile")   # the probe's extents
    ctx.emit(Op.EXPAND, [view(ctx, x, [v for d in xs for v in (1, d)]), shape], [wide], [])
    out = ctx.temp((r,), i64, "tile_out")
    ctx.emit(Op.BINARY, [reps, ctx.weight(np.array(xs, i64), "tile_extents")], [out], [BinaryFn.MUL])
    ctx.emit(Op.VIEW, [wide, out], [y], [VIEW_RESHAPE, 1, 0])   # allowzero: a repeat of 0 is an empty dim


@lowers("Tile")
def lower_tile(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    x, y = node.input[0], node.output[0]
    ctx.check_dtypes(node, DATA_DTYPES, [x, y])
    if _run_time_values(ctx, node, node.input[1:2]):
        return _tile_run_time(ctx, node)
    reps = _const_ints(ctx, node, node.input[1])
    xs = list(ctx.shape(x))
    if len(reps) != len(xs) or any(v < 0 for v in reps):
        raise ctx.unsupported(node, f"repeats {reps} for rank {len(xs)}")
    if not ctx.fixed(x):
        raise ctx.unsupported(node, "Tile of an input whose shape is known only at run time")
    _expect_shape(ctx, node, y, [d * v for d, v in zip(xs, reps)])
    if math.prod(reps) == 1 or math.prod(xs) == 0:
        if math.prod(xs) == math.prod(ctx.shape(y)):
            ctx.alias(y, x)
            return
    # Tile = broadcast of x viewed as [1, d0, 1, d1, ...] to [r0, d0, r1, d1, ...] (dims of 1 dropped).
    vin, vout = [], []
    for d, v in zip(xs, reps):
        if v != 1 and d != 1:
            vin += [1, d]
            vout += [v, d]
        elif v != 1:
            vin.append(1)
            vout.append(v)
        else:
            vin.append(d)
            vout.append(d)
    if len(vout) > MAX_RANK:
        raise ctx.unsupported(node, f"needs a rank-{len(vout)} broadcast (more than {MAX_RANK})")
    src = view(ctx, x, vin)
    t = ctx.temp(vout, ctx.dtype(x), "tile")
    ctx.emit(Op.EXPAND, [src, ctx.weight(np.array(vout, np.int64), "tile_shape")], [t], [])
    ctx.alias(y, t)
