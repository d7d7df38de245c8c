"""MatMul + Add -> Gemm for 2-D operands: one GEMM kernel with the bias in its epilogue (and an activation
after it can then fuse too) instead of MATMUL + a broadcast ADD.

The rules are onnxscript's (rewriter.rules.common._matmul_add_to_gemm, both Add operand orders); this
module adds the conditions Gemm itself imposes that they do not check: the bias must broadcast to
[M, N] one-directionally (rank <= 2, each dim 1 or equal) and the dtype must be one Gemm takes."""
from __future__ import annotations

import onnx_ir as ir
from onnxscript.rewriter import RewriteRuleSet
from onnxscript.rewriter.rules.common._matmul_add_to_gemm import (MatMulAddToGemm, TransABMatMulAddToGemm,
                                                                 TransAMatMulAddToGemm, TransBMatMulAddToGemm)

GEMM_DTYPES = {ir.DataType.FLOAT, ir.DataType.DOUBLE, ir.DataType.FLOAT16}


def _bias_fits(a: ir.Value, b: ir.Value, c: ir.Value, trans_a: bool, trans_b: bool) -> bool:
    if a.shape is None or b.shape is None or c.shape is None or a.dtype not in GEMM_DTYPES:
        return False
    if not all(isinstance(d, int) for d in (*a.shape, *b.shape, *c.shape)):
        return False
    m = a.shape[1] if trans_a else a.shape[0]
    n = b.shape[0] if trans_b else b.shape[1]
    cs = list(c.shape)
    return len(cs) <= 2 and all(d in (1, want) for d, want in zip(reversed(cs), (n, m)))


def _checked(base: type) -> type:
    class Rule(base):
        def check(self, context, input_a, input_b, input_c=None, **kw):   # type: ignore[override]
            r = super().check(context, input_a, input_b, **kw)
            if r and not _bias_fits(input_a, input_b, input_c, self.trans_a, self.trans_b):
                return r.fail("bias does not broadcast one-directionally to [M, N], or dtype not Gemm's")
            return r
    Rule.__name__ = base.__name__
    return Rule


RULES = RewriteRuleSet([_checked(c)().rule() for c in (MatMulAddToGemm, TransAMatMulAddToGemm,
                                                       TransBMatMulAddToGemm, TransABMatMulAddToGemm)], commute=True)


def matmul_add_to_gemm(model: ir.Model) -> ir.Model:
    RULES.apply_to_model(model)
    return model
