"""onnxruntime's contrib ops (domain com.microsoft) rewritten into standard ONNX nodes.

onnxruntime's own tools write these into models: the quantizer (DynamicQuantizeMatMul, MatMulIntegerToFloat,
QLinearAdd, QGemm, ...), the transformer optimizer (Attention, SkipLayerNormalization, BiasGelu, FastGelu,
EmbedLayerNormalization, ...) and its graph optimizations saved to disk (FusedConv, FusedGemm). Each node here
becomes the standard nodes that compute the same thing (semantics from onnxruntime's
docs/ContribOperators.md and CPU kernels, checked against onnxruntime in tests/test_contrib_ops.py), before
analysis; edgepack's usual machinery then takes over: shape arithmetic folds, the QDQ groups
(DequantizeLinear -> op -> QuantizeLinear) fuse into the int8 kernels (packager/passes/qdq_fusion.py), MatMul +
constant bias and Conv/Gemm + activation fuse into one kernel.

What a rewrite does not implement is refused with op, node, domain and the reason (UnsupportedError)."""
from __future__ import annotations

import math
from typing import Callable

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from .. import weights
from ..errors import UnsupportedError

DOMAIN = "com.microsoft"
STANDARD = ("", "ai.onnx")
MIN_OPSET = 11   # the rewrites use Slice/Range/DequantizeLinear input forms from here on


class Refused(Exception):
    """A contrib node the rewrite cannot express exactly: the reason, for UnsupportedError."""


class _Shapes:
    """Ranks, dims and element types of a model's values, contrib outputs included (onnxruntime's symbolic
    shape inference knows the com.microsoft schemas; onnx's own inference is the fallback)."""

    def __init__(self, model: onnx.ModelProto) -> None:
        inferred = None
        try:
            # SymbolicShapeInference.infer_shapes' own loop, without its ending: on an incomplete inference it
            # writes sym_shape_infer_temp.onnx (+ external data) into the working directory and raises, where
            # the values it did settle are what is wanted here
            from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference
            ssi = SymbolicShapeInference(2**31 - 1, True, False, 0)
            ssi._preprocess(model)
            while ssi.run_:
                ssi._infer_impl()
            ssi._update_output_from_vi()
            inferred = ssi.out_mp_
        except Exception:  # noqa: BLE001 - an unusual model: onnx's inference still gives the standard values
            inferred = None
        if inferred is None:
            try:
                inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False)
            except Exception:  # noqa: BLE001
                inferred = model
        g = inferred.graph
        self.types: dict[str, onnx.TypeProto] = {vi.name: vi.type for vi in [*g.input, *g.value_info, *g.output]
                                                 if vi.type.HasField("tensor_type")}
        self.consts: dict[str, np.ndarray] = {t.name: weights.to_array(t) for t in model.graph.initializer}
        for n in model.graph.node:   # Constant nodes: exporters and onnxruntime's tools write scales this way
            if n.op_type == "Constant" and n.domain in STANDARD and n.attribute and n.attribute[0].name == "value":
                self.consts[n.output[0]] = numpy_helper.to_array(n.attribute[0].t)
        self.model = model
        self.done: tuple[list[onnx.NodeProto], list[onnx.TensorProto]] | None = None   # the rewrite so far
        self.refreshed = False

    def _refresh(self) -> None:
        """Values the contrib inference left untyped (outputs of contrib ops it does not know): onnx's inference
        on the graph rewritten so far, which holds standard ops only up to here."""
        if self.done is None or self.refreshed:
            return
        self.refreshed = True
        m = onnx.ModelProto()
        m.CopyFrom(self.model)
        del m.graph.node[:]
        m.graph.node.extend(self.done[0])
        m.graph.initializer.extend(self.done[1])
        del m.graph.output[:]
        try:
            g = onnx.shape_inference.infer_shapes(m, strict_mode=False).graph
        except Exception:  # noqa: BLE001
            return
        for vi in [*g.value_info, *g.input]:
            old = self.types.get(vi.name)
            if vi.type.HasField("tensor_type") and (old is None or not old.tensor_type.HasField("shape")):
                self.types[vi.name] = vi.type

    def dims(self, name: str) -> list[int | str | None] | None:
        if name in self.consts:
            return list(self.consts[name].shape)
        if name not in self.types or not self.types[name].tensor_type.HasField("shape"):
            self._refresh()
        t = self.types.get(name)
        if t is None or not t.tensor_type.HasField("shape"):
            return None
        return [d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in t.tensor_type.shape.dim]

    def rank(self, name: str) -> int | None:
        d = self.dims(name)
        return None if d is None else len(d)

    def dtype(self, name: str) -> int:
        if name in self.consts:
            return helper.np_dtype_to_tensor_dtype(self.consts[name].dtype)
        t = self.types.get(name)
        return t.tensor_type.elem_type if t is not None else 0


class _B:
    """Emits the standard nodes replacing one contrib node (opset-aware forms of the ops that changed)."""

    def __init__(self, node: onnx.NodeProto, opset: int, label: str, shapes: _Shapes) -> None:
        self.node, self.opset, self.label, self.shapes = node, opset, label, shapes
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.k = 0
        self.attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}

    # -- the contrib node ---------------------------------------------------------------------------
    def inp(self, i: int) -> str | None:
        return self.node.input[i] if i < len(self.node.input) and self.node.input[i] else None

    def out(self, i: int) -> str | None:
        return self.node.output[i] if i < len(self.node.output) and self.node.output[i] else None

    def attr(self, name: str, default=None):
        v = self.attrs.get(name, default)
        return v.decode() if isinstance(v, bytes) else v

    def positive(self, name: str) -> int:
        """A required positive integer attribute (num_heads)."""
        v = self.attrs.get(name)
        if not isinstance(v, int) or v <= 0:
            raise Refused(f"attribute {name} must be a positive integer (got {v})")
        return v

    def const_of(self, name: str | None) -> np.ndarray | None:
        return None if name is None else self.shapes.consts.get(name)

    # -- emitting -----------------------------------------------------------------------------------
    def tmp(self, hint: str) -> str:
        self.k += 1
        return f"{self.label}/{hint}_{self.k}"

    def op(self, op_type: str, inputs: list[str | None], out: str | list[str] | None = None, n_out: int = 1,
           **attrs) -> str:
        outs = [out] if isinstance(out, str) else (list(out) if out else [self.tmp(op_type) for _ in range(n_out)])
        self.nodes.append(helper.make_node(op_type, [i or "" for i in inputs], outs,
                                           name=f"{self.label}/{op_type}_{len(self.nodes)}", **attrs))
        return outs[0]

    def const(self, value, dtype=np.float32, hint: str = "c") -> str:
        name = self.tmp(hint)
        self.inits.append(numpy_helper.from_array(np.asarray(value, dtype=dtype), name))
        return name

    def i64(self, values) -> str:
        return self.const(values, np.int64, "i")

    # -- ops whose form depends on the opset ---------------------------------------------------------
    def unsqueeze(self, x: str, axes: list[int], out: str | None = None) -> str:
        if self.opset >= 13:
            return self.op("Unsqueeze", [x, self.i64(axes)], out)
        return self.op("Unsqueeze", [x], out, axes=axes)

    def reduce(self, kind: str, x: str, axes: list[int], keepdims: int = 1, out: str | None = None) -> str:
        if self.opset >= 18 or (kind == "ReduceSum" and self.opset >= 13):
            return self.op(kind, [x, self.i64(axes)], out, keepdims=keepdims)
        return self.op(kind, [x], out, axes=axes, keepdims=keepdims)

    def split(self, x: str, sizes: list[int], axis: int) -> list[str]:
        outs = [self.tmp("part") for _ in sizes]
        if self.opset >= 13:
            self.op("Split", [x, self.i64(sizes)], outs, axis=axis)
        else:
            self.op("Split", [x], outs, axis=axis, split=sizes)
        return outs

    def slice(self, x: str, start: int, end: int, axis: int, step: int = 1) -> str:
        return self.op("Slice", [x, self.i64([start]), self.i64([end]), self.i64([axis]), self.i64([step])])

    def dim(self, x: str, axis: int) -> str:
        """x.shape[axis] as a 1-element int64 tensor (folds at package time)."""
        return self.op("Gather", [self.op("Shape", [x]), self.i64([axis])], axis=0)

    def arange(self, n1: str) -> str:
        """[0, n) from a 1-element int64 tensor n."""
        n = self.op("Squeeze", [n1, self.i64([0])]) if self.opset >= 13 else self.op("Squeeze", [n1], axes=[0])
        return self.op("Range", [self.i64(0), n, self.i64(1)])

    # -- math shared by several ops ------------------------------------------------------------------
    def gelu(self, x: str, out: str, tanh: bool = False) -> str:
        if self.opset >= 20:
            return self.op("Gelu", [x], out, **({"approximate": "tanh"} if tanh else {}))
        if tanh:   # 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
            x3 = self.op("Mul", [self.op("Mul", [x, x]), x])
            inner = self.op("Add", [x, self.op("Mul", [x3, self.const(0.044715)])])
            t = self.op("Tanh", [self.op("Mul", [inner, self.const(math.sqrt(2 / math.pi))])])
        else:      # 0.5 x (1 + erf(x / sqrt 2))
            t = self.op("Erf", [self.op("Div", [x, self.const(math.sqrt(2.0))])])
        return self.op("Mul", [self.op("Mul", [x, self.op("Add", [t, self.const(1.0)])]), self.const(0.5)], out)

    def layer_norm(self, x: str, gamma: str, beta: str | None, eps: float, out: str,
                   mean: str | None = None, inv_std: str | None = None) -> None:
        if self.opset >= 17:
            outs = [out, mean or "", inv_std or ""]
            while outs[-1] == "":
                outs.pop()
            self.op("LayerNormalization", [x, gamma, beta], outs, axis=-1, epsilon=float(eps))
            return
        mu = self.reduce("ReduceMean", x, [-1], out=mean)
        d = self.op("Sub", [x, mu])
        var = self.reduce("ReduceMean", self.op("Mul", [d, d]), [-1])
        r = self.op("Sqrt", [self.op("Add", [var, self.const(float(eps))])])
        if inv_std:
            self.op("Reciprocal", [r], inv_std)
        y = self.op("Mul", [self.op("Div", [d, r]), gamma], None if beta else out)
        if beta:
            self.op("Add", [y, beta], out)

    def rms_norm(self, x: str, scale: str, eps: float, axes: list[int], out: str, inv_std: str | None = None) -> None:
        ms = self.reduce("ReduceMean", self.op("Mul", [x, x]), axes)
        r = self.op("Sqrt", [self.op("Add", [ms, self.const(float(eps))])])
        if inv_std:
            self.op("Reciprocal", [r], inv_std)
        self.op("Mul", [self.op("Div", [x, r]), scale], out)

    def dq(self, x: str, scale: str, zp: str | None, axis: int | None = None) -> str:
        if self.const_of(scale) is None and axis is None:
            # a scale known only at run time (DynamicQuantizeLinear's): (x - zp) * scale in float32, which is
            # DequantizeLinear exactly; edgepack's DequantizeLinear kernels take constant scales
            xf = self.op("Cast", [x], to=TensorProto.FLOAT)
            if zp:
                xf = self.op("Sub", [xf, self.op("Cast", [zp], to=TensorProto.FLOAT)])
            return self.op("Mul", [xf, scale])
        return self.op("DequantizeLinear", [x, scale, zp], **({} if axis is None else {"axis": axis}))

    def q(self, x: str, scale: str, zp: str | None, like: str, out: str) -> str:
        """QuantizeLinear to the type of `like` (the contrib ops' output type; a missing zero point means 0)."""
        if zp is None:
            zp = self.const(0, helper.tensor_dtype_to_np_dtype(self.shapes.dtype(like) or TensorProto.UINT8), "zp")
        return self.op("QuantizeLinear", [x, scale, zp], out)


# -- the rewrites ------------------------------------------------------------------------------------
Rewrite = Callable[[_B], None]
REWRITES: dict[str, Rewrite] = {}


def _rewrites(*ops: str) -> Callable[[Rewrite], Rewrite]:
    def deco(fn: Rewrite) -> Rewrite:
        for o in ops:
            REWRITES[o] = fn
        return fn
    return deco


def _only_outputs(b: _B, allowed: int, what: str) -> None:
    extra = [i for i in range(allowed, len(b.node.output)) if b.out(i)]
    if extra:
        raise Refused(f"output {extra[0]} ({what}) is not implemented")


@_rewrites("Gelu")
def _gelu(b: _B) -> None:
    b.gelu(b.inp(0), b.out(0))


@_rewrites("BiasGelu")
def _bias_gelu(b: _B) -> None:
    b.gelu(b.op("Add", [b.inp(0), b.inp(1)]), b.out(0))


@_rewrites("FastGelu")
def _fast_gelu(b: _B) -> None:
    x = b.op("Add", [b.inp(0), b.inp(1)]) if b.inp(1) else b.inp(0)
    b.gelu(x, b.out(0), tanh=True)


@_rewrites("QuickGelu")
def _quick_gelu(b: _B) -> None:   # x * sigmoid(alpha x)
    x = b.inp(0)
    b.op("Mul", [x, b.op("Sigmoid", [b.op("Mul", [x, b.const(float(b.attr("alpha", 1.702)))])])], b.out(0))


@_rewrites("SkipLayerNormalization")
def _skip_layer_norm(b: _B) -> None:
    s = b.op("Add", [b.inp(0), b.inp(1)])
    if b.inp(4):
        s = b.op("Add", [s, b.inp(4)])
    if b.out(3):
        s = b.op("Identity", [s], b.out(3))
    if (b.out(1) or b.out(2)) and b.opset < 17:
        raise Refused("its mean / inv_std_var outputs need opset >= 17 (LayerNormalization)")
    b.layer_norm(s, b.inp(2), b.inp(3), b.attr("epsilon", 1e-12), b.out(0), b.out(1), b.out(2))


def _rms_axes(b: _B, x: str) -> list[int]:
    axis = int(b.attr("axis", -1))
    if axis == -1:
        return [-1]
    r = b.shapes.rank(x)
    if r is None:
        raise Refused(f"axis {axis} needs the rank of '{x}', which is not known")
    return list(range(axis % r, r))


@_rewrites("SimplifiedLayerNormalization")
def _simplified_layer_norm(b: _B) -> None:
    b.rms_norm(b.inp(0), b.inp(1), b.attr("epsilon", 1e-5), _rms_axes(b, b.inp(0)), b.out(0), b.out(1))


@_rewrites("SkipSimplifiedLayerNormalization")
def _skip_simplified_layer_norm(b: _B) -> None:
    if b.out(1):
        raise Refused("output 1 (mean) is not implemented (RMS normalization has no mean)")
    s = b.op("Add", [b.inp(0), b.inp(1)])
    if b.inp(3):
        s = b.op("Add", [s, b.inp(3)])
    if b.out(3):
        s = b.op("Identity", [s], b.out(3))
    b.rms_norm(s, b.inp(2), b.attr("epsilon", 1e-5), [-1], b.out(0), b.out(2))


# -- quantized ops: DequantizeLinear -> float op -> QuantizeLinear (the int8 path fuses them back) -----
def _qbinary(op: str) -> Rewrite:
    def fn(b: _B) -> None:
        a = b.dq(b.inp(0), b.inp(1), b.inp(2))
        c = b.dq(b.inp(3), b.inp(4), b.inp(5))
        b.q(b.op(op, [a, c]), b.inp(6), b.inp(7), b.inp(0), b.out(0))
    return fn


REWRITES["QLinearAdd"] = _qbinary("Add")
REWRITES["QLinearMul"] = _qbinary("Mul")


@_rewrites("QLinearSigmoid", "QLinearLeakyRelu")
def _qunary(b: _B) -> None:
    x = b.dq(b.inp(0), b.inp(1), b.inp(2))
    y = (b.op("Sigmoid", [x]) if b.node.op_type == "QLinearSigmoid"
         else b.op("LeakyRelu", [x], alpha=float(b.attr("alpha", 0.01))))
    b.q(y, b.inp(3), b.inp(4), b.inp(0), b.out(0))


@_rewrites("QuantizeLinear", "DequantizeLinear")
def _qdq(b: _B) -> None:
    """The quantizer's com.microsoft Q/DQ (its UseQDQContribOps option): the standard ops, same semantics."""
    attrs = dict(b.attrs)
    if b.opset < 13 and "axis" in attrs:
        raise Refused("per-axis quantization needs opset >= 13 for the standard op")
    if int(attrs.get("block_size", 0) or 0):
        raise Refused("blocked quantization (block_size) is not implemented")
    b.op(b.node.op_type, list(b.node.input), list(b.node.output), **attrs)


def _channels_last_perms(b: _B, x: str) -> tuple[list[int], list[int]]:
    r = b.shapes.rank(x)
    if r is None:
        raise Refused(f"channels_last needs the rank of '{x}', which is not known")
    to_first = [0, r - 1, *range(1, r - 1)]
    return to_first, [int(i) for i in np.argsort(to_first)]


@_rewrites("QLinearGlobalAveragePool")
def _qglobal_avg_pool(b: _B) -> None:
    x = b.dq(b.inp(0), b.inp(1), b.inp(2))
    if int(b.attr("channels_last", 0)):
        r = b.shapes.rank(b.inp(0))
        if r is None:
            raise Refused("channels_last needs the input's rank, which is not known")
        y = b.reduce("ReduceMean", x, list(range(1, r - 1)))
    else:
        y = b.op("GlobalAveragePool", [x])
    b.q(y, b.inp(3), b.inp(4), b.inp(0), b.out(0))


@_rewrites("QLinearAveragePool")
def _qavg_pool(b: _B) -> None:
    x = b.dq(b.inp(0), b.inp(1), b.inp(2))
    attrs = {k: v for k, v in b.attrs.items() if k in ("kernel_shape", "pads", "strides", "ceil_mode",
                                                        "count_include_pad", "auto_pad")}
    attrs = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in attrs.items()}
    if int(b.attr("channels_last", 0)):
        first, back = _channels_last_perms(b, b.inp(0))
        y = b.op("Transpose", [b.op("AveragePool", [b.op("Transpose", [x], perm=first)], **attrs)], perm=back)
    else:
        y = b.op("AveragePool", [x], **attrs)
    b.q(y, b.inp(3), b.inp(4), b.inp(0), b.out(0))


@_rewrites("QLinearConcat")
def _qconcat(b: _B) -> None:
    ins = list(b.node.input)
    if (len(ins) - 2) % 3:
        raise Refused(f"{len(ins)} inputs: expected Y_scale, Y_zero_point, then (X, X_scale, X_zero_point) triples")
    parts = [b.dq(ins[k], ins[k + 1], ins[k + 2] or None) for k in range(2, len(ins), 3)]
    y = b.op("Concat", parts, axis=int(b.attr("axis")))
    b.q(y, b.inp(0), b.inp(1), ins[2], b.out(0))


def _b_axis(b: _B, scale: str, axis: int) -> int | None:
    """The axis of a per-column weight scale (None: per tensor)."""
    s = b.const_of(scale)
    dims = b.shapes.dims(scale)
    n = s.size if s is not None else (math.prod(dims) if dims and all(isinstance(d, int) for d in dims) else None)
    if n == 1:
        return None
    if n is None:
        raise Refused(f"the size of scale '{scale}' is not known")
    return axis


@_rewrites("QGemm")
def _qgemm(b: _B) -> None:
    a = b.dq(b.inp(0), b.inp(1), b.inp(2))
    trans_a, trans_b = int(b.attr("transA", 0)), int(b.attr("transB", 0))
    bw = b.dq(b.inp(3), b.inp(4), b.inp(5), _b_axis(b, b.inp(4), 0 if trans_b else 1))
    alpha = float(b.attr("alpha", 1.0))
    c = None
    if b.inp(6):   # int32 bias with scale alpha * a_scale * b_scale, zero point 0
        scale = b.op("Mul", [b.op("Mul", [b.inp(1), b.inp(4)]), b.const(alpha)])
        c = b.op("Mul", [b.op("Cast", [b.inp(6)], to=TensorProto.FLOAT), scale])
    y_q = b.inp(7)
    y = b.op("Gemm", [a, bw, c], None if y_q else b.out(0), alpha=alpha, transA=trans_a, transB=trans_b)
    if y_q:
        b.q(y, y_q, b.inp(8), b.inp(0), b.out(0))


def _matmul_integer_to_float(b: _B, a: str, a_zp: str | None, scale: str, w: str, w_zp: str | None,
                             bias: str | None) -> None:
    acc = b.op("MatMulInteger", [a, w, a_zp, w_zp] if (a_zp or w_zp) else [a, w])
    y = b.op("Mul", [b.op("Cast", [acc], to=TensorProto.FLOAT), scale], None if bias else b.out(0))
    if bias:
        b.op("Add", [y, bias], b.out(0))


@_rewrites("DynamicQuantizeMatMul")
def _dynamic_quantize_matmul(b: _B) -> None:
    """A quantized to uint8 per tensor at run time (as onnxruntime does), integer MatMul, scaled back."""
    a_q, a_scale, a_zp = (b.tmp("a_q"), b.tmp("a_scale"), b.tmp("a_zp"))
    b.op("DynamicQuantizeLinear", [b.inp(0)], [a_q, a_scale, a_zp])
    scale = b.op("Mul", [a_scale, b.inp(2)])
    _matmul_integer_to_float(b, a_q, a_zp, scale, b.inp(1), b.inp(3), b.inp(4))


@_rewrites("MatMulIntegerToFloat")
def _matmul_integer_to_float_op(b: _B) -> None:
    scale = b.op("Mul", [b.inp(2), b.inp(3)])
    _matmul_integer_to_float(b, b.inp(0), b.inp(4), scale, b.inp(1), b.inp(5), b.inp(6))


# -- fused float ops (onnxruntime's saved optimized graphs) ----------------------------------------
def _activation(b: _B, x: str, act: str, params: list[float], out: str) -> None:
    p = list(params) + [None] * 3
    if act == "Relu" or act == "Tanh" or act == "Sigmoid":
        b.op(act, [x], out)
    elif act == "LeakyRelu":
        b.op(act, [x], out, alpha=float(p[0] if p[0] is not None else 0.01))
    elif act == "HardSigmoid":
        b.op(act, [x], out, alpha=float(p[0] if p[0] is not None else 0.2), beta=float(p[1] if p[1] is not None else 0.5))
    elif act == "Elu":
        b.op(act, [x], out, alpha=float(p[0] if p[0] is not None else 1.0))
    elif act == "Clip":
        lo = float(p[0] if p[0] is not None else -np.inf)
        hi = float(p[1] if p[1] is not None else np.inf)
        b.op("Clip", [x, b.const(lo), b.const(hi)], out) if b.opset >= 11 else b.op("Clip", [x], out, min=lo, max=hi)
    else:
        raise Refused(f"activation '{act}' is not implemented (Relu, Tanh, Sigmoid, LeakyRelu, HardSigmoid, Elu, "
                      f"Clip are)")


@_rewrites("FusedConv")
def _fused_conv(b: _B) -> None:
    act = b.attr("activation", "") or ""
    attrs = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in b.attrs.items()
             if k in ("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides")}
    y = b.op("Conv", [b.inp(0), b.inp(1), b.inp(2)], None if (act or b.inp(3)) else b.out(0), **attrs)
    if b.inp(3):   # Z: added before the activation
        y = b.op("Add", [y, b.inp(3)], None if act else b.out(0))
    if act:
        _activation(b, y, act, list(b.attr("activation_params", []) or []), b.out(0))


@_rewrites("FusedGemm")
def _fused_gemm(b: _B) -> None:
    act = b.attr("activation", "") or ""
    attrs = {k: b.attrs[k] for k in ("alpha", "beta", "transA", "transB") if k in b.attrs}
    y = b.op("Gemm", [b.inp(0), b.inp(1), b.inp(2)], None if act else b.out(0), **attrs)
    if act:
        if act in ("Selu", "ThresholdedRelu", "ScaledTanh", "ParametricSoftplus", "Affine", "ScaledTanh"):
            raise Refused(f"activation '{act}' is not implemented")
        params = [b.attrs[k] for k in ("activation_alpha", "activation_beta") if k in b.attrs]
        if act == "HardSigmoid" and "activation_alpha" not in b.attrs:
            params = [0.2, b.attrs.get("activation_beta", 0.5)]
        _activation(b, y, act, params, b.out(0))


# -- transformer ops -------------------------------------------------------------------------------
def _heads(b: _B, x: str, n: int, perm: list[int]) -> str:
    """(B, S, N*H) -> Transpose((B, S, N, H), perm)."""
    return b.op("Transpose", [b.op("Reshape", [x, b.i64([0, 0, n, -1])])], perm=perm)


def _mask_add(b: _B, mask: str, kind: str, filt: float, k_bnth: str, batch_dim, what: str) -> str:
    """The additive float mask (0 / mask_filter_value) of a key padding or attention mask, shaped to
    broadcast against scores (B, N, S, T)."""
    r = b.shapes.rank(mask)
    if r is None:
        raise Refused(f"the rank of {what} '{mask}' is not known")
    if r == 1:
        n = (b.shapes.dims(mask) or [None])[0]
        both = isinstance(n, int) and isinstance(batch_dim, int) and n == 2 * batch_dim   # end, then start positions
        if n is None or batch_dim is None or (n != batch_dim and not both):
            raise Refused(f"{what} of shape [{n}]: the [batch] form (valid lengths) and [2 x batch] (end and start "
                          f"positions) are implemented, and its length must be known to be one of them "
                          f"(batch: {batch_dim})")
        pos = b.unsqueeze(b.op("Cast", [b.arange(b.dim(k_bnth, 2))], to=TensorProto.FLOAT), [0])   # (1, T)
        ends = b.unsqueeze(b.op("Cast", [mask], to=TensorProto.FLOAT), [1])                         # (B or 2B, 1)
        if both:
            end, start = b.slice(ends, 0, batch_dim, 0), b.slice(ends, batch_dim, 2 * batch_dim, 0)
            keep = b.op("And", [b.op("Less", [pos, end]), b.op("Not", [b.op("Less", [pos, start])])])
        else:
            keep = b.op("Less", [pos, ends])                                                           # (B, T)
        add = b.op("Where", [keep, b.const(0.0), b.const(filt)])
        return b.unsqueeze(add, [1, 2])
    if r in (2, 3):
        keep = b.op("Greater", [b.op("Cast", [mask], to=TensorProto.FLOAT), b.const(0.0)])
        add = b.op("Where", [keep, b.const(0.0), b.const(filt)])
        return b.unsqueeze(add, [1, 2] if r == 2 else [1])
    raise Refused(f"{what} of rank {r} is not implemented (1-D lengths, 2-D key padding, 3-D attention masks are)")


def _causal_add(b: _B, q_bnsh: str, k_bnth: str) -> str:
    """(S, T): the lowest float32 where key j lies after query i (j > i + T - S), so a later key never counts,
    even in a row whose earlier keys are all padding (onnxruntime excludes them; mask_filter_value would
    not). Folds at package time."""
    s, t = b.dim(q_bnsh, 2), b.dim(k_bnth, 2)
    i = b.unsqueeze(b.arange(s), [1])
    j = b.unsqueeze(b.arange(t), [0])
    later = b.op("Greater", [b.op("Sub", [j, i]), b.op("Sub", [t, s])])
    return b.op("Where", [later, b.const(np.finfo(np.float32).min), b.const(0.0)])


def _attend(b: _B, q: str, k: str, v: str, scale: float | None, adds: list[str], out: str) -> None:
    """q (B,N,S,H), k (B,N,T,H), v (B,N,T,Hv) -> out (B, S, N*Hv). scale None: already in q."""
    scores = b.op("MatMul", [q, b.op("Transpose", [k], perm=[0, 1, 3, 2])])
    if scale is not None:
        scores = b.op("Mul", [scores, b.const(scale)])
    for a in adds:
        scores = b.op("Add", [scores, a])
    ctx = b.op("MatMul", [b.op("Softmax", [scores], axis=-1), v])
    b.op("Reshape", [b.op("Transpose", [ctx], perm=[0, 2, 1, 3]), b.i64([0, 0, -1])], out)


def _last_dim(b: _B, name: str) -> int | None:
    d = b.shapes.dims(name)
    return d[-1] if d and isinstance(d[-1], int) else None


@_rewrites("Attention")
def _attention(b: _B) -> None:
    if int(b.attr("past_present_share_buffer", 0)) or b.inp(6):
        raise Refused("a shared past/present buffer (past_sequence_length) is not implemented")
    _attention_core(b, b.inp(0), b.inp(1), b.const_of(b.inp(1)), b.inp(2), b.inp(3), b.inp(4), b.inp(5))


@_rewrites("QAttention")
def _qattention(b: _B) -> None:
    """onnxruntime's quantize_dynamic form of Attention: integer input and weights with their scales; the
    float Attention of their dequantized values (constant weights dequantized here, at package time)."""
    x = b.dq(b.inp(0), b.inp(3), b.inp(6))
    w, ws, wz = b.inp(1), b.inp(4), b.inp(7)
    wc, sc, zc = b.const_of(w), b.const_of(ws), b.const_of(wz)
    if wc is not None and sc is not None and (wz is None or zc is not None):
        zero = np.zeros(1, np.float32) if zc is None else zc.astype(np.float32).reshape(-1)
        wf = ((wc.astype(np.float32) - zero) * sc.astype(np.float32).reshape(-1)).astype(np.float32)
        _attention_core(b, x, w, wf, b.inp(2), b.inp(5), b.inp(8), None)
        return
    if (sc is not None and sc.size != 1) or (zc is not None and zc.size != 1):
        raise Refused("per-column weight scales need constant weights")
    _attention_core(b, x, b.dq(w, ws, wz), None, b.inp(2), b.inp(5), b.inp(8), None)


def _attention_core(b: _B, x: str, w: str, wc: np.ndarray | None, bias: str | None, mask: str | None,
                    past: str | None, attn_bias: str | None) -> None:
    """Attention / QAttention: x (B, S, Hin) @ w (Hin, Dq+Dk+Dv) (+ bias) -> heads -> masked softmax -> output;
    wc: w's value when known at package time."""
    if int(b.attr("do_rotary", 0)):
        raise Refused("do_rotary=1 is not implemented")
    n = b.positive("num_heads")
    width = wc.shape[-1] if wc is not None else _last_dim(b, w)
    sizes = list(b.attr("qkv_hidden_sizes", []) or [])
    if not sizes:
        if width is None:
            raise Refused(f"the width of weights '{w}' is not known")
        sizes = [width // 3] * 3
    scale = float(b.attr("scale", 0.0)) or 1.0 / math.sqrt(sizes[0] // n)
    bc = b.const_of(bias)
    if wc is not None and (bias is None or bc is not None):   # three MatMul + constant bias (one fused kernel each)
        qkv, at = [], 0
        for i, s in enumerate(sizes):
            f = scale if i == 0 else 1.0   # the score scale folded into Q's weights: no pass over (B, N, S, T)
            y = b.op("MatMul", [x, b.const(wc[:, at:at + s] * f, wc.dtype, "w")])
            if bias:
                y = b.op("Add", [y, b.const(bc[at:at + s] * f, bc.dtype, "b")])
            qkv.append(y)
            at += s
        scale = None
    else:
        y = b.op("MatMul", [x, w])
        if bias:
            y = b.op("Add", [y, bias])
        qkv = b.split(y, sizes, -1)
    q = _heads(b, qkv[0], n, [0, 2, 1, 3])
    k = _heads(b, qkv[1], n, [0, 2, 1, 3])
    v = _heads(b, qkv[2], n, [0, 2, 1, 3])
    if past:
        k = b.op("Concat", [b.op("Gather", [past, b.i64(0)], axis=0), k], axis=2)
        v = b.op("Concat", [b.op("Gather", [past, b.i64(1)], axis=0), v], axis=2)
    if b.out(1):
        b.op("Concat", [b.unsqueeze(k, [0]), b.unsqueeze(v, [0])], b.out(1), axis=0)
    filt = float(b.attr("mask_filter_value", -10000.0))
    adds = []
    if mask:
        adds.append(_mask_add(b, mask, "mask_index", filt, k, (b.shapes.dims(b.inp(0)) or [None])[0], "mask_index"))
    if int(b.attr("unidirectional", 0)):
        adds.append(_causal_add(b, q, k))
    if attn_bias:
        adds.append(attn_bias)
    _attend(b, q, k, v, scale, adds, b.out(0))


@_rewrites("MultiHeadAttention")
def _multi_head_attention(b: _B) -> None:
    _only_outputs(b, 3, "qk")
    if b.inp(8) or b.inp(9):
        raise Refused("past_sequence_length / cache_indirection (beam search) are not implemented")
    n = b.positive("num_heads")
    q, k, v, bias = b.inp(0), b.inp(1), b.inp(2), b.inp(3)
    rq = b.shapes.rank(q)
    if rq != 3 or k is None or v is None:
        raise Refused("packed QKV / KV inputs are not implemented (query, key and value given separately are)")
    rk, rv = b.shapes.rank(k), b.shapes.rank(v)
    if rk not in (3, 4) or rk != rv:
        raise Refused(f"key/value of rank {rk}/{rv}: (B, L, D) or (B, N, L, H) are implemented")
    d = _last_dim(b, q)
    if d is None:
        raise Refused(f"the hidden size of query '{q}' is not known")
    if bias:
        dk = _last_dim(b, k) if rk == 3 else None
        dv = _last_dim(b, v) if rk == 3 else None
        if rk == 4 or dk is None or dv is None:
            raise Refused("bias with key/value in (B, N, L, H) form is not implemented")
        bq, bk, bv = b.split(bias, [d, dk, dv], 0)
        q, k, v = b.op("Add", [q, bq]), b.op("Add", [k, bk]), b.op("Add", [v, bv])
    qh = _heads(b, q, n, [0, 2, 1, 3])
    kh = _heads(b, k, n, [0, 2, 1, 3]) if rk == 3 else k
    vh = _heads(b, v, n, [0, 2, 1, 3]) if rk == 3 else v
    if b.inp(6) and b.inp(7):
        kh = b.op("Concat", [b.inp(6), kh], axis=2)
        vh = b.op("Concat", [b.inp(7), vh], axis=2)
    elif b.inp(6) or b.inp(7):
        raise Refused("past_key and past_value must be given together")
    if b.out(1):
        b.op("Identity", [kh], b.out(1))
    if b.out(2):
        b.op("Identity", [vh], b.out(2))
    filt = float(b.attr("mask_filter_value", -10000.0))
    adds = []
    if b.inp(4):
        adds.append(_mask_add(b, b.inp(4), "key_padding_mask", filt, kh, (b.shapes.dims(b.inp(0)) or [None])[0],
                              "key_padding_mask"))
    if int(b.attr("unidirectional", 0)):
        adds.append(_causal_add(b, qh, kh))
    if b.inp(5):
        adds.append(b.inp(5))
    scale = float(b.attr("scale", 0.0)) or 1.0 / math.sqrt(d // n)
    _attend(b, qh, kh, vh, scale, adds, b.out(0))


@_rewrites("RotaryEmbedding")
def _rotary(b: _B) -> None:
    if int(b.attr("is_packed_batching", 0)):
        raise Refused("is_packed_batching=1 is not implemented")
    if float(b.attr("scale", 1.0)) != 1.0:
        raise Refused("scale != 1 is not implemented")
    x, pos, cos_c, sin_c = b.inp(0), b.inp(1), b.inp(2), b.inp(3)
    dims, cdims = b.shapes.dims(x), b.shapes.dims(cos_c)
    if dims is None or len(dims) not in (3, 4) or cdims is None or not isinstance(cdims[-1], int):
        raise Refused("the ranks of input and cos_cache must be known (input 3-D or 4-D)")
    n, rd = int(b.attr("num_heads", 0)), int(b.attr("rotary_embedding_dim", 0))
    if len(dims) == 4:
        head = dims[3]
    elif n:
        head = dims[2] // n if isinstance(dims[2], int) else None
    else:
        head = cdims[-1] * 2
        n = dims[2] // head if isinstance(dims[2], int) else 0
    if not isinstance(head, int) or (len(dims) == 3 and not n):
        raise Refused("the head size is not known (give num_heads, or a static hidden size)")
    rd = rd or head
    if rd != cdims[-1] * 2 or rd > head or rd % 2:
        raise Refused(f"rotary dim {rd} does not match cos_cache's {cdims[-1]} x 2 and head size {head}")
    xh = b.op("Reshape", [x, b.i64([0, 0, n, head])]) if len(dims) == 3 else x   # (B,S,N,H) or (B,N,S,H)
    seq_axis, head_axis = (1, 2) if len(dims) == 3 else (2, 1)
    if b.shapes.rank(pos) == 1:   # one offset: positions offset + [0, S)
        ids = b.unsqueeze(b.op("Add", [b.arange(b.dim(xh, seq_axis)), b.op("Cast", [pos], to=TensorProto.INT64)]), [0])
    else:
        ids = pos
    cos = b.unsqueeze(b.op("Gather", [cos_c, ids], axis=0), [head_axis])   # (B, S, 1, rd/2) / (B, 1, S, rd/2)
    sin = b.unsqueeze(b.op("Gather", [sin_c, ids], axis=0), [head_axis])
    xr = b.slice(xh, 0, rd, 3) if rd < head else xh
    half = rd // 2
    if int(b.attr("interleaved", 0)):
        x1, x2 = b.slice(xr, 0, rd, 3, 2), b.slice(xr, 1, rd, 3, 2)
    else:
        x1, x2 = b.slice(xr, 0, half, 3), b.slice(xr, half, rd, 3)
    o1 = b.op("Sub", [b.op("Mul", [x1, cos]), b.op("Mul", [x2, sin])])
    o2 = b.op("Add", [b.op("Mul", [x2, cos]), b.op("Mul", [x1, sin])])
    if int(b.attr("interleaved", 0)):
        pair = b.op("Concat", [b.unsqueeze(o1, [4]), b.unsqueeze(o2, [4])], axis=4)
        rot = b.op("Reshape", [pair, b.i64([0, 0, 0, rd])])
    else:
        rot = b.op("Concat", [o1, o2], axis=3)
    parts = [rot, b.slice(xh, rd, head, 3)] if rd < head else [rot]
    final = b.out(0) if len(dims) == 4 else None
    y = b.op("Concat", parts, final, axis=3) if len(parts) > 1 else b.op("Identity", parts, final)
    if len(dims) == 3:
        b.op("Reshape", [y, b.i64([0, 0, -1])], b.out(0))


@_rewrites("EmbedLayerNormalization")
def _embed_layer_norm(b: _B) -> None:
    _embed_core(b, *(b.inp(i) for i in range(9)))


@_rewrites("QEmbedLayerNormalization")
def _qembed_layer_norm(b: _B) -> None:
    """onnxruntime's quantize_dynamic form: the five tables 8-bit with scales and zero points (inputs 8-12 and
    13-17); DequantizeLinear of each (folded at package time, the tables kept 8-bit), then EmbedLayerNormalization."""
    tables = [b.dq(b.inp(k), b.inp(k + 6), b.inp(k + 11)) if b.inp(k) else None for k in (2, 3, 4, 5, 6)]
    we, pe, se, gamma, beta = tables
    _embed_core(b, b.inp(0), b.inp(1), we, pe, se, gamma, beta, b.inp(7), None)


def _embed_core(b: _B, ids: str, seg: str | None, word: str, pos_emb: str, seg_emb: str | None, gamma: str,
                beta: str | None, mask: str | None, pos_ids: str | None) -> None:
    """LayerNorm(word[ids] + pos[position ids or 0..S-1] + seg[segment ids]); mask_index = valid lengths."""
    s = b.op("Gather", [word, ids], axis=0)                                         # (B, S, H)
    p = pos_ids if pos_ids else b.arange(b.dim(ids, 1))
    s = b.op("Add", [s, b.op("Gather", [pos_emb, p], axis=0)])
    if seg and seg_emb:
        s = b.op("Add", [s, b.op("Gather", [seg_emb, seg], axis=0)])
    if b.out(2):
        s = b.op("Identity", [s], b.out(2))
    b.layer_norm(s, gamma, beta, b.attr("epsilon", 1e-12), b.out(0))
    if b.out(1):   # valid lengths per batch row, as the Attention mask_index reads them
        if mask:
            # summed in float32 (exact below 2^24; the reduce kernels are float32)
            b.op("Cast", [b.reduce("ReduceSum", b.op("Cast", [mask], to=TensorProto.FLOAT), [1], keepdims=0)],
                 b.out(1), to=TensorProto.INT32)
        else:   # no mask: onnxruntime writes zeros
            b.op("ConstantOfShape", [b.dim(ids, 0)], b.out(1), value=helper.make_tensor("z", TensorProto.INT32, [1], [0]))


SUPPORTED = frozenset(REWRITES)
# onnxruntime registers these contrib ops in the default ONNX domain (its transformer optimizer writes them there)
ORT_DEFAULT_DOMAIN = frozenset({"SimplifiedLayerNormalization"})


def adopt_ort_ops(model: onnx.ModelProto) -> onnx.ModelProto:
    """onnxruntime's default-domain contrib ops (no ONNX schema: the checker would refuse the model) moved to
    com.microsoft, where the rewrite finds them; a copy when anything changes."""
    opset = next((i.version for i in model.opset_import if i.domain in STANDARD), 1)

    def foreign(n: onnx.NodeProto) -> bool:
        if n.domain not in STANDARD or n.op_type not in ORT_DEFAULT_DOMAIN:
            return False
        try:
            onnx.defs.get_schema(n.op_type, opset, "")
            return False
        except onnx.defs.SchemaError:
            return True
    if not any(foreign(n) for n in model.graph.node):
        return model
    m = onnx.ModelProto()
    m.CopyFrom(model)
    for n in m.graph.node:
        if foreign(n):
            n.domain = DOMAIN
    if not any(o.domain == DOMAIN for o in m.opset_import):
        m.opset_import.append(helper.make_opsetid(DOMAIN, 1))
    return m


def supported(node: onnx.NodeProto) -> bool:
    """Whether the loader accepts this node without --allow-domain: a com.microsoft op edgepack rewrites."""
    return node.domain == DOMAIN and node.op_type in REWRITES


def refusal(op_type: str) -> str:
    """Why a com.microsoft op is not accepted (for the loader's message)."""
    return (f"edgepack has no rewrite for com.microsoft.{op_type}; the contrib ops it rewrites into standard ONNX are "
            f"{', '.join(sorted(REWRITES))}")


def for_onnxruntime(model: onnx.ModelProto) -> onnx.ModelProto:
    """The model as onnxruntime runs it (a verification reference): adopt_ort_ops undone."""
    if not any(n.domain == DOMAIN and n.op_type in ORT_DEFAULT_DOMAIN for n in model.graph.node):
        return model
    m = onnx.ModelProto()
    m.CopyFrom(model)
    for n in m.graph.node:
        if n.domain == DOMAIN and n.op_type in ORT_DEFAULT_DOMAIN:
            n.domain = ""
    return m


def drop_unused_custom(model: onnx.ModelProto) -> onnx.ModelProto:
    """Nodes of non-standard domains (accepted by --allow-domain) whose outputs nothing reads, dropped until none
    is left: they cannot change the outputs, and neither analysis nor lowering could run them."""
    from .subgraphs import node_outer_refs
    nodes = list(model.graph.node)
    keep = [True] * len(nodes)
    while True:
        used = {o.name for o in model.graph.output}
        for k, n in enumerate(nodes):
            if keep[k]:
                used.update(n.input)
                used.update(node_outer_refs(n))   # values If/Loop/Scan bodies read from this graph
        dead = [k for k, n in enumerate(nodes) if keep[k] and n.domain not in STANDARD
                and not any(o in used for o in n.output if o)]
        if not dead:
            break
        for k in dead:
            keep[k] = False
    if all(keep):
        return model
    m = onnx.ModelProto()
    m.CopyFrom(model)
    del m.graph.node[:]
    m.graph.node.extend(n for n, k in zip(nodes, keep) if k)
    return m


def rewrite_contrib(model: onnx.ModelProto) -> tuple[onnx.ModelProto, dict[str, int]]:
    """Every com.microsoft node of the main graph replaced (in a copy) by standard nodes; returns the model and
    how many nodes of each op were rewritten. Raises UnsupportedError for a node it cannot rewrite exactly."""
    model = drop_unused_custom(model)
    todo = [n for n in model.graph.node if n.domain == DOMAIN]
    if not todo:
        return model, {}
    opset = next((i.version for i in model.opset_import if i.domain in STANDARD), 1)
    m = onnx.ModelProto()
    m.CopyFrom(model)
    shapes = _Shapes(m)
    nodes: list[onnx.NodeProto] = []
    inits: list[onnx.TensorProto] = []
    done: dict[str, int] = {}
    for i, n in enumerate(m.graph.node):
        if n.domain != DOMAIN:
            keep = onnx.NodeProto()
            keep.CopyFrom(n)
            nodes.append(keep)
            continue
        label = n.name or f"{n.op_type}_{i}"
        fn = REWRITES.get(n.op_type)
        if fn is None:
            raise UnsupportedError(n.op_type, label, opset, refusal(n.op_type), domain=DOMAIN)
        if opset < MIN_OPSET:
            raise UnsupportedError(n.op_type, label, opset, f"contrib ops are rewritten for opset {MIN_OPSET} and "
                                   f"later only", domain=DOMAIN)
        shapes.done, shapes.refreshed = (nodes, list(m.graph.initializer) + inits), False
        b = _B(n, opset, label, shapes)
        try:
            fn(b)
        except Refused as e:
            raise UnsupportedError(n.op_type, label, opset, str(e), domain=DOMAIN) from None
        except Exception as e:  # noqa: BLE001 - a required attribute or input missing, a zero num_heads, ...
            raise UnsupportedError(n.op_type, label, opset, f"malformed node ({type(e).__name__}: {e})",
                                   domain=DOMAIN) from None
        nodes.extend(b.nodes)
        inits.extend(b.inits)
        done[n.op_type] = done.get(n.op_type, 0) + 1
    del m.graph.node[:]
    m.graph.node.extend(nodes)
    m.graph.initializer.extend(inits)
    keep_imports = [o for o in m.opset_import if o.domain != DOMAIN]
    del m.opset_import[:]
    m.opset_import.extend(keep_imports)
    return m, done
