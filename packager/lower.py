"""Lowering: a static ONNX graph -> a plan (tensor table, kernel nodes, packed weights, arena offsets).

Each ONNX op has a lowering function in packager/ops/, registered with @lowers("OpType"). It reads
shapes/attributes through LowerCtx and emits one or more kernel nodes; it raises UnsupportedError for
anything the kernels cannot do exactly. Lowerings never touch the plan bytes directly."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

import numpy as np
import onnx
from onnx import helper

from .analyze import Graph
from .errors import NeedsConstantError, PackagerError, UnsupportedError, collected, with_opset
from .passes.fuse_epilogue import Fused, fuse_epilogues
from .plan import layout
from .plan.memory import Block, plan_memory
from .plan.opcodes import CODES, DTYPES, MAX_IO, MAX_RANK, Op
from .plan.opspec import ARITY, N_PARAMS, NO_KERNEL

LowerFn = Callable[["LowerCtx", onnx.NodeProto], None]
# A fused lowering gets the head node (its output renamed to the group's), the activation
# (code, params) and the residual input name (or None).
FusedFn = Callable[["LowerCtx", onnx.NodeProto, tuple[int, list[float]], "str | None"], None]
REGISTRY: dict[str, LowerFn] = {}
FUSED_REGISTRY: dict[str, FusedFn] = {}


def lowers(*op_types: str) -> Callable[[LowerFn], LowerFn]:
    """Register a lowering function for ONNX op types: "Op" (default domain) or "domain.Op" (a custom domain's op
    that edgepack implements, accepted without --allow-domain: packager/model_load.py)."""
    def deco(fn: LowerFn) -> LowerFn:
        for t in op_types:
            if t in REGISTRY:
                raise RuntimeError(f"two lowerings registered for {t}")
            REGISTRY[t] = fn
        return fn
    return deco


def lowers_fused(*op_types: str) -> Callable[[FusedFn], FusedFn]:
    """Register the epilogue-fusing lowering of Conv/Gemm (see packager/passes/fuse_epilogue.py)."""
    def deco(fn: FusedFn) -> FusedFn:
        for t in op_types:
            FUSED_REGISTRY[t] = fn
        return fn
    return deco


@dataclass
class Tensor:
    name: str
    dtype: int
    shape: tuple[int, ...]
    data: bytes | memoryview | None = None   # weights: the bytes to store in the plan (a view: never copied)
    alias: str | None = None        # arena tensor sharing another's bytes

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * DTYPES[self.dtype].itemsize


def _check_spec(op: Op, inputs: Sequence[str | None], outputs: Sequence[str], words: Sequence[int]) -> None:
    """A node of an op without a kernel, or outside its op's arity or word counts (wasm_kernels/spec/ops.json), is a
    lowering bug that every runtime would refuse: report it where it is made."""
    if op in NO_KERNEL:
        raise PackagerError(f"{op.name}: no runtime has this kernel yet (\"kernel\": false in wasm_kernels/spec/ops.json)")
    lo_in, hi_in, lo_out, hi_out = ARITY[op]
    counts = N_PARAMS[op]
    if not (lo_in <= len(inputs) <= hi_in and lo_out <= len(outputs) <= hi_out) or (
            counts is not None and len(words) not in counts):
        raise PackagerError(f"{op.name}: {len(inputs)} inputs, {len(outputs)} outputs and {len(words)} parameter words "
                            f"are not what wasm_kernels/spec/ops.json allows")


@dataclass
class Emitted:
    op: Op
    inputs: list[str | None]
    outputs: list[str]
    params: list[int]
    scratch_bytes: int
    onnx_node: str
    flags: int = 0          # layout.NODE_PROLOGUE: runs once at bind; its outputs live for the whole run
    ctrl: dict | None = None  # IF / LOOP / SCAN (packager/ops/control.py): bodies and the names tying them to the node


@dataclass
class LoweredPlan:
    plan: layout.Plan
    names: list[str]                         # tensor id -> name
    node_sources: list[str]                  # plan node -> ONNX node name
    intermediates_bytes: int                 # sum of all arena tensors if none shared memory
    report: dict = field(default_factory=dict)


class LowerCtx:
    """What a lowering function may ask and do."""

    def __init__(self, graph: Graph, dynamic: dict[str, set[int]] | None = None) -> None:
        self.graph = graph
        self.opset = graph.opset
        # Plan v2 (docs/plan-format.md): tensor name -> axes whose extent is only known at run time. A
        # lowering of a dynamic plan emits parameter forms that the kernel resolves from the actual shapes
        # (never words derived from a dim that may change) and chooses kernels without looking at such dims.
        self.dynamic_axes: dict[str, set[int]] = dynamic or {}
        self.tensors: dict[str, Tensor] = {}
        self.emitted: list[Emitted] = []
        # If outputs whose dims differ per branch: per-dim flags (the core sets them when the branch has run)
        self.run_dims: dict[str, tuple[bool, ...]] = {}
        self._current = ""
        self._counter = 0

    # -- queries ---------------------------------------------------------------------------------
    @property
    def dynamic(self) -> bool:
        """True when some shapes of this plan are resolved at run time (plan v2)."""
        return bool(self.dynamic_axes)

    def fixed(self, name: str, axis: int | None = None) -> bool:
        """Whether `name`'s extent on `axis` (default: every axis) is the same for every run."""
        axes = self.dynamic_axes.get(name, set())
        return not axes if axis is None else (axis % max(len(self.shape(name)), 1)) not in axes

    def shape(self, name: str) -> tuple[int, ...]:
        if name in self.tensors:
            return self.tensors[name].shape
        try:
            return self.graph.shapes[name]
        except KeyError:
            raise PackagerError(f"no static shape known for '{name}'") from None

    def dtype(self, name: str) -> np.dtype:
        code = self.tensors[name].dtype if name in self.tensors else self.graph.dtypes.get(name, 0)
        if code not in DTYPES:
            name_s = onnx.TensorProto.DataType.Name(code) if code else "unknown"
            raise UnsupportedError(self._node.op_type, self._current, self.opset,
                                   f"tensor '{name}' has dtype {name_s}, which the runtime does not support")
        return DTYPES[code]

    def const(self, name: str) -> np.ndarray | None:
        return self.graph.consts.get(name) if name else None

    def attrs(self, node: onnx.NodeProto) -> dict:
        return {a.name: helper.get_attribute_value(a) for a in node.attribute}

    def require_const(self, node: onnx.NodeProto, *names: str) -> list[np.ndarray]:
        missing = [n for n in names if n and n not in self.graph.consts]
        if missing:
            raise NeedsConstantError(node.op_type, node.name or node.output[0], self.opset, missing)
        return [self.graph.consts[n] if n else None for n in names]

    def unsupported(self, node: onnx.NodeProto, reason: str) -> UnsupportedError:
        return UnsupportedError(node.op_type, node.name or node.output[0], self.opset, reason)

    def check_dtypes(self, node: onnx.NodeProto, allowed: Iterable[type], names: Sequence[str] | None = None) -> None:
        """Refuse the node unless every named (default: all) input and output has one of `allowed` dtypes."""
        ok = {np.dtype(a) for a in allowed}
        for n in (names if names is not None else [*node.input, *node.output]):
            if n and self.dtype(n) not in ok:
                raise self.unsupported(node, f"dtype {self.dtype(n)} of '{n}' is not supported "
                                             f"(supported: {', '.join(sorted(str(d) for d in ok))})")

    # -- building --------------------------------------------------------------------------------
    def weight(self, array: np.ndarray, hint: str = "w") -> str:
        """Add a (packed) weight tensor; returns its name."""
        array = np.ascontiguousarray(array)
        if array.dtype not in CODES:
            raise PackagerError(f"weight dtype {array.dtype} not storable")
        name = self._fresh(hint)
        self.tensors[name] = Tensor(name, CODES[array.dtype], tuple(array.shape), _bytes_view(array))
        return name

    def temp(self, shape: Sequence[int], dtype: type = np.float32, hint: str = "t") -> str:
        """A new intermediate arena tensor (for lowerings that emit several kernels)."""
        name = self._fresh(hint)
        self.tensors[name] = Tensor(name, CODES[np.dtype(dtype)], tuple(int(d) for d in shape))
        return name

    def emit(self, op: Op, inputs: Sequence[str | None], outputs: Sequence[str],
             params: Sequence[int | float | np.integer | np.floating] = (), scratch_bytes: int = 0) -> None:
        if len(inputs) > MAX_IO or len(outputs) > MAX_IO:
            raise PackagerError(f"{op.name}: more than {MAX_IO} inputs/outputs")
        for n in [*inputs, *outputs]:
            if n:
                self._ensure(n)
        words = []
        for p in params:
            if isinstance(p, (float, np.floating)):
                words.append(layout.f32_bits(float(p)))
            else:
                v = int(p)
                if not -2**31 <= v < 2**31:
                    raise PackagerError(f"{op.name}: parameter {v} does not fit in 32 bits")
                words.append(v)
        _check_spec(op, inputs, outputs, words)
        self.emitted.append(Emitted(op, list(inputs), list(outputs), words, int(scratch_bytes), self._current))

    def prologue(self, op: Op, inputs: Sequence[str], outputs: Sequence[str], params: Sequence[int] = ()) -> None:
        """A kernel that runs once at bind (docs/plan-format.md, "Node flags"): inputs must be weights; its outputs
        live for the whole run. It joins the prologue prefix of the node list."""
        for n in [*inputs, *outputs]:
            self._ensure(n)
        _check_spec(op, inputs, outputs, params)
        at = next((i for i, e in enumerate(self.emitted) if not e.flags & layout.NODE_PROLOGUE), len(self.emitted))
        self.emitted.insert(at, Emitted(op, list(inputs), list(outputs), [int(p) for p in params], 0, self._current,
                                        flags=layout.NODE_PROLOGUE))

    def root(self, name: str) -> str:
        """The tensor whose bytes `name` uses (itself unless it is an alias)."""
        while self.tensors[name].alias:
            name = self.tensors[name].alias
        return name

    def alias(self, out: str, src: str) -> None:
        """`out` is `src` reinterpreted (Reshape, Flatten, Squeeze, ...): same bytes, no kernel."""
        self._ensure(src)
        t = self.tensors[src]
        if t.data is not None:   # a view of a weight (graph constant or packed) is itself a weight
            self.tensors[out] = Tensor(out, t.dtype, self.shape(out), t.data)
            return
        self.tensors[out] = Tensor(out, t.dtype, self.shape(out), alias=src)

    # -- internals -------------------------------------------------------------------------------
    def _fresh(self, hint: str) -> str:
        self._counter += 1
        return f"{self._current or 'plan'}::{hint}{self._counter}"

    def _ensure(self, name: str) -> None:
        if name in self.tensors:
            return
        shape = self.shape(name)
        check_wasm32(int(np.prod(shape, dtype=np.float64)) * DTYPES.get(self.graph.dtypes.get(name, 1), np.dtype("f4")).itemsize,
                     f"tensor '{name}' {list(shape)}")
        if len(shape) > MAX_RANK:
            raise PackagerError(f"tensor '{name}' has rank {len(shape)} > {MAX_RANK}")
        code = self.graph.dtypes.get(name, 0)
        if code not in DTYPES:
            raise UnsupportedError(getattr(self, "_node", onnx.NodeProto()).op_type or "graph", self._current,
                                   self.opset, f"tensor '{name}' has dtype "
                                   f"{onnx.TensorProto.DataType.Name(code) if code else 'unknown'}, unsupported")
        c = self.graph.consts.get(name)
        data = _bytes_view(np.ascontiguousarray(c).astype(DTYPES[code], copy=False)) if c is not None else None
        self.tensors[name] = Tensor(name, code, shape, data)


def _bytes_view(a: np.ndarray) -> memoryview:
    """A weight's bytes without copying them (a 1-2 GB weight is held once: docs/security.md, "Large models")."""
    a = np.ascontiguousarray(a)
    if a.dtype.byteorder == ">":
        a = a.astype(a.dtype.newbyteorder("<"))
    return memoryview(a.reshape(-1).view(np.uint8)).toreadonly()


def lowered_custom_op(domain: str, op_type: str) -> bool:
    """Whether an op of a custom domain has a lowering of its own (e.g. com.microsoft.DynamicQuantizeLSTM)."""
    _load_ops()
    return f"{domain}.{op_type}" in REGISTRY


def _load_ops() -> None:
    import importlib
    import pkgutil
    from . import ops
    for m in pkgutil.iter_modules(ops.__path__):
        importlib.import_module(f"{ops.__name__}.{m.name}")


def lower(graph: Graph, fuse: bool = True, weights_fp16: bool = False) -> LoweredPlan:
    """A static (version 1) plan; with If/Loop/Scan nodes a version-2 plan of fixed dims (the core runs bodies).
    Every node edgepack cannot run is reported at once (errors.collected), not only the first."""
    problems: list[PackagerError] = []
    ctx, ins, outs = lower_ctx(graph, fuse, weights_fp16, problems=problems)
    if problems:
        raise collected(problems)
    if any(e.ctrl for e in ctx.emitted):
        from .plan.dynamic import assemble_dynamic
        return assemble_dynamic(ctx, ins, outs, dict(ctx.run_dims), {})
    return _assemble(ctx, ins, outs)


def _step_io(step) -> tuple[list[str], list[str]]:
    """Inputs and outputs of a lowering step: an ONNX node, a Fused group or an integer kernel group."""
    if isinstance(step, Fused):
        return [*step.head.input, *([step.residual] if step.residual else [])], list(step.head.output)
    return list(step.input), list(step.output)


def lower_ctx(graph: Graph, fuse: bool = True, weights_fp16: bool = False,
              dynamic_axes: dict[str, set[int]] | None = None,
              problems: list[PackagerError] | None = None) -> tuple[LowerCtx, list[str], list[str]]:
    """Lower every node: the context with its tensors and emitted kernels, the plan's inputs and outputs.
    problems: when given, each node's refusal (UnsupportedError, NeedsConstantError) is appended there and lowering
    goes on with the next node (nodes reading a refused node's outputs are skipped: their refusal would only
    repeat it); the context is then incomplete and only good for the report."""
    _load_ops()
    ctx = LowerCtx(graph, dynamic_axes)
    for name in graph.inputs:
        ctx._ensure(name)
    # Nodes analyze computed but kept in the model (DequantizeLinear of weights) produce constants only.
    steps: list = [n for n in graph.nodes if not (n.output and all(o in graph.consts for o in n.output if o))]
    if fuse:
        from .ops.qdq_fusion import fuse_qdq
        steps = fuse_qdq(steps, graph)   # QDQ groups -> integer kernels, before the float epilogue fusion
        fused = fuse_epilogues(steps, graph.outputs, graph.shapes, graph.consts, graph.opset)
        if all(not isinstance(s, Fused) or s.head.op_type in FUSED_REGISTRY for s in fused):
            steps = fused
    refused: set[str] = set()   # outputs of refused nodes (collecting only)
    source = getattr(graph, "source_opset", None)   # the model's opset when analysis converted it
    for node in steps:
        ins, outs = _step_io(node)
        head = node.head if isinstance(node, Fused) else node
        try:
            if problems is not None and any(i in refused for i in ins if i):
                _check_has_kernel(ctx, graph, head)   # its own missing kernel is still worth naming
                refused.update(o for o in outs if o)
                continue
            _lower_step(ctx, graph, node)
        except (UnsupportedError, NeedsConstantError) as e:
            if source and source != graph.opset:
                e = with_opset(e, source)
            if problems is None:
                raise e from None
            problems.append(e)
            refused.update(o for o in outs if o)
    if problems:
        return ctx, graph.inputs, list(graph.outputs)
    ctx._current = "output"
    # Outputs that are weights or duplicates of another output/input need a copy into their own arena tensor.
    out_names: list[str] = []
    for o in graph.outputs:
        ctx._ensure(o)
        t = ctx.tensors[o]
        if t.data is not None or o in out_names:
            dst = ctx.temp(t.shape, DTYPES[t.dtype], "out")
            ctx.emit(Op.COPY, [o], [dst], [])
            o = dst
        out_names.append(o)
    if weights_fp16:   # float32 weights stored as float16, widened once by prologue CASTs (packager/quantize/fp16.py)
        from .quantize.fp16 import store_weights_fp16
        store_weights_fp16(ctx)
    return ctx, graph.inputs, out_names


def _check_has_kernel(ctx: LowerCtx, graph: Graph, node) -> None:
    """The refusals that need no shapes: a custom domain, an op with no lowering."""
    name = node.name or (node.output[0] if node.output else "")
    if getattr(node, "emit_plan", None) is not None or isinstance(node, Fused):
        return
    if _registered_name(node) not in REGISTRY:
        if node.domain not in ("", "ai.onnx"):
            raise UnsupportedError(node.op_type, name, graph.opset,
                                   f"custom domain '{node.domain}' is not supported", domain=node.domain)
        raise UnsupportedError(node.op_type, name, graph.opset, "no edgepack kernel for this op")


def _registered_name(node) -> str:
    """REGISTRY key: "Op" in the default domain, "domain.Op" for a custom domain's op edgepack implements."""
    return node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}.{node.op_type}"


def _lower_step(ctx: LowerCtx, graph: Graph, node) -> None:
    if getattr(node, "emit_plan", None) is not None:   # an integer kernel group (ops/qdq_fusion.py)
        ctx._current = node.name
        ctx._node = node.head
        node.emit_plan(ctx)
        return
    if isinstance(node, Fused):
        ctx._current = node.head.name or node.head.output[0]
        ctx._node = node.head
        extra = {"bias": node.bias} if node.bias is not None else {}   # MatMul's constant bias
        FUSED_REGISTRY[node.head.op_type](ctx, node.head, node.activation, node.residual, **extra)
        return
    ctx._current = node.name or node.output[0]
    ctx._node = node
    _check_has_kernel(ctx, graph, node)
    REGISTRY[_registered_name(node)](ctx, node)
    for o in node.output:
        if o and o not in ctx.tensors:
            raise PackagerError(f"internal: lowering of {node.op_type} did not produce '{o}'")


WASM32_BYTES = 0xFFFFFFC0   # what one 32-bit linear memory can address, with room to align


def check_wasm32(nbytes: int, what: str) -> None:
    """Refuse, with the figure, anything a wasm32 memory cannot hold (4 GiB): the plan's sizes are u32."""
    if nbytes > WASM32_BYTES:
        raise PackagerError(f"{what} needs {nbytes / 2**30:.1f} GiB: more than a wasm32 memory holds (4 GiB); "
                            f"give smaller input shapes (--input-shape)")


class Lifetimes:
    """First and last node step at which each arena root is used (-1: before the first node; the node count:
    after the last). Shared by the version-1 and version-2 assemblies."""

    def __init__(self, ctx: LowerCtx) -> None:
        self.ctx = ctx
        self.first: dict[str, int] = {}
        self.last: dict[str, int] = {}

    def touch(self, name: str, step: int) -> None:
        r = self.ctx.root(name)
        self.first[r] = min(self.first.get(r, step), step)
        self.last[r] = max(self.last.get(r, step), step)


def _assemble(ctx: LowerCtx, inputs: list[str], outputs: list[str]) -> LoweredPlan:
    names = list(ctx.tensors)
    ids = {n: i for i, n in enumerate(names)}
    n_steps = len(ctx.emitted)
    lifetimes = Lifetimes(ctx)
    touch, first, last = lifetimes.touch, lifetimes.first, lifetimes.last
    for name in inputs:
        touch(name, -1)
    for step, e in enumerate(ctx.emitted):
        for n in [*e.inputs, *e.outputs]:
            if n:
                touch(n, step)
        if e.flags & layout.NODE_PROLOGUE:   # written once at bind, read by every run
            for n in e.outputs:
                touch(n, -1)
                touch(n, n_steps)
    for name in outputs:
        touch(name, n_steps)
    # Weights: in order, each 64-aligned (pieces joined only when the plan is written).
    weights = layout.Weights()
    w_off: dict[str, int] = {}
    for n in names:
        t = ctx.tensors[n]
        if t.data is not None:
            w_off[n] = weights.add(t.data)
    blocks = [Block(ids[r], ctx.tensors[r].nbytes, first[r], last[r]) for r in first if ctx.tensors[r].data is None]
    scratch_key = {}
    for step, e in enumerate(ctx.emitted):
        if e.scratch_bytes:
            key = len(names) + step
            scratch_key[step] = key
            blocks.append(Block(key, e.scratch_bytes, step, step))
    offsets, arena = plan_memory(blocks)
    tensors = []
    for n in names:
        t = ctx.tensors[n]
        if t.data is not None:
            tensors.append(layout.TensorEntry(t.dtype, layout.WEIGHTS, w_off[n], t.nbytes, t.shape))
        else:
            r = ctx.root(n)
            off = offsets.get(ids[r], 0)   # never-used tensors get offset 0 with size checked below
            tensors.append(layout.TensorEntry(t.dtype, layout.ARENA, off, t.nbytes, t.shape))
            arena = max(arena, off + t.nbytes)
    nodes = [layout.NodeEntry(int(e.op), [ids[i] if i else -1 for i in e.inputs], [ids[o] for o in e.outputs],
                              e.params, offsets.get(scratch_key.get(s, -1), 0), e.scratch_bytes, e.flags)
             for s, e in enumerate(ctx.emitted)]
    arena = (arena + layout.ALIGN - 1) // layout.ALIGN * layout.ALIGN
    check_wasm32(arena, "the arena (all intermediate tensors at once)")
    plan = layout.Plan(tensors, nodes, [ids[i] for i in inputs], [ids[o] for o in outputs], weights, arena)
    intermediates = sum(ctx.tensors[r].nbytes for r in first if ctx.tensors[r].data is None) + \
        sum(e.scratch_bytes for e in ctx.emitted)
    return LoweredPlan(plan, names, [e.onnx_node for e in ctx.emitted], intermediates)
