"""The lowering registry: ONNX op type -> the function in packager/ops/ that lowers it.

An op module registers with @lowers("OpType") (or @lowers_fused for the epilogue-fusing Conv/Gemm/MatMul);
the driver (packager/lower.py) looks lowerings up here, as do analysis (what a kernel computes at run time)
and model loading (custom-domain ops edgepack implements)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import onnx

if TYPE_CHECKING:
    from .context import LowerCtx

LowerFn = Callable[["LowerCtx", onnx.NodeProto], None]
# A fused lowering gets the head node (its output renamed to the group's), the activation
# (code, params) and the residual input name (or None).
FusedFn = Callable[["LowerCtx", onnx.NodeProto, tuple[int, list[float]], "str | None"], None]
REGISTRY: dict[str, LowerFn] = {}
FUSED_REGISTRY: dict[str, FusedFn] = {}


def lowers(*op_types: str) -> Callable[[LowerFn], LowerFn]:
    """Register a lowering function for ONNX op types: "Op" (default domain) or "domain.Op" (a custom domain's op
    that edgepack implements, accepted without --allow-domain: packager/model_load.py)."""
    def deco(fn: LowerFn) -> LowerFn:
        for t in op_types:
            if t in REGISTRY:
                raise RuntimeError(f"two lowerings registered for {t}")
            REGISTRY[t] = fn
        return fn
    return deco


def lowers_fused(*op_types: str) -> Callable[[FusedFn], FusedFn]:
    """Register the epilogue-fusing lowering of Conv/Gemm (see packager/passes/fuse_epilogue.py)."""
    def deco(fn: FusedFn) -> FusedFn:
        for t in op_types:
            FUSED_REGISTRY[t] = fn
        return fn
    return deco


def registered_name(node) -> str:
    """REGISTRY key: "Op" in the default domain, "domain.Op" for a custom domain's op edgepack implements."""
    return node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}.{node.op_type}"


def lowered_custom_op(domain: str, op_type: str) -> bool:
    """Whether an op of a custom domain has a lowering of its own (e.g. com.microsoft.DynamicQuantizeLSTM)."""
    load_ops()
    return f"{domain}.{op_type}" in REGISTRY


def load_ops() -> None:
    """Import every module of packager/ops (each registers its lowerings); found by name, so the registry
    imports no lowering and every lowering can import the registry."""
    import importlib
    import pkgutil
    ops = importlib.import_module("..ops", __package__)
    for m in pkgutil.iter_modules(ops.__path__):
        importlib.import_module(f"{ops.__name__}.{m.name}")
