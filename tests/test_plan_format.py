"""The plan's two descriptions (C header, Python writer) agree, and the writer/reader round-trip.
(Kernel ids: generated on both sides from wasm_kernels/spec/ops.json, checked by tests/test_opspec.py.)"""
from __future__ import annotations

import re

import numpy as np

from packager.plan import layout
from packager.plan.opcodes import Op

from .conftest import REPO

INCLUDE = REPO / "wasm_kernels" / "include"


def test_layout_constants_match_c_header() -> None:
    text = (INCLUDE / "ep_plan_layout.h").read_text()
    consts = dict(re.findall(r"#define (EP_PLAN_\w+) (\d+)u", text))
    assert int(consts["EP_PLAN_VERSION"]) == layout.VERSION
    assert int(consts["EP_PLAN_HEADER_BYTES"]) == layout.HEADER_BYTES
    assert int(consts["EP_PLAN_TENSOR_BYTES"]) == layout.TENSOR_BYTES
    assert int(consts["EP_PLAN_NODE_BYTES"]) == layout.NODE_BYTES
    assert int(consts["EP_PLAN_ALIGN"]) == layout.ALIGN


def test_encode_decode_roundtrip() -> None:
    w = np.arange(10, dtype=np.float32).tobytes()
    plan = layout.Plan(
        tensors=[layout.TensorEntry(1, layout.ARENA, 0, 24, (2, 3)), layout.TensorEntry(1, layout.WEIGHTS, 0, 40, (10,)),
                 layout.TensorEntry(7, layout.ARENA, 64, 16, (2,))],
        nodes=[layout.NodeEntry(int(Op.COPY), [0, -1], [2], [5, layout.f32_bits(1.5)], 128, 32)],
        inputs=[0], outputs=[2], weights=w, arena_bytes=192)
    data = layout.encode(plan)
    assert data[:4] == b"EPLN" and len(data) % 4 == 0
    back = layout.decode(data)
    assert back.tensors == plan.tensors and back.nodes == plan.nodes
    assert back.inputs == [0] and back.outputs == [2] and back.weights == w and back.arena_bytes == 192
    assert np.array([back.nodes[0].params[1]], dtype="<i4").view("<f4")[0] == 1.5
