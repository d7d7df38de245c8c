"""Kernel ids and the dtypes of the plan. Op, its arity and the function codes are generated from
wasm_kernels/spec/ops.json into opspec.py (scripts/gen_opspec.py); this module re-exports Op and MAX_IO."""
from __future__ import annotations

import numpy as np

from .opspec import MAX_IO, Op

__all__ = ["CODES", "DTYPES", "MAX_IO", "MAX_RANK", "Op"]

# ONNX TensorProto dtype codes the runtime understands, with their numpy types (docs/plan-format.md, "Dtypes").
DTYPES: dict[int, np.dtype] = {
    1: np.dtype(np.float32), 2: np.dtype(np.uint8), 3: np.dtype(np.int8), 4: np.dtype(np.uint16),
    5: np.dtype(np.int16), 6: np.dtype(np.int32), 7: np.dtype(np.int64), 9: np.dtype(np.bool_),
    10: np.dtype(np.float16), 11: np.dtype(np.float64), 12: np.dtype(np.uint32), 13: np.dtype(np.uint64),
}
CODES: dict[np.dtype, int] = {v: k for k, v in DTYPES.items()}
MAX_RANK = 8
