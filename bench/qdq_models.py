"""int8 versions of the benchmark models for tests and benchmarks, made with onnxruntime.quantization.

    python -m bench.qdq_models [--models cifar10net,mobilenetv2] [--placement naive|fusion|both]

Static QDQ (quantize_static, QDQ format, int8 weights symmetric per channel, int8 activations per tensor,
random-normal calibration), in two placements:
  naive   ORT's output with symmetric activations (zero point 0): Conv -> Q -> DQ -> Relu -> Q -> DQ
  fusion  the DequantizeLinear moved past the positively homogeneous activation (Relu, LeakyRelu,
          Clip(0, M)) and the then redundant Q/DQ pair dropped: Conv -> Relu -> Q -> DQ
          (valid because f(a x) = a f(x) for a > 0 when the zero point is 0; see docs/int8.md)
Dynamic (quantize_dynamic: DynamicQuantizeLinear + MatMulInteger) for MatMul-heavy models (minilm_like).
Models are cached in .cache/qdq/<name>_<placement>.onnx."""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import onnx

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / ".cache" / "models"
OUT = ROOT / ".cache" / "qdq"
STATIC = ("cifar10net", "mobilenetv2", "resnet18")
DYNAMIC = ("minilm_like",)
HOMOGENEOUS = ("Relu", "LeakyRelu", "Clip")


def _input_specs(model: onnx.ModelProto) -> list[tuple[str, list[int], int]]:
    inits = {i.name for i in model.graph.initializer}
    return [(vi.name, [d.dim_value or 1 for d in vi.type.tensor_type.shape.dim], vi.type.tensor_type.elem_type)
            for vi in model.graph.input if vi.name not in inits]


def _reader(model: onnx.ModelProto, n: int = 8, seed: int = 0):
    from onnxruntime.quantization import CalibrationDataReader
    specs = _input_specs(model)

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.i = 0

        def get_next(self):
            if self.i >= n:
                return None
            rng = np.random.default_rng(seed + self.i)
            self.i += 1
            return {name: rng.standard_normal(shape).astype(np.float32) for name, shape, _ in specs}
    return Reader()


def _const(model: onnx.ModelProto, name: str) -> np.ndarray | None:
    for i in model.graph.initializer:
        if i.name == name:
            return onnx.numpy_helper.to_array(i)
    return None


def fusion_aware(model: onnx.ModelProto) -> tuple[onnx.ModelProto, int]:
    """op -> Q1 -> DQ1 -> act -> Q2  becomes  op -> act -> Q2 where Q1/DQ1 have zero point 0 and act is
    positively homogeneous (Clip only with min 0). Returns the model and the number of moves."""
    g = model.graph
    prod = {o: n for n in g.node for o in n.output}
    cons: dict[str, list] = {}
    for n in g.node:
        for i in n.input:
            cons.setdefault(i, []).append(n)
    drop, moved = set(), 0
    for act in g.node:
        if act.op_type not in HOMOGENEOUS:
            continue
        dq1 = prod.get(act.input[0])
        if dq1 is None or dq1.op_type != "DequantizeLinear" or len(cons.get(dq1.output[0], [])) != 1:
            continue
        q1 = prod.get(dq1.input[0])
        if q1 is None or q1.op_type != "QuantizeLinear" or len(cons.get(q1.output[0], [])) != 1:
            continue
        z = _const(model, q1.input[2]) if len(q1.input) > 2 else None
        if z is not None and np.any(z != 0):
            continue
        if act.op_type == "Clip":
            lo = _const(model, act.input[1]) if len(act.input) > 1 and act.input[1] else None
            if lo is None or float(lo) != 0.0:
                continue
        act.input[0] = q1.input[0]
        drop.update({id(q1), id(dq1)})
        moved += 1
    keep = [n for n in g.node if id(n) not in drop]
    del g.node[:]
    g.node.extend(keep)
    return model, moved


def make(name: str, placement: str = "fusion") -> Path:
    """The cached int8 model; placement 'naive' | 'fusion' (static) or 'dynamic'."""
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"{name}_{placement}.onnx"
    if path.exists():
        return path
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_dynamic, quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process
    src = MODELS / f"{name}.onnx"
    pre = OUT / f"{name}_pre.onnx"
    if not pre.exists():
        quant_pre_process(str(src), str(pre), skip_symbolic_shape=True)
    if placement == "dynamic":
        # reduce_range: 7-bit weights, so that onnxruntime's u8 x s8 AVX2 kernel (pmaddubsw, int16 pair sums
        # that saturate) computes MatMulInteger exactly and can serve as the reference
        quantize_dynamic(str(pre), str(path), weight_type=QuantType.QInt8, reduce_range=True)
        return path
    naive = OUT / f"{name}_naive.onnx"
    if not naive.exists():
        quantize_static(str(pre), str(naive), _reader(onnx.load(str(pre))), quant_format=QuantFormat.QDQ,
                        per_channel=True, activation_type=QuantType.QInt8, weight_type=QuantType.QInt8,
                        extra_options={"ActivationSymmetric": True, "WeightSymmetric": True})
    if placement == "naive":
        return naive
    model, _ = fusion_aware(onnx.load(str(naive)))
    onnx.save(model, str(path))
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default=",".join(STATIC + DYNAMIC))
    a = ap.parse_args(argv)
    for m in a.models.split(","):
        for p in (("dynamic",) if m in DYNAMIC else ("naive", "fusion")):
            print(make(m, p))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
