"""float16 weights: stored as float16 (half the bytes), computed in float32.

Two views of the same choice:
- the plan: every float32 weight tensor becomes a float16 weight plus a CAST node flagged NODE_PROLOGUE;
  the runtime runs prologue nodes once when the arena is bound, so kernels read float32 weights from the
  arena and no run pays for the conversion (docs/plan-format.md, "Node flags");
- model.onnx in the bundle: float16 initializers, each widened by a Cast node (onnxruntime runs it as is)."""
from __future__ import annotations

import copy

import numpy as np
import onnx
from onnx import TensorProto, helper

from .. import weights

MIN_ELEMS = 64          # smaller tensors (scalars, tiny biases) stay float32: nothing to save, one node less
F16_MAX = 65504.0       # largest finite float16


def _convertible(a: np.ndarray) -> bool:
    if a.dtype != np.float32 or a.size < MIN_ELEMS:
        return False
    flat = a.reshape(-1)
    for at in range(0, flat.size, 1 << 20):   # in slices: no temporary as large as a 1-2 GB weight
        part = flat[at:at + (1 << 20)]
        if not np.all(np.isfinite(part)) or float(np.abs(part).max()) > F16_MAX:
            return False
    return True


def store_weights_fp16(ctx) -> int:
    """In a LowerCtx, before assembly: float32 weights -> float16 weight + prologue CAST into an arena tensor
    of the original name. Returns how many tensors were converted."""
    from ..lowering.context import Emitted, Tensor
    from ..plan import layout
    from ..plan.opcodes import Op
    prologue = []
    # WINOGRAD_FILTER (a prologue node: it may read weights only, not a CAST's output) widens float16 taps itself.
    widened_by_reader = {n for e in ctx.emitted if e.op == Op.WINOGRAD_FILTER for n in e.inputs if n}
    for name, t in list(ctx.tensors.items()):
        if t.data is None or t.dtype != TensorProto.FLOAT:
            continue
        a = np.frombuffer(t.data, dtype=np.float32)
        if not _convertible(a):
            continue
        if name in widened_by_reader:
            ctx.tensors[name] = Tensor(name, TensorProto.FLOAT16, t.shape, a.astype(np.float16).tobytes())
            continue
        half = f"{name}::f16"
        ctx.tensors[half] = Tensor(half, TensorProto.FLOAT16, t.shape, a.astype(np.float16).tobytes())
        t.data = None   # now an arena tensor, written once by the prologue
        prologue.append(Emitted(Op.CAST, [half], [name], [], 0, "float16 weights", flags=layout.NODE_PROLOGUE))
    ctx.emitted[:0] = prologue
    return len(prologue)


def model_with_fp16_weights(model: onnx.ModelProto) -> onnx.ModelProto:
    """The same model with float32 initializers stored as float16 and a Cast back to float32 in front."""
    m = copy.deepcopy(model)
    g = m.graph
    casts, inits = [], []
    for init in g.initializer:
        a = weights.to_array(init)
        if not _convertible(a):
            inits.append(init)
            continue
        inits.append(weights.from_array(a.astype(np.float16), f"{init.name}__fp16"))
        casts.append(helper.make_node("Cast", [f"{init.name}__fp16"], [init.name], to=TensorProto.FLOAT,
                                      name=f"{init.name}__widen"))
    del g.initializer[:]
    g.initializer.extend(inits)
    nodes = list(g.node)
    del g.node[:]
    g.node.extend(casts + nodes)
    return m


def fp16_weight_bytes(model: onnx.ModelProto) -> tuple[int, int]:
    """(float32 bytes of all initializers, bytes once stored as float16) for the report."""
    before = after = 0
    for init in model.graph.initializer:
        a = weights.to_array(init)
        before += a.nbytes
        after += a.nbytes // 2 if _convertible(a) else a.nbytes
    return before, after
