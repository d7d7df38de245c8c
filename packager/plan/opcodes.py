"""Kernel ids of the plan: mirror of wasm_kernels/include/ep_ops.h (tests/test_plan_format.py checks they agree)."""
from __future__ import annotations

import enum


class Op(enum.IntEnum):
    UNARY = 1
    BINARY = 2
    WHERE = 3
    CAST = 4
    CONV = 5
    CONV_TRANSPOSE = 6
    GEMM = 7
    MATMUL = 8
    POOL = 9
    GLOBAL_POOL = 10
    BATCHNORM = 11
    SOFTMAX = 12
    LAYERNORM = 13
    REDUCE = 14
    CONCAT = 15
    SPLIT = 16
    SLICE = 17
    GATHER = 18
    TRANSPOSE = 19
    COPY = 20
    PAD = 21
    EXPAND = 22
    RESIZE = 23
    DEPTHWISE_CONV = 24
    WINOGRAD_CONV = 25
    # int8 family (ids 26..39)
    QUANTIZE_LINEAR = 26
    DEQUANTIZE_LINEAR = 27
    DYNAMIC_QUANTIZE_LINEAR = 28
    QCONV = 29
    QDEPTHWISE_CONV = 30
    QMATMUL = 31
    QADD = 32
    QMAXPOOL = 33
    QWINOGRAD_CONV = 34
    # float kernels again (ids 40..)
    WINOGRAD_CONV_F4 = 40
    WINOGRAD_FILTER = 41
    # plan v2: run-time shapes (ids 42..)
    SHAPE = 42
    VIEW = 43
    RANGE = 44
    CONSTANT_OF_SHAPE = 45
    # plan v2 control flow: bodies are node ranges after the main sequence (docs/plan-format.md, "Sub-plans")
    IF = 46
    LOOP = 47
    SCAN = 48


# ONNX TensorProto dtype codes the runtime understands, with their numpy types.
import numpy as np  # noqa: E402

DTYPES: dict[int, np.dtype] = {
    1: np.dtype(np.float32), 2: np.dtype(np.uint8), 3: np.dtype(np.int8), 6: np.dtype(np.int32),
    7: np.dtype(np.int64), 9: np.dtype(np.bool_), 10: np.dtype(np.float16),
}
CODES: dict[np.dtype, int] = {v: k for k, v in DTYPES.items()}
MAX_RANK = 8
MAX_IO = 16
