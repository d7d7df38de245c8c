"""`--profile strict`, in the spirit of the SONNX safety-related ONNX profile.

Strict packaging makes every semantic choice visible and checkable: every attribute is written
explicitly in the shipped model (nothing left to a default), shapes are static (a symbolic dim must be
given with --input-shape), the execution order is fixed and recorded in the manifest, the exact memory
bound (runtime image + plan + arena) is reported, the bundle is run twice and must give the same bits,
and ops outside the profile are refused with the reason."""
from __future__ import annotations

import onnx
from onnx import helper

from .errors import UnsupportedError

# Ops in the profile: fully specified semantics, deterministic kernels, static output shapes.
STRICT_OPS = frozenset("""
Abs Add AveragePool BatchNormalization Ceil Clip Concat Conv ConvTranspose Div Equal Erf Exp Flatten Floor Gather
Gemm GlobalAveragePool GlobalMaxPool Greater HardSigmoid HardSwish Identity LayerNormalization LeakyRelu Less Log
LogSoftmax MatMul Max MaxPool Min Mul Neg Pad Pow PRelu Reciprocal ReduceMax ReduceMean ReduceMin ReduceSum Relu
Reshape Sigmoid Slice Softmax Split Sqrt Squeeze Sub Tanh Transpose Unsqueeze Where Gelu Expand Cast
""".split())
REASONS = {
    "Dropout": "training-only op: remove it before packaging (strict models state exactly what runs)",
    "Resize": "coordinate transformation and rounding leave implementation-defined choices; not in the profile",
    "Upsample": "deprecated; coordinate rounding is implementation-defined",
    "RandomNormal": "non-deterministic", "RandomUniform": "non-deterministic", "RandomNormalLike": "non-deterministic",
    "RandomUniformLike": "non-deterministic", "Multinomial": "non-deterministic", "Bernoulli": "non-deterministic",
    "Loop": "data-dependent control flow", "If": "data-dependent control flow", "Scan": "data-dependent control flow",
    "NonZero": "data-dependent output shape", "Unique": "data-dependent output shape",
    "TopK": "tie-breaking order is implementation-defined",
}
# Attributes whose defaults the ONNX schema states only in prose; strict mode writes them out.
SPATIAL = ("Conv", "ConvTranspose", "MaxPool", "AveragePool")


def check_strict_ops(nodes: list[onnx.NodeProto], opset: int) -> None:
    for n in nodes:
        if n.op_type not in STRICT_OPS:
            reason = REASONS.get(n.op_type, "not part of the strict profile")
            raise UnsupportedError(n.op_type, n.name or n.output[0], opset, f"--profile strict: {reason}")


def explicit_attributes(model: onnx.ModelProto, shapes: dict[str, tuple[int, ...]], opset: int) -> int:
    """Write every defaulted attribute explicitly (in place). Returns how many were added."""
    added = 0
    for n in model.graph.node:
        have = {a.name for a in n.attribute}
        try:
            schema = onnx.defs.get_schema(n.op_type, opset, n.domain)
        except onnx.defs.SchemaError:
            continue
        for name, attr in schema.attributes.items():
            if name in have or attr.default_value.type == onnx.AttributeProto.UNDEFINED:
                continue
            a = onnx.AttributeProto()
            a.CopyFrom(attr.default_value)
            a.name = name
            n.attribute.append(a)
            added += 1
        if n.op_type in SPATIAL:
            added += _spatial_defaults(n, shapes)
    return added


def _spatial_defaults(n: onnx.NodeProto, shapes: dict[str, tuple[int, ...]]) -> int:
    attrs = {a.name: helper.get_attribute_value(a) for a in n.attribute}
    if n.op_type in ("Conv", "ConvTranspose"):
        w = shapes.get(n.input[1])
        if w is None:
            return 0
        kernel = list(w[2:])
    else:
        kernel = list(attrs.get("kernel_shape", []))
    k = len(kernel)
    if not k:
        return 0
    defaults = {"kernel_shape": kernel, "strides": [1] * k, "dilations": [1] * k}
    if attrs.get("auto_pad", b"NOTSET") in (b"NOTSET", "NOTSET"):
        defaults["pads"] = [0] * (2 * k)
    added = 0
    for name, value in defaults.items():
        if name not in attrs:
            n.attribute.append(helper.make_attribute(name, value))
            added += 1
    return added
