"""The runtime treats the plan as hostile: truncated or corrupted plans give an error code, never an
out-of-bounds access (checked under AddressSanitizer + UBSan on the host) nor a wasm trap."""
from __future__ import annotations

import random
import subprocess
from pathlib import Path

import pytest
import wasmtime

from packager import package
from packager.errors import RuntimeFailure
from packager.plan import layout
from packager.runtime.wasm import WasmPlan
from packager.toolchain import BUILD, KERNELS

from .conftest import model_path


@pytest.fixture(scope="module")
def plan_bytes(tmp_path_factory) -> bytes:
    out = package(model_path("cifar10net"), out=tmp_path_factory.mktemp("b") / "cifar", verify=False,
                  dynamic=False)
    return (out / "model.plan").read_bytes()


@pytest.fixture(scope="module")
def asan_driver() -> Path:
    exe = BUILD / "asan" / "run_plan"
    subprocess.run(["make", "-s", "-C", str(KERNELS), "build/asan/run_plan"], check=True, capture_output=True)
    return exe


def _mutants(plan: bytes, n: int, seed: int) -> list[bytes]:
    """Single-byte changes anywhere in the header, tables and int pool (the weights only change numbers)."""
    rng = random.Random(seed)
    w_off = int.from_bytes(plan[48:52], "little")
    out = []
    for _ in range(n):
        b = bytearray(plan)
        i = rng.randrange(0, w_off)
        b[i] = rng.choice([0, 1, 0x7F, 0x80, 0xFF, b[i] ^ (1 << rng.randrange(8)), rng.randrange(256)])
        out.append(bytes(b))
    return out


def _run_asan(driver: Path, plans: list[bytes], tmp: Path, timeout: int = 600) -> list[str]:
    """Each plan run by the ASan/UBSan driver in one process; its lines ('<status> <word>' per plan)."""
    files = []
    for k, p in enumerate(plans):
        f = tmp / f"p{k}.plan"
        f.write_bytes(p)
        files.append(str(f))
    r = subprocess.run([str(driver), *files], capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"sanitizer report:\n{r.stderr[-3000:]}"
    return r.stdout.splitlines()


def test_valid_plan_runs_clean_under_asan(plan_bytes: bytes, asan_driver: Path, tmp_path: Path) -> None:
    assert _run_asan(asan_driver, [plan_bytes], tmp_path) == ["0 ok"]


def test_truncated_plans_are_refused(plan_bytes: bytes, asan_driver: Path, tmp_path: Path) -> None:
    w_off = int.from_bytes(plan_bytes[48:52], "little")
    cuts = sorted(set(range(0, w_off + 8)) | {len(plan_bytes) - 1, len(plan_bytes) // 2})
    lines = _run_asan(asan_driver, [plan_bytes[:c] for c in cuts], tmp_path)
    assert all(not line.startswith("0 ") for line in lines)
    for c in cuts[:: max(1, len(cuts) // 40)]:
        with pytest.raises(RuntimeFailure):
            WasmPlan(BUILD / "edgepack.wasm", plan_bytes[:c])


def test_corrupted_plans_never_read_out_of_bounds(plan_bytes: bytes, asan_driver: Path, tmp_path: Path) -> None:
    mutants = _mutants(plan_bytes, 500, seed=1)
    lines = _run_asan(asan_driver, mutants, tmp_path)
    assert len(lines) == len(mutants)
    refused = sum(not line.startswith("0 ") for line in lines)
    assert refused > len(mutants) // 4   # most corruptions are caught at open; the rest change values only


def test_corrupted_plans_never_trap_in_wasm(plan_bytes: bytes) -> None:
    for m in _mutants(plan_bytes, 150, seed=2):
        try:
            s = WasmPlan(BUILD / "edgepack.wasm", m)
            s.run()
        except RuntimeFailure:
            pass
        except wasmtime.Trap as e:  # an out-of-bounds access the checks missed
            pytest.fail(f"wasm trap on a corrupted plan: {e}")


def test_plan_reader_in_python_checks_bounds(plan_bytes: bytes) -> None:
    from packager.errors import BundleError
    with pytest.raises(BundleError):
        layout.decode(plan_bytes[:100])
    with pytest.raises(BundleError):
        layout.decode(b"XXXX" + plan_bytes[4:])


def _gather_plan(tmp: Path) -> layout.Plan:
    from onnx import TensorProto, helper
    g = helper.make_graph(
        [helper.make_node("Gather", ["x", "i"], ["y"], axis=0)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, 16]),
         helper.make_tensor_value_info("i", TensorProto.INT64, [32])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [32, 16])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    out = package(m, out=tmp / "gather", verify=False)
    return layout.decode((out / "model.plan").read_bytes())


def test_node_writing_over_its_own_inputs_is_refused(tmp_path: Path, asan_driver: Path) -> None:
    """Found by the fuzzer: Gather validates its indices, then re-reads them while writing its output.
    A plan placing the output over the indices (or scratch over an input) would turn a validated index
    into a wild one, so the reader refuses any node whose outputs or scratch overlap its own tensors."""
    plan = _gather_plan(tmp_path)
    good = layout.encode(plan)
    WasmPlan(BUILD / "edgepack.wasm", good)
    node = plan.nodes[-1]
    y, i = plan.tensors[node.outputs[0]], plan.tensors[node.inputs[1]]
    y_at, y.offset = y.offset, i.offset
    bad_out = layout.encode(plan)
    y.offset = y_at   # back in place, now with scratch over the indices
    node.scratch_offset, node.scratch_bytes = i.offset, 16
    bad_scratch = layout.encode(plan)
    for bad in (bad_out, bad_scratch):
        with pytest.raises(RuntimeFailure):
            WasmPlan(BUILD / "edgepack.wasm", bad)
    codes = [line.split()[0] for line in _run_asan(asan_driver, [good, bad_out, bad_scratch], tmp_path)]
    assert codes[1:] == ["4", "4"] and codes[0] != "4"   # the driver's inputs are not valid indices: 11 at run
