"""Quantization with onnxruntime's own tools: static int8 QDQ (calibrated) and dynamic int8 (MatMul weights).

Static: weights int8 per channel, symmetric (zero point 0); activations int8 per tensor, symmetric (zero
point 0, so a DequantizeLinear commutes with ReLU/Clip: packager/quantize/qdq_placement.py); ranges from
onnxruntime's MinMax, Percentile or Entropy calibrator on the calibration samples."""
from __future__ import annotations

import logging
import tempfile
from pathlib import Path

import onnx

from ..errors import PackagerError
from .calib_data import CalibrationSet
from .progress import Progress

CALIBRATION_METHODS = ("minmax", "percentile", "entropy")
ORT_MAX_IR = 10


def _ort_model(model: onnx.ModelProto) -> onnx.ModelProto:
    m = onnx.ModelProto()
    m.CopyFrom(model)
    m.ir_version = min(m.ir_version, ORT_MAX_IR)   # onnx writes newer IR versions than onnxruntime reads
    return m


class _Reader:
    """onnxruntime CalibrationDataReader over a CalibrationSet, ticking a progress bar."""

    def __init__(self, data: CalibrationSet, bar: Progress) -> None:
        self.data, self.bar, self.i = data, bar, 0

    def get_next(self) -> dict | None:
        if self.i >= self.data.count:
            return None
        feed = self.data.feed(self.i)
        self.i += 1
        self.bar.step()
        return feed

    def rewind(self) -> None:
        self.i = 0


def _quiet_ort() -> None:
    # onnxruntime.quantization logs a line per tensor and warns about pre-processing: keep `package` output short
    logging.getLogger("onnxruntime").setLevel(logging.ERROR)
    logging.getLogger().setLevel(max(logging.getLogger().level, logging.WARNING))


def quantize_int8_static(model: onnx.ModelProto, data: CalibrationSet, method: str = "minmax",
                         log=lambda s: None) -> onnx.ModelProto:
    """A QDQ model (QuantizeLinear/DequantizeLinear around every quantizable op) calibrated on `data`."""
    from onnxruntime.quantization import CalibrationDataReader, CalibrationMethod, QuantFormat, QuantType, quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process
    if method not in CALIBRATION_METHODS:
        raise PackagerError(f"unknown calibration method '{method}' (available: {', '.join(CALIBRATION_METHODS)})")
    _quiet_ort()
    calib = {"minmax": CalibrationMethod.MinMax, "percentile": CalibrationMethod.Percentile,
             "entropy": CalibrationMethod.Entropy}[method]

    class Reader(_Reader, CalibrationDataReader):
        pass

    with tempfile.TemporaryDirectory(prefix="edgepack-quant-") as tmp:
        src, pre, out = Path(tmp, "model.onnx"), Path(tmp, "pre.onnx"), Path(tmp, "qdq.onnx")
        onnx.save(_ort_model(model), src)
        try:   # shape inference + onnxruntime's basic graph cleanup: what its quantizer expects to see
            quant_pre_process(str(src), str(pre), skip_symbolic_shape=True)
        except Exception as e:  # noqa: BLE001 - pre-processing is an optimization; quantize the model as is
            log(f"notice: quantization pre-processing skipped ({str(e).splitlines()[0][:120]})")
            pre = src
        bar = Progress(f"calibrating ({method})", data.count)
        try:
            quantize_static(str(pre), str(out), Reader(data, bar), quant_format=QuantFormat.QDQ,
                            per_channel=True, reduce_range=False, activation_type=QuantType.QInt8,
                            weight_type=QuantType.QInt8, calibrate_method=calib,
                            extra_options={"WeightSymmetric": True, "ActivationSymmetric": True})
        except PackagerError:
            raise
        except Exception as e:  # noqa: BLE001 - report onnxruntime's reason, not a traceback
            raise PackagerError(f"int8 quantization failed in onnxruntime: {str(e).splitlines()[0][:300]}") from None
        finally:
            secs = bar.close()
        log(f"calibrated on {data.count} samples ({method}) in {secs:.1f}s")
        return onnx.load(str(out))


def quantize_int8_dynamic(model: onnx.ModelProto, log=lambda s: None) -> onnx.ModelProto:
    """MatMul weights int8 (per tensor, symmetric); activations quantized at run time
    (DynamicQuantizeLinear + MatMulInteger). No calibration."""
    from onnxruntime.quantization import QuantType, quantize_dynamic
    _quiet_ort()
    with tempfile.TemporaryDirectory(prefix="edgepack-quant-") as tmp:
        src, out = Path(tmp, "model.onnx"), Path(tmp, "dyn.onnx")
        onnx.save(_ort_model(model), src)
        try:
            quantize_dynamic(str(src), str(out), op_types_to_quantize=["MatMul"], per_channel=False,
                             weight_type=QuantType.QInt8, extra_options={"MatMulConstBOnly": True})
        except Exception as e:  # noqa: BLE001
            raise PackagerError(f"int8-dynamic quantization failed in onnxruntime: {str(e).splitlines()[0][:300]}") from None
        q = onnx.load(str(out))
    n = sum(1 for node in q.graph.node if node.op_type == "MatMulInteger")
    if n == 0:
        raise PackagerError("--quantize int8-dynamic: the model has no MatMul with a constant weight to quantize "
                            "(use int8 with calibration data for convolutional models)")
    log(f"int8-dynamic: {n} MatMul weights quantized")
    return q
