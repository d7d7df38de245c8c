"""Quantization with onnxruntime's own tools: static int8 QDQ (calibrated) and dynamic int8 (MatMul weights).

Static: weights int8 per channel, symmetric (zero point 0); activations int8 per tensor, symmetric (zero
point 0, so a DequantizeLinear commutes with ReLU/Clip: packager/quantize/qdq_placement.py); ranges from
onnxruntime's MinMax, Percentile or Entropy calibrator on the calibration samples."""
from __future__ import annotations

import contextlib
import io
import logging
import tempfile
from pathlib import Path
from typing import Callable

import onnx

from ..errors import PackagerError
from .calib_data import CalibrationSet
from ..reference import ort_model
from ..weights import inline, write_model
from .progress import Progress

CALIBRATION_METHODS = ("minmax", "percentile", "entropy")


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


@contextlib.contextmanager
def _quiet_ort():
    """onnxruntime.quantization logs through the root logger (a line per tensor, advice about pre-processing)
    and its histogram calibrators print to stdout: silence both while it runs, then restore the caller's."""
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            yield
    finally:
        root.setLevel(level)


def quantize_int8_static(model: onnx.ModelProto, data: CalibrationSet, method: str = "minmax",
                         log=lambda s: None) -> onnx.ModelProto:
    """A QDQ model (QuantizeLinear/DequantizeLinear around every quantizable op) calibrated on `data`."""
    from onnxruntime.quantization import CalibrationDataReader, CalibrationMethod, QuantFormat, QuantType, quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process
    if method not in CALIBRATION_METHODS:
        raise PackagerError(f"unknown calibration method '{method}' (available: {', '.join(CALIBRATION_METHODS)})")
    calib = {"minmax": CalibrationMethod.MinMax, "percentile": CalibrationMethod.Percentile,
             "entropy": CalibrationMethod.Entropy}[method]

    class Reader(_Reader, CalibrationDataReader):
        pass

    with _quiet_ort(), tempfile.TemporaryDirectory(prefix="edgepack-quant-") as tmp:
        src, pre, out = Path(tmp, "model.onnx"), Path(tmp, "pre.onnx"), Path(tmp, "qdq.onnx")
        write_model(ort_model(model), src)
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


def _dynamic(model: onnx.ModelProto, tmp: Path, exclude: list[str] | None = None,
             only: list[str] | None = None) -> onnx.ModelProto:
    from onnxruntime.quantization import QuantType, quantize_dynamic
    out = tmp / "dyn.onnx"
    try:
        quantize_dynamic(inline(model), str(out), op_types_to_quantize=["MatMul"], per_channel=False, reduce_range=True,
                         weight_type=QuantType.QInt8, nodes_to_exclude=exclude or [], nodes_to_quantize=only or [],
                         extra_options={"MatMulConstBOnly": True})
    except Exception as e:  # noqa: BLE001
        raise PackagerError(f"int8-dynamic quantization failed in onnxruntime: {str(e).splitlines()[0][:300]}") from None
    return onnx.load(str(out))


def quantize_int8_dynamic(model: onnx.ModelProto, log=lambda s: None,
                          score: Callable[[onnx.ModelProto], float] | None = None,
                          min_score: float = 0.99) -> tuple[onnx.ModelProto, list[str]]:
    """MatMul weights int8 (per tensor, symmetric, 7-bit range); activations quantized at run time
    (DynamicQuantizeLinear + MatMulInteger). No calibration.

    reduce_range (weights in [-64, 63]): onnxruntime's x86 u8 x s8 kernel (pmaddubsw on AVX2 without VNNI)
    sums int8 products in saturating int16 pairs; with 7-bit weights it cannot saturate, so onnxruntime
    computes the shipped model.onnx exactly and can score the guard below. The edgepack kernels are exact
    either way; the cost is one bit of weight precision (cosine to float32 0.9999 on minilm_like).

    Guard: with `score` (worst cosine similarity to float32 on a few samples), MatMuls are returned to float32,
    most harmful first (each one's harm measured alone), until the score reaches `min_score`. Returns the model
    and the MatMuls kept in float32."""
    src = ort_model(model)
    consts = {i.name for i in src.graph.initializer}
    weighted = [n.name for n in src.graph.node if n.op_type == "MatMul" and n.input[1] in consts and n.name]
    if not weighted:
        raise PackagerError("--quantize int8-dynamic: the model has no MatMul with a constant weight to quantize "
                            "(use int8 with calibration data for convolutional models)")
    excluded: list[str] = []
    with _quiet_ort(), tempfile.TemporaryDirectory(prefix="edgepack-quant-") as tmp_s:
        tmp = Path(tmp_s)
        q = _dynamic(src, tmp)
        if score is not None and (s := score(q)) < min_score:
            bar = Progress("int8-dynamic: measuring each MatMul's error", len(weighted))
            harm = {}
            for name in weighted:
                harm[name] = score(_dynamic(src, tmp, only=[name]))
                bar.step()
            bar.close()
            for name in sorted(weighted, key=lambda n: harm[n]):
                excluded.append(name)
                q = _dynamic(src, tmp, exclude=excluded)
                s = score(q)
                if s >= min_score:
                    break
            log(f"int8-dynamic: {len(excluded)} of {len(weighted)} MatMuls kept in float32 to hold cosine "
                f">= {min_score} (reached {s:.4f})")
    n = sum(1 for node in q.graph.node if node.op_type == "MatMulInteger")
    log(f"int8-dynamic: {n} MatMul weights quantized")
    return q, excluded
