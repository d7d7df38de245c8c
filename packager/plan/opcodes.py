"""Kernel ids and the dtypes of the plan. Op, its arity and the function codes are generated from
wasm_kernels/spec/ops.json into opspec.py (scripts/gen_opspec.py); this module re-exports Op and MAX_IO."""
from __future__ import annotations

import ml_dtypes
import numpy as np

from .opspec import DTYPE_TABLE, MAX_IO, Op

__all__ = ["CODES", "DTYPES", "FLOAT8", "MAX_IO", "MAX_RANK", "Op"]

# ONNX TensorProto dtype codes the runtime understands, with their numpy types (docs/plan-format.md, "Dtypes").
# The low-precision ones are ml_dtypes' (onnx's own numpy types for them): one element per byte (bfloat16: two), as
# the plan stores them; their names (np.dtype(name) once ml_dtypes is imported) are the manifest's dtype names.
DTYPES: dict[int, np.dtype] = {code: np.dtype(getattr(ml_dtypes, name, name)) for code, (name, _, _) in DTYPE_TABLE.items()}
assert all(DTYPES[c].itemsize == DTYPE_TABLE[c][1] for c in DTYPES)
# The float8 formats: CAST into them takes [saturate, round_mode] words (float8e8m0 rounds by round_mode).
FLOAT8 = frozenset({17, 18, 19, 20, 24})
CODES: dict[np.dtype, int] = {v: k for k, v in DTYPES.items()}
MAX_RANK = 8
