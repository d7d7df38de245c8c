"""Elementwise ops -> UNARY, BINARY, WHERE, CAST kernels (wasm_kernels/src/kernels/elementwise.c).

UNARY params: [UnaryFn, float params...]; BINARY params: [BinaryFn]; WHERE and CAST: none.
The function codes UnaryFn, BinaryFn are generated from wasm_kernels/spec/ops.json (packager/plan/opspec.py).
Broadcasting is done by the kernels from the tensor shapes; every attribute default and opset
difference is resolved here so the kernels get explicit values."""
from __future__ import annotations

import math

import numpy as np
import onnx

from ..lowering import LowerCtx, lowers
from ..plan.opcodes import DTYPES, FLOAT8, Op
from ..plan.opspec import BinaryFn, UnaryFn

FLT_MAX = float(np.finfo(np.float32).max)


_SIMPLE_UNARY = {
    "Relu": UnaryFn.RELU, "Sigmoid": UnaryFn.SIGMOID, "HardSwish": UnaryFn.HARDSWISH, "Tanh": UnaryFn.TANH,
    "Erf": UnaryFn.ERF, "Exp": UnaryFn.EXP, "Log": UnaryFn.LOG, "Sqrt": UnaryFn.SQRT,
    "Reciprocal": UnaryFn.RECIPROCAL, "Neg": UnaryFn.NEG, "Abs": UnaryFn.ABS, "Floor": UnaryFn.FLOOR,
    "Ceil": UnaryFn.CEIL, "Round": UnaryFn.ROUND, "Sign": UnaryFn.SIGN, "Softplus": UnaryFn.SOFTPLUS,
    "Softsign": UnaryFn.SOFTSIGN, "Mish": UnaryFn.MISH, "Sin": UnaryFn.SIN, "Cos": UnaryFn.COS,
    "Tan": UnaryFn.TAN, "Asin": UnaryFn.ASIN, "Acos": UnaryFn.ACOS, "Atan": UnaryFn.ATAN, "Sinh": UnaryFn.SINH,
    "Cosh": UnaryFn.COSH, "Asinh": UnaryFn.ASINH, "Acosh": UnaryFn.ACOSH, "Atanh": UnaryFn.ATANH,
}

INT_DTYPES = (np.int32, np.int64, np.int8, np.uint8, np.int16, np.uint16, np.uint32, np.uint64)


def activation_params(ctx: LowerCtx, node: onnx.NodeProto) -> list[int | float] | None:
    """[fn, params...] if `node` is an activation a conv/gemm epilogue can apply exactly, else None.
    For fusion by other lowerings (Clip only with constant bounds)."""
    t = node.op_type
    a = ctx.attrs(node)
    if t == "Relu":
        return [UnaryFn.RELU]
    if t == "LeakyRelu":
        return [UnaryFn.LEAKY_RELU, float(a.get("alpha", 0.01))]
    if t == "Sigmoid":
        return [UnaryFn.SIGMOID]
    if t == "HardSigmoid":
        return [UnaryFn.HARDSIGMOID, float(a.get("alpha", 0.2)), float(a.get("beta", 0.5))]
    if t == "HardSwish":
        return [UnaryFn.HARDSWISH]
    if t == "Tanh":
        return [UnaryFn.TANH]
    if t == "Gelu":
        approx = a.get("approximate", b"none")
        approx = approx.decode() if isinstance(approx, bytes) else approx
        if approx == "none":
            return [UnaryFn.GELU]
        if approx == "tanh":
            return [UnaryFn.GELU_TANH]
        return None
    if t == "Clip":
        try:
            lo, hi = _clip_bounds(ctx, node)
        except Exception:  # noqa: BLE001 - non-constant bounds: not fusable
            return None
        return [UnaryFn.CLIP, lo, hi]
    return None


def _clip_bounds(ctx: LowerCtx, node: onnx.NodeProto) -> tuple[float, float]:
    if ctx.opset < 11:
        a = ctx.attrs(node)   # Clip-6 defaults are the float range, not infinities: clip(inf) = FLT_MAX
        return float(a.get("min", -FLT_MAX)), float(a.get("max", FLT_MAX))
    names = [node.input[i] if len(node.input) > i and node.input[i] else "" for i in (1, 2)]
    vals = ctx.require_const(node, *names)
    out = []
    for v, default in zip(vals, (-np.inf, np.inf)):
        if v is None:
            out.append(default)
            continue
        v = np.asarray(v)
        if v.size != 1:
            raise ctx.unsupported(node, "min/max must be scalars")
        out.append(float(v.reshape(())))
    return out[0], out[1]


def _clip_at_run_time(ctx: LowerCtx, node: onnx.NodeProto, bounds: list[str]) -> None:
    """Clip with a bound fed at run time: min(max(x, lo), hi) as BINARY MAX then MIN (both propagate NaN, and
    lo > hi gives hi, as ONNX says); the bounds are scalars broadcast over x."""
    ctx.check_dtypes(node, [np.float32], [b for b in bounds if b])
    for b in bounds:
        if b and math.prod(ctx.shape(b)) != 1:
            raise ctx.unsupported(node, f"min/max must be scalars ('{b}' has shape {list(ctx.shape(b))})")
    steps = [(b, fn) for b, fn in zip(bounds, (BinaryFn.MAX, BinaryFn.MIN)) if b]
    acc = node.input[0]
    for k, (b, fn) in enumerate(steps):
        dst = node.output[0] if k == len(steps) - 1 else ctx.temp(ctx.shape(acc), np.float32, "clip")
        ctx.emit(Op.BINARY, [acc, b], [dst], [fn])
        acc = dst


def _f32_only(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    ctx.check_dtypes(node, [np.float32], [node.input[0], node.output[0]])


def _unary(ctx: LowerCtx, node: onnx.NodeProto, params: list) -> None:
    ctx.emit(Op.UNARY, [node.input[0]], [node.output[0]], params)


def _int_neg_abs(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    """Neg and Abs of an integer tensor through BINARY (wrapping, as numpy: -INT_MIN = INT_MIN):
    Neg = 0 - x, Abs = max(x, 0 - x); Abs of an unsigned tensor is the tensor."""
    x, y = node.input[0], node.output[0]
    dt = ctx.dtype(x)
    if node.op_type == "Abs" and dt.kind == "u":
        ctx.alias(y, x)
        return
    neg = y if node.op_type == "Neg" else ctx.temp(ctx.shape(x), dt, "neg")
    ctx.emit(Op.BINARY, [ctx.weight(np.zeros((), dt), "zero"), x], [neg], [BinaryFn.SUB])
    if node.op_type == "Abs":
        ctx.emit(Op.BINARY, [x, neg], [y], [BinaryFn.MAX])


def _int_clip(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    """Clip of an integer tensor: min(max(x, lo), hi) through BINARY (hi wins when lo > hi, as the spec says);
    an absent bound is no step."""
    x, y = node.input[0], node.output[0]
    steps = [(node.input[i], fn) for i, fn in ((1, BinaryFn.MAX), (2, BinaryFn.MIN)) if len(node.input) > i and node.input[i]]
    ctx.check_dtypes(node, [ctx.dtype(x)], [y, *[b for b, _ in steps]])
    if not steps:
        ctx.alias(y, x)
        return
    acc = x
    for k, (bound, fn) in enumerate(steps):
        _check_broadcast(ctx, node, [acc, bound], y)
        dst = y if k == len(steps) - 1 else ctx.temp(ctx.shape(y), ctx.dtype(x), "clip")
        ctx.emit(Op.BINARY, [acc, bound], [dst], [fn])
        acc = dst


@lowers(*_SIMPLE_UNARY)
def lower_simple_unary(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    if node.op_type in ("Neg", "Abs") and ctx.dtype(node.input[0]) in INT_DTYPES:
        ctx.check_dtypes(node, [ctx.dtype(node.input[0])], [node.output[0]])
        _int_neg_abs(ctx, node)
        return
    ctx.check_dtypes(node, [np.float32, *_VIA_F32], [node.input[0], node.output[0]])
    if ctx.dtype(node.input[0]) != ctx.dtype(node.output[0]):
        raise ctx.unsupported(node, "input and output must share one dtype")
    via_f32(ctx, node, lambda ins, out: ctx.emit(Op.UNARY, [ins[0]], [out], [_SIMPLE_UNARY[node.op_type]]))


@lowers("LeakyRelu", "HardSigmoid", "Gelu", "Clip")
def lower_activation(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    if node.op_type == "Clip" and ctx.opset >= 11 and ctx.dtype(node.input[0]) in INT_DTYPES:
        _int_clip(ctx, node)
        return
    _f32_only(ctx, node)
    if node.op_type == "Clip":
        bounds = [node.input[i] if len(node.input) > i else "" for i in (1, 2)]
        if ctx.opset >= 11 and any(b and ctx.const(b) is None for b in bounds):
            _clip_at_run_time(ctx, node, bounds)
            return
        lo, hi = _clip_bounds(ctx, node)
        _unary(ctx, node, [UnaryFn.CLIP, lo, hi])
        return
    p = activation_params(ctx, node)
    if p is None:
        raise ctx.unsupported(node, f"attribute approximate={ctx.attrs(node).get('approximate')!r} is not supported")
    _unary(ctx, node, p)


@lowers("Elu", "Selu", "Celu", "ThresholdedRelu")
def lower_param_unary(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    if in_f32(ctx, node, lower_param_unary):
        return
    _f32_only(ctx, node)
    a = ctx.attrs(node)
    t = node.op_type
    if t == "Elu":
        p = [UnaryFn.ELU, float(a.get("alpha", 1.0))]
    elif t == "Selu":
        p = [UnaryFn.SELU, float(a.get("alpha", 1.67326319217681884765625)),
             float(a.get("gamma", 1.05070102214813232421875))]
    elif t == "Celu":
        p = [UnaryFn.CELU, float(a.get("alpha", 1.0))]
    else:
        p = [UnaryFn.THRESHOLDED_RELU, float(a.get("alpha", 1.0))]
    _unary(ctx, node, p)


# Floats the kernels compute on as float32: float16 and bfloat16 exactly (widened), float64 approximately (rounded,
# with a notice).
HALF = (np.dtype(np.float16), DTYPES[16])
_VIA_F32 = (*HALF, np.dtype(np.float64))


def as_f32(ctx: LowerCtx, node: onnx.NodeProto, name: str) -> str:
    """A float16 / bfloat16 tensor widened to a float32 temporary (CAST, exact), a float64 one rounded to a float32 one (CAST;
    the package's notices say that `node` computes in float32); any other tensor as it is."""
    dt = ctx.dtype(name)
    if dt not in _VIA_F32:
        return name
    if dt == np.float64:
        note = (f"{node.op_type} '{node.name or node.output[0]}': float64 computed in float32 (operands rounded to "
                "float32, float32 range and precision, the result widened back)")
        if note not in ctx.graph.notices:
            ctx.graph.notices.append(note)
    t = ctx.temp(ctx.shape(name), np.float32, "f32")
    if ctx.const(name) is not None:   # a weight: widened once at bind (a prologue CAST), not on every run
        ctx.prologue(Op.CAST, [name], [t])
    else:
        ctx.emit(Op.CAST, [name], [t])
    return t


def via_f32(ctx: LowerCtx, node: onnx.NodeProto, emit) -> None:
    """emit(inputs, output) on float32 copies of float16 / bfloat16 / float64 operands, the result converted into the
    output's dtype (float16, bfloat16: round to nearest even, what numpy's float16 arithmetic, computed in float32, gives;
    float64: exact widening of the float32 result). Other dtypes pass through."""
    y = node.output[0]
    ins = [as_f32(ctx, node, n) if n else n for n in node.input]
    if ctx.dtype(y) not in _VIA_F32:
        emit(ins, y)
        return
    t = ctx.temp(ctx.shape(y), np.float32, "f32_out")
    emit(ins, t)
    ctx.emit(Op.CAST, [t], [y])


def in_f32(ctx: LowerCtx, node: onnx.NodeProto, lower) -> bool:
    """When `node` has float16 / float64 inputs or outputs: lower(ctx, a copy of node on float32 copies of them)
    (as_f32, with its notice), each float16 / float64 output converted back from a float32 temporary (CAST); True.
    False (nothing emitted) when node has none: the caller lowers it as it is. For ops whose float32 kernel gives
    the float16 / float64 answer within float32's rounding (scans, reductions, contractions)."""
    names = [n for n in [*node.input, *node.output] if n]
    if not any(ctx.dtype(n) in _VIA_F32 for n in names):
        return False
    outs = [ctx.temp(ctx.shape(o), np.float32, "f32_out") if o and ctx.dtype(o) in _VIA_F32 else o for o in node.output]
    f32 = onnx.NodeProto()
    f32.CopyFrom(node)
    f32.name = node.name or node.output[0]   # refusals name the model's node, not a temporary
    del f32.input[:], f32.output[:]
    f32.input.extend(as_f32(ctx, node, n) if n else n for n in node.input)
    f32.output.extend(outs)
    lower(ctx, f32)
    for o, t in zip(node.output, outs):
        if o != t:
            ctx.emit(Op.CAST, [t], [o])
    return True


@lowers("IsNaN", "IsInf")
def lower_isnan_isinf(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    ctx.check_dtypes(node, [np.float32, *HALF], [node.input[0]])
    ctx.check_dtypes(node, [np.bool_], [node.output[0]])
    params = [UnaryFn.ISNAN]
    if node.op_type == "IsInf":
        a = ctx.attrs(node)
        params = [UnaryFn.ISINF, float(int(a.get("detect_positive", 1)) != 0), float(int(a.get("detect_negative", 1)) != 0)]
    ctx.emit(Op.UNARY, [as_f32(ctx, node, node.input[0])], [node.output[0]], params)


@lowers("Not")
def lower_not(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    ctx.check_dtypes(node, [np.bool_])
    _unary(ctx, node, [UnaryFn.NOT])


# ---- binary ----------------------------------------------------------------------------------------

_ARITH = {"Add": BinaryFn.ADD, "Sub": BinaryFn.SUB, "Mul": BinaryFn.MUL, "Div": BinaryFn.DIV}
_CMP = {"Equal": BinaryFn.EQUAL, "Less": BinaryFn.LESS, "Greater": BinaryFn.GREATER,
        "LessOrEqual": BinaryFn.LESS_EQUAL, "GreaterOrEqual": BinaryFn.GREATER_EQUAL}
_LOGIC = {"And": BinaryFn.AND, "Or": BinaryFn.OR, "Xor": BinaryFn.XOR}


def _check_broadcast(ctx: LowerCtx, node: onnx.NodeProto, names: list[str], out: str) -> None:
    try:
        shape = np.broadcast_shapes(*[ctx.shape(n) for n in names])
    except ValueError:
        raise ctx.unsupported(node, "input shapes do not broadcast") from None
    if tuple(shape) != tuple(ctx.shape(out)):
        raise ctx.unsupported(node, f"output shape {ctx.shape(out)} is not the broadcast {tuple(shape)} of the inputs")


def _emit_binary(ctx: LowerCtx, node: onnx.NodeProto, fn: BinaryFn) -> None:
    """The shared tail of the binary ops once their dtypes are checked: numpy broadcasting, one BINARY step."""
    _check_broadcast(ctx, node, list(node.input[:2]), node.output[0])
    ctx.emit(Op.BINARY, list(node.input[:2]), [node.output[0]], [fn])


def _legacy_broadcast(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    # Opset < 7 'broadcast'/'axis' attributes mean something else than numpy broadcasting.
    a = ctx.attrs(node)
    if "axis" in a or a.get("broadcast", 0):
        raise ctx.unsupported(node, "legacy broadcast/axis attributes are not supported")


@lowers(*_ARITH)
def lower_arith(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    _legacy_broadcast(ctx, node)
    ctx.check_dtypes(node, [np.float32, *_VIA_F32, *INT_DTYPES])
    if len({ctx.dtype(n) for n in [*node.input, node.output[0]]}) != 1:
        raise ctx.unsupported(node, "inputs and output must share one dtype")
    _check_broadcast(ctx, node, list(node.input[:2]), node.output[0])
    via_f32(ctx, node, lambda ins, out: ctx.emit(Op.BINARY, ins[:2], [out], [_ARITH[node.op_type]]))


@lowers(*_CMP)
def lower_compare(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    _legacy_broadcast(ctx, node)
    # float16 / bfloat16 compare exactly as float32; float64 is not rounded to float32 here (it would change the answers)
    allowed = [np.float32, *HALF, *INT_DTYPES] + ([np.bool_] if node.op_type == "Equal" else [])
    ctx.check_dtypes(node, allowed, list(node.input[:2]))
    ctx.check_dtypes(node, [np.bool_], [node.output[0]])
    if ctx.dtype(node.input[0]) != ctx.dtype(node.input[1]):
        raise ctx.unsupported(node, "inputs must share one dtype")
    _check_broadcast(ctx, node, list(node.input[:2]), node.output[0])
    via_f32(ctx, node, lambda ins, out: ctx.emit(Op.BINARY, ins[:2], [out], [_CMP[node.op_type]]))


@lowers(*_LOGIC)
def lower_logic(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    _legacy_broadcast(ctx, node)
    ctx.check_dtypes(node, [np.bool_])
    _emit_binary(ctx, node, _LOGIC[node.op_type])


@lowers("Mod")
def lower_mod(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    ctx.check_dtypes(node, [np.float32, *HALF, *INT_DTYPES])
    if len({ctx.dtype(n) for n in [*node.input, node.output[0]]}) != 1:
        raise ctx.unsupported(node, "inputs and output must share one dtype")
    fmod = int(ctx.attrs(node).get("fmod", 0))
    if fmod not in (0, 1):
        raise ctx.unsupported(node, f"fmod={fmod} must be 0 or 1")
    # fmod=0 on floats: the spec asks for fmod=1, the reference computes numpy's mod: so does the kernel.
    # float16: fmod is exact in float32 and representable in float16; mod's one addition rounds once, as numpy's.
    _check_broadcast(ctx, node, list(node.input[:2]), node.output[0])
    via_f32(ctx, node, lambda ins, out: ctx.emit(Op.BINARY, ins[:2], [out], [BinaryFn.FMOD if fmod else BinaryFn.MOD]))


@lowers("BitShift")
def lower_bitshift(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    ctx.check_dtypes(node, INT_DTYPES)
    if len({ctx.dtype(n) for n in [*node.input, node.output[0]]}) != 1:
        raise ctx.unsupported(node, "inputs and output must share one dtype")
    d = ctx.attrs(node).get("direction", b"")
    d = d.decode() if isinstance(d, bytes) else d
    if d not in ("LEFT", "RIGHT"):
        raise ctx.unsupported(node, f"direction={d!r} must be LEFT or RIGHT")
    _emit_binary(ctx, node, BinaryFn.SHL if d == "LEFT" else BinaryFn.SHR)


_BITWISE = {"BitwiseAnd": BinaryFn.BIT_AND, "BitwiseOr": BinaryFn.BIT_OR, "BitwiseXor": BinaryFn.BIT_XOR}


@lowers(*_BITWISE, "BitwiseNot")
def lower_bitwise(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    """Bitwise ops on integers through BINARY's 64-bit integer rows; BitwiseNot is x ^ (all ones)."""
    ctx.check_dtypes(node, INT_DTYPES)
    if len({ctx.dtype(n) for n in [*node.input, node.output[0]]}) != 1:
        raise ctx.unsupported(node, "inputs and output must share one dtype")
    if node.op_type == "BitwiseNot":
        ones = ctx.weight(np.array(-1).astype(ctx.dtype(node.input[0])), "ones")
        ctx.emit(Op.BINARY, [node.input[0], ones], [node.output[0]], [BinaryFn.BIT_XOR])
        return
    _emit_binary(ctx, node, _BITWISE[node.op_type])


@lowers("PRelu")
def lower_prelu(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    ctx.check_dtypes(node, [np.float32])
    x, slope = node.input[0], node.input[1]
    if len(ctx.shape(slope)) > len(ctx.shape(x)):
        raise ctx.unsupported(node, "slope has a higher rank than X")
    _check_broadcast(ctx, node, [x, slope], node.output[0])   # slope broadcasts to X (unidirectional)
    ctx.emit(Op.BINARY, [x, slope], [node.output[0]], [BinaryFn.PRELU])


@lowers("Pow")
def lower_pow(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    x, y, out = node.input[0], node.input[1], node.output[0]
    if in_f32(ctx, node, lower_pow):
        return
    if ctx.dtype(x) in (np.int32, np.int64) and ctx.dtype(out) == ctx.dtype(x):
        _int_pow(ctx, node)
        return
    ctx.check_dtypes(node, [np.float32], [x, out])
    ctx.check_dtypes(node, [np.float32, *INT_DTYPES], [y])
    _check_broadcast(ctx, node, [x, y], out)
    c = ctx.const(y)
    if c is not None:
        cf = np.asarray(c).astype(np.float32)
        if c.dtype != np.float32 and not np.array_equal(cf.astype(c.dtype), c):
            raise ctx.unsupported(node, "integer exponent not exactly representable as float32")
        if cf.size >= 1 and np.all(cf == cf.flat[0]) and ctx.shape(out) == ctx.shape(x):
            # one exponent for all: UNARY with exact fast paths for small integers
            ctx.emit(Op.UNARY, [x], [out], [UnaryFn.POW, float(cf.flat[0])])
            return
        y = ctx.weight(cf, "pow_exp")
    elif ctx.dtype(y) != np.float32:
        # a run-time integer exponent: cast to float32 first (exact for |y| <= 2^24)
        t = ctx.temp(ctx.shape(y), np.float32, "pow_exp")
        ctx.emit(Op.CAST, [y], [t])
        y = t
    ctx.emit(Op.BINARY, [x, y], [out], [BinaryFn.POW])


def _int_pow(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    """Pow of an int32 / int64 base: the float32 power, rounded to the nearest integer (ROUND: the float power of
    integers may land a hair off), then CAST back. Exact while |x^y| < 2^24; the package's notices say so."""
    x, out = node.input[0], node.output[0]
    note = f"Pow '{node.name or out}': integer power computed in float32 (exact while |result| < 2^24)"
    if note not in ctx.graph.notices:
        ctx.graph.notices.append(note)
    xf, pf, rf = (ctx.temp(ctx.shape(n), np.float32, h) for n, h in ((x, "pow_x"), (out, "pow_f"), (out, "pow_r")))
    ctx.emit(Op.CAST, [x], [xf])
    lower_pow(ctx, onnx.helper.make_node("Pow", [xf, node.input[1]], [pf], name=node.name))
    ctx.emit(Op.UNARY, [pf], [rf], [UnaryFn.ROUND])
    ctx.emit(Op.CAST, [rf], [out])


@lowers("Min", "Max", "Sum", "Mean")
def lower_variadic(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    ins = [n for n in node.input if n]
    out = node.output[0]
    t = node.op_type
    if not ins:
        raise ctx.unsupported(node, "no inputs")
    allowed = [np.float32, *_VIA_F32, *([] if t in ("Sum", "Mean") else INT_DTYPES)]
    ctx.check_dtypes(node, allowed, [*ins, out])
    if len({ctx.dtype(n) for n in [*ins, out]}) != 1:
        raise ctx.unsupported(node, "inputs and output must share one dtype")
    _check_broadcast(ctx, node, ins, out)
    if ctx.dtype(out) in _VIA_F32 and len(ins) > 1:   # Max / Min of float16 exact; Sum / Mean rounded at the end
        f32 = onnx.helper.make_node(t, [as_f32(ctx, node, n) for n in ins], [ctx.temp(ctx.shape(out), np.float32, "f32_out")])
        lower_variadic(ctx, f32)
        ctx.emit(Op.CAST, [f32.output[0]], [out])
        return
    dt = ctx.dtype(out)
    if len(ins) == 1:
        ctx.alias(out, ins[0])   # max/min/sum/mean of one tensor is that tensor
        return
    fn = {"Min": BinaryFn.MIN, "Max": BinaryFn.MAX, "Sum": BinaryFn.ADD, "Mean": BinaryFn.ADD}[t]
    acc = ins[0]
    for k, nxt in enumerate(ins[1:], start=2):
        shape = tuple(np.broadcast_shapes(ctx.shape(acc), ctx.shape(nxt)))
        last = k == len(ins) and t != "Mean"
        dst = out if last else ctx.temp(shape, dt, "acc")
        ctx.emit(Op.BINARY, [acc, nxt], [dst], [fn])
        acc = dst
    if t == "Mean":   # the reference divides the sum by the count (not a multiply by 1/n)
        ctx.emit(Op.BINARY, [acc, ctx.weight(np.array(len(ins), np.float32), "count")], [out], [BinaryFn.DIV])


@lowers("Where")
def lower_where(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    c, x, y = node.input[:3]
    out = node.output[0]
    ctx.check_dtypes(node, [np.bool_], [c])
    ctx.check_dtypes(node, [np.float32, np.int64, np.int32, np.bool_, np.uint8, np.int8, np.float16, np.float64,
                            np.int16, np.uint16, np.uint32, np.uint64], [x, y, out])   # WHERE moves bytes
    if not ctx.dtype(x) == ctx.dtype(y) == ctx.dtype(out):
        raise ctx.unsupported(node, "X, Y and output must share one dtype")
    _check_broadcast(ctx, node, [c, x, y], out)
    ctx.emit(Op.WHERE, [c, x, y], [out])


_ROUND_MODES = {"up": 0, "down": 1, "nearest": 2}   # CAST's round_mode word (wasm_kernels/src/kernels/lowp.h)


@lowers("Cast", "CastLike")
def lower_cast(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    """CAST between every pair of the plan's dtypes; into a float8 one with [saturate, round_mode]."""
    x, out = node.input[0], node.output[0]
    a = ctx.attrs(node)
    to = int(a["to"]) if node.op_type == "Cast" and "to" in a else ctx.graph.dtypes.get(out, 0)
    if to not in DTYPES:   # string, complex, float6
        name = onnx.TensorProto.DataType.Name(to) if to else "unknown"
        supported = ", ".join(DTYPES[c].name for c in sorted(DTYPES))
        raise ctx.unsupported(node, f"cast to {name} is not supported (supported: {supported})")
    ctx.dtype(x)   # refuses a source dtype outside the plan's, naming it
    if ctx.shape(x) != ctx.shape(out):
        raise ctx.unsupported(node, "input and output shapes differ")
    words: list[int] = []
    if to in FLOAT8:
        saturate = int(a.get("saturate", 1))
        mode = a.get("round_mode", b"up")
        mode = mode.decode() if isinstance(mode, bytes) else str(mode)
        if saturate not in (0, 1) or mode not in _ROUND_MODES:
            raise ctx.unsupported(node, f"saturate={saturate}, round_mode={mode!r}: saturate must be 0 or 1, "
                                        f"round_mode one of {', '.join(_ROUND_MODES)}")
        words = [saturate, _ROUND_MODES[mode]]
    ctx.emit(Op.CAST, [x], [out], words)
