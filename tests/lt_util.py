"""Shared by tests/test_longtail_ops.py and tests/test_nan_propagation.py: a one-node ONNX model from numpy
inputs, packaged once and run on several wasm builds under wasmtime, compared with onnxruntime or the ONNX
reference evaluator."""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np
import onnx
from onnx import helper, numpy_helper

from packager import load_bundle, package

NP_TO_ONNX = {np.dtype(k): v for k, v in {np.float32: 1, np.uint8: 2, np.int8: 3, np.int32: 6, np.int64: 7, np.float16: 10,
                                          np.bool_: 9}.items()}


def one_node(op: str, ins: dict[str, np.ndarray | None], outputs: Sequence[str], consts: Sequence[str] = (),
             opset: int = 18, **attrs) -> onnx.ModelProto:
    """`op` over `ins` in order (None: an absent optional input); names in `consts` are initializers, the
    others graph inputs. Output types and shapes from ONNX shape inference."""
    node = helper.make_node(op, [k if v is not None else "" for k, v in ins.items()], list(outputs), **attrs)
    g = helper.make_graph([node], "t",
                          [helper.make_tensor_value_info(k, NP_TO_ONNX[v.dtype], v.shape) for k, v in ins.items()
                           if v is not None and k not in consts],
                          [helper.make_empty_tensor_value_info(o) for o in outputs],
                          [numpy_helper.from_array(ins[k], k) for k in consts])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    inferred = onnx.shape_inference.infer_shapes(m, strict_mode=True)
    m.graph.ClearField("output")
    m.graph.output.extend(inferred.graph.output)
    for o in m.graph.output:   # ops ONNX infers nothing for (function ops: GroupNormalization): the first input's type
        if not o.type.tensor_type.elem_type:
            o.type.CopyFrom(next(i.type for i in m.graph.input))
    return m


def feeds_of(ins: dict[str, np.ndarray | None], consts: Sequence[str] = ()) -> dict[str, np.ndarray]:
    return {k: v for k, v in ins.items() if v is not None and k not in consts}


def ort_run(m: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    import onnxruntime as rt
    s = rt.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return s.run(None, feeds)


def ref_run(m: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    from onnx.reference import ReferenceEvaluator
    return [np.asarray(v) for v in ReferenceEvaluator(m).run(None, feeds)]


def ours(m: onnx.ModelProto, feeds: dict[str, np.ndarray], tmp: Path, variants: Sequence[str]) -> dict[str, list[np.ndarray]]:
    """Package once; each variant's outputs in graph order."""
    out = package(m, out=tmp / "b", verify=False, input_shapes={k: v.shape for k, v in feeds.items()})
    res = {}
    for v in variants:
        got = load_bundle(out, v).run(feeds)
        res[v] = [got[o.name] for o in m.graph.output]
    return res


def assert_same(got: np.ndarray, want: np.ndarray, what: str, rtol: float = 1e-5, atol: float = 1e-6) -> None:
    want = np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != {want.dtype}"
    if want.dtype.kind == "f":
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True, err_msg=what)
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)
