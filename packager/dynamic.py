"""Run-time shapes at package time (plan version 2).

Which input dims are symbolic, and what varies with them: the model is analyzed, optimized and lowered at two
probe shapes, A and B. Values that differ between them (a Shape's output, a Reshape target computed from it)
stay in the graph as shape arithmetic instead of being folded; dims that differ become run-time dims. Both
lowerings must then agree on every kernel, parameter word and weight: a parameter that changed with the shape
means a lowering baked a run-time dim, and the model is refused with that node named (the packager then falls
back to fixed shapes unless run-time shapes were asked for)."""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import onnx

from .errors import PackagerError

Bound = tuple[int, int]            # (min, max); max 0 = unbounded


@dataclass
class Symbols:
    """Per graph input: each dim's symbol name (None when fixed), extents and probes."""
    dims: dict[str, list[str | None]]
    fixed: dict[str, list[int]]
    bounds: dict[str, list[Bound | None]]
    probe_a: dict[str, int] = field(default_factory=dict)   # symbol -> extent
    probe_b: dict[str, int] = field(default_factory=dict)
    example: dict[str, int] = field(default_factory=dict)   # a small shape the packager verifies the bundle at
    values: list[str] = field(default_factory=list)   # value inputs: graph inputs whose values decide shapes
    notes: list[str] = field(default_factory=list)    # dims the model writes as a dim_value <= 0, and what they became

    @property
    def any(self) -> bool:
        return bool(self.values) or any(s for dims in self.dims.values() for s in dims)

    def names(self) -> list[str]:
        return sorted(self.probe_a)

    def _bound(self, s: str) -> Bound:
        b = [self.bounds[n][k] or (1, 0) for n, dims in self.dims.items() for k, d in enumerate(dims) if d == s]
        lo = max(x[0] for x in b)
        his = [x[1] for x in b if x[1]]
        return lo, min(his) if his else 0

    def lo(self, s: str) -> int:
        return self._bound(s)[0]

    def hi(self, s: str) -> int | None:
        """The most extent of symbol s, None when unbounded."""
        return self._bound(s)[1] or None

    def symbol_for(self, a: int, b: int) -> str | None:
        """The symbol whose probes are (a, b): an output dim that follows an input dim; None otherwise."""
        return next((s for s in self.probe_a if self.probe_a[s] == a and self.probe_b[s] == b), None)

    def shapes(self, values: dict[str, int]) -> dict[str, tuple[int, ...]]:
        return {name: tuple(values[s] if s else self.fixed[name][k] for k, s in enumerate(dims))
                for name, dims in self.dims.items()}


def _dims(vi: onnx.ValueInfoProto) -> list[int | str | None]:
    tt = vi.type.tensor_type
    if not tt.HasField("shape"):
        return []
    return [d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tt.shape.dim]


def find_symbols(model: onnx.ModelProto, input_shapes: dict[str, tuple] | None,
                 constants: dict[str, np.ndarray] | None) -> Symbols:
    """Symbolic dims of the graph inputs, after --input-shape (an int fixes a dim, a (min, max) pair bounds it).
    A dim_value of 0 or -1 (some exporters write those) counts as symbolic; a 0 one is bounded [0..], not [1..]."""
    given = dict(input_shapes or {})
    inits = {i.name for i in model.graph.initializer} | set(constants or {})
    valued = value_slot_inputs(model, inits)
    dims: dict[str, list[str | None]] = {}
    fixed: dict[str, list[int]] = {}
    bounds: dict[str, list[Bound | None]] = {}
    notes: list[str] = []
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        model_dims = _dims(vi)
        want = list(given.get(vi.name, [None] * len(model_dims)))
        if model_dims and len(want) != len(model_dims):
            raise PackagerError(f"--input-shape {vi.name}: rank {len(want)} given, the model says rank {len(model_dims)}")
        names, ext, bnd = [], [], []
        for k, (d, w) in enumerate(zip(model_dims or [None] * len(want), want)):
            if not (w is None or isinstance(w, (int, np.integer)) or
                    (isinstance(w, (tuple, list)) and len(w) == 2 and all(isinstance(x, (int, np.integer)) for x in w))):
                raise PackagerError(f"--input-shape {vi.name}: dim {k} is {w!r}; give a size, a (min, max) pair "
                                    f"(max 0: unbounded) or None")
            if isinstance(w, (int, np.integer)):
                names.append(None); ext.append(int(w)); bnd.append(None)
            elif isinstance(d, int) and (d > 0 or (d == 0 and vi.name in valued)):   # a value input's 0 is empty
                if w is not None and not (w[0] <= d and (not w[1] or d <= w[1])):
                    raise PackagerError(f"--input-shape {vi.name}: the model fixes dim {k} to {d}")
                names.append(None); ext.append(d); bnd.append(None)
            else:
                names.append(d if isinstance(d, str) else f"{vi.name}_{k}")
                if isinstance(d, int) and w is None:
                    notes.append(f"input '{vi.name}': dimension written as dim_value {d} (axis {k}) read as any size: "
                                 f"resolved at run time as '{names[-1]}' (use --input-shape {vi.name}=... to fix it)")
                ext.append(-1)
                # a dim_value 0 may be an exporter's "unknown" or a real empty dim: it may be fed as 0
                bnd.append(tuple(int(x) for x in w) if w is not None else (0, 0) if d == 0 else None)
        dims[vi.name], fixed[vi.name], bounds[vi.name] = names, ext, bnd
    syms = Symbols(dims, fixed, bounds, values=[n for n in valued if n in dims and not any(dims[n])
                                                and int(np.prod(fixed[n], dtype=np.int64)) <= MAX_VALUE_ELEMENTS],
                   notes=notes)
    _choose_probes(syms)
    return syms


# Inputs whose values decide an output's shape and that a version-2 kernel reads while the core resolves shapes
# (packager/plan/dynamic.SHAPE_INPUTS): ONNX op -> (input indices, the first opset where they are inputs).
VALUE_SLOTS: dict[str, tuple[tuple[int, ...], int]] = {
    "Reshape": ((1,), 5), "Expand": ((1,), 8), "ConstantOfShape": ((0,), 9), "Range": ((0, 1, 2), 11),
    "TopK": ((1,), 10), "ReduceSum": ((1,), 13), "Squeeze": ((1,), 13), "Unsqueeze": ((1,), 13),
    "OneHot": ((1,), 9), "Slice": ((1, 2, 3, 4), 10), "Pad": ((1, 3), 11), "Split": ((1,), 13),
    "CumSum": ((1,), 11), "CumProd": ((1,), 11), "Tile": ((1,), 6),
    **{w: ((0,), 17) for w in ("HannWindow", "HammingWindow", "BlackmanWindow")}, "CenterCropPad": ((1,), 18),
    # (those four expanded to their ONNX bodies when fed: passes/expand_functions.RUN_TIME_BODIES)
    **{f"Reduce{k}": ((1,), 18) for k in ("Mean", "Max", "Min", "Prod", "L1", "L2", "SumSquare", "LogSum", "LogSumExp")},
}
MAX_VALUE_ELEMENTS = 4096   # a larger input is data, not shape parameters (the values region holds 16 MiB)
# Probe extents of the dims that value inputs decide (packager/analyze.py): they differ, so those dims are
# resolved at run time; odd primes, so that they rarely meet a fixed dim by chance.
VALUE_DIM_PROBES = (29, 31)


def value_slot_inputs(model: onnx.ModelProto, inits: set[str]) -> list[str]:
    """Graph inputs (not initializers) that a shape-deciding input of VALUE_SLOTS is computed from (directly, or
    through nodes that then run while the core resolves shapes; a Shape or Size reads only dims and ends the
    chain): fed at run time, their values go to the values region before the core resolves shapes
    (docs/plan-format.md, "Value inputs"). Only small ones with fixed dims become value inputs."""
    from .analyze import default_opset
    opset = default_opset(model)
    graph_inputs = {vi.name for vi in model.graph.input} - inits
    producer = {o: n for n in model.graph.node for o in n.output if o}
    out: list[str] = []
    seen: set[str] = set()
    todo = []
    for n in model.graph.node:
        slots, since = VALUE_SLOTS.get(n.op_type, ((), 0))
        if n.domain in ("", "ai.onnx") and opset >= since:
            todo += [n.input[k] for k in slots if k < len(n.input) and n.input[k]]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        if name in graph_inputs:
            out.append(name)
        elif name in producer and producer[name].op_type not in ("Shape", "Size"):
            todo += [i for i in producer[name].input if i]
    return sorted(out)


# Extents of the first non-batch symbol's two probes and the step to the next symbol's. A model whose inputs must
# stay short (a position table of 64 rows) fails at the default probes: SMALL_PROBES is the second try.
DEFAULT_PROBES = (64, 96, 32)
SMALL_PROBES = (16, 24, 8)


def smaller_probes(syms: Symbols) -> Symbols | None:
    """syms with SMALL_PROBES for its non-batch symbols; None when that changes no probe (all batch or bounded)."""
    small = replace(syms, probe_a={}, probe_b={}, example={}, notes=list(syms.notes))
    _choose_probes(small, SMALL_PROBES)
    return None if (small.probe_a, small.probe_b) == (syms.probe_a, syms.probe_b) else small


def _choose_probes(syms: Symbols, probes: tuple[int, int, int] = DEFAULT_PROBES) -> None:
    """Two distinct extents per symbol for the probes (batch-like symbols, only ever on axis 0, small ones), and
    the example extent the bundle is verified at (1 for batch-like symbols)."""
    axes: dict[str, set[int]] = {}
    for dims in syms.dims.values():
        for k, s in enumerate(dims):
            if s:
                axes.setdefault(s, set()).add(k)
    spatial = 0
    for s in sorted(axes, key=lambda s: (min(axes[s]), s)):
        batch = axes[s] == {0}
        a, b = (2, 3) if batch else (probes[0] + probes[2] * spatial, probes[1] + probes[2] * spatial)
        spatial += 0 if batch else 1
        lo, hi = syms._bound(s)
        if hi and hi - lo < 1:
            raise PackagerError(f"dimension '{s}' has bounds [{lo}..{hi}]: a single value, give it as a fixed size")
        a = min(max(a, lo), hi) if hi else max(a, lo)
        b = min(max(b, lo), hi) if hi else max(b, lo)
        if a == b:
            a = b - 1 if b - 1 >= lo else b + 1
        syms.probe_a[s], syms.probe_b[s] = a, b
        syms.example[s] = max(1, lo) if batch else a


def varying_values(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> frozenset[str]:
    """Constants of the two probe analyses that differ (or exist in one only): they depend on the input shapes."""
    out = {k for k in a.keys() ^ b.keys()}
    for k in a.keys() & b.keys():
        x, y = np.asarray(a[k]), np.asarray(b[k])
        if x.shape != y.shape or x.dtype != y.dtype or not np.array_equal(x, y):
            out.add(k)
    return frozenset(out)


def varying_axes(a: dict[str, tuple[int, ...]], b: dict[str, tuple[int, ...]]) -> dict[str, set[int]]:
    out: dict[str, set[int]] = {}
    for k in a.keys() & b.keys():
        if len(a[k]) != len(b[k]):
            raise PackagerError(f"'{k}' has rank {len(a[k])} or {len(b[k])} depending on the input shape")
        axes = {i for i, (x, y) in enumerate(zip(a[k], b[k])) if x != y}
        if axes:
            out[k] = axes
    return out


def compare_lowerings(ctx_a, ctx_b) -> dict[str, tuple[bool, ...]]:
    """Both probe lowerings must be the same program: same tensors (dtype, rank, weights, aliases) and the same
    kernels with the same parameter words. Returns, per tensor, which dims differ (resolved at run time)."""
    names_a, names_b = list(ctx_a.tensors), list(ctx_b.tensors)
    if len(ctx_a.emitted) != len(ctx_b.emitted) or names_a != names_b:
        first = next((i for i, (x, y) in enumerate(zip(ctx_a.emitted, ctx_b.emitted)) if x.onnx_node != y.onnx_node
                      or x.op != y.op), min(len(ctx_a.emitted), len(ctx_b.emitted)))
        where = ctx_a.emitted[first].onnx_node if first < len(ctx_a.emitted) else "the end of the graph"
        raise PackagerError(f"the lowering depends on the input shape (it differs from node '{where}' on): "
                            f"give fixed shapes with --input-shape")
    for x, y in zip(ctx_a.emitted, ctx_b.emitted):
        if x.op != y.op or x.inputs != y.inputs or x.outputs != y.outputs or x.flags != y.flags:
            raise PackagerError(f"node '{x.onnx_node}': its kernels depend on the input shape: give fixed shapes "
                                f"with --input-shape")
        if x.params != y.params:
            raise PackagerError(f"node '{x.onnx_node}' ({x.op.name}): its parameters depend on the input shape "
                                f"(this op cannot yet run with shapes known only at run time): give fixed shapes "
                                f"with --input-shape")
    out: dict[str, tuple[bool, ...]] = {}
    for n in names_a:
        ta, tb = ctx_a.tensors[n], ctx_b.tensors[n]
        if ta.dtype != tb.dtype or len(ta.shape) != len(tb.shape) or ta.alias != tb.alias or \
                (ta.data is None) != (tb.data is None):
            raise PackagerError(f"tensor '{n}' differs between input shapes: give fixed shapes with --input-shape")
        if ta.data is not None and ta.data != tb.data:
            raise PackagerError(f"weights '{n}' depend on the input shape: give fixed shapes with --input-shape")
        out[n] = tuple(x != y for x, y in zip(ta.shape, tb.shape))
    return out


def bounded_memory(plan, syms: Symbols, wasm: "str | object") -> tuple[int, int] | None:
    """When every run-time dim is bounded: (arena bytes, linear-memory bytes) at the bounds, as the core lays them
    out (the most a run can take: packager/plan/layout.py writes the first into the plan). None otherwise."""
    from .plan import layout
    from .runtime.wasm import WasmPlan
    if syms.values or any(syms.hi(s) is None for s in syms.names()):   # values decide sizes: no bound
        return None
    top = {s: syms.hi(s) for s in syms.names()}
    session = WasmPlan(wasm, layout.encode(plan))
    session.set_shapes([syms.shapes(top)[n] for n in syms.dims])
    arena = session.memory_bound - session.arena_ptr
    return arena, session.memory_bound
