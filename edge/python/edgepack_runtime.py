"""Run an edgepack bundle from Python on a Raspberry Pi 5 (or any aarch64 Linux): ctypes + numpy only.

    from edgepack_runtime import Session
    s = Session("bundle_dir")                 # checks model.plan's SHA-256 against manifest.json
    out = s.run({"input": x})                 # dict name -> numpy array (copies)
    print(s.bench(seconds=5))                 # latency percentiles after a timed warm-up

The library (libedgepack.so next to this file, or `lib=`) allocates nothing: the plan, the arena
and the runtime context are numpy buffers this module owns, 64-byte aligned. One Session per thread.
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
_DTYPES = {"float32": np.float32, "int64": np.int64, "bool": np.bool_, "int32": np.int32, "uint8": np.uint8,
           "int8": np.int8, "float16": np.float16}


class EdgepackError(RuntimeError):
    pass


def _aligned(nbytes: int, align: int = 64) -> np.ndarray:
    raw = np.zeros(nbytes + align, dtype=np.uint8)
    off = (-raw.ctypes.data) % align
    return raw[off:off + nbytes]


class Session:
    def __init__(self, bundle: str | Path = ".", lib: str | Path | None = None, verify: bool = True) -> None:
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
        self.lib = ctypes.CDLL(str(lib or self.path / "libedgepack.so"))
        L = self.lib
        vp, u32, i32 = ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int32
        for name, res, args in [("ep_open", ctypes.c_int, [vp, vp, u32]), ("ep_arena_bytes", u32, [vp]),
                                ("ep_bind", ctypes.c_int, [vp, vp, u32]), ("ep_run", ctypes.c_int, [vp]),
                                ("ep_num_inputs", u32, [vp]), ("ep_num_outputs", u32, [vp]),
                                ("ep_input_id", i32, [vp, u32]), ("ep_output_id", i32, [vp, u32]),
                                ("ep_tensor_data", vp, [vp, u32]), ("ep_status_str", ctypes.c_char_p, [ctypes.c_int]),
                                ("ep_vec_name", ctypes.c_char_p, [])]:
            f = getattr(L, name)
            f.restype, f.argtypes = res, args
        self._ctx = _aligned(_CTX_BYTES)
        self._plan = _aligned(len(plan))
        self._plan[:] = np.frombuffer(plan, dtype=np.uint8)
        self._check(L.ep_open(self._ctx.ctypes.data, self._plan.ctypes.data, len(plan)), "the runtime rejected the plan")
        n = L.ep_arena_bytes(self._ctx.ctypes.data)
        self._arena = _aligned(max(n, 1))
        self._check(L.ep_bind(self._ctx.ctypes.data, self._arena.ctypes.data, n), "binding the arena")
        self.inputs: list[dict] = self.manifest["inputs"]
        self.outputs: list[dict] = self.manifest["outputs"]
        c = self._ctx.ctypes.data
        if [L.ep_input_id(c, i) for i in range(L.ep_num_inputs(c))] != [s["tensor"] for s in self.inputs] or \
           [L.ep_output_id(c, i) for i in range(L.ep_num_outputs(c))] != [s["tensor"] for s in self.outputs]:
            raise EdgepackError("manifest.json inputs/outputs disagree with the plan")
        self.vector_layer = L.ep_vec_name().decode()

    def _check(self, status: int, what: str) -> None:
        if status != 0:
            raise EdgepackError(f"{what}: {self.lib.ep_status_str(status).decode()} (status {status})")

    def _view(self, spec: dict) -> np.ndarray:
        """The tensor's bytes in the arena, as a numpy array (no copy)."""
        ptr = self.lib.ep_tensor_data(self._ctx.ctypes.data, spec["tensor"])
        dt = np.dtype(_DTYPES[spec["dtype"]])
        n = int(np.prod(spec["shape"], dtype=np.int64)) * dt.itemsize
        if not ptr:
            raise EdgepackError(f"tensor {spec['name']} has no data")
        off = ptr - self._arena.ctypes.data
        if off < 0 or off + n > self._arena.size:
            raise EdgepackError(f"tensor {spec['name']} lies outside the arena")
        return self._arena[off:off + n].view(dt).reshape(spec["shape"])

    def write_inputs(self, feeds: dict[str, np.ndarray]) -> None:
        names = [s["name"] for s in self.inputs]
        unknown = [k for k in feeds if k not in names]
        if unknown:
            raise EdgepackError(f"unknown input(s) {unknown}; this model takes {names}")
        for s in self.inputs:
            if s["name"] not in feeds:
                raise EdgepackError(f"missing input '{s['name']}'")
            a = np.asarray(feeds[s["name"]])
            want = np.dtype(_DTYPES[s["dtype"]])
            if a.dtype != want:
                raise EdgepackError(f"input '{s['name']}': dtype {a.dtype}, expected {want}")
            if list(a.shape) != list(s["shape"]):
                raise EdgepackError(f"input '{s['name']}': shape {list(a.shape)}, expected {s['shape']}")
            self._view(s)[...] = a

    def run(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        self.write_inputs(feeds)
        self._check(self.lib.ep_run(self._ctx.ctypes.data), "run failed")
        return {s["name"]: self._view(s).copy() for s in self.outputs}

    def bench(self, feeds: dict[str, np.ndarray] | None = None, warmup: float = 3.0, seconds: float = 10.0) -> dict:
        """Latency (ms) after a warm-up by time; random float inputs unless given."""
        if feeds is None:
            rng = np.random.default_rng(0)
            feeds = {s["name"]: (rng.standard_normal(s["shape"]).astype(np.float32) if s["dtype"] == "float32"
                                 else np.zeros(s["shape"], dtype=_DTYPES[s["dtype"]])) for s in self.inputs}
        run, c = self.lib.ep_run, self._ctx.ctypes.data
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
                "runs": len(t), "vector_layer": self.vector_layer, "threads": 1}


if __name__ == "__main__":
    import sys
    s = Session(sys.argv[1] if len(sys.argv) > 1 else ".")
    print(s.bench())
