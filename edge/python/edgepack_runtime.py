"""Run an edgepack bundle from Python on a Raspberry Pi 5 (or any aarch64 Linux): ctypes + numpy only.

    from edgepack_runtime import Session
    s = Session("bundle_dir")                 # checks model.plan's SHA-256 against manifest.json
    s = Session("bundle_dir", threads=4)      # the plan on 4 threads (a Pi 5 has four cores); same outputs
    out = s.run({"input": x})                 # dict name -> numpy array (copies)
    print(s.bench(seconds=5))                 # latency percentiles after a timed warm-up

The library: `lib=` if given, else libedgepack.so in the bundle folder, else next to this file (a bundle
holds both; the path is absolute, so dlopen never searches the system's library paths). It allocates
nothing: the plan, the arena and the runtime context are numpy buffers this module owns, 64-byte aligned.
One Session per thread. threads=N: the library's worker pool (pthreads, one per process, started once) runs
this session's plan on N threads; sessions run at the same time from several Python threads are fine (one
uses the pool, the others run on their own thread).

A bundle whose inputs have symbolic dims (plan version 2, manifest "dims") runs at any shape within
its bounds: run() checks the arrays against the manifest (fixed dims equal, each symbol within its
bounds and one extent per symbol), gives the core their dims, resolves (nothing to do when the dims
did not change), grows the arena when the shape needs more, and returns outputs at their resolved shapes.
"""
from __future__ import annotations

import ctypes
import hashlib
import json
import time
from pathlib import Path

import numpy as np

__all__ = ["Session", "EdgepackError"]

_CTX_BYTES = 1024   # >= sizeof(ep_ctx) (about 80 bytes today); the C API never exposes its layout
class _Info(ctypes.Structure):   # ep_tensor_info
    _fields_ = [("dtype", ctypes.c_uint32), ("rank", ctypes.c_uint32), ("dims", ctypes.c_int32 * 8),
                ("nbytes", ctypes.c_uint32)]


_DTYPES = {"float32": np.float32, "int64": np.int64, "bool": np.bool_, "int32": np.int32, "uint8": np.uint8,
           "int8": np.int8, "float16": np.float16, "float64": np.float64, "int16": np.int16, "uint16": np.uint16,
           "uint32": np.uint32, "uint64": np.uint64}
try:   # bfloat16, float8, float4, (u)int4/2 (docs/plan-format.md, "Dtypes") as ml_dtypes' arrays, when it is installed
    import ml_dtypes
    _DTYPES.update({n: getattr(ml_dtypes, n) for n in (
        "bfloat16", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "uint4", "int4", "float4_e2m1fn",
        "float8_e8m0fnu", "uint2", "int2")})
except ImportError:
    pass


class EdgepackError(RuntimeError):
    pass


MAX_THREADS = 16   # EP_EDGE_MAX_THREADS in ep_edge.h


def _find_library(bundle: Path, lib: str | Path | None) -> Path:
    """`lib`, else libedgepack.so in the bundle, else next to this module; always an absolute path (a bare
    name would make dlopen search the system's library paths, and miss the bundle's)."""
    if lib is not None:
        p = Path(lib)
        if not p.is_file():
            raise EdgepackError(f"lib={str(lib)!r}: no such file")
        return p.resolve()
    tried = []
    for d in (bundle, Path(__file__).resolve().parent):
        p = (d / "libedgepack.so").resolve()
        if p.is_file():
            return p
        tried.append(str(p))
    raise EdgepackError(f"libedgepack.so not found (looked for {' and '.join(dict.fromkeys(tried))}); pass lib=")


def _aligned(nbytes: int, align: int = 64) -> np.ndarray:
    raw = np.zeros(nbytes + align, dtype=np.uint8)
    off = (-raw.ctypes.data) % align
    return raw[off:off + nbytes]


class Session:
    def __init__(self, bundle: str | Path = ".", lib: str | Path | None = None, verify: bool = True,
                 threads: int = 1) -> None:
        if isinstance(threads, bool) or not isinstance(threads, int) or not 1 <= threads <= MAX_THREADS:
            raise EdgepackError(f"threads must be a whole number in [1, {MAX_THREADS}], got {threads!r}")
        self.threads = threads
        self.path = Path(bundle)
        try:
            self.manifest = json.loads((self.path / "manifest.json").read_text())
        except (OSError, ValueError) as e:
            raise EdgepackError(f"{self.path}: cannot read manifest.json ({e})") from None
        except RecursionError:   # json recurses per nesting level: a hostile manifest nests 100,000 deep
            raise EdgepackError(f"{self.path}: manifest.json is nested too deeply") from None
        if not isinstance(self.manifest, dict) or self.manifest.get("format") != "edgepack-bundle":
            raise EdgepackError(f"{self.path}: not an edgepack bundle")
        if self.manifest.get("target") not in ("pi5", "web"):
            raise EdgepackError(f"{self.path}: bundle was packaged for target '{self.manifest.get('target')}'; this "
                                f"module runs pi5 (and web) bundles")
        plan_name = self.manifest.get("runtime", {}).get("plan", "model.plan")
        plan = (self.path / plan_name).read_bytes()
        if verify:
            want = self.manifest.get("files", {}).get(plan_name, {}).get("sha256")
            if hashlib.sha256(plan).hexdigest() != want:
                raise EdgepackError(f"{plan_name} does not match its SHA-256 in manifest.json (tampered or corrupt)")
        self.lib = ctypes.CDLL(str(_find_library(self.path, lib)))
        L = self.lib
        vp, u32, i32 = ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int32
        for name, res, args in [("ep_open", ctypes.c_int, [vp, vp, u32]), ("ep_arena_bytes", u32, [vp]),
                                ("ep_bind", ctypes.c_int, [vp, vp, u32]), ("ep_run", ctypes.c_int, [vp]),
                                ("ep_num_inputs", u32, [vp]), ("ep_num_outputs", u32, [vp]),
                                ("ep_input_id", i32, [vp, u32]), ("ep_output_id", i32, [vp, u32]),
                                ("ep_tensor_data", vp, [vp, u32]), ("ep_status_str", ctypes.c_char_p, [ctypes.c_int]),
                                ("ep_vec_name", ctypes.c_char_p, []),
                                ("ep_tensor_describe", ctypes.c_int, [vp, u32, ctypes.POINTER(_Info)]),
                                ("ep_plan_version", u32, [vp]), ("ep_state_bytes", u32, [vp]),
                                ("ep_set_state", ctypes.c_int, [vp, vp, u32]),
                                ("ep_set_input_shape", ctypes.c_int, [vp, u32, u32, ctypes.POINTER(i32)]),
                                ("ep_input_bound", ctypes.c_int, [vp, u32, u32, ctypes.POINTER(i32), ctypes.POINTER(i32)]),
                                ("ep_resolve", ctypes.c_int, [vp]), ("ep_input_values", vp, [vp, u32]),
                                ("ep_edge_set_threads", u32, [u32]),
                                ("ep_thread_tasks", u32, [u32])]:
            f = getattr(L, name)
            f.restype, f.argtypes = res, args
        self._ctx = _aligned(_CTX_BYTES)
        self._plan = _aligned(len(plan))
        self._plan[:] = np.frombuffer(plan, dtype=np.uint8)
        self._check(L.ep_open(self._ctx.ctypes.data, self._plan.ctypes.data, len(plan)), "the runtime rejected the plan")
        self.dynamic = L.ep_plan_version(self._ctx.ctypes.data) == 2
        self.dims: dict[str, dict] = self.manifest.get("dims", {}) if self.dynamic else {}
        self._shapes: list[tuple[int, ...]] | None = None
        self._arena = _aligned(64)
        if self.dynamic:   # the core's state once; the arena is sized per shape (_set_shapes)
            n = L.ep_state_bytes(self._ctx.ctypes.data)
            self._state = _aligned(max(n, 1))
            self._check(L.ep_set_state(self._ctx.ctypes.data, self._state.ctypes.data, n), "setting the plan state")
        else:
            self._bind()
        self.inputs: list[dict] = self.manifest["inputs"]
        self.outputs: list[dict] = self.manifest["outputs"]
        c = self._ctx.ctypes.data
        if [L.ep_input_id(c, i) for i in range(L.ep_num_inputs(c))] != [s["tensor"] for s in self.inputs] or \
           [L.ep_output_id(c, i) for i in range(L.ep_num_outputs(c))] != [s["tensor"] for s in self.outputs]:
            raise EdgepackError("manifest.json inputs/outputs disagree with the plan")
        self.vector_layer = L.ep_vec_name().decode()
        # version 2: inputs whose values decide shapes, written before resolving (docs/plan-format.md, "Value inputs")
        self._values = [i for i in range(len(self.inputs)) if self.dynamic and L.ep_input_values(c, i)]

    def _bind(self) -> None:
        """Bind an arena of ep_arena_bytes(): a larger one when this shape needs more, else the same one again
        (the core then re-runs nothing)."""
        n = self.lib.ep_arena_bytes(self._ctx.ctypes.data)
        if n > self._arena.size:
            self._arena = _aligned(n)
        self._check(self.lib.ep_bind(self._ctx.ctypes.data, self._arena.ctypes.data, self._arena.size), "binding the arena")

    def _set_shapes(self, shapes: list[tuple[int, ...]], arrays: list[np.ndarray] | None = None) -> None:
        """Version 2: the inputs' dims and the value inputs' values to the core, resolve, arena; nothing when the
        dims did not change and no input's values decide shapes (else the core compares the values itself)."""
        if not self.dynamic or (shapes == self._shapes and not self._values):
            return
        self._shapes = None
        c = self._ctx.ctypes.data
        for i, (spec, shape) in enumerate(zip(self.inputs, shapes)):
            dims = (ctypes.c_int32 * max(len(shape), 1))(*shape)
            st = self.lib.ep_set_input_shape(c, i, len(shape), dims)
            if st != 0:
                lo, hi = ctypes.c_int32(), ctypes.c_int32()
                for k, x in enumerate(shape):
                    if self.lib.ep_input_bound(c, i, k, ctypes.byref(lo), ctypes.byref(hi)) == 0 and \
                            (x < lo.value or (hi.value > 0 and x > hi.value)):
                        raise EdgepackError(f"input '{spec['name']}': dimension {k} is {x}, outside the plan's bounds "
                                            f"[{lo.value}..{hi.value or ''}]")
                self._check(st, f"input '{spec['name']}' shape {list(shape)}")
        for i in self._values:
            a = np.ascontiguousarray(arrays[i])
            ctypes.memmove(self.lib.ep_input_values(c, i), a.ctypes.data, a.nbytes)
        st = self.lib.ep_resolve(c)
        if st != 0 and self._values:
            said = ", ".join(f"'{self.inputs[i]['name']}' = {np.asarray(arrays[i]).tolist()}" for i in self._values)
            raise EdgepackError(f"input values {said} decide shapes and give none this bundle can run: "
                                f"{self.lib.ep_status_str(st).decode()} (status {st})")
        self._check(st, f"resolving input shapes {[list(x) for x in shapes]}")
        self._bind()
        self._shapes = list(shapes)

    def describe(self, tensor: int) -> tuple[int, tuple[int, ...], int]:
        """(dtype code, dims, nbytes) of a tensor as the core has it now (version 2: resolved for the last shapes)."""
        info = _Info()
        self._check(self.lib.ep_tensor_describe(self._ctx.ctypes.data, tensor, ctypes.byref(info)), f"describing tensor {tensor}")
        return info.dtype, tuple(info.dims[:info.rank]), info.nbytes

    def _check(self, status: int, what: str) -> None:
        if status != 0:
            raise EdgepackError(f"{what}: {self.lib.ep_status_str(status).decode()} (status {status})")

    def _view(self, spec: dict) -> np.ndarray:
        """The tensor's bytes in the arena, as a numpy array (no copy)."""
        ptr = self.lib.ep_tensor_data(self._ctx.ctypes.data, spec["tensor"])
        dt = np.dtype(_DTYPES[spec["dtype"]])
        _, shape, n = self.describe(spec["tensor"])
        if n != int(np.prod(shape, dtype=np.int64)) * dt.itemsize:
            raise EdgepackError(f"tensor {spec['name']}: {n} bytes for dims {list(shape)}")
        if not n:
            return np.zeros(shape, dtype=dt)
        if not ptr:
            raise EdgepackError(f"tensor {spec['name']} has no data")
        off = ptr - self._arena.ctypes.data
        if off < 0 or off + n > self._arena.size:
            raise EdgepackError(f"tensor {spec['name']} lies outside the arena")
        return self._arena[off:off + n].view(dt).reshape(shape)

    def check_feeds(self, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        """The arrays in manifest order, checked: names, dtypes, fixed dims equal, symbolic dims within the
        manifest's bounds and one extent per symbol (errors name the input, the dimension and the bound)."""
        names = [s["name"] for s in self.inputs]
        unknown = [k for k in feeds if k not in names]
        if unknown:
            raise EdgepackError(f"unknown input(s) {unknown}; this model takes {names}")
        seen: dict[str, tuple[int, str]] = {}   # symbol -> (extent, the input that gave it)
        out = []
        for s in self.inputs:
            if s["name"] not in feeds:
                raise EdgepackError(f"missing input '{s['name']}'")
            a = np.asarray(feeds[s["name"]])
            want = np.dtype(_DTYPES[s["dtype"]])
            if a.dtype != want:
                raise EdgepackError(f"input '{s['name']}': dtype {a.dtype}, expected {want}")
            shape = s["shape"]
            if a.ndim != len(shape) or any(isinstance(d, int) and d != x for d, x in zip(shape, a.shape)):
                raise EdgepackError(f"input '{s['name']}': shape {list(a.shape)}, expected {shape}")
            for k, (d, x) in enumerate(zip(shape, a.shape)):
                if isinstance(d, int):
                    continue
                b = self.dims.get(d, {})
                lo, hi = b.get("min", 0), b.get("max")
                if x < lo or (hi and x > hi):
                    raise EdgepackError(f"input '{s['name']}': dimension {k} ('{d}') is {x}, "
                                        f"{'below' if x < lo else 'above'} its bound {lo if x < lo else hi} "
                                        f"(this bundle accepts '{d}' in [{lo}..{hi or ''}])")
                if d in seen and seen[d][0] != x:
                    raise EdgepackError(f"input '{s['name']}': dimension {k} ('{d}') is {x}, but input "
                                        f"'{seen[d][1]}' gives '{d}' = {seen[d][0]}")
                seen[d] = (x, s["name"])
            out.append(a)
        return out

    def write_inputs(self, feeds: dict[str, np.ndarray]) -> None:
        arrays = self.check_feeds(feeds)
        self._set_shapes([a.shape for a in arrays], arrays)
        for i, (s, a) in enumerate(zip(self.inputs, arrays)):
            if i not in self._values:   # written before resolving
                self._view(s)[...] = a

    def _use_threads(self) -> None:
        """The pool's thread count is per process: set this session's before each run (starts workers once)."""
        got = self.lib.ep_edge_set_threads(self.threads)
        if got != self.threads:
            raise EdgepackError(f"could only start {got} of {self.threads} threads")

    def thread_tasks(self) -> list[int]:
        """Tasks each pool thread has run so far in this process (0: the threads calling run)."""
        return [self.lib.ep_thread_tasks(i) for i in range(self.threads)]

    def run(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        self.write_inputs(feeds)
        self._use_threads()
        self._check(self.lib.ep_run(self._ctx.ctypes.data), "run failed")
        return {s["name"]: self._view(s).copy() for s in self.outputs}

    def bench(self, feeds: dict[str, np.ndarray] | None = None, warmup: float = 3.0, seconds: float = 10.0) -> dict:
        """Latency (ms) after a warm-up by time; random float inputs unless given."""
        if feeds is None:   # symbolic dims at their example extents
            rng = np.random.default_rng(0)
            shapes = {s["name"]: [self.dims.get(d, {}).get("example", 1) if isinstance(d, str) else d for d in s["shape"]]
                      for s in self.inputs}
            feeds = {s["name"]: (rng.standard_normal(shapes[s["name"]]).astype(np.float32) if s["dtype"] == "float32"
                                 else np.zeros(shapes[s["name"]], dtype=_DTYPES[s["dtype"]])) for s in self.inputs}
        run, c = self.lib.ep_run, self._ctx.ctypes.data
        self._use_threads()
        end = time.perf_counter() + warmup
        while time.perf_counter() < end:
            self.write_inputs(feeds)   # every run: the arena may reuse an input's bytes once it is consumed
            run(c)
        t = []
        end = time.perf_counter() + seconds
        while time.perf_counter() < end or len(t) < 10:
            t0 = time.perf_counter()
            self.write_inputs(feeds)
            self._check(run(c), "run failed")
            t.append((time.perf_counter() - t0) * 1e3)
        p50, p90, p99 = np.percentile(t, [50, 90, 99])
        return {"p50_ms": float(p50), "p90_ms": float(p90), "p99_ms": float(p99), "min_ms": float(min(t)),
                "runs": len(t), "vector_layer": self.vector_layer, "threads": self.threads}


if __name__ == "__main__":
    import sys
    s = Session(sys.argv[1] if len(sys.argv) > 1 else ".", threads=int(sys.argv[2]) if len(sys.argv) > 2 else 1)
    print(s.bench())
