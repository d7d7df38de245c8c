"""If, Loop and Scan: each body is analyzed (shapes inferred with its inputs typed, constants folded) and lowered
into its own list of kernel nodes; the control node (Op.IF / LOOP / SCAN) carries those lists and the names that
connect a body to the node. packager/plan/dynamic.py places the bodies after the main sequence and writes the
parameter words (docs/plan-format.md, "Sub-plans"). Outer-scope values are tensors of the same plan."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper, shape_inference

from .. import data_dependent
from ..errors import NeedsConstantError
from ..lowering import REGISTRY, Emitted, LowerCtx, Tensor, lowers
from ..passes import subgraphs as sg
from ..plan.opcodes import CODES, DTYPES, Op
from ..reference import ORT_MAX_IR

BOOL, INT64 = onnx.TensorProto.BOOL, onnx.TensorProto.INT64
MAX_DEPTH = 7   # bodies inside bodies: the core's EP_MAX_DEPTH - 1 (src/control.h)


def _value_types(g: onnx.GraphProto) -> dict[str, tuple[int, tuple | None]]:
    out = {}
    for vi in list(g.input) + list(g.value_info) + list(g.output):
        tt = vi.type.tensor_type
        shape = None
        if tt.HasField("shape") and all(d.HasField("dim_value") for d in tt.shape.dim):
            shape = tuple(d.dim_value for d in tt.shape.dim)
        if vi.name not in out or out[vi.name][1] is None:
            out[vi.name] = (tt.elem_type, shape)
    for init in g.initializer:
        out[init.name] = (init.data_type, tuple(init.dims))
    return out


def _analyze_body(ctx: LowerCtx, node: onnx.NodeProto, body: onnx.GraphProto,
                  in_types: list[tuple[int, tuple]]) -> list[onnx.NodeProto]:
    """The body's shapes, dtypes and constants joined to the graph's (names are unique across a model); returns the
    body nodes left to run."""
    from ..analyze import _eval_node
    g = ctx.graph
    for n in body.node:
        if n.op_type in data_dependent.OPS and n.domain in ("", "ai.onnx"):
            raise ctx.unsupported(n, "its output extent is set when it runs, which the runtime supports in the main "
                                     "graph only, not inside an If/Loop/Scan body")
    for vi in body.output:
        if vi.type.WhichOneof("value") not in (None, "tensor_type"):
            raise ctx.unsupported(node, f"its body returns '{vi.name}', a {vi.type.WhichOneof('value')[:-5]}: "
                                        "only tensors are supported")
    refs = sorted(sg.outer_refs(body))
    inputs = [helper.make_tensor_value_info(vi.name, t, s) for vi, (t, s) in zip(body.input, in_types)]
    known = [r for r in refs if r in g.consts]
    for r in refs:
        if r not in g.consts:
            inputs.append(helper.make_tensor_value_info(r, g.dtypes.get(r, 0), ctx.shape(r)))
    standalone = helper.make_graph(list(body.node), "body", inputs, list(body.output),
                                   list(body.initializer) + [numpy_helper.from_array(np.asarray(g.consts[r]), r)
                                                             for r in known])
    m = helper.make_model(standalone, opset_imports=[helper.make_opsetid("", ctx.opset)])
    m.ir_version = min(m.ir_version, ORT_MAX_IR)
    try:
        m = shape_inference.infer_shapes(m, strict_mode=False, data_prop=True)
    except Exception as e:  # noqa: BLE001
        raise ctx.unsupported(node, f"shape inference of its body failed: {str(e).splitlines()[0][:160]}") from None
    types = _value_types(m.graph)
    for init in body.initializer:   # subgraph initializers become weights
        g.consts[init.name] = numpy_helper.to_array(init)
        g.shapes[init.name], g.dtypes[init.name] = tuple(init.dims), init.data_type
    left = []
    for n in body.node:
        ins = [g.consts.get(i) if i else None for i in n.input]
        tensor_op = not n.op_type.startswith(("Sequence", "Optional", "SplitToSequence", "ConcatFromSequence"))
        if tensor_op and (n.op_type == "Constant" or (n.input and all(x is not None or not i for x, i in zip(ins, n.input))
                                                      and not sg.subgraphs(n))):
            try:
                vals = _eval_node(n, ins, ctx.opset)
                for o, v in zip(n.output, vals):
                    g.consts[o] = v
                    g.shapes[o] = tuple(v.shape)
                    g.dtypes[o] = helper.np_dtype_to_tensor_dtype(v.dtype)
                continue
            except Exception:  # noqa: BLE001 - left to the kernels
                pass
        left.append(n)
    names = [vi.name for vi in body.input] + [o for n in left for o in n.output if o]
    for v in names:
        if v in ctx.tensors:
            raise ctx.unsupported(node, f"value '{v}' of its body has the name of another value: rename it")
        t, s = types.get(v, (0, None))
        if s is None:
            raise ctx.unsupported(node, f"the shape of '{v}' in its body cannot be determined at package time")
        g.shapes[v], g.dtypes[v] = s, t
    for (t, s), vi in zip(in_types, body.input):
        g.shapes[vi.name], g.dtypes[vi.name] = tuple(s), t
    return left


def _lower_body(ctx: LowerCtx, node: onnx.NodeProto, body: onnx.GraphProto, nodes: list[onnx.NodeProto],
                fresh_outputs: bool) -> tuple[list[Emitted], list[str]]:
    """The body's kernel nodes and the names of its outputs. fresh_outputs: an output whose bytes are a body
    input's is copied first (the node copies outputs back into inputs one by one: Loop and Scan)."""
    saved, saved_current, saved_node = ctx.emitted, ctx._current, getattr(ctx, "_node", None)
    if ctx.dynamic:
        raise ctx.unsupported(node, "bodies with run-time input dims are not supported yet: give fixed shapes "
                                    "(--input-shape)")
    depth = getattr(ctx, "body_depth", 0) + 1
    if depth > MAX_DEPTH:
        raise ctx.unsupported(node, f"bodies nested {depth} deep: the runtime runs {MAX_DEPTH} at most")
    ctx.emitted = []
    ctx.body_depth = depth
    try:
        for vi in body.input:
            ctx._ensure(vi.name)
        for n in nodes:
            ctx._current = n.name or n.output[0]
            ctx._node = n
            if n.domain not in ("", "ai.onnx") or n.op_type not in REGISTRY:
                raise ctx.unsupported(n, "no edgepack kernel for this op (in a subgraph)")
            REGISTRY[n.op_type](ctx, n)
        ctx._current = f"{node.name or node.output[0]}/body"
        ins = {vi.name for vi in body.input}
        outs = []
        for o in body.output:
            name = o.name
            ctx._ensure(name)
            if fresh_outputs and ctx.root(name) in ins:
                dst = ctx.temp(ctx.shape(name), DTYPES[ctx.tensors[name].dtype], "bodyout")
                ctx.emit(Op.COPY, [name], [dst], [])
                name = dst
            outs.append(name)
        return ctx.emitted, outs
    finally:
        ctx.emitted, ctx._current, ctx._node, ctx.body_depth = saved, saved_current, saved_node, depth - 1




def _out(ctx: LowerCtx, name: str, dtype: int, shape: tuple[int, ...]) -> None:
    ctx.graph.shapes[name], ctx.graph.dtypes[name] = tuple(shape), dtype
    ctx.tensors[name] = Tensor(name, dtype, tuple(int(d) for d in shape))


def _emit(ctx: LowerCtx, op: Op, inputs: list[str | None], outputs: list[str], bodies: list[list[Emitted]],
          head: list[int], body_in: list[str | None], body_out: list[str], axes: list[int] = ()) -> None:
    ctx.emit(op, inputs, outputs, [])
    ctx.emitted[-1].ctrl = {"bodies": bodies, "head": list(head), "body_in": list(body_in),
                            "body_out": list(body_out), "axes": list(axes)}


def _type(ctx: LowerCtx, name: str) -> tuple[int, tuple]:
    ctx.dtype(name)
    return ctx.tensors[name].dtype if name in ctx.tensors else ctx.graph.dtypes[name], ctx.shape(name)


@lowers("If")
def lower_if(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    a = ctx.attrs(node)
    ctx._ensure(node.input[0])
    bodies, outs, shapes = [], [], []
    for key in ("then_branch", "else_branch"):
        g = a[key]
        left = _analyze_body(ctx, node, g, [])
        emitted, o = _lower_body(ctx, node, g, left, fresh_outputs=False)
        bodies.append(emitted)
        outs.append(o)
        shapes.append([ctx.tensors[n].shape for n in o])
    if len(outs[0]) != len(node.output) or len(outs[1]) != len(node.output):
        raise ctx.unsupported(node, "its branches return a different number of values than it has outputs")
    for k, name in enumerate(node.output):
        (t0, s0), (t1, s1) = _type(ctx, outs[0][k]), _type(ctx, outs[1][k])
        if t0 != t1 or len(s0) != len(s1):
            raise ctx.unsupported(node, f"output '{name}': its branches give different dtypes or ranks")
        # different dims per branch: the core sets the output's dims when the branch has run (room for the larger)
        _out(ctx, name, t0, tuple(max(x, y) for x, y in zip(s0, s1)))
        if s0 != s1:
            ctx.run_dims[name] = tuple(x != y for x, y in zip(s0, s1))
            ctx.run_dims_why = {**getattr(ctx, "run_dims_why", {}),
                                name: f"If '{node.name or node.output[0]}': its branches give '{name}' shapes "
                                      f"{list(s0)} and {list(s1)}"}
    _emit(ctx, Op.IF, [node.input[0]], list(node.output), bodies, [], [], outs[0] + outs[1])


@lowers("Loop")
def lower_loop(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    body = ctx.attrs(node)["body"]
    m_name = node.input[0] if node.input[0] else None
    c_name = node.input[1] if len(node.input) > 1 and node.input[1] else None
    carried = list(node.input[2:])
    n, k = len(carried), len(node.output) - len(carried)
    if any(not c for c in carried):
        raise ctx.unsupported(node, "a loop-carried input is missing")
    if k and (m_name is None or m_name not in ctx.graph.consts or (c_name and c_name not in ctx.graph.consts)):
        # scan outputs are as long as the loop runs: that length must be known before the run
        need = sg.inputs_behind(ctx.graph.nodes, ctx.graph.inputs, [m_name, c_name])
        if need:
            raise NeedsConstantError("Loop", node.name or node.output[0], ctx.opset, need)
        raise ctx.unsupported(node, "its scan outputs are as long as the loop runs, which is only known at run time "
                                    "(the trip count or condition is computed from input data)")
    in_types = [(INT64, ()), (BOOL, ())] + [_type(ctx, c) for c in carried]
    left = _analyze_body(ctx, node, body, in_types)
    emitted, outs = _lower_body(ctx, node, body, left, fresh_outputs=True)
    trips = None
    if k:
        trips = int(np.asarray(ctx.graph.consts[m_name]).reshape(-1)[0])
        if c_name is not None and not bool(np.asarray(ctx.graph.consts[c_name]).reshape(-1)[0]):
            trips = 0
        if not sg.condition_stays_true(body):
            raise ctx.unsupported(node, "its scan outputs are as long as the loop runs, and its body's condition "
                                        "may stop it early (only the run knows when)")
    for j, name in enumerate(node.output[:n]):
        _out(ctx, name, *_type(ctx, carried[j]))
    for j, name in enumerate(node.output[n:]):
        t, s = _type(ctx, outs[1 + n + j])
        _out(ctx, name, t, (max(trips, 0),) + tuple(s))
    for x in (m_name, c_name, *carried):
        if x:
            ctx._ensure(x)
    ins = [vi.name for vi in body.input]
    _emit(ctx, Op.LOOP, [m_name, c_name, *carried], list(node.output), [emitted], [n, k], ins, outs)


@lowers("Scan")
def lower_scan(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    a = ctx.attrs(node)
    body = a["body"]
    m = int(a["num_scan_inputs"])
    ins = list(node.input)
    batched = ctx.opset < 9
    if batched:   # Scan-8: a batch axis first and optional sequence lengths; a batch of 1 is Scan-9 on axis 1
        if ins[0]:
            raise ctx.unsupported(node, "sequence_lens is not supported")
        ins = ins[1:]
    n = len(ins) - m
    k = len(node.output) - n
    states, xs = ins[:n], ins[n:]
    for x in ins:
        ctx._ensure(x)
        if batched and ctx.shape(x)[:1] != (1,):
            raise ctx.unsupported(node, "a batch other than 1 is not supported")
    if batched:
        dirs = list(a.get("directions", [0] * m))
        in_axes, in_rev, out_axes, out_rev = [1] * m, dirs, [0] * k, [0] * k
    else:
        in_axes = list(a.get("scan_input_axes", [0] * m))
        in_rev = list(a.get("scan_input_directions", [0] * m))
        out_axes = list(a.get("scan_output_axes", [0] * k))
        out_rev = list(a.get("scan_output_directions", [0] * k))
    in_axes = [ax % len(ctx.shape(x)) for ax, x in zip(in_axes, xs)]
    lens = {ctx.shape(x)[ax] for x, ax in zip(xs, in_axes)}
    if len(lens) != 1:
        raise ctx.unsupported(node, "its scan inputs have different lengths")
    length = lens.pop()
    drop = (lambda s, ax: s[1:]) if batched else (lambda s, ax: s)
    in_types = [(t, drop(s, 0)) for t, s in (_type(ctx, x) for x in states)]
    for x, ax in zip(xs, in_axes):
        t, s = _type(ctx, x)
        s = tuple(d for i, d in enumerate(s) if i != ax)
        in_types.append((t, s[1:] if batched else s))
    left = _analyze_body(ctx, node, body, in_types)
    emitted, outs = _lower_body(ctx, node, body, left, fresh_outputs=True)
    for j, name in enumerate(node.output[:n]):
        _out(ctx, name, *_type(ctx, states[j]))
    for j, name in enumerate(node.output[n:]):
        t, s = _type(ctx, outs[n + j])
        ax = out_axes[j] % (len(s) + 1)
        shape = tuple(s[:ax]) + (length,) + tuple(s[ax:])
        out_axes[j] = ax + 1 if batched else ax
        _out(ctx, name, t, ((1,) + shape) if batched else shape)
    _emit(ctx, Op.SCAN, states + xs, list(node.output), [emitted], [n, m, k], [vi.name for vi in body.input], outs,
          in_axes + out_axes + [int(r) for r in in_rev] + [int(r) for r in out_rev])


__all__ = ["lower_if", "lower_loop", "lower_scan", "CODES"]
