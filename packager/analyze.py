"""Model analysis before lowering: bind symbolic dims, fold what is known at package time, infer every shape.

The result is a static graph: each value has a dtype and a concrete shape, and every value computable
without the graph inputs (initializers, Constant, Shape of a static tensor, ...) is a numpy constant."""
from __future__ import annotations

import copy
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import helper, numpy_helper, shape_inference

from . import data_dependent, weights
from .errors import NeedsConstantError, PackagerError, UnsupportedError, with_opset
from .passes import subgraphs as sg

MIN_OPSET, MAX_OPSET = 7, onnx.defs.onnx_opset_version()
# Ops evaluated at package time when all their inputs are known; anything else with known inputs is too.
SHAPE_OPS = {"Shape", "Size"}
FOLD_LIMIT_BYTES = 256 << 20
# ConstantOfShape of constant dims is a weight (exporters make big weights so: onnx's "light" models): a fill,
# kept in the plan up to this size; larger ones are refused naming the limit.
WEIGHT_LIMIT_BYTES = 1 << 30
# Models of an older default-domain opset are converted (onnx.version_converter) to this one: the lowerings read
# ops as defined from it on (Squeeze/Unsqueeze axes as inputs, Resize for Upsample, ...).
CONVERT_BELOW_OPSET = 13


@dataclass
class Graph:
    model: onnx.ModelProto                 # bound + folded model (what the bundle ships as model.onnx)
    opset: int
    nodes: list[onnx.NodeProto]            # nodes left to run (not folded), topological order
    inputs: list[str]
    outputs: list[str]
    shapes: dict[str, tuple[int, ...]]
    dtypes: dict[str, int]                 # ONNX TensorProto codes
    consts: dict[str, np.ndarray]
    notices: list[str] = field(default_factory=list)
    folded: int = 0
    # Folded DequantizeLinear nodes by output name: a QDQ model's weights, biases and their scales stay
    # reachable (in consts) for the integer lowerings (packager/passes/qdq_fusion.py).
    dq_sources: dict[str, onnx.NodeProto] = field(default_factory=dict)
    # Plan version 2 (packager/dynamic.py): values left unfolded because they vary with the input shapes, and
    # whether the shapes bound here are only a probe (passes must not bake them into the graph).
    keep: frozenset[str] = frozenset()
    dynamic: bool = False
    value_dim: int = 0                      # the probe extent of dims value inputs decide (analyze's argument)
    source_opset: int | None = None        # the model's own opset when it was converted (errors name that one)
    # NonZero / NonMaxSuppression / Unique outputs (at their capacities) -> the axes their run sets
    data_dependent: dict[str, set[int]] = field(default_factory=dict)


def default_opset(model: onnx.ModelProto) -> int:
    for imp in model.opset_import:
        if imp.domain in ("", "ai.onnx"):
            return imp.version
    return 1


def _dims(t: onnx.TypeProto) -> list[int | str | None]:
    if not t.tensor_type.HasField("shape"):
        return []
    return [d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in t.tensor_type.shape.dim]


def _written(d: onnx.TensorShapeProto.Dimension) -> str:
    """How the model writes a dim that is not a fixed size, for notices: its name, or the value itself."""
    if d.HasField("dim_value"):
        return f"written as dim_value {d.dim_value}"
    return f"'{d.dim_param}'" if d.dim_param else "(no name, no value)"


def bind_inputs(model: onnx.ModelProto, input_shapes: dict[str, tuple[int, ...]], notices: list[str],
                strict: bool = False) -> None:
    """Give every graph input a fully static shape (in place): --input-shape values, else 1 with a notice
    (strict: an error). A dim_value <= 0 counts as symbolic: exporters write -1 or 0 for 'any size'."""
    inits = {i.name for i in model.graph.initializer}
    zero_as_any = False
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        if not vi.type.HasField("tensor_type"):
            raise UnsupportedError("graph input", vi.name, default_opset(model), "only tensor inputs are supported")
        dims = _dims(vi.type)
        zero_as_any |= 0 in dims
        raw = list(vi.type.tensor_type.shape.dim) if vi.type.tensor_type.HasField("shape") else []
        if vi.name in input_shapes:
            want = tuple(int(d) for d in input_shapes[vi.name])
            if dims and len(dims) != len(want):
                raise PackagerError(f"--input-shape {vi.name}: rank {len(want)} given, the model says rank {len(dims)}")
            for d, w in zip(dims, want):
                if isinstance(d, int) and d > 0 and d != w:
                    raise PackagerError(f"--input-shape {vi.name}={'x'.join(map(str, want))}: the model fixes "
                                        f"this dimension to {d}")
            new = list(want)
        else:
            if not vi.type.tensor_type.HasField("shape"):
                raise PackagerError(f"input '{vi.name}' has no shape in the model: give it with "
                                    f"--input-shape {vi.name}=1x3x224x224")
            new = []
            for k, d in enumerate(dims):
                if isinstance(d, int) and d > 0:
                    new.append(d)
                elif strict:
                    raise PackagerError(f"--profile strict: input '{vi.name}' has symbolic dimension "
                                        f"{_written(raw[k])} (axis {k}): give it with --input-shape {vi.name}=...")
                else:
                    why = "; a dim_value <= 0 is read as any size" if isinstance(d, int) else ""
                    notices.append(f"input '{vi.name}': symbolic dimension {_written(raw[k])} set to 1 (axis {k}{why}; "
                                   f"use --input-shape {vi.name}=... or --dynamic to choose)")
                    new.append(1)
        shape = vi.type.tensor_type.shape
        del shape.dim[:]
        for w in new:
            shape.dim.add().dim_value = w
    if zero_as_any:   # a model that writes 0 for 'any size' on its inputs does on its outputs too: inference gives it
        for vi in model.graph.output:
            for d in vi.type.tensor_type.shape.dim:
                if d.HasField("dim_value") and d.dim_value <= 0:
                    d.Clear()
    for name in input_shapes:
        if name not in {vi.name for vi in model.graph.input}:
            raise PackagerError(f"--input-shape names '{name}', which is not an input of the model "
                                f"(inputs: {', '.join(vi.name for vi in model.graph.input if vi.name not in inits)})")


class _TooLarge(PackagerError):
    """An output that would exceed the folding limit: sized from the inputs' values, never evaluated."""

    def __init__(self, node: onnx.NodeProto, nbytes: int) -> None:
        super().__init__(f"{node.op_type} '{node.name}': {nbytes} bytes exceed the folding limit "
                         f"({_fold_limit(node)}): not evaluated at package time")
        self.nbytes = nbytes


def _eval_node(node: onnx.NodeProto, inputs: list[np.ndarray | None], opset: int,
               outer: dict[str, np.ndarray] | None = None) -> list[np.ndarray]:
    """outer: the values a node's subgraphs read from the enclosing graph (graph inputs of the evaluated model)."""
    import math
    from onnx.reference import ReferenceEvaluator
    # Ops whose output size comes from input *values*: a few bytes can ask for gigabytes (ConstantOfShape
    # of [2^31], Expand of a 1x1 to [65536, 65536]). Size the output first; the caller leaves it unfolded.
    ints = lambda k: [abs(int(v)) for v in inputs[k].reshape(-1)]  # noqa: E731 - |dim|: a bound, not a check
    x = inputs[0] if inputs else None
    elems = None
    if node.op_type == "ConstantOfShape" and x is not None:
        value = next((a.t for a in node.attribute if a.name == "value"), None)
        item = helper.tensor_dtype_to_np_dtype(value.data_type).itemsize if value is not None else 4
        elems = math.prod(ints(0))
    elif node.op_type == "Expand" and len(inputs) > 1 and x is not None and inputs[1] is not None:
        want, have = ints(1), list(x.shape)
        rank = max(len(want), len(have))
        want, have = [1] * (rank - len(want)) + want, [1] * (rank - len(have)) + have
        elems, item = math.prod(max(a, b) for a, b in zip(want, have)), x.itemsize
    elif node.op_type == "Tile" and len(inputs) > 1 and x is not None and inputs[1] is not None:
        elems, item = x.size * math.prod(ints(1)), x.itemsize
    elif node.op_type == "Range" and len(inputs) == 3 and all(v is not None and v.size == 1 for v in inputs):
        start, limit, delta = (float(v.reshape(-1)[0]) for v in inputs)
        if delta and math.isfinite(start) and math.isfinite(limit):
            elems, item = max(math.ceil((limit - start) / delta), 0), x.itemsize
    elif node.op_type == "Pad" and len(inputs) > 1 and x is not None and inputs[1] is not None:
        pads, item = ints(1), x.itemsize
        elems = (math.prod(d + pads[i] + pads[i + x.ndim] for i, d in enumerate(x.shape)) if len(pads) == 2 * x.ndim
                 else math.prod(d + sum(pads) for d in x.shape))   # with `axes`: a bound
    elif node.op_type == "OneHot" and len(inputs) > 1 and x is not None and inputs[1] is not None:
        elems, item = x.size * math.prod(ints(1)), 8
    elif node.op_type in ("Resize", "Upsample") and x is not None:
        sizes = inputs[3] if len(inputs) > 3 else None
        scales = inputs[2] if node.op_type == "Resize" and len(inputs) > 2 else (inputs[1] if len(inputs) > 1 else None)
        if sizes is not None and sizes.size:
            elems = math.prod(ints(3))
        elif scales is not None and scales.size == x.ndim:
            sc = [abs(float(v)) for v in scales.reshape(-1)]
            elems = math.prod(math.floor(d * f) if math.isfinite(f) else 2 ** 62 for d, f in zip(x.shape, sc))
        item = x.itemsize
    if elems is not None and elems * item > _fold_limit(node):
        raise _TooLarge(node, elems * item)
    names = [f"i{k}" if x is not None else "" for k, x in enumerate(inputs)]
    n = helper.make_node(node.op_type, names, [f"o{k}" for k in range(len(node.output))], domain=node.domain)
    n.attribute.extend(node.attribute)
    named = list(zip(names, inputs)) + list((outer or {}).items())
    g = helper.make_graph([n], "fold",
                          [helper.make_tensor_value_info(nm, helper.np_dtype_to_tensor_dtype(x.dtype), x.shape)
                           for nm, x in named if x is not None],
                          [helper.make_tensor_value_info(o, onnx.TensorProto.UNDEFINED, None) for o in n.output])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    feeds = {nm: x for nm, x in named if x is not None}
    return [np.asarray(r) for r in ReferenceEvaluator(m).run(None, feeds)]


def _fold_limit(node: onnx.NodeProto) -> int:
    """Bytes a node's outputs may take to be folded into a weight: a Constant is already in the model, a
    ConstantOfShape of constant dims is how some exporters write weights; anything else, FOLD_LIMIT_BYTES."""
    if node.op_type == "Constant":
        return 1 << 62
    return WEIGHT_LIMIT_BYTES if node.op_type == "ConstantOfShape" else FOLD_LIMIT_BYTES


def _leave_large(node: onnx.NodeProto, nbytes: int, opset: int) -> None:
    """A node of constant inputs whose output is too large to fold is left to run in the bundle when a kernel
    can compute it there (Expand, Tile, ...); otherwise it is refused here, naming the size and the limit
    (never 'no edgepack kernel': the op is not the problem)."""
    from .lowering.registry import REGISTRY, load_ops
    load_ops()
    if node.op_type in REGISTRY and node.op_type not in ("ConstantOfShape", "Range"):
        return   # the kernel computes it at run time (Range/ConstantOfShape run only as shape arithmetic)
    limit = _fold_limit(node)
    raise UnsupportedError(node.op_type, node.name or node.output[0], opset,
                           f"its output is known at package time but takes {nbytes / 2**20:.1f} MiB, more than "
                           f"the {limit / 2**20:.0f} MiB a constant may take in a bundle (folding limit)")


def _dequantize(node: onnx.NodeProto, inputs: list[np.ndarray | None]) -> list[np.ndarray] | None:
    """DequantizeLinear of constants (onnx.reference implements it only from opset 19): (x - zp) * scale
    in float32, per tensor or per axis; None for what it does not cover (blocked, float8, ...)."""
    a = {x.name: helper.get_attribute_value(x) for x in node.attribute}
    x, s = inputs[0], inputs[1]
    z = inputs[2] if len(inputs) > 2 else None
    if int(a.get("block_size", 0)) or x.dtype.kind not in "iu" or s.dtype != np.float32:
        return None
    shape = [1] * x.ndim
    if s.size != 1:
        axis = int(a.get("axis", 1))
        axis = axis + x.ndim if axis < 0 else axis
        if s.ndim != 1 or not 0 <= axis < x.ndim or x.shape[axis] != s.size:
            return None
        shape[axis] = s.size
    zf = np.zeros(1, np.float32) if z is None else z.astype(np.float32).reshape(shape if z.size != 1 else [1] * x.ndim)
    return [((x.astype(np.float32) - zf) * s.reshape(shape if s.size != 1 else [1] * x.ndim)).astype(np.float32)]


# ConstantOfShape / Expand of a constant shape: onnx's shape inference (data propagation) can materialize them.
_SHAPED_BY_INPUT = {"ConstantOfShape": 0, "Expand": 1}
_MAX_BYTES = 1 << 32   # no wasm32 bundle holds more


def _refuse_huge_constant_shapes(model: onnx.ModelProto) -> None:
    """A constant shape input naming more elements than any bundle can hold is refused before inference sees it."""
    consts = {i.name: i for i in model.graph.initializer}
    consts.update({n.output[0]: n.attribute[0].t for n in model.graph.node
                   if n.op_type == "Constant" and n.attribute and n.attribute[0].name == "value"})
    for n in model.graph.node:
        k = _SHAPED_BY_INPUT.get(n.op_type)
        if k is None or len(n.input) <= k or n.input[k] not in consts:
            continue
        dims = weights.to_array(consts[n.input[k]]).astype(np.float64).reshape(-1)
        value = next((a.t for a in n.attribute if a.name == "value"), None)
        src = consts.get(n.input[0]) if k == 1 else value
        itemsize = helper.tensor_dtype_to_np_dtype(src.data_type).itemsize if src is not None else 4
        nbytes = float(np.prod(np.maximum(dims, 1))) * itemsize
        if dims.size and nbytes >= _MAX_BYTES:
            raise UnsupportedError(n.op_type, n.name or n.output[0], default_opset(model),
                                   f"its output shape {[int(d) for d in dims]} takes {nbytes / 2**30:.1f} GiB: more "
                                   f"than a bundle can hold (4 GiB)")


def _infer(model: onnx.ModelProto) -> onnx.ModelProto:
    _refuse_huge_constant_shapes(model)
    try:
        return shape_inference.infer_shapes(model, strict_mode=False, data_prop=True)
    except Exception as e:  # inference errors mean an inconsistent model
        raise PackagerError(f"shape inference failed: {e}") from e


def _value_rank_hints(model: onnx.ModelProto) -> onnx.ModelProto:
    """With value inputs: a Reduce* whose axes are a run-time input has no shape for onnx's inference when keepdims
    is 0; its rank is still known (the input's less the axes' length), so it is written as a value_info of unknown
    dims and inference runs again, giving the nodes after it their ranks too (the probe extents then fill the dims)."""
    for _ in range(4):
        g = model.graph
        types = {vi.name: vi.type.tensor_type for vi in [*g.input, *g.value_info, *g.output] if vi.type.HasField("tensor_type")}
        ranks = {n: len(t.shape.dim) for n, t in types.items() if t.HasField("shape")}
        ranks.update({i.name: len(i.dims) for i in g.initializer})
        added = False
        for n in g.node:
            if not n.op_type.startswith("Reduce") or len(n.input) < 2 or not n.output or n.output[0] in ranks:
                continue
            x, axes = n.input[0], n.input[1]
            a = {at.name: at.i for at in n.attribute}
            if x not in ranks or axes not in ranks or ranks[axes] != 1 or not types.get(axes, None) or \
                    not types[axes].shape.dim[0].HasField("dim_value") or x not in types:
                continue
            count = types[axes].shape.dim[0].dim_value
            r = ranks[x] if a.get("keepdims", 1) or (count == 0 and a.get("noop_with_empty_axes", 0)) else \
                0 if count == 0 else ranks[x] - count
            g.value_info.append(helper.make_tensor_value_info(n.output[0], types[x].elem_type, [None] * max(r, 0)))
            added = True
        if not added:
            return model
        model = _infer(model)
    return model


def _collect_types(model: onnx.ModelProto) -> tuple[dict[str, tuple[int, ...]], dict[str, int]]:
    shapes, dtypes = {}, {}
    g = model.graph
    for vi in list(g.input) + list(g.value_info) + list(g.output):
        tt = vi.type.tensor_type
        if tt.elem_type:
            dtypes[vi.name] = tt.elem_type
        d = _dims(vi.type)
        if tt.HasField("shape") and all(isinstance(x, int) and (x > 0 or _is_zero_dim(vi, i)) for i, x in enumerate(d)):
            shapes[vi.name] = tuple(int(x) for x in d)
    for init in g.initializer:
        shapes[init.name] = tuple(init.dims)
        dtypes[init.name] = init.data_type
    return shapes, dtypes


def _is_zero_dim(vi: onnx.ValueInfoProto, i: int) -> bool:
    d = vi.type.tensor_type.shape.dim[i]
    return d.HasField("dim_value") and d.dim_value == 0


def _shapes_by_running(model: onnx.ModelProto, shapes: dict, dtypes: dict, missing: list[str]) -> None:
    """Last resort for shapes inference could not settle: run the model once on zeros and read them off.
    onnxruntime runs in a child process (packager/ort_isolated.py): a graph that crashes it is an error here."""
    from .ort_isolated import run_isolated
    from .reference import ort_model
    m = copy.deepcopy(model)
    known_out = {o.name for o in m.graph.output}
    for name in missing:
        if name not in known_out:
            m.graph.output.append(helper.make_empty_tensor_value_info(name))
    feeds = {}
    inits = {i.name for i in m.graph.initializer}
    for vi in m.graph.input:
        if vi.name in inits:
            continue
        dt = helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type)
        feeds[vi.name] = np.zeros(shapes[vi.name], dtype=dt)
    try:
        outs = run_isolated(ort_model(m), feeds, missing)
    except Exception as e:
        node = next(n for n in model.graph.node if missing[0] in n.output)
        probe = ", ".join(f"{k}={'x'.join(map(str, v.shape)) or 'scalar'}" for k, v in feeds.items())
        raise UnsupportedError(node.op_type, node.name or node.output[0], default_opset(model),
                               f"the shape of '{missing[0]}' cannot be determined at package time (it depends on "
                               f"run-time values, or running the model on zeros of shape {probe} failed: "
                               f"{str(e).splitlines()[0][:240]}); give the inputs' real shapes with --input-shape") from None
    for name in missing:
        val = np.asarray(outs[name])
        shapes[name] = tuple(val.shape)
        dtypes[name] = helper.np_dtype_to_tensor_dtype(val.dtype)


def _probe_value_dims(model: onnx.ModelProto, shapes: dict, missing: list[str], extent: int) -> None:
    """Outputs whose rank shape inference knows but not every dim (they depend on value inputs' values): each
    unknown dim gets the probe extent."""
    g = model.graph
    for vi in [*g.value_info, *g.output]:
        tt = vi.type.tensor_type
        if vi.name in missing and vi.name not in shapes and tt.HasField("shape"):
            shapes[vi.name] = tuple(int(x) if isinstance(x, int) and (x > 0 or _is_zero_dim(vi, i)) else extent
                                    for i, x in enumerate(_dims(vi.type)))


def _pin_capacities(model: onnx.ModelProto, nodes: list[onnx.NodeProto], consts: dict) -> dict[str, set[int]]:
    """NonZero, NonMaxSuppression and Unique outputs at their capacities, inferred onwards (packager/data_dependent.py);
    one round per such op at most, as one's capacity may follow another's. Returns output -> the axes the run sets."""
    axes: dict[str, set[int]] = {}
    for _ in range(sum(n.op_type in data_dependent.OPS for n in nodes)):
        shapes, _ = _collect_types(model)
        got = data_dependent.pin(model, shapes, consts)
        model.CopyFrom(_infer(model))
        if got == axes:
            break
        axes = got
    return axes


def _scalar(consts: dict[str, np.ndarray], name: str):
    v = consts.get(name) if name else None
    return None if v is None or v.size != 1 else v.reshape(-1)[0]


def _infer_inlined(model: onnx.ModelProto, nodes: list[onnx.NodeProto], consts: dict[str, np.ndarray],
                   shapes: dict[str, tuple[int, ...]], dtypes: dict[str, int]) -> None:
    """Shapes of the nodes an inlined If branch or unrolled Loop brought to the top level (the first inference saw
    them inside a body only), so that Shape -> ... -> If conditions inside them fold too (silero-vad's models)."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    used = {i for n in nodes for i in n.input} | {r for n in nodes for r in sg.node_outer_refs(n)}
    del g.node[:], g.initializer[:], g.value_info[:]
    g.node.extend(nodes)
    for k, v in consts.items():   # small values feed data propagation (Reshape targets); large ones only their shape
        if k not in used:
            continue
        v = np.asarray(v)
        if v.size <= 1024:
            g.initializer.append(numpy_helper.from_array(v, k))
        elif k not in {i.name for i in g.input}:
            g.input.append(helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape))
    try:
        m = shape_inference.infer_shapes(m, strict_mode=False, data_prop=True)
    except Exception:
        return   # as before: these shapes stay unknown
    s2, d2 = _collect_types(m)
    for k, v in s2.items():
        shapes.setdefault(k, v)
    for k, v in d2.items():
        dtypes.setdefault(k, v)


def _control_known(node: onnx.NodeProto, consts: dict[str, np.ndarray], opset: int, notices: list[str],
                   at: int) -> list[onnx.NodeProto] | None:
    """The nodes replacing an If whose condition is a constant, or a Loop with a small constant trip count whose
    condition stays true (packager/passes/subgraphs.py); None for any other node."""
    label = node.name or node.output[0]
    if node.op_type == "If" and node.domain in ("", "ai.onnx"):
        cond = _scalar(consts, node.input[0])
        if cond is None:
            return None
        notices.append(f"If '{label}': condition known at package time ({bool(cond)}), branch inlined")
        return sg.inline_branch(node, bool(cond), f"{label}/{'then' if cond else 'else'}{at}/")
    if node.op_type == "Loop" and node.domain in ("", "ai.onnx"):
        trips = _scalar(consts, node.input[0]) if node.input[0] else None
        cond = _scalar(consts, node.input[1]) if len(node.input) > 1 and node.input[1] else True
        if trips is None or cond is None or not sg.can_unroll(node, int(trips), bool(cond)):
            return None
        return sg.unroll_loop(node, int(trips), f"{label}/iter", opset)
    return None


def convert_opset(model: onnx.ModelProto, opset: int, notices: list[str]) -> tuple[onnx.ModelProto, int]:
    """An older default-domain opset converted by onnx.version_converter to CONVERT_BELOW_OPSET, the form the
    lowerings read (Squeeze's axes as an input, Upsample as Resize, BatchNormalization without 'spatial', ...).
    A model the converter cannot take stays as it is (its ops are then checked one by one, as written)."""
    from onnx import version_converter
    m = onnx.ModelProto()
    m.CopyFrom(model)
    if m.ir_version < 4:   # IR 3 lists every initializer as a graph input too: they are weights, not inputs
        inits = {i.name for i in m.graph.initializer}
        keep = [vi for vi in m.graph.input if vi.name not in inits]
        del m.graph.input[:]
        m.graph.input.extend(keep)
        m.ir_version = 4
    resize = {n.op_type for n in _all_nodes(m.graph)} & {"Upsample", "Resize"}
    if opset <= 10 and resize:
        # onnx's Resize 10 -> 11 adapter keeps the attributes but not the meaning (opset 11 defaults to half_pixel
        # coordinates; Upsample and Resize-10 are asymmetric): the lowerings read those ops as written instead
        notices.append(f"opset {opset}: not converted by onnx.version_converter ({', '.join(sorted(resize))} would "
                       f"change meaning); its ops are checked as written")
        return m, opset

    def io(g: onnx.GraphProto) -> list:
        return [(vi.name, vi.type.SerializeToString()) for vi in [*g.input, *g.output]]
    _hardmax_as_2d(m.graph)
    try:
        converted = version_converter.convert_version(m, CONVERT_BELOW_OPSET)
        weights.check_model(converted)
        if io(converted.graph) != io(m.graph):
            # Scan 8 -> 9 drops the batch axis of its graph's inputs: the user feeds what the model says
            raise ValueError("the conversion changes the model's inputs or outputs")
    except Exception as e:  # the converter raises many kinds, and its C++ side RuntimeError
        notices.append(f"opset {opset}: onnx.version_converter could not convert the model to opset "
                       f"{CONVERT_BELOW_OPSET} ({str(e).strip().splitlines()[0][:160] if str(e).strip() else type(e).__name__}); "
                       f"its ops are checked as written")
        return m, opset
    notices.append(f"opset {opset} converted to opset {CONVERT_BELOW_OPSET} by onnx.version_converter")
    return converted, CONVERT_BELOW_OPSET


def _hardmax_as_2d(g: onnx.GraphProto) -> None:
    """Hardmax before opset 13 works on the input flattened to 2-D at `axis`; onnx's converter keeps the node as
    is, which would change its meaning (it rewrites Softmax and LogSoftmax this way itself): Shape, Flatten(axis),
    Hardmax(axis=1), Reshape, valid at the old opset and the new one."""
    from onnx import helper
    nodes = []
    for n in g.node:
        if n.op_type != "Hardmax" or n.domain not in ("", "ai.onnx"):
            nodes.append(n)
            continue
        axis = next((a.i for a in n.attribute if a.name == "axis"), 1)
        x, y, tag = n.input[0], n.output[0], n.name or n.output[0]
        nodes += [helper.make_node("Shape", [x], [f"{tag}/shape"], name=f"{tag}/Shape"),
                  helper.make_node("Flatten", [x], [f"{tag}/2d"], name=f"{tag}/Flatten", axis=axis),
                  helper.make_node("Hardmax", [f"{tag}/2d"], [f"{tag}/max2d"], name=tag, axis=1),
                  helper.make_node("Reshape", [f"{tag}/max2d", f"{tag}/shape"], [y], name=f"{tag}/Reshape")]
    del g.node[:]
    g.node.extend(nodes)


def _stft_onesided_explicit(g: onnx.GraphProto) -> None:
    """STFT's onesided defaults to 1, but onnx's shape inference reads an absent attribute as 0 (a two-sided
    output shape that neither the spec, onnx.reference nor onnxruntime computes): write the default out."""
    from onnx import helper
    for n in _all_nodes(g):
        if n.op_type == "STFT" and n.domain in ("", "ai.onnx") and all(a.name != "onesided" for a in n.attribute):
            n.attribute.append(helper.make_attribute("onesided", 1))


def _all_nodes(g: onnx.GraphProto):
    """Every node of a graph and of its subgraphs (If/Loop/Scan bodies)."""
    for n in g.node:
        yield n
        for a in n.attribute:
            for sub in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                yield from _all_nodes(sub)


def _drop_unused_optional_outputs(nodes: list[onnx.NodeProto], outputs: list[str], opset: int) -> None:
    """Optional outputs nothing reads (Dropout's mask, MaxPool's Indices, ...) become unnamed, as the optimizer
    strips them: a lowering then never refuses an output no one asked for (--no-optimize is never stricter)."""
    used = {i for n in nodes for i in n.input} | set(outputs) | {r for n in nodes for r in sg.node_outer_refs(n)}
    for n in nodes:
        if n.domain not in ("", "ai.onnx") or len(n.output) < 2:
            continue
        try:
            schema = onnx.defs.get_schema(n.op_type, opset, n.domain)
        except Exception:  # an op onnx does not know: left for the lowering to refuse by name
            continue
        formal = schema.outputs
        for k in range(1, len(n.output)):
            if n.output[k] and n.output[k] not in used and k < len(formal) and \
                    formal[k].option == onnx.defs.OpSchema.FormalParameterOption.Optional:
                n.output[k] = ""
        while len(n.output) > 1 and not n.output[-1]:
            del n.output[-1]


def analyze(model: onnx.ModelProto, input_shapes: dict[str, tuple[int, ...]] | None = None,
            constants: dict[str, np.ndarray] | None = None, strict: bool = False,
            keep: frozenset[str] = frozenset(), dynamic: bool = False, value_dim: int = 0) -> Graph:
    """keep: values not to fold although computable here (they vary with the input shapes: packager/dynamic.py);
    dynamic: input_shapes are a probe of a plan whose shapes are resolved at run time; value_dim: the model has
    value inputs (their values decide shapes, known only at run time): a dim shape inference leaves unknown gets
    this probe extent (packager/dynamic.VALUE_DIM_PROBES), so that it becomes a run-time dim."""
    model = copy.deepcopy(model)
    notices: list[str] = []
    opset = default_opset(model)
    source_opset = opset
    if opset < CONVERT_BELOW_OPSET:
        model, opset = convert_opset(model, opset, notices)
    try:
        graph = _analyze(model, opset, notices, input_shapes, constants, strict, keep, dynamic, value_dim)
    except (UnsupportedError, NeedsConstantError) as e:
        raise (with_opset(e, source_opset) if source_opset != opset else e) from None
    graph.source_opset = source_opset if source_opset != opset else None
    return graph


def _analyze(model: onnx.ModelProto, opset: int, notices: list[str], input_shapes, constants, strict: bool,
             keep: frozenset[str], dynamic: bool, value_dim: int = 0) -> Graph:
    if not MIN_OPSET <= opset <= MAX_OPSET:
        raise UnsupportedError("model", model.graph.name or "graph", opset,
                               f"opset {opset} is outside the supported range {MIN_OPSET}..{MAX_OPSET}")
    g = model.graph
    constants = dict(constants or {})
    # Inputs bound to constants become initializers.
    for name, value in constants.items():
        if name not in {vi.name for vi in g.input}:
            raise PackagerError(f"--const names '{name}', which is not an input of the model")
        g.initializer.append(weights.from_array(np.asarray(value), name))
    keep_inputs = [vi for vi in g.input if vi.name not in constants]
    del g.input[:]
    g.input.extend(keep_inputs)
    bind_inputs(model, input_shapes or {}, notices, strict)
    if value_dim:   # outputs' dims may follow run-time values: shape inference (or the probe extent) decides them
        for o in g.output:
            for d in o.type.tensor_type.shape.dim:
                d.Clear()
    _stft_onesided_explicit(g)

    consts: dict[str, np.ndarray] = {i.name: weights.to_array(i) for i in g.initializer}   # stored: not copied
    inputs = [vi.name for vi in g.input if vi.name not in consts]
    outputs = [o.name for o in g.output]
    folded = 0
    dq_sources: dict[str, onnx.NodeProto] = {}
    model = _infer(model)
    shapes, dtypes = _collect_types(model)
    run_set = data_dependent.downstream(model.graph)   # their dims (a capacity so far) are set when the graph runs
    remaining: list[onnx.NodeProto] = []
    queue = list(model.graph.node)
    at = 0
    while at < len(queue):
        node = queue[at]
        at += 1
        if node.domain not in ("", "ai.onnx"):
            remaining.append(node)
            continue
        vals = None
        if keep and any(o in keep for o in node.output):
            remaining.append(node)
            continue
        inlined = _control_known(node, consts, opset, notices, at)
        if inlined is not None:   # an If or Loop decided at package time: its nodes fold on in the queue
            queue[at:at] = inlined
            folded += 1
            _infer_inlined(model, remaining + queue[at:], consts, shapes, dtypes)
            continue
        outer = sg.node_outer_refs(node)
        if outer and not all(r in consts for r in outer):
            remaining.append(node)
            continue
        if node.op_type == "Constant":
            vals = [_eval_node(node, [], opset)[0]]
        elif node.op_type in SHAPE_OPS and node.input[0] in shapes and node.input[0] not in run_set:
            vals = [_eval_node(node, [np.zeros(shapes[node.input[0]], dtype=np.float32)], opset)[0]]
        elif node.input and all((not i) or i in consts for i in node.input) and node.op_type not in ("RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial", "Bernoulli"):
            out_bytes = 0   # outputs whose shapes inference knows: too large to fold is never evaluated
            for o in node.output:
                if o in shapes:
                    try:
                        item = helper.tensor_dtype_to_np_dtype(dtypes[o]).itemsize
                    except (KeyError, TypeError, ValueError):
                        item = 1
                    out_bytes += int(np.prod(shapes[o], dtype=object)) * item
            if out_bytes > _fold_limit(node):
                _leave_large(node, out_bytes, opset)
                remaining.append(node)
                continue
            try:
                ins = [consts[i] if i else None for i in node.input]
                vals = _dequantize(node, ins) if node.op_type == "DequantizeLinear" else None
                vals = vals if vals is not None else _eval_node(node, ins, opset, {r: consts[r] for r in outer})
            except _TooLarge as e:
                _leave_large(node, e.nbytes, opset)
                vals = None
            except Exception:
                vals = None  # leave it to the runtime (or to a clear unsupported error)
        if vals is not None and sum(v.nbytes for v in vals) > _fold_limit(node):
            _leave_large(node, sum(v.nbytes for v in vals), opset)
            vals = None
        if vals is not None:
            for name, v in zip(node.output, vals):
                if name:
                    consts[name] = v
                    shapes[name] = tuple(v.shape)
                    dtypes[name] = helper.np_dtype_to_tensor_dtype(v.dtype)
            folded += 1
            if node.op_type == "DequantizeLinear":
                # Known, but kept in the shipped model: its integer initializer is 4x smaller than the
                # float32 one. lower() skips nodes whose outputs are all constants.
                dq_sources[node.output[0]] = node
                remaining.append(node)
            continue
        remaining.append(node)

    _drop_unused_optional_outputs(remaining, outputs, opset)
    # Rebuild: folded values become initializers; re-infer so shapes downstream of folds settle.
    # values read inside If/Loop/Scan bodies count as used: their initializers must stay
    used = {i for n in remaining for i in n.input} | set(outputs) | {r for n in remaining for r in sg.node_outer_refs(n)}
    del model.graph.node[:]
    model.graph.node.extend(remaining)
    del model.graph.initializer[:]
    produced = {o for n in remaining for o in n.output}
    model.graph.initializer.extend(weights.from_array(v, k) for k, v in consts.items()
                                   if k in used and k not in produced)
    del model.graph.value_info[:]
    model = _infer(model)
    if value_dim:
        model = _value_rank_hints(model)
    run_set = _pin_capacities(model, remaining, consts)
    shapes2, dtypes2 = _collect_types(model)
    shapes.update(shapes2)
    dtypes.update(dtypes2)
    missing = [o for n in remaining for o in n.output if o and o not in shapes]
    control = {o: n for n in remaining if n.op_type in sg.CONTROL_OPS for o in n.output}
    for o in missing:
        n = control.get(o)
        if n is not None and n.op_type == "Loop" and len(n.output) > len(n.input) - 2 and not (
                n.input[0] in consts and (len(n.input) < 2 or not n.input[1] or n.input[1] in consts)):
            # scan outputs as long as the loop runs: the trip count must be known before the run
            need = sg.inputs_behind(remaining, inputs, [n.input[0], n.input[1] if len(n.input) > 1 else None])
            if need:
                raise NeedsConstantError("Loop", n.name or n.output[0], opset, need)
    if all(o in control for o in missing):
        missing = []   # the lowering derives If/Loop/Scan outputs from their bodies (packager/ops/control.py)
    if missing and value_dim:
        _probe_value_dims(model, shapes, missing, value_dim)
        missing = [o for o in missing if o not in shapes]
    if missing:
        _shapes_by_running(model, shapes, dtypes, missing)
    return Graph(model, opset, remaining, inputs, outputs, shapes, dtypes, consts, notices, folded, dq_sources,
                 keep, dynamic, value_dim, data_dependent=run_set)
