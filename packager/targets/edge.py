"""Edge targets: `pi5` (Raspberry Pi 5, aarch64 Linux) and `android` (arm64-v8a app drop-in).

The plan is the same bytes as for the web; what changes is the runtime shipped next to it, built
by edge/Makefile from the same wasm_kernels/src sources with Debian's gcc-aarch64-linux-gnu:

  pi5      libedgepack.so (-mcpu=cortex-a76), static edgepack-run CLI, edgepack.h, ep_edge.h,
           edgepack_runtime.py (ctypes + numpy), model.plan, README.md (model.onnx with --emit-onnx)
  android  jniLibs/arm64-v8a/libedgepack.so (armv8-a, no libc), java/org/edgepack/Session.java,
           edgepack.aar, assets/edgepack/{model.plan, io.txt}, ort/model.ort +
           ort/model.required_operators.config (ORT-Mobile), README.md (model.onnx with --emit-onnx)

Verification ("consistency" in the manifest): the same seeded inputs through onnxruntime, the
wasm SIMD build (wasmtime) and the bundle's own aarch64 build under qemu-aarch64 (the CLI for pi5,
the Android library loaded by edge/build/aarch64/harness for android). Without qemu-aarch64 the
manifest says the NEON build was not run, and why.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import urllib.parse
from functools import partial
from pathlib import Path
from typing import Callable

import numpy as np
import onnx

from ..bundle import StagedBundle, sha256, stage_bundle
from ..errors import PackagerError
from ..plan.opcodes import DTYPES
from ..plan.opspec import DTYPE_TABLE
from ..reference import Runner, compare, ort_model
from ..toolchain import KERNELS, REPO
from ..weights import write_model
from .base import Log, Target

EDGE_TARGETS = ("pi5", "android")
EDGE = REPO / "edge"
EBUILD = EDGE / "build"
QEMU = "qemu-aarch64"
QEMU_SYSROOT = "/usr/aarch64-linux-gnu"
QEMU_CPU = {"pi5": "cortex-a76", "android": "max"}  # pi5: prove the binary needs nothing beyond an A76

_README = {
    "pi5": """# {name}: edgepack bundle for Raspberry Pi 5 (aarch64 Linux)

Copy this directory to the Pi and run it; nothing to install.

    ./edgepack-run . --info
    ./edgepack-run . {in_args} --output y.npy
    ./edgepack-run . --bench            # latency percentiles after a timed warm-up, 1 thread
    ./edgepack-run . --bench --threads 4   # the same on the Pi 5's four cores (same outputs)

`edgepack-run` is a static binary. It checks model.plan against the SHA-256 in manifest.json
before running it, and refuses inputs whose name, dtype or shape differ from the manifest:
.npy v1.0, C order, little-endian float32/int64 (bool). `--output FILE.npy` saves the first
output; `--output NAME=FILE.npy` any output.

From Python (numpy only):

    from edgepack_runtime import Session
    s = Session(".")                     # loads ./libedgepack.so, checks the plan's SHA-256
    s = Session(".", threads=4)          # or: the plan on 4 threads
    outputs = s.run({{{feeds}}})

From C: `edgepack.h` is the whole API (ep_open / ep_bind / ep_run; the library allocates
nothing, you pass it the plan and a 64-byte aligned arena). Link with -L. -ledgepack.

Built with -mcpu=cortex-a76 (NEON, dot product, fp16 arithmetic): it runs on a Pi 5 (or any
Cortex-A76-class core), not on a Pi 3/4.

Inputs: {inputs}
Outputs: {outputs}
""",
    "android": """# {name}: edgepack bundle for Android (arm64-v8a)

Drop-in:

- `edgepack.aar` (classes.jar + jni/arm64-v8a/libedgepack.so): add to `app/libs/` and
  `implementation(files("libs/edgepack.aar"))`; or copy `jniLibs/` to `app/src/main/jniLibs/` and
  `java/` into your sources.
- `assets/edgepack/` to `app/src/main/assets/edgepack/` (the plan and io.txt, the I/O names).

    Session s = Session.load(getAssets().open("edgepack/model.plan"),
                             getAssets().open("edgepack/io.txt"));   // checks the plan's SHA-256
    s.setThreads(4);                          // optional: the plan on 4 threads, same outputs
    ByteBuffer x = s.newInputBuffer(0);       // direct, little-endian, 64-byte aligned
    x.asFloatBuffer().put(pixels);
    ByteBuffer[] y = s.run(x);

`io.txt` carries model.plan's SHA-256 (the manifest's): `Session.load` refuses a plan that does not
match it (`Session.EdgepackException`) before the native library reads a byte.

All memory (plan, arena, context) is direct ByteBuffers Java allocates; the native library
allocates nothing and links no libc. It is built for baseline armv8-a; the dot-product path is
chosen at run time from /proc/self/auxv (`Session.cpuFeatures()`).

Teams on ORT-Mobile: `ort/model.ort` and `ort/model.required_operators.config` (for a
reduced-operator onnxruntime build) are the same model in ORT format.

Inputs: {inputs}
Outputs: {outputs}
""",
}


def _dynamic_readme(target: str, manifest: dict) -> str:
    """README section of a version-2 bundle (shapes resolved at run time)."""
    dims = "\n".join(f"- `{k}`: {v['min']}..{v['max'] if v.get('max') else ' (no upper bound)'}, verified at {v.get('example')}"
                     for k, v in manifest["dims"].items())
    if target == "pi5":
        how = """`edgepack-run` takes each input's shape from its .npy file; a dim outside its bounds, a fixed dim that
differs, or one symbol given two extents is refused with the input, the dimension and the bound named.
`Session.run` (Python) takes numpy arrays of any allowed shape; outputs come back at their resolved shapes.

From C (plan version 2, `ep_plan_version() == 2`): allocate `ep_state_bytes()` bytes (64-byte aligned, kept
alive) and call `ep_set_state()` once; per run `ep_set_input_shape()` for each input, `ep_resolve()`, bind an
arena of `ep_arena_bytes()` bytes with `ep_bind()` (grow it when a shape needs more; binding the same arena
again costs nothing), write the inputs at `ep_tensor_data()`, `ep_run()`, read the outputs' resolved dims and
sizes with `ep_tensor_describe()`. The sequence is in edgepack.h."""
    else:
        how = """    Session.Tensor[] y = s.run(Session.Tensor.ofFloats(x, 1, 16));   // data + dims; outputs with their dims

or `s.setInputShapes(new int[][] {{1, 16}})` then `newInputBuffer`/`run(ByteBuffer...)` at that shape
(`inputInfo(i).shape` and `outputInfo(i).shape` are then the resolved dims, `inputMin/inputMax` the bounds).
A dim outside its bounds throws IllegalArgumentException naming the input, the dimension and the bound.
The arena (a direct ByteBuffer) grows when a larger shape needs it."""
    return f"""
## Input shapes resolved at run time (plan version 2)

Symbolic dims and their bounds:

{dims}

{how}
"""


def _run(cmd: list[str], what: str, timeout: float = 600, **kw) -> subprocess.CompletedProcess:
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    except FileNotFoundError as e:
        raise PackagerError(f"{what}: {e.filename} not found (run scripts/setup.sh)") from None
    except subprocess.TimeoutExpired:
        raise PackagerError(f"{what}: timed out after {timeout:.0f}s") from None
    if r.returncode != 0:
        raise PackagerError(f"{what} failed:\n{r.stdout[-2000:]}{r.stderr[-4000:]}")
    return r


def ensure_edge(target: str) -> dict[str, Path]:
    """Build (or bring up to date) the aarch64 runtime files for `target`."""
    if shutil.which("aarch64-linux-gnu-gcc") is None:
        raise PackagerError("the aarch64 cross compiler (gcc-aarch64-linux-gnu) is not installed: run scripts/setup.sh")
    goals = ["pi5"] if target == "pi5" else ["android"]
    _run(["make", "-s", "-C", str(EDGE), "-j2", *goals], f"building the {target} runtime")
    if target == "pi5":
        return {"libedgepack.so": EBUILD / "pi5" / "libedgepack.so", "edgepack-run": EBUILD / "pi5" / "edgepack-run"}
    return {"libedgepack.so": EBUILD / "android" / "libedgepack.so", "edgepack.aar": EBUILD / "android" / "edgepack.aar"}


def ensure_harness() -> Path:
    _run(["make", "-s", "-C", str(EDGE), "build/aarch64/harness"], "building the aarch64 test harness")
    return EBUILD / "aarch64" / "harness"


def qemu_available() -> bool:
    return shutil.which(QEMU) is not None


def io_txt(manifest: dict, plan: Path | None = None) -> str:
    """Graph I/O names for the Java wrapper (no JSON parser on plain Java): kind TAB url-encoded name; and
    model.plan's SHA-256 (the manifest's hash of assets/edgepack/model.plan), which Session.load checks."""
    lines = ["# edgepack io.txt: kind<TAB>name (URL-encoded), in the plan's order"
             + ("; inputs: <TAB>dims, comma-separated, a number or a (URL-encoded) symbol" if "dims" in manifest else "")]
    if plan is not None:
        lines.append(f"sha256\tmodel.plan\t{sha256(plan)}")
    for kind in ("input", "output"):
        for s in manifest[kind + "s"]:
            line = f"{kind}\t{urllib.parse.quote(s['name'], safe='')}"
            if kind == "input" and "dims" in manifest:   # version 2: the symbols name dims in Session's errors
                line += "\t" + ",".join(urllib.parse.quote(str(d), safe="") for d in s["shape"])
            lines.append(line)
    return "\n".join(lines) + "\n"


def ort_format(model: onnx.ModelProto, log: Callable[[str], None]) -> dict[str, bytes] | str:
    """The model in ORT format + its reduced-operator config, or the reason it could not be made."""
    m = ort_model(model)
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "model.onnx"
        write_model(m, src)
        r = subprocess.run([sys.executable, "-m", "onnxruntime.tools.convert_onnx_models_to_ort", str(src),
                            "--output_dir", str(Path(tmp) / "ort"), "--optimization_style", "Fixed"],
                           capture_output=True, text=True, timeout=600)
        ort = Path(tmp) / "ort" / "model.ort"
        cfg = Path(tmp) / "ort" / "model.required_operators.config"
        if r.returncode != 0 or not ort.is_file() or not cfg.is_file():
            why = (r.stderr or r.stdout).strip().splitlines()
            return f"onnxruntime could not convert the model to ORT format: {why[-1][:300] if why else 'unknown error'}"
        return {"ort/model.ort": ort.read_bytes(), "ort/model.required_operators.config": cfg.read_bytes()}


class EdgeTarget(Target):
    """pi5 or android: the same plan, the aarch64 runtime next to it, checked for consistency under qemu."""

    def __init__(self, name: str) -> None:
        if name not in EDGE_TARGETS:
            raise PackagerError(f"unknown edge target '{name}'")
        self.name = name

    def check(self, control_flow: bool) -> None:
        if control_flow:   # not verified on the aarch64 runtime yet
            raise PackagerError(f"If/Loop/Scan: web bundles only so far (their version-2 plans are not verified on the "
                                f"{self.name} runtime yet): package for --target web")

    def stage(self, out: Path, manifest: dict, shipped: onnx.ModelProto, plan: Path, *, emit_onnx: bool = False,
              signed: bool = False, log: Log = lambda s: None) -> StagedBundle:
        return _stage(self.name, out, manifest, shipped, plan, emit_onnx, log)

    def verify(self, path: Path, reference: onnx.ModelProto, log: Log, strict: bool = False) -> None:
        consistency(path, self.name, reference, log, strict)

    def runner(self, path: Path) -> tuple[Runner, str]:
        """The C core built as wasm SIMD on the bundle's own plan (the consistency report compares it with the
        aarch64 build under qemu on seeded inputs)."""
        from ..runtime.wasm import PlanFile, WasmPlan
        from ..toolchain import ensure_wasm
        m = json.loads((path / "manifest.json").read_text())
        wasm = WasmPlan(ensure_wasm()["edgepack.wasm"], PlanFile(path / m["runtime"]["plan"]))

        def run(feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
            for s in m["inputs"]:
                wasm.write(s["tensor"], feeds[s["name"]])
            wasm.run()
            return {o["name"]: wasm.read(o["tensor"], np.dtype(o["dtype"]), tuple(o["shape"])) for o in m["outputs"]}
        return run, "the bundle's plan on the edgepack C core (wasm SIMD build, wasmtime)"


def _stage(target: str, out: Path, manifest: dict, model: onnx.ModelProto, plan: Path, emit_onnx: bool,
           log: Log) -> StagedBundle:
    """A pi5 or android bundle in its staging folder (manifest already holds name, I/O, plan stats)."""
    rt = ensure_edge(target)
    header = KERNELS / "include" / "edgepack.h"
    edge_header = EDGE / "neon" / "ep_edge.h"
    fmt_io = lambda specs: ", ".join(  # noqa: E731
        f"{s['name']} {s['dtype']}[{', '.join('?' if d is None else str(d) for d in s['shape'])}]" for s in specs)
    readme = _README[target].format(
        name=manifest["name"], inputs=fmt_io(manifest["inputs"]), outputs=fmt_io(manifest["outputs"]),
        in_args=" ".join(f"--input {s['name']}=x{i}.npy" for i, s in enumerate(manifest["inputs"])),
        feeds=", ".join(f"'{s['name']}': x{i}" for i, s in enumerate(manifest["inputs"])))
    if "dims" in manifest:
        readme += _dynamic_readme(target, manifest)
    files: dict = {"model.onnx": partial(write_model, model)} if emit_onnx else {}   # streamed: weights not copied
    executables: tuple[str, ...] = ()
    if target == "pi5":
        files.update({"model.plan": plan, "libedgepack.so": rt["libedgepack.so"],
                      "edgepack-run": rt["edgepack-run"], "edgepack.h": header, "ep_edge.h": edge_header,
                      "edgepack_runtime.py": EDGE / "python" / "edgepack_runtime.py", "README.md": readme.encode()})
        executables = ("edgepack-run",)
        runtime = {"arch": "aarch64", "cpu": "cortex-a76 (armv8.2-a: NEON, dot product, fp16)", "vector_layer": "neon",
                   "library": "libedgepack.so", "cli": "edgepack-run", "header": "edgepack.h", "python": "edgepack_runtime.py",
                   "plan": "model.plan"}
    else:
        files.update({"assets/edgepack/model.plan": plan, "assets/edgepack/io.txt": io_txt(manifest, plan).encode(),
                      "jniLibs/arm64-v8a/libedgepack.so": rt["libedgepack.so"], "edgepack.aar": rt["edgepack.aar"],
                      "java/org/edgepack/Session.java": EDGE / "android" / "java" / "org" / "edgepack" / "Session.java",
                      "include/edgepack.h": header, "README.md": readme.encode()})
        runtime = {"arch": "aarch64", "abi": "arm64-v8a", "cpu": "armv8-a baseline; dot product chosen at run time",
                   "vector_layer": "neon", "library": "jniLibs/arm64-v8a/libedgepack.so", "aar": "edgepack.aar",
                   "java": "org.edgepack.Session", "plan": "assets/edgepack/model.plan"}
        ort = ort_format(model, log)
        if isinstance(ort, dict):
            files.update(ort)
            runtime["ort_mobile"] = {"model": "ort/model.ort", "reduced_operator_config": "ort/model.required_operators.config"}
        else:
            manifest = dict(manifest, notices=list(manifest.get("notices", [])) + [ort])
            runtime["ort_mobile"] = {"unavailable": ort}
            log(f"notice: {ort}")
    manifest = dict(manifest, runtime=runtime)
    return stage_bundle(out, manifest, files, executables)




# ---------------------------------------------------------------- running the aarch64 builds

def qemu_cmd(target: str) -> list[str]:
    return [QEMU, "-cpu", QEMU_CPU.get(target, "max"), "-L", QEMU_SYSROOT]


def run_cli(bundle: Path, feeds: dict[str, np.ndarray], outputs: list[dict], cli: Path | None = None,
            qemu: list[str] | None = None, timeout: float = 600) -> dict[str, np.ndarray]:
    """Run a bundle with edgepack-run (under qemu when `qemu` is given); returns every output."""
    cli = cli or bundle / "edgepack-run"
    with tempfile.TemporaryDirectory() as tmp:
        args = [*(qemu or []), str(cli), str(bundle)]
        for i, (name, v) in enumerate(feeds.items()):
            p = Path(tmp) / f"in{i}.npy"
            np.save(p, npy_carrier(np.array(v, order="C", copy=True)))  # ascontiguousarray would make a 0-d array 1-d
            args += ["--input", f"{name}={p}"]
        for i, o in enumerate(outputs):
            args += ["--output", f"{o['name']}={Path(tmp) / f'out{i}.npy'}"]
        r = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
        if r.returncode != 0:
            from ..errors import RuntimeFailure
            raise RuntimeFailure(f"edgepack-run failed (exit {r.returncode}): {r.stderr.strip()[-1000:]}")
        return {o["name"]: from_npy_carrier(np.load(Path(tmp) / f"out{i}.npy"), o["dtype"]) for i, o in enumerate(outputs)}


# numpy cannot read back the .npy files ml_dtypes writes, so edgepack-run's .npy files carry the low-precision dtypes
# in plain ones (edge/README.md): bfloat16 / float8 / float4 as their bits, (u)int4 / (u)int2 as (u)int8 values.
_CARRIERS = {"Uint16Array": np.uint16, "Uint8Array": np.uint8, "Int8Array": np.int8}
_LOWP = {DTYPES[code]: _CARRIERS[arr] for code, (name, _, arr) in DTYPE_TABLE.items() if not hasattr(np, name)}


def npy_carrier(v: np.ndarray) -> np.ndarray:
    c = _LOWP.get(v.dtype)
    return v if c is None else v.view(c) if v.dtype.name[0] in "bf" else v.astype(c)


def from_npy_carrier(v: np.ndarray, dtype: str) -> np.ndarray:
    dt = np.dtype(dtype)
    return v if dt not in _LOWP or v.dtype == dt else v.view(dt) if dtype[0] in "bf" else v.astype(dt)


def run_harness(lib: Path, plan: Path, feeds: list[np.ndarray], outputs: list[dict], qemu: list[str],
                timeout: float = 600) -> dict[str, np.ndarray]:
    """Run a plan through a shared library dlopen()ed by the aarch64 harness (raw tensors in plan order; each
    input's dims follow its file name, FILE@2x16, for a version-2 plan; the harness prints the outputs' dims)."""
    harness = ensure_harness()
    with tempfile.TemporaryDirectory() as tmp:
        ins = []
        for i, v in enumerate(feeds):
            p = Path(tmp) / f"in{i}.bin"
            p.write_bytes(np.ascontiguousarray(v).tobytes())
            ins.append(f"{p}@{'x'.join(str(d) for d in np.shape(v))}")
        outs = [str(Path(tmp) / f"out{i}.bin") for i in range(len(outputs))]
        r = subprocess.run([*qemu, str(harness), str(lib), str(plan), *ins, *outs], capture_output=True, text=True,
                           timeout=timeout)
        if r.returncode != 0:
            from ..errors import RuntimeFailure
            raise RuntimeFailure(f"harness failed (exit {r.returncode}): {r.stdout.strip()[-500:]} {r.stderr.strip()[-500:]}")
        dims = {}
        for line in r.stdout.splitlines():   # "output 0 dims 2x8" (a rank-0 output: "dims -")
            f = line.split()
            if len(f) == 4 and f[0] == "output" and f[2] == "dims":
                dims[int(f[1])] = () if f[3] == "-" else tuple(int(d) for d in f[3].split("x"))
        return {o["name"]: np.frombuffer(Path(p).read_bytes(), dtype=np.dtype(o["dtype"])).reshape(dims.get(i, o["shape"]))
                for i, (o, p) in enumerate(zip(outputs, outs))}


def run_neon(path: Path, target: str, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The bundle's own aarch64 build on `feeds`, under qemu-aarch64."""
    m = json.loads((path / "manifest.json").read_text())
    if target == "pi5":
        return run_cli(path, feeds, m["outputs"], qemu=qemu_cmd(target))
    return run_harness(path / "jniLibs" / "arm64-v8a" / "libedgepack.so", path / "assets" / "edgepack" / "model.plan",
                       [feeds[s["name"]] for s in m["inputs"]], m["outputs"], qemu_cmd(target))


def example_specs(manifest: dict) -> list[dict]:
    """The manifest's inputs with each symbolic dim at its example extent (version 2), as random_inputs wants."""
    dims = manifest.get("dims", {})
    return [dict(s, shape=[dims[d].get("example", 1) if isinstance(d, str) else d for d in s["shape"]])
            for s in manifest["inputs"]]


def consistency(path: Path, target: str, model: onnx.ModelProto, log: Callable[[str], None], strict: bool = False) -> dict:
    """Same seeded inputs through onnxruntime, the wasm SIMD build and this bundle's aarch64 build;
    pairwise max differences into manifest['consistency'] (and 'verification': NEON vs onnxruntime). strict: a
    comparison with no finite value is an error (reference.check_finite), as in web verification."""
    from ..reference import check_finite, reference_run, verification_feeds
    from ..runtime.wasm import PlanFile, WasmPlan
    from ..toolchain import ensure_wasm
    mpath = path / "manifest.json"
    m = json.loads(mpath.read_text())
    feeds, ranges = verification_feeds(model, example_specs(m))
    plan = PlanFile(path / m["runtime"]["plan"])   # copied into wasm memory in chunks (a 2 GB plan: once)
    results: dict[str, dict[str, np.ndarray]] = {}
    notes: dict[str, str] = {}
    try:
        results["onnxruntime"] = reference_run(model, feeds, isolated=True)
    except Exception as e:  # noqa: BLE001 - onnxruntime itself cannot run this model
        notes["onnxruntime"] = f"not run: {str(e).splitlines()[0][:200]}"
    wasm = WasmPlan(ensure_wasm()["edgepack.wasm"], plan)
    wasm.set_shapes([tuple(feeds[s["name"]].shape) for s in m["inputs"]])   # version 2; nothing for version 1
    for s in m["inputs"]:
        wasm.write(s["tensor"], feeds[s["name"]])
    wasm.run()
    results["wasm"] = {o["name"]: wasm.read(o["tensor"], np.dtype(o["dtype"]), None if wasm.dynamic else tuple(o["shape"]))
                       for o in m["outputs"]}
    if qemu_available():
        results["neon"] = run_neon(path, target, feeds)
        runner = " ".join(qemu_cmd(target)) + (" edgepack-run" if target == "pi5" else " harness (dlopen)")
    else:
        notes["neon"] = "not run: qemu-aarch64 is not installed (apt install qemu-user); run edgepack-run on the device"
        runner = None
    c: dict = {"inputs": "seeded random (seed 0)", "reference": "onnxruntime CPU"}
    if ranges:
        c["input_ranges"] = ranges
    if "dims" in m:   # version 2: checked at the example shape
        c["input_shapes"] = {k: list(v.shape) for k, v in feeds.items()}
    names = list(results)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            c[f"{a}_vs_{b}"] = compare(results[a], results[b])
    if runner:
        c["neon_runner"] = runner + " (emulated: correctness only, no timing)"
    c.update(notes)
    m["consistency"] = c
    if "onnxruntime" in results:
        build = "neon" if "neon" in results else "wasm"
        m["verification"] = dict(c[f"onnxruntime_vs_{build}"], reference="onnxruntime CPU", build=build,
                                 inputs="seeded random (seed 0)")
        if "input_shapes" in c:
            m["verification"]["input_shapes"] = c["input_shapes"]
        check_finite(m["verification"], log, strict)
    mpath.write_text(json.dumps(m, indent=2) + "\n")
    for k, v in c.items():
        if isinstance(v, dict) and "max_abs_diff" in v:
            log(f"consistency {k}: max abs diff {v['max_abs_diff']:.3g}")
        elif k in ("neon", "onnxruntime"):
            log(f"consistency: {k} {v}")
    return c
