"""Hostile parameter words and dims for one kernel family at a time: mutants of a valid plan, run under the
ASan + UBSan host build and the wasm builds (tests/test_int8.py, test_int8_winograd.py, test_linalg.py)."""
from __future__ import annotations

import random
import subprocess
from pathlib import Path

from packager.errors import RuntimeFailure
from packager.plan import layout
from packager.runtime.wasm import WasmPlan
from packager.toolchain import BUILD, KERNELS


def param_mutants(plan: bytes, seed: int, n: int, min_op: int = 26) -> list[bytes]:
    """n copies of the plan, each with one hostile value in a parameter word of a node of kernel id >= min_op
    (26: the int8 family and the kernels after it) or in a dim of one of that node's tensors."""
    p = layout.decode(plan)
    rng = random.Random(seed)
    ints_off = int.from_bytes(plan[40:44], "little")
    t_off = int.from_bytes(plan[32:36], "little")
    words, dims = [], []
    # node entries: io_at at byte 4, params_at at 8, n_params at 12 (docs/plan-format.md)
    n_off = int.from_bytes(plan[36:40], "little")
    for k, node in enumerate(p.nodes):
        e = n_off + 32 * k
        if node.op < min_op:
            continue
        at, cnt = int.from_bytes(plan[e + 8:e + 12], "little"), int.from_bytes(plan[e + 12:e + 16], "little")
        words += [ints_off + 4 * (at + i) for i in range(cnt)]
        io_at = int.from_bytes(plan[e + 4:e + 8], "little")
        for i in range(plan[e + 2] + plan[e + 3]):
            tid = int.from_bytes(plan[ints_off + 4 * (io_at + i):ints_off + 4 * (io_at + i) + 4], "little", signed=True)
            if tid >= 0:
                dims += [t_off + 48 * tid + 12 + 4 * d for d in range(plan[t_off + 48 * tid + 2])]
    out = []
    for _ in range(n):
        b = bytearray(plan)
        at = rng.choice(words + dims)
        v = rng.choice([0, 1, 2, -1, 7, 8, 255, 256, 65535, 65536, 2**31 - 1, -2**31, rng.randrange(-300, 300)])
        b[at:at + 4] = (v & 0xFFFFFFFF).to_bytes(4, "little")
        out.append(bytes(b))
    return out


def check_hostile_params(plans: list[bytes], tmp_path: Path, seed: int, n: int = 150, wasm_n: int = 40,
                         min_op: int = 26) -> None:
    """Each plan and n of its mutants through the ASan + UBSan host build: no sanitizer report, the plans
    themselves run clean, at least a third of all refused; then wasm_n mutants each through the SIMD and
    relaxed wasm builds: an error or a result, never a trap."""
    subprocess.run(["make", "-s", "-C", str(KERNELS), "build/asan/run_plan"], check=True, capture_output=True)
    files = []
    for j, plan in enumerate(plans):
        for k, m in enumerate([plan] + param_mutants(plan, seed=seed + j, n=n, min_op=min_op)):
            f = tmp_path / f"p{j}_{k}.plan"
            f.write_bytes(m)
            files.append(str(f))
    r = subprocess.run([str(BUILD / "asan" / "run_plan"), *files], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, f"sanitizer report:\n{r.stderr[-3000:]}"
    lines = r.stdout.splitlines()
    assert len(lines) == len(files)
    assert all(lines[j * (n + 1)] == "0 ok" for j in range(len(plans))), lines[::n + 1]
    assert sum(not line.startswith("0 ") for line in lines) > len(files) // 3
    for j, plan in enumerate(plans):
        for m in param_mutants(plan, seed=seed + 100 + j, n=wasm_n, min_op=min_op):
            for wasm in ("edgepack.wasm", "edgepack-relaxed.wasm"):   # relaxed: its own GEMM paths
                try:
                    WasmPlan(BUILD / wasm, m).run()
                except RuntimeFailure:
                    pass
