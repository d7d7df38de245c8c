"""The front of the pipeline: analyze (bind, fold, infer shapes; packager/analyze.py), the strict profile's
checks, then optimize (packager/optimizer.py), for given input shapes."""
from __future__ import annotations

from typing import Callable

import numpy as np
import onnx

from .analyze import analyze
from .passes.float16 import widen_float16
from .profile import check_strict_ops, explicit_attributes
from .quantize.fp16 import MIN_ELEMS


class Front:
    """The analyze and optimize stages for one set of input shapes (a static plan: one; run-time shapes: two
    probes, packager/run_time_shapes.py)."""

    def __init__(self, m: onnx.ModelProto, constants, strict: bool, optimize: bool, keep_metadata: bool,
                 log: Callable[[str], None]) -> None:
        self.constants, self.strict, self.optimize, self.keep_metadata, self.log = \
            constants, strict, optimize, keep_metadata, log
        # A float16 model computes in float32 (packager/passes/float16.py); verification compares with the model
        # as given. Its weights ship as float16 again when all were float16 (what the user chose the format for);
        # a mixed model's float32 weights stay float32 (they were kept wide on purpose).
        self.original = m
        self.m, widened = widen_float16(m)
        self.weights_fp16 = bool(widened) and not any(
            t.data_type == onnx.TensorProto.FLOAT and np.prod(t.dims) >= MIN_ELEMS for t in m.graph.initializer)

    def run(self, input_shapes, keep: frozenset[str] | None = None, quiet: bool = False, value_dim: int = 0):
        """(graph, reference model, optimization or None). keep: a probe of run-time shapes (packager/dynamic.py);
        value_dim: that probe's extent of the dims value inputs decide (packager/analyze.py)."""
        graph = analyze(self.m, input_shapes, self.constants, strict=self.strict, keep=keep or frozenset(),
                        dynamic=keep is not None, value_dim=value_dim)
        if not quiet:
            for n in graph.notices:
                self.log(f"notice: {n}")
        if self.strict:
            check_strict_ops(graph.nodes, graph.opset)
            explicit_attributes(graph.model, graph.shapes, graph.opset)
        # verification compares with the graph before optimization (a float16 model: the model as given)
        reference, optimization = graph.model if self.m is self.original else self.source_model(), None
        if self.optimize:
            from .optimizer import optimize as run_optimizer, summary   # lazily: onnx_ir imports sympy (~1 s)
            optimization = run_optimizer(graph, len(self.m.graph.node), self.keep_metadata)
            graph = optimization.graph
            reference = optimization.reference if self.m is self.original else reference
            if not quiet:
                for line in summary(optimization.report, optimization.stripped):
                    self.log(f"optimize: {line}")
        return graph, reference, optimization

    def source_model(self, model: onnx.ModelProto | None = None) -> onnx.ModelProto:
        """The loaded model with --const inputs as initializers: onnxruntime runs it at any input shape."""
        from onnx import numpy_helper
        m = onnx.ModelProto()
        m.CopyFrom(model if model is not None else self.original)
        for name, value in (self.constants or {}).items():
            m.graph.initializer.append(numpy_helper.from_array(np.asarray(value), name))
        keep = [vi for vi in m.graph.input if vi.name not in (self.constants or {})]
        del m.graph.input[:]
        m.graph.input.extend(keep)
        return m
