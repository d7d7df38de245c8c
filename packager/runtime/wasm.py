"""Run a plan with the exact .wasm a browser gets, under wasmtime."""
from __future__ import annotations

import ctypes
import hashlib
from functools import lru_cache
from pathlib import Path

import numpy as np
import wasmtime

from ..errors import BundleError, RuntimeFailure

PAGE = 65536
# Exports whose i32 result is a size or an address: unsigned (a 2 GiB arena is 0x80000000, not -2147483648).
_UNSIGNED = frozenset({"ep_heap_base", "ep_arena_bytes", "ep_state_bytes", "ep_tensor_data", "ep_tensor_nbytes",
                       "ep_dims_buffer", "ep_input_values", "ep_status_str", "ep_vec_name"})


@lru_cache(maxsize=None)
def _engine() -> wasmtime.Engine:
    cfg = wasmtime.Config()
    cfg.wasm_simd = True
    cfg.wasm_relaxed_simd = True
    return wasmtime.Engine(cfg)


@lru_cache(maxsize=8)
def _compiled(digest: str, code: bytes) -> wasmtime.Module:
    return wasmtime.Module(_engine(), code)


def _module(wasm: "str | Path | bytes") -> wasmtime.Module:
    """Compiled once per distinct binary: every bundle carries its own copy of the same .wasm."""
    code = wasm if isinstance(wasm, bytes) else Path(wasm).read_bytes()
    return _compiled(hashlib.sha256(code).hexdigest(), code)


def _as_u32(f):
    return lambda store, *args: f(store, *args) & 0xFFFFFFFF


def _align(n: int, a: int = 64) -> int:
    return (n + a - 1) // a * a


class PlanFile:
    """A plan on disk, copied into an instance's memory in chunks (a plan of 1-2 GB of weights is never one bytes
    object beside the instance's copy). sha256: the digest the bytes copied must have, else the copy fails (what
    runs is what was checked, although the file is read twice)."""

    CHUNK = 16 << 20

    def __init__(self, path: Path, sha256: str | None = None) -> None:
        self.path, self.sha256 = Path(path), sha256
        self.size = self.path.stat().st_size

    def copy_to(self, write) -> None:
        """write(chunk, offset) for every chunk, exactly self.size bytes, then the digest check."""
        h = hashlib.sha256()
        with open(self.path, "rb") as f:
            at = 0
            while at < self.size:
                chunk = f.read(min(self.CHUNK, self.size - at))
                if not chunk:
                    raise BundleError(f"{self.path}: shorter than when it was checked")
                h.update(chunk)
                write(chunk, at)
                at += len(chunk)
        if self.sha256 is not None and h.hexdigest() != self.sha256:
            raise BundleError(f"{self.path} changed after its SHA-256 was checked (tampered or corrupt)")


class WasmPlan:
    """One wasm instance holding one plan and its arena. Tensor ids come from the manifest."""

    def __init__(self, wasm: Path | str | bytes, plan: "bytes | PlanFile") -> None:
        """wasm: the runtime's path, or its bytes (as verified against the manifest); plan: its bytes, or a PlanFile
        (copied in chunks)."""
        self.store = wasmtime.Store(_engine())
        inst = wasmtime.Instance(self.store, _module(wasm), [])
        self.ex = {name: _as_u32(f) if name in _UNSIGNED else f for name, f in inst.exports(self.store).items()}
        if "_initialize" in self.ex:
            self.ex["_initialize"](self.store)
        self.mem: wasmtime.Memory = self.ex["memory"]
        self.plan_ptr = plan_ptr = _align(self.ex["ep_heap_base"](self.store))
        self.plan_size = size = plan.size if isinstance(plan, PlanFile) else len(plan)
        self._reserve(plan_ptr + size)
        if isinstance(plan, PlanFile):
            plan.copy_to(lambda chunk, at: self._put(plan_ptr + at, chunk))
        else:
            self._put(plan_ptr, plan)
        self._check(self.ex["ep_open"](self.store, plan_ptr, size), "opening the plan")
        self.vec = self._cstr(self.ex["ep_vec_name"](self.store))
        self.dynamic = "ep_plan_version" in self.ex and self.ex["ep_plan_version"](self.store) == 2
        self._shapes: list[tuple[int, ...]] | None = None
        self.node_names: list[str] = []   # plan node -> "KERNEL (ONNX node)", for error messages
        end = plan_ptr + size
        if self.dynamic:   # version 2: the core's state after the plan, then the arena (planned per shape)
            state_ptr = _align(end)
            state_bytes = self.ex["ep_state_bytes"](self.store)
            self._reserve(state_ptr + state_bytes)
            self._check(self.ex["ep_set_state"](self.store, state_ptr, state_bytes), "setting the plan state")
            end = state_ptr + state_bytes
        self.arena_ptr = _align(end)
        self.memory_bound = self.arena_ptr
        if not self.dynamic:
            self._bind()

    def _bind(self) -> None:
        arena_bytes = self.ex["ep_arena_bytes"](self.store)
        self._reserve(self.arena_ptr + arena_bytes)
        self._check(self.ex["ep_bind"](self.store, self.arena_ptr, arena_bytes), "binding the arena")
        self.memory_bound = max(self.memory_bound, self.arena_ptr + arena_bytes)   # highest linear-memory byte touched

    def plan_head(self) -> bytes:
        """The plan's bytes before its weights (header and tables: what layout.decode(head_only=True) reads), as they
        are in this instance's memory: the plan that runs, not the file read again."""
        from ..plan import layout
        first = self._bytes(self.plan_ptr, min(layout.HEADER_BYTES, self.plan_size)).tobytes()
        return self._bytes(self.plan_ptr, min(max(layout.weights_offset(first), len(first)), self.plan_size)).tobytes()

    def value_inputs(self) -> list[int]:
        """Version 2: the graph inputs whose values decide shapes (written by set_shapes, before resolving)."""
        if not self.dynamic or "ep_input_values" not in self.ex:
            return []
        return [i for i in range(self.ex["ep_num_inputs"](self.store)) if self.ex["ep_input_values"](self.store, i)]

    def set_shapes(self, shapes: list[tuple[int, ...]], values: "dict[int, np.ndarray] | None" = None) -> None:
        """Version 2: the graph inputs' dims for the next runs, and the value inputs' values (input index -> array;
        value_inputs()); resolved, and the arena re-planned, when either changed (the core compares the values)."""
        if not self.dynamic or (shapes == self._shapes and not values):
            return
        self._shapes = None
        buf = self.ex["ep_dims_buffer"](self.store)
        for i, dims in enumerate(shapes):
            self.mem.write(self.store, np.asarray(dims, dtype="<i4").tobytes(), buf)
            self._check(self.ex["ep_set_input_shape"](self.store, i, len(dims)), f"input {i}'s shape {list(dims)}")
        for i, array in (values or {}).items():
            ptr, data = self.ex["ep_input_values"](self.store, i), np.ascontiguousarray(array)
            if not ptr or data.nbytes != self.ex["ep_tensor_nbytes"](self.store, self.ex["ep_input_id"](self.store, i)):
                raise RuntimeFailure(f"input {i}: not a value input of {data.nbytes} bytes")
            self._put(ptr, data)
        status = self.ex["ep_resolve"](self.store)
        if status:
            node = self.ex["ep_failed_node"](self.store)
            self._check(status, f"shapes {[list(d) for d in shapes]} (at plan node {node}"
                                f"{': ' + self.node_names[node] if node < len(self.node_names) else ''})")
        self._bind()
        self._shapes = list(shapes)

    def dims(self, tensor_id: int) -> tuple[int, ...]:
        rank = self.ex["ep_tensor_dims"](self.store, tensor_id)
        if rank < 0:
            raise RuntimeFailure(f"tensor {tensor_id}: no such tensor")
        raw = self.mem.read(self.store, self.ex["ep_dims_buffer"](self.store), self.ex["ep_dims_buffer"](self.store) + 4 * rank)
        return tuple(int(d) for d in np.frombuffer(bytes(raw), dtype="<i4"))

    def _reserve(self, end: int) -> None:
        have = self.mem.data_len(self.store)
        if end > have:
            try:
                self.mem.grow(self.store, (end - have + PAGE - 1) // PAGE)
            except wasmtime.WasmtimeError:
                raise RuntimeFailure(f"edgepack runtime refused a run: it needs {end} bytes of memory, more than the "
                                     f"wasm instance can grow to") from None

    def _bytes(self, ptr: int, n: int) -> np.ndarray:
        """n bytes of linear memory at ptr as a uint8 array over them, no copy (valid until the memory grows)."""
        if ptr + n > self.mem.data_len(self.store):
            raise RuntimeFailure(f"{n} bytes at address {ptr}: outside the instance's memory")
        base = ctypes.cast(self.mem.data_ptr(self.store), ctypes.c_void_p).value
        return np.ctypeslib.as_array((ctypes.c_ubyte * n).from_address(base + ptr)) if n else np.empty(0, np.uint8)

    def _put(self, ptr: int, data: "bytes | np.ndarray") -> None:
        """Copy bytes or a C-contiguous array into linear memory at ptr: one copy (Memory.write makes two of bytes)."""
        src = data.reshape(-1).view(np.uint8) if isinstance(data, np.ndarray) else np.frombuffer(data, np.uint8)
        self._bytes(ptr, src.size)[:] = src

    def _cstr(self, ptr: int) -> str:
        raw = self.mem.read(self.store, ptr, ptr + 256)
        return bytes(raw[: raw.index(0)]).decode()

    def _check(self, status: int, what: str) -> None:
        if status != 0:
            msg = self._cstr(self.ex["ep_status_str"](self.store, status))
            raise RuntimeFailure(f"edgepack runtime refused {what}: {msg} (status {status})")

    def write(self, tensor_id: int, array: np.ndarray) -> None:
        ptr = self.ex["ep_tensor_data"](self.store, tensor_id)
        n = self.ex["ep_tensor_nbytes"](self.store, tensor_id)
        data = np.ascontiguousarray(array)
        if not ptr or data.nbytes != n:
            raise RuntimeFailure(f"tensor {tensor_id}: expected {n} bytes, got {data.nbytes}")
        self._put(ptr, data)

    def read(self, tensor_id: int, dtype: np.dtype, shape: tuple[int, ...] | None = None) -> np.ndarray:
        """A tensor's bytes as an array; shape None: its dims as resolved (version 2)."""
        if shape is None:
            shape = self.dims(tensor_id)
        ptr = self.ex["ep_tensor_data"](self.store, tensor_id)
        n = self.ex["ep_tensor_nbytes"](self.store, tensor_id)
        return self._bytes(ptr, n).copy().view(dtype).reshape(shape)

    def run(self) -> None:
        self._check(self.ex["ep_run"](self.store), "running the plan")

    def profile(self) -> list[float]:
        """Run node by node; seconds spent in each (plan order)."""
        import time
        run_node, out = self.ex["ep_run_node"], []
        for i in range(self.ex["ep_num_nodes"](self.store)):
            t = time.perf_counter()
            self._check(run_node(self.store, i), f"running node {i}")
            out.append(time.perf_counter() - t)
        return out
