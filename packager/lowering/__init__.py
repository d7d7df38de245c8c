"""The lowering machinery the driver (packager/lower.py) and every op module (packager/ops/) share: the registry
of lowering functions and the context they emit kernels into."""
from .context import Emitted, LowerCtx, LoweredPlan, Tensor, check_wasm32
from .registry import FUSED_REGISTRY, REGISTRY, lowered_custom_op, lowers, lowers_fused, load_ops

__all__ = ["Emitted", "LowerCtx", "LoweredPlan", "Tensor", "check_wasm32", "FUSED_REGISTRY", "REGISTRY",
           "lowered_custom_op", "lowers", "lowers_fused", "load_ops"]
