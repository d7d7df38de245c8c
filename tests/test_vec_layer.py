"""The vector layer's operations (wasm_kernels/tests/vec_layer_test.c) on every instruction set the core is built
for, each picked by src/vec/ep_isa.h from the compiler's own macros: the host (scalar), aarch64 NEON with the
pi5 and android flags (under qemu-aarch64, the android one on a core without the dot product), and wasm32 with
SIMD128, relaxed SIMD and no SIMD (under wasmtime; the threaded builds use the SIMD128/relaxed layers)."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
K = REPO / "wasm_kernels"
SRC = K / "tests" / "vec_layer_test.c"
# The core's own flags where they matter: freestanding, no contraction (the references' a*b+c stay unfused).
FLAGS = ["-std=c11", f"-I{K / 'include'}", f"-I{K / 'src'}", "-Wall", "-Wextra", "-Werror", "-Wno-unused-parameter",
         "-O2", "-ffp-contract=off", "-fno-math-errno", "-fno-builtin-memcpy"]
CLANG19 = shutil.which("clang-19")
WASMLD = "/usr/lib/llvm-19/bin/wasm-ld"


def _check_line(out: str, layer: str) -> None:
    assert out.startswith(f"vec={layer} ") and " failed=0" in out, out
    assert int(out.split("checks=")[1].split()[0]) > 500, out


def test_host_scalar(tmp_path: Path) -> None:
    exe = tmp_path / "vt"
    subprocess.run(["gcc", *FLAGS, str(SRC), "-o", str(exe)], check=True)
    r = subprocess.run([str(exe)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout
    _check_line(r.stdout, "scalar")


@pytest.mark.skipif(shutil.which("aarch64-linux-gnu-gcc") is None or shutil.which("qemu-aarch64") is None,
                    reason="aarch64 cross compiler or qemu-user missing")
@pytest.mark.parametrize("arch,cpu", [("-mcpu=cortex-a76", "cortex-a76"), ("-march=armv8-a", "cortex-a53")])
def test_aarch64_neon(tmp_path: Path, arch: str, cpu: str) -> None:
    exe = tmp_path / "vt"
    subprocess.run(["aarch64-linux-gnu-gcc", arch, *FLAGS, "-static", str(SRC), "-o", str(exe)], check=True)
    r = subprocess.run(["qemu-aarch64", "-cpu", cpu, str(exe)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    _check_line(r.stdout, "neon")


@pytest.mark.skipif(shutil.which("aarch64-linux-gnu-gcc") is None or shutil.which("qemu-aarch64") is None,
                    reason="aarch64 cross compiler or qemu-user missing")
def test_aarch64_neon_ubsan(tmp_path: Path) -> None:
    """The integer lanes wrap without undefined behaviour: gcc's arm_neon.h writes vaddq_s32/vmulq_s32 as signed C
    vector arithmetic, which UBSan reports on overflow (the NEON fuzz run found it in the int8 epilogue)."""
    exe = tmp_path / "vt"
    subprocess.run(["aarch64-linux-gnu-gcc", "-mcpu=cortex-a76", *FLAGS, "-fsanitize=undefined",
                    "-fno-sanitize-recover=all", str(SRC), "-o", str(exe)], check=True)
    r = subprocess.run(["qemu-aarch64", "-L", "/usr/aarch64-linux-gnu", "-cpu", "cortex-a76", str(exe)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "runtime error" not in r.stderr, r.stdout + r.stderr
    _check_line(r.stdout, "neon")


@pytest.mark.skipif(CLANG19 is None or not Path(WASMLD).exists(), reason="clang-19 / wasm-ld missing")
@pytest.mark.parametrize("flags,layer", [(["-msimd128"], "wasm-simd128"),
                                         (["-msimd128", "-mrelaxed-simd"], "wasm-simd128-relaxed"),
                                         ([], "scalar")])
def test_wasm(tmp_path: Path, flags: list[str], layer: str) -> None:
    wasmtime = pytest.importorskip("wasmtime")
    obj, wasm = tmp_path / "vt.o", tmp_path / "vt.wasm"
    subprocess.run([CLANG19, "--target=wasm32", "-nostdlib", *flags, *FLAGS, "-c", str(SRC), "-o", str(obj)], check=True)
    subprocess.run([WASMLD, "--no-entry", "--export-dynamic", str(obj), "-o", str(wasm)], check=True)
    cfg = wasmtime.Config()
    cfg.wasm_relaxed_simd = True
    engine = wasmtime.Engine(cfg)
    store = wasmtime.Store(engine)
    ex = wasmtime.Instance(store, wasmtime.Module.from_file(engine, str(wasm)), []).exports(store)
    mem = ex["memory"]

    def cstr(p: int) -> str:
        b = mem.read(store, p, p + 600)
        return b[:b.index(0)].decode()
    failed = ex["ep_vec_test"](store)
    out = f"vec={cstr(ex['ep_vec_test_layer'](store))} checks={ex['ep_vec_test_checks'](store)} failed={failed} " \
          f"{cstr(ex['ep_vec_test_report'](store))}"
    _check_line(out, layer)


def test_isa_selection_is_one_header_and_the_design_table_lists_every_layer() -> None:
    """The instruction sets are visible in the source, not in build flags: every vector layer sits in src/vec/ (none
    under edge/), ep_isa.h names each ISA, no Makefile renames a symbol with -DNAME=VALUE, and docs/design.md's
    kernel family x instruction set table has a column per ISA build and names every layer header."""
    layers = sorted(p.name for p in (K / "src" / "vec").glob("vec_*.h"))
    assert layers == ["vec_neon.h", "vec_scalar.h", "vec_wasm128.h"], layers
    assert not list((REPO / "edge").rglob("vec_*.h")), "the NEON layer belongs in wasm_kernels/src/vec/"
    isa = (K / "src" / "vec" / "ep_isa.h").read_text()
    for name in ("EP_ISA_WASM_RELAXED", "EP_ISA_WASM128", "EP_ISA_NEON", "EP_ISA_SCALAR"):
        assert f"#define {name} 1" in isa, name
    for mk in (K / "Makefile", REPO / "edge" / "Makefile"):
        flags = [ln.split("#", 1)[0] for ln in mk.read_text().splitlines()]
        renames = [f for f in flags if re.search(r"-D\w+=[A-Za-z_]", f)]
        assert not renames, f"{mk.relative_to(REPO)}: a -D rename picks code outside ep_isa.h: {renames}"
    design = (REPO / "docs" / "design.md").read_text()
    header = next(ln for ln in design.splitlines() if ln.startswith("| kernel family |"))
    for column in ("scalar", "wasm SIMD128", "wasm relaxed", "NEON pi5", "NEON android"):
        assert column in header, column
    table = design[design.index(header):].split("\n\n", 1)[0]
    for layer in layers:
        assert f"`{layer}`" in table, layer
