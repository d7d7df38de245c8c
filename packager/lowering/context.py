"""What a lowering function works with: LowerCtx (queries on the analyzed graph, weight/temp/emit), the tensors
and kernel nodes it records, and the LoweredPlan the assembly makes of them."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable, Sequence

import numpy as np
import onnx
from onnx import helper

from ..errors import NeedsConstantError, PackagerError, UnsupportedError
from ..plan import layout
from ..plan.opcodes import CODES, DTYPES, MAX_IO, MAX_RANK, Op
from ..plan.opspec import ARITY, N_PARAMS, NO_KERNEL

if TYPE_CHECKING:
    from ..analyze import Graph


@dataclass
class Tensor:
    name: str
    dtype: int
    shape: tuple[int, ...]
    data: bytes | memoryview | None = None   # weights: the bytes to store in the plan (a view: never copied)
    alias: str | None = None        # arena tensor sharing another's bytes

    def __post_init__(self) -> None:
        if any(d > 0x7FFFFFFF for d in self.shape):   # a plan's dims are i32 (docs/plan-format.md)
            raise PackagerError(f"tensor '{self.name}' {list(self.shape)}: a dimension of 2^31 or more does not fit "
                                f"a plan's 32-bit dims; give smaller input shapes (--input-shape)")

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
        """True when some shapes of this plan are resolved at run time (plan v2), or decided by value inputs."""
        return bool(self.dynamic_axes) or bool(getattr(self.graph, "value_dim", 0))

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
        self.tensors[name] = Tensor(name, CODES[array.dtype], tuple(array.shape), bytes_view(array))
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
        data = bytes_view(np.ascontiguousarray(c).astype(DTYPES[code], copy=False)) if c is not None else None
        self.tensors[name] = Tensor(name, code, shape, data)


WASM32_BYTES = 0xFFFFFFC0   # what one 32-bit linear memory can address, with room to align


def check_wasm32(nbytes: int, what: str) -> None:
    """Refuse, with the figure, anything a wasm32 memory cannot hold (4 GiB): the plan's sizes are u32."""
    if nbytes > WASM32_BYTES:
        raise PackagerError(f"{what} needs {nbytes / 2**30:.1f} GiB: more than a wasm32 memory holds (4 GiB); "
                            f"give smaller input shapes (--input-shape)")


def bytes_view(a: np.ndarray) -> memoryview:
    """A weight's bytes without copying them (a 1-2 GB weight is held once: docs/security.md, "Large models")."""
    a = np.ascontiguousarray(a)
    if a.dtype.byteorder == ">":
        a = a.astype(a.dtype.newbyteorder("<"))
    return memoryview(a.reshape(-1).view(np.uint8)).toreadonly()
