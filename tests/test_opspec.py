"""The one op specification (wasm_kernels/spec/ops.json) and everything that must agree with it.

The generated files (C, Python, JS, docs) are compared with a fresh generation; the rest are the facts a
generator cannot write: the built core's dispatch table, the kernels' definitions, the packager's lowerings
and the WebGPU backend's builders."""
from __future__ import annotations

import ctypes
import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from packager.plan import opspec
from packager.plan.opcodes import Op
from packager.toolchain import ensure_host_lib

from .conftest import REPO

SCRIPT = REPO / "scripts" / "gen_opspec.py"
SPEC = json.loads((REPO / "wasm_kernels" / "spec" / "ops.json").read_text())
KERNEL_OPS = [o["name"] for o in SPEC["ops"] if o["kernel"]]
RESERVED_OPS = [o["name"] for o in SPEC["ops"] if not o["kernel"]]


def _gen():
    spec = importlib.util.spec_from_file_location("gen_opspec", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["gen_opspec"] = mod   # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def test_generated_files_match_the_spec() -> None:
    r = subprocess.run([sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_check_fails_on_an_edited_generated_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gen = _gen()
    for p in gen.outputs(gen.load()):
        dst = tmp_path / p.relative_to(REPO)
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(p, dst)
    monkeypatch.setattr(gen, "REPO", tmp_path)
    assert gen.main(["--check"]) == 0
    h = tmp_path / "wasm_kernels" / "include" / "ep_ops.h"
    h.write_text(h.read_text().replace("X(10, GLOBAL_POOL)", "X(11, GLOBAL_POOL)"))
    assert gen.main(["--check"]) == 1
    gen.main([])   # regenerates the edited file
    assert gen.main(["--check"]) == 0


@pytest.mark.parametrize("edit, error", [
    (lambda s: s["ops"][1].update(id=1), "duplicate op ids"),
    (lambda s: s["ops"][0]["inputs"].update(max=2), "names for up to 2"),
    (lambda s: s["ops"][4]["inputs"]["names"].__setitem__(2, "bias"), "end with '?'"),
    (lambda s: s["ops"][0]["params"].append({"use": "nope"}), "unknown param group"),
    (lambda s: s["unary_fns"][22].update(fusable=True, params=["a", "b", "c"]), "at most 2 activation parameters"),
    (lambda s: s["binary_fns"].pop(3), "0, 1, 2"),
    (lambda s: s["ops"][7].update(n_params=[0, 4, 7]), "n_params [0, 4, 7] for 6 fixed words"),
])
def test_inconsistent_spec_is_refused(tmp_path: Path, edit, error: str) -> None:
    gen = _gen()
    spec = json.loads(json.dumps(SPEC))
    edit(spec)
    p = tmp_path / "ops.json"
    p.write_text(json.dumps(spec))
    with pytest.raises(gen.SpecError, match=re.escape(error)):
        gen.load(p)


def test_dispatch_table_of_the_built_core_is_the_spec() -> None:
    """ep_kernel_for(op) of the host build: a row with the spec's arity for each op with a kernel, none otherwise."""
    lib = ctypes.CDLL(str(ensure_host_lib("host")))
    lib.ep_kernel_for.restype = ctypes.POINTER(ctypes.c_uint8 * 4)
    lib.ep_kernel_for.argtypes = [ctypes.c_uint32]
    for o in SPEC["ops"]:
        row = lib.ep_kernel_for(o["id"])
        if not o["kernel"]:
            assert not row, f"{o['name']} has a dispatch entry but the spec says it has no kernel yet"
            continue
        assert row, f"{o['name']}: no dispatch entry"
        assert tuple(row.contents) == opspec.ARITY[Op[o["name"]]], o["name"]
    ids = {o["id"] for o in SPEC["ops"]}
    assert not any(lib.ep_kernel_for(i) for i in range(0, 256) if i not in ids)


def test_every_kernel_is_defined_once() -> None:
    src = "\n".join(p.read_text() for p in (REPO / "wasm_kernels" / "src").rglob("*.c"))
    for name in KERNEL_OPS:
        for fn in ("check", "run"):
            defs = re.findall(rf"^(?:EP_\w+ )*ep_status ep_{fn}_{name}\(const ep_node \*\w*\)\s*\{{", src, re.M)
            assert len(defs) == 1, f"ep_{fn}_{name}: {len(defs)} definitions in wasm_kernels/src"


def _packager_text() -> str:
    skip = {REPO / "packager" / "plan" / "opspec.py", REPO / "packager" / "plan" / "opcodes.py"}
    return "\n".join(p.read_text() for p in (REPO / "packager").rglob("*.py") if p not in skip)


def test_every_kernel_is_emitted_by_a_lowering() -> None:
    text = _packager_text()
    missing = [n for n in KERNEL_OPS if not re.search(rf"\bOp\.{n}\b", text)]
    assert not missing, f"ops with a kernel that no packager lowering emits: {missing}"


def test_no_lowering_emits_an_op_without_kernel() -> None:
    """A plan with such a node is refused by every runtime: flip "kernel" in the spec with the kernel."""
    text = _packager_text()
    emitted = [n for n in RESERVED_OPS if re.search(rf"(emit|prologue)\(\s*Op\.{n}\b", text)]
    assert not emitted, f"lowerings emit ops the spec marks as having no kernel: {emitted}"


def _node_eval(code: str) -> str:
    r = subprocess.run(["node", "--input-type=module", "-e", code], capture_output=True, text=True, cwd=REPO / "web")
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_webgpu_builders_are_a_subset_of_the_spec() -> None:
    out = _node_eval("import { BUILDERS } from './src/webgpu/ops/index.js';"
                     "console.log(JSON.stringify(Object.keys(BUILDERS)));")
    keys = json.loads(out)
    by_id = {str(o["id"]): o for o in SPEC["ops"]}
    unknown = [k for k in keys if k not in by_id]
    assert not unknown, f"WebGPU builders for ids outside the spec (a misspelt OP.NAME reads 'undefined'): {unknown}"
    assert all(by_id[k]["kernel"] for k in keys)
    # Every OP.NAME the backend's sources mention is a spec name (undefined otherwise, silently).
    src = "\n".join(p.read_text() for p in (REPO / "web" / "src").rglob("*.js"))
    names = set(re.findall(r"\bOP\.(\w+)", src))
    assert names <= {o["name"] for o in SPEC["ops"]}, names - {o["name"] for o in SPEC["ops"]}


def test_webgpu_unary_shaders_cover_the_float_functions() -> None:
    """wgsl.js's unaryExpr has a WGSL body for every UNARY code but NOT, ISNAN and ISINF (bool outputs), keyed by
    the generated names."""
    out = _node_eval("import { unaryExpr } from './src/webgpu/wgsl.js';"
                     "console.log(JSON.stringify(Array.from({length: 48}, (_, i) => unaryExpr(i) !== null)));")
    has = json.loads(out)
    want = [f["name"] not in ("NOT", "ISNAN", "ISINF") for f in SPEC["unary_fns"]] + [False] * (48 - len(SPEC["unary_fns"]))
    assert has == want


def test_python_function_codes_are_the_generated_ones() -> None:
    """The packager's modules use the generated codes, not copies of them."""
    from packager.ops import conv, elementwise
    from packager.passes import fuse_epilogue
    assert elementwise.UnaryFn is opspec.UnaryFn and elementwise.BinaryFn is opspec.BinaryFn
    assert conv.ACT_FUSABLE == opspec.ACT_FUSABLE == {f["code"] for f in SPEC["unary_fns"] if f.get("fusable")}
    assert set(range(opspec.ACT_COUNT)) <= opspec.ACT_FUSABLE and opspec.ACT_COUNT not in opspec.ACT_FUSABLE
    assert fuse_epilogue.ACT_GELU_TANH == opspec.UnaryFn.GELU_TANH
    text = _packager_text()
    assert not re.search(r"^\s*ACT_\w+\s*(,\s*ACT_\w+\s*)*=\s*\d", text, re.M), "ACT_* constants defined outside opspec.py"


def test_lowering_refuses_a_node_outside_its_spec(monkeypatch: pytest.MonkeyPatch) -> None:
    """LowerCtx.emit checks kernel, arity and word counts against the spec (packager/lowering/context.py, _check_spec)."""
    from packager.lowering import context
    from packager.errors import PackagerError
    from packager.lowering.context import _check_spec
    _check_spec(Op.GLOBAL_POOL, ["x"], ["y"], [1])
    _check_spec(Op.MATMUL, ["a", "b", None, "r"], ["y"], [0, 0, 0, 0, 1])
    for args in ((Op.GLOBAL_POOL, ["x"], ["y"], [1, 0]), (Op.GLOBAL_POOL, ["x", "z"], ["y"], [1]),
                 (Op.MATMUL, ["a", "b"], ["y"], [0, 0, 0])):
        with pytest.raises(PackagerError, match="spec"):
            _check_spec(*args)
    # An id reserved without a kernel (none is, now that 42..45 have theirs: pretend GLOBAL_POOL is one).
    monkeypatch.setattr(context, "NO_KERNEL", frozenset({Op[n] for n in RESERVED_OPS} | {Op.GLOBAL_POOL}))
    with pytest.raises(PackagerError, match="spec"):
        _check_spec(Op.GLOBAL_POOL, ["x"], ["y"], [1])


def test_docs_need_a_section_per_kernel_op() -> None:
    gen = _gen()
    spec = gen.load()
    text = (REPO / "docs" / "plan-format.md").read_text()
    gone = re.sub(r"<!-- generated:op:GLOBAL_POOL .*?<!-- end generated:op:GLOBAL_POOL -->\n", "", text, flags=re.S)
    assert gone != text
    with pytest.raises(gen.SpecError, match="op:GLOBAL_POOL"):
        gen.gen_doc(spec, gone)
