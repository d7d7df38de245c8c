"""Byte layout of plan versions 1 (static shapes) and 2 (shapes resolved at run time): writer and reader. Mirrors wasm_kernels/include/ep_plan_layout.h;
docs/plan-format.md is the prose description of the same bytes."""
from __future__ import annotations

import struct
from dataclasses import dataclass, field

import numpy as np

from ..errors import BundleError
from .opcodes import MAX_RANK

MAGIC = b"EPLN"
VERSION = 1
VERSION_DYNAMIC = 2
HEADER_BYTES = 64
HEADER_BYTES_V2 = 96
LIFE_BYTES = 12
TENSOR_BYTES = 48
NODE_BYTES = 32
ALIGN = 64
ARENA, WEIGHTS, VALUES = 0, 1, 2           # VALUES (v2): computed while resolving shapes
TENSOR_DYNAMIC = 1                         # tensor flag (v2): dims of -1 are resolved at run time

_HEADER = struct.Struct("<4s15I")          # magic + 15 u32
_TENSOR = struct.Struct("<BBBBII8iI")      # dtype storage rank flags offset nbytes dims[8] reserved
_NODE = struct.Struct("<HBBIIIIII4x")      # op n_in n_out io_at params_at n_params scratch_off scratch_bytes flags reserved
NODE_PROLOGUE = 1                          # node flag: runs once when the arena is bound (e.g. float16 weight -> float32)
NODE_RESOLVE = 2                           # node flag (v2): shape arithmetic, runs while resolving shapes
_HEADER_V2 = struct.Struct("<5I12x")       # life_off bounds_at values_bytes max_arena_bytes n_main reserved
assert _HEADER.size == HEADER_BYTES and _TENSOR.size == TENSOR_BYTES and _NODE.size == NODE_BYTES
assert HEADER_BYTES + _HEADER_V2.size == HEADER_BYTES_V2


@dataclass
class TensorEntry:
    dtype: int
    storage: int
    offset: int
    nbytes: int
    dims: tuple[int, ...]       # v2: -1 for a dim resolved at run time
    flags: int = 0              # TENSOR_DYNAMIC


@dataclass
class Dynamic:
    """What a version-2 plan adds: per tensor (root, first, last) lifetimes, per input dim (min, max) bounds
    (max 0 = unbounded), the values region's size and the most arena the plan may take (0 = unbounded)."""
    life: list[tuple[int, int, int]]
    bounds: list[list[tuple[int, int]]]
    values_bytes: int = 0
    max_arena_bytes: int = 0
    n_main: int = 0        # nodes run in order; If/Loop/Scan bodies after them (0: no bodies)


@dataclass
class NodeEntry:
    op: int
    inputs: list[int]      # tensor ids, -1 for an absent optional input
    outputs: list[int]
    params: list[int]      # i32 words (floats already bit-cast)
    scratch_offset: int = 0
    scratch_bytes: int = 0
    flags: int = 0         # NODE_PROLOGUE


class Weights:
    """The weights section as 64-aligned pieces (views of the packer's arrays), joined only on disk: a plan of
    1-2 GB of weights is written without a second copy of them in memory (issue 21)."""

    def __init__(self) -> None:
        self.pieces: list[memoryview] = []
        self.size = 0

    def add(self, data) -> int:
        """Append a buffer (bytes, memoryview, contiguous array; not copied); returns its offset."""
        at = self.size
        view = memoryview(data).cast("B")
        pad = -len(view) % ALIGN
        self.pieces.append(view)
        if pad:
            self.pieces.append(memoryview(bytes(pad)))
        self.size += len(view) + pad
        return at

    def __len__(self) -> int:
        return self.size

    def __bytes__(self) -> bytes:
        return b"".join(self.pieces)

    def __eq__(self, other) -> bool:
        return bytes(self) == bytes(other)

    def __deepcopy__(self, memo: dict) -> "Weights":
        """The pieces are read-only views: a copy of the plan shares them."""
        w = Weights()
        w.pieces, w.size = list(self.pieces), self.size
        return w


@dataclass
class Plan:
    tensors: list[TensorEntry]
    nodes: list[NodeEntry]
    inputs: list[int]
    outputs: list[int]
    weights: bytes | Weights
    arena_bytes: int
    extra: dict = field(default_factory=dict)
    dynamic: Dynamic | None = None           # set: a version-2 plan

    @property
    def version(self) -> int:
        return VERSION if self.dynamic is None else VERSION_DYNAMIC


def _align(n: int, a: int = ALIGN) -> int:
    return (n + a - 1) // a * a


def encode(plan: Plan) -> bytes:
    """Serialize a plan. Sections: header, tensor table, node table, int pool, [v2: lifetimes], weights (64-aligned)."""
    return b"".join([_head(plan), *_pieces(plan)])


def write(plan: Plan, path) -> int:
    """encode(plan) written to `path`, the weights streamed piece by piece; returns the bytes written."""
    with open(path, "wb") as f:
        f.write(_head(plan))
        for piece in _pieces(plan):
            f.write(piece)
        return f.tell()


def _pieces(plan: Plan) -> list:
    return plan.weights.pieces if isinstance(plan.weights, Weights) else [plan.weights]


def _head(plan: Plan) -> bytes:
    """Every byte of the encoded plan before its weights."""
    dyn = plan.dynamic
    ints: list[int] = list(plan.inputs) + list(plan.outputs)
    bounds_at = 0
    if dyn is not None:
        bounds_at = len(ints)
        for per_input in dyn.bounds:
            for lo, hi in per_input:
                ints += [lo, hi]
    node_blobs = []
    for n in plan.nodes:
        io_at = len(ints)
        ints += list(n.inputs) + list(n.outputs)
        params_at = len(ints)
        ints += list(n.params)
        node_blobs.append(_NODE.pack(n.op, len(n.inputs), len(n.outputs), io_at, params_at, len(n.params),
                                     n.scratch_offset, n.scratch_bytes, n.flags))
    header = HEADER_BYTES if dyn is None else HEADER_BYTES_V2
    tensors_off = header
    nodes_off = tensors_off + TENSOR_BYTES * len(plan.tensors)
    ints_off = nodes_off + NODE_BYTES * len(plan.nodes)
    life_off = ints_off + 4 * len(ints)
    end = life_off + (LIFE_BYTES * len(plan.tensors) if dyn is not None else 0)
    weights_off = _align(end)
    total = weights_off + len(plan.weights)
    out = bytearray(weights_off)
    _HEADER.pack_into(out, 0, MAGIC, plan.version, header, total, len(plan.tensors), len(plan.nodes),
                      len(plan.inputs), len(plan.outputs), tensors_off, nodes_off, ints_off, len(ints),
                      weights_off, len(plan.weights), plan.arena_bytes if dyn is None else 0, 0)
    if dyn is not None:
        _HEADER_V2.pack_into(out, HEADER_BYTES, life_off, bounds_at, dyn.values_bytes, dyn.max_arena_bytes, dyn.n_main)
        out[life_off:end] = np.asarray(dyn.life, dtype="<i4").reshape(-1).tobytes() if dyn.life else b""
    for i, t in enumerate(plan.tensors):
        dims = list(t.dims) + [0] * (MAX_RANK - len(t.dims))
        _TENSOR.pack_into(out, tensors_off + i * TENSOR_BYTES, t.dtype, t.storage, len(t.dims), t.flags, t.offset,
                          t.nbytes, *dims, 0)
    for i, b in enumerate(node_blobs):
        out[nodes_off + i * NODE_BYTES: nodes_off + (i + 1) * NODE_BYTES] = b
    out[ints_off: ints_off + 4 * len(ints)] = np.asarray(ints, dtype="<i4").tobytes()
    return bytes(out)


def weights_offset(data: bytes) -> int:
    """Where the weights start, from a plan's header (the bytes before are what decode(head_only=True) needs)."""
    if len(data) < HEADER_BYTES:
        raise BundleError("plan truncated: shorter than its header")
    return _HEADER.unpack_from(data, 0)[12]


def decode(data: bytes, head_only: bool = False) -> Plan:
    """Parse a plan for inspection. Checks section bounds; the C core does the full validation.
    head_only: `data` is the plan up to its weights (weights_offset bytes): tables only, weights left empty."""
    if len(data) < HEADER_BYTES:
        raise BundleError("plan truncated: shorter than its header")
    (magic, version, hdr, total, n_t, n_n, n_in, n_out, t_off, n_off, i_off, i_cnt, w_off, w_bytes, arena,
     _flags) = _HEADER.unpack_from(data, 0)
    if magic != MAGIC:
        raise BundleError("not an edgepack plan (bad magic)")
    if version not in (VERSION, VERSION_DYNAMIC):
        raise BundleError(f"plan version {version} not supported (this packager reads {VERSION} and {VERSION_DYNAMIC})")
    if (total != len(data) and not head_only) or any(off + size > len(data) for off, size in
                                                     [(t_off, n_t * TENSOR_BYTES), (n_off, n_n * NODE_BYTES),
                                                      (i_off, 4 * i_cnt)] + ([] if head_only else [(w_off, w_bytes)])):
        raise BundleError("plan truncated or section out of bounds")
    ints = np.frombuffer(data, dtype="<i4", count=i_cnt, offset=i_off).tolist()
    tensors = []
    for i in range(n_t):
        dt, st, rank, fl, off, nb, *rest = _TENSOR.unpack_from(data, t_off + i * TENSOR_BYTES)
        tensors.append(TensorEntry(dt, st, off, nb, tuple(rest[:rank]), fl))
    nodes = []
    for i in range(n_n):
        op, ni, no, io_at, p_at, n_p, s_off, s_b, fl = _NODE.unpack_from(data, n_off + i * NODE_BYTES)
        nodes.append(NodeEntry(op, ints[io_at:io_at + ni], ints[io_at + ni:io_at + ni + no], ints[p_at:p_at + n_p],
                               s_off, s_b, fl))
    dyn = None
    if version == VERSION_DYNAMIC:
        if len(data) < HEADER_BYTES_V2:
            raise BundleError("plan truncated: shorter than its header")
        life_off, bounds_at, values_bytes, max_arena, n_main = _HEADER_V2.unpack_from(data, HEADER_BYTES)
        if life_off + LIFE_BYTES * n_t > len(data):
            raise BundleError("plan truncated or section out of bounds")
        life = np.frombuffer(data, dtype="<i4", count=3 * n_t, offset=life_off).reshape(-1, 3).tolist()
        bounds, at = [], bounds_at
        for t in ints[:n_in]:
            rank = len(tensors[t].dims) if 0 <= t < n_t else 0
            bounds.append([(ints[at + 2 * k], ints[at + 2 * k + 1]) for k in range(rank)])
            at += 2 * rank
        dyn = Dynamic([tuple(x) for x in life], bounds, values_bytes, max_arena, n_main)
    return Plan(tensors, nodes, ints[:n_in], ints[n_in:n_in + n_out],
                b"" if head_only else bytes(data[w_off:w_off + w_bytes]), arena, dynamic=dyn)


def f32_bits(x: float) -> int:
    """A float parameter as the i32 word the kernels read."""
    return int(np.array([x], dtype="<f4").view("<i4")[0])
