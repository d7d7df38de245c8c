"""A scalar scale after a MatMul moves onto its smaller operand: Mul(MatMul(a, b), c) -> MatMul(Mul(a, c), b) (or b
scaled), and Div likewise. Attention scales its scores so: Whisper's are 1500 x 1500 per head where Q is 1500 x 64,
BERT divides its 128 x 128 scores by 8; an elementwise pass over the scores becomes one over Q (or K). A constant
operand takes the scale first: analysis folds it into the weights and no kernel is left.

The product is the same up to where one rounding happens: exact when c is a power of two (1/sqrt(64) = 1/8, the
usual head size), otherwise within an ulp of each product term (onnxruntime's attention fusion scales Q too)."""
from __future__ import annotations

import math

import onnx_ir as ir
from onnxscript.rewriter import RewriteRuleSet, pattern

FLOATS = {ir.DataType.FLOAT, ir.DataType.DOUBLE, ir.DataType.FLOAT16}


def _numel(v: ir.Value) -> int | None:
    if v.shape is None or not all(isinstance(d, int) for d in v.shape):
        return None
    return math.prod(v.shape)


def _scaled_side(a: ir.Value, b: ir.Value, c: ir.Value, product: ir.Value) -> int | None:
    """0 to scale a, 1 to scale b, None to leave the graph alone."""
    cv = c.const_value
    if cv is None or cv.size != 1 or c.dtype not in FLOATS or c.dtype != product.dtype or c.shape is None:
        return None
    sizes = [_numel(a), _numel(b)]
    out = _numel(product)
    if None in sizes or out is None:
        return None
    const = [x.const_value is not None for x in (a, b)]
    side = const.index(True) if any(const) else (0 if sizes[0] <= sizes[1] else 1)
    x = (a, b)[side]
    # the scale must not broadcast x to another shape (c of rank <= x's), and must save work unless it folds
    if len(c.shape) > len(x.shape) or (not const[side] and sizes[side] >= out):
        return None
    return side


def _rules(op_type: str) -> list[pattern.RewriteRule]:
    def target(op, a, b, c):
        return getattr(op, op_type)(op.MatMul(a, b, _outputs=["product"]), c)

    def on_a(op, a, b, c, **_):
        return op.MatMul(getattr(op, op_type)(a, c), b)

    def on_b(op, a, b, c, **_):
        return op.MatMul(a, getattr(op, op_type)(b, c))

    def cond(side: int):
        return lambda context, a, b, c, product, **_: _scaled_side(a, b, c, product) == side

    return [pattern.RewriteRule(target, on_a, cond(0), name=f"{op_type}OnA"),
            pattern.RewriteRule(target, on_b, cond(1), name=f"{op_type}OnB")]


RULES = RewriteRuleSet([*_rules("Mul"), *_rules("Div")], commute=True)


def hoist_matmul_scale(model: ir.Model) -> ir.Model:
    RULES.apply_to_model(model)
    return model
