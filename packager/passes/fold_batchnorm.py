"""BatchNormalization folded into the Conv / ConvTranspose / Gemm before it (weights and bias rescaled).

The rewrite rules are onnxscript's (rewriter.rules.common._fuse_batchnorm); this module adds the
inference-only condition they do not check: a BatchNormalization in training mode (batch statistics,
running-stat outputs) is not an affine map and is left alone."""
from __future__ import annotations

import onnx_ir as ir
from onnxscript.rewriter import RewriteRuleSet
from onnxscript.rewriter._basics import MatchResult
from onnxscript.rewriter.rules.common._fuse_batchnorm import (FuseBatchNormIntoConv, FuseBatchNormIntoConvTranspose,
                                                             FuseBatchNormIntoGemm)


def _inference_only(base: type) -> type:
    class Rule(base):
        def check(self, context, x, inbound_out, batchnorm_out):   # type: ignore[override]
            bn = batchnorm_out.producer()
            if bn.attributes.get_int("training_mode", 0) or len(bn.outputs) > 1:
                return MatchResult().fail("training-mode BatchNormalization")
            return super().check(context, x, inbound_out, batchnorm_out)
    Rule.__name__ = base.__name__
    return Rule


RULES = RewriteRuleSet([_inference_only(c)().rule()
                        for c in (FuseBatchNormIntoConv, FuseBatchNormIntoConvTranspose, FuseBatchNormIntoGemm)])


def fold_batchnorm(model: ir.Model) -> ir.Model:
    RULES.apply_to_model(model)
    return model
