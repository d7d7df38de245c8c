"""The kernels' shape and scratch functions (wasm_kernels/src/ep_shape.h) against static plans.

Every conformance case and benchmark model the packager accepts is packaged as a static (v1) plan, whose dims
and scratch sizes the packager computed and onnxruntime's shapes confirm. The C core then re-derives every
node's output dims and scratch bytes through the kernel's shape functions (`ep_shapes_consistent`, host
build) and must agree exactly: the run-time shape resolution of plan v2 uses these same functions."""
from __future__ import annotations

import ctypes
import tempfile
from collections import Counter
from pathlib import Path

import pytest

from packager.plan import layout
from packager.plan.opcodes import Op
from packager.toolchain import ensure_host_lib

from .conftest import model_path

CTX_BYTES = 4096   # >= sizeof(ep_ctx)


class ShapeChecker:
    def __init__(self) -> None:
        self.lib = ctypes.CDLL(str(ensure_host_lib("host")))
        self.lib.ep_open.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint32]
        self.lib.ep_shapes_consistent.argtypes = [ctypes.c_void_p] + [ctypes.POINTER(ctypes.c_uint32)] * 3

    def check(self, plan: bytes) -> tuple[int, int, int, int]:
        """(status, node, what, nodes checked) for one plan."""
        buf = ctypes.create_string_buffer(len(plan) + 64)
        base = ctypes.addressof(buf)
        p = (base + 63) // 64 * 64
        ctypes.memmove(p, plan, len(plan))
        ctx = ctypes.create_string_buffer(CTX_BYTES)
        s = self.lib.ep_open(ctx, p, len(plan))
        assert s == 0, f"plan refused: status {s}"
        node, what, checked = ctypes.c_uint32(), ctypes.c_uint32(), ctypes.c_uint32()
        s = self.lib.ep_shapes_consistent(ctx, ctypes.byref(node), ctypes.byref(what), ctypes.byref(checked))
        return s, node.value, what.value, checked.value


def _describe(plan: layout.Plan, node: int, what: int) -> str:
    n = plan.nodes[node]
    outs = [plan.tensors[t].dims for t in n.outputs]
    kind = {1: "dims differ", 2: "scratch differs", 3: "shape() refused"}.get(what, f"what={what}")
    return f"node {node} {Op(n.op).name}: {kind}; plan outputs {outs}, scratch {n.scratch_bytes}, params {n.params}"


@pytest.fixture(scope="module")
def checker() -> ShapeChecker:
    return ShapeChecker()


def _conformance_plans():
    from .conformance.runner import collect, package_case
    from packager.errors import PackagerError
    with tempfile.TemporaryDirectory() as d:
        for case, op in collect():
            out = Path(d) / "b"
            try:
                package_case(case, out)
            except PackagerError:
                continue
            except Exception:   # noqa: BLE001 - the conformance tests report these
                continue
            yield case.name, (out / "model.plan").read_bytes()


def test_shape_functions_agree_on_conformance_plans(checker: ShapeChecker) -> None:
    bad, per_op = [], Counter()
    for name, plan in _conformance_plans():
        s, node, what, checked = checker.check(plan)
        dec = layout.decode(plan)
        if s != 0:
            bad.append(f"{name}: {_describe(dec, node, what)}")
        for n in dec.nodes:
            per_op[Op(n.op).name] += 1
    assert not bad, "\n".join(bad[:40])
    assert sum(per_op.values()) > 500


@pytest.mark.parametrize("name", ["cifar10net", "mobilenetv2", "resnet18", "minilm_like"])
def test_shape_functions_agree_on_models(checker: ShapeChecker, name: str, tmp_path: Path) -> None:
    from packager import package
    kw = {"input_shapes": {"input_ids": (1, 128)}} if name == "minilm_like" else {}
    out = package(str(model_path(name)), target="web", out=tmp_path / "b", verify=False, **kw)
    plan = (out / "model.plan").read_bytes()
    s, node, what, checked = checker.check(plan)
    assert s == 0, _describe(layout.decode(plan), node, what)
