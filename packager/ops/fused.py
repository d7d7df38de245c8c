"""Fused lowerings: the epilogue groups found by packager/passes/fuse_epilogue.py."""
from __future__ import annotations

import onnx

from ..lowering import LowerCtx, lowers_fused
from .conv import emit_conv
from .linalg import emit_gemm, emit_matmul


@lowers_fused("Conv")
def fused_conv(ctx: LowerCtx, node: onnx.NodeProto, activation: tuple[int, list[float]], residual: str | None) -> None:
    emit_conv(ctx, node, activation=activation, residual=residual)


@lowers_fused("Gemm")
def fused_gemm(ctx: LowerCtx, node: onnx.NodeProto, activation: tuple[int, list[float]], residual: str | None) -> None:
    emit_gemm(ctx, node, activation=activation, residual=residual)


@lowers_fused("MatMul")
def fused_matmul(ctx: LowerCtx, node: onnx.NodeProto, activation: tuple[int, list[float]], residual: str | None,
                 bias: str | None = None) -> None:
    emit_matmul(ctx, node, bias=bias, activation=activation, residual=residual)
