"""Byte layout of plan version 1: writer and reader. Mirrors wasm_kernels/include/ep_plan_layout.h;
docs/plan-format.md is the prose description of the same bytes."""
from __future__ import annotations

import struct
from dataclasses import dataclass, field

import numpy as np

from ..errors import BundleError
from .opcodes import MAX_RANK

MAGIC = b"EPLN"
VERSION = 1
HEADER_BYTES = 64
TENSOR_BYTES = 48
NODE_BYTES = 32
ALIGN = 64
ARENA, WEIGHTS = 0, 1

_HEADER = struct.Struct("<4s15I")          # magic + 15 u32
_TENSOR = struct.Struct("<BBBBII8iI")      # dtype storage rank flags offset nbytes dims[8] reserved
_NODE = struct.Struct("<HBBIIIIII4x")      # op n_in n_out io_at params_at n_params scratch_off scratch_bytes flags reserved
NODE_PROLOGUE = 1                          # node flag: runs once when the arena is bound (e.g. float16 weight -> float32)
assert _HEADER.size == HEADER_BYTES and _TENSOR.size == TENSOR_BYTES and _NODE.size == NODE_BYTES


@dataclass
class TensorEntry:
    dtype: int
    storage: int
    offset: int
    nbytes: int
    dims: tuple[int, ...]


@dataclass
class NodeEntry:
    op: int
    inputs: list[int]      # tensor ids, -1 for an absent optional input
    outputs: list[int]
    params: list[int]      # i32 words (floats already bit-cast)
    scratch_offset: int = 0
    scratch_bytes: int = 0
    flags: int = 0         # NODE_PROLOGUE


@dataclass
class Plan:
    tensors: list[TensorEntry]
    nodes: list[NodeEntry]
    inputs: list[int]
    outputs: list[int]
    weights: bytes
    arena_bytes: int
    extra: dict = field(default_factory=dict)


def _align(n: int, a: int = ALIGN) -> int:
    return (n + a - 1) // a * a


def encode(plan: Plan) -> bytes:
    """Serialize a plan. Sections: header, tensor table, node table, int pool, weights (64-aligned)."""
    ints: list[int] = list(plan.inputs) + list(plan.outputs)
    node_blobs = []
    for n in plan.nodes:
        io_at = len(ints)
        ints += list(n.inputs) + list(n.outputs)
        params_at = len(ints)
        ints += list(n.params)
        node_blobs.append(_NODE.pack(n.op, len(n.inputs), len(n.outputs), io_at, params_at, len(n.params),
                                     n.scratch_offset, n.scratch_bytes, n.flags))
    tensors_off = HEADER_BYTES
    nodes_off = tensors_off + TENSOR_BYTES * len(plan.tensors)
    ints_off = nodes_off + NODE_BYTES * len(plan.nodes)
    weights_off = _align(ints_off + 4 * len(ints))
    total = weights_off + len(plan.weights)
    out = bytearray(total)
    _HEADER.pack_into(out, 0, MAGIC, VERSION, HEADER_BYTES, total, len(plan.tensors), len(plan.nodes),
                      len(plan.inputs), len(plan.outputs), tensors_off, nodes_off, ints_off, len(ints),
                      weights_off, len(plan.weights), plan.arena_bytes, 0)
    for i, t in enumerate(plan.tensors):
        dims = list(t.dims) + [0] * (MAX_RANK - len(t.dims))
        _TENSOR.pack_into(out, tensors_off + i * TENSOR_BYTES, t.dtype, t.storage, len(t.dims), 0, t.offset,
                          t.nbytes, *dims, 0)
    for i, b in enumerate(node_blobs):
        out[nodes_off + i * NODE_BYTES: nodes_off + (i + 1) * NODE_BYTES] = b
    out[ints_off: ints_off + 4 * len(ints)] = np.asarray(ints, dtype="<i4").tobytes()
    out[weights_off:] = plan.weights
    return bytes(out)


def decode(data: bytes) -> Plan:
    """Parse a plan for inspection. Checks section bounds; the C core does the full validation."""
    if len(data) < HEADER_BYTES:
        raise BundleError("plan truncated: shorter than its header")
    (magic, version, hdr, total, n_t, n_n, n_in, n_out, t_off, n_off, i_off, i_cnt, w_off, w_bytes, arena,
     _flags) = _HEADER.unpack_from(data, 0)
    if magic != MAGIC:
        raise BundleError("not an edgepack plan (bad magic)")
    if version != VERSION:
        raise BundleError(f"plan version {version} not supported (this packager reads {VERSION})")
    if total != len(data) or any(off + size > len(data) for off, size in
                                 [(t_off, n_t * TENSOR_BYTES), (n_off, n_n * NODE_BYTES), (i_off, 4 * i_cnt),
                                  (w_off, w_bytes)]):
        raise BundleError("plan truncated or section out of bounds")
    ints = np.frombuffer(data, dtype="<i4", count=i_cnt, offset=i_off).tolist()
    tensors = []
    for i in range(n_t):
        dt, st, rank, _fl, off, nb, *rest = _TENSOR.unpack_from(data, t_off + i * TENSOR_BYTES)
        tensors.append(TensorEntry(dt, st, off, nb, tuple(rest[:rank])))
    nodes = []
    for i in range(n_n):
        op, ni, no, io_at, p_at, n_p, s_off, s_b, fl = _NODE.unpack_from(data, n_off + i * NODE_BYTES)
        nodes.append(NodeEntry(op, ints[io_at:io_at + ni], ints[io_at + ni:io_at + ni + no], ints[p_at:p_at + n_p],
                               s_off, s_b, fl))
    return Plan(tensors, nodes, ints[:n_in], ints[n_in:n_in + n_out], bytes(data[w_off:w_off + w_bytes]), arena)


def f32_bits(x: float) -> int:
    """A float parameter as the i32 word the kernels read."""
    return int(np.array([x], dtype="<f4").view("<i4")[0])
