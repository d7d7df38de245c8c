"""Large weights held once, outside the graph protobuf, while the packager works on the graph (issue 21).

A model of 1-2 GB is nearly all weights. Every copy of its ModelProto (deepcopy, CopyFrom, shape inference and the
inliner serialize it, onnx-ir converts it) would copy them too. So an initializer of MIN_BYTES or more lives here, as
one read-only numpy array, and the graph holds a reference in its place: a TensorProto with its name, type and dims,
marked EXTERNAL at location 'edgepack-store:<key>'. Such a reference is never a file: onnx's loader must not read it,
and nothing leaves the packager holding one: inline() / write_model() / save_external() put the bytes back.

Only inside a scope (one packaging run: api.package) are tensors stored, and its arrays are released when it ends;
outside one (a test analyzing a model directly) tensors stay ordinary TensorProtos, as onnx makes them."""
from __future__ import annotations

import contextlib
import functools
import itertools
from pathlib import Path
from typing import Callable, Iterator

import numpy as np
import onnx
from onnx import numpy_helper

MIN_BYTES = 1 << 20
PREFIX = "edgepack-store:"
CHUNK = 16 << 20

_arrays: dict[str, np.ndarray] = {}
_keys: dict[int, str] = {}          # id(array) -> key: the same array stored twice is one entry
_scopes: list[list[str]] = []
_next = itertools.count()


def key_of(t: onnx.TensorProto) -> str | None:
    """The store key a TensorProto refers to, or None for an ordinary tensor."""
    if t.data_location != onnx.TensorProto.EXTERNAL:
        return None
    for e in t.external_data:
        if e.key == "location" and e.value.startswith(PREFIX):
            return e.value[len(PREFIX):]
    return None


def is_ref(t: onnx.TensorProto) -> bool:
    return key_of(t) is not None


def active() -> bool:
    """Inside a scope: large tensors are stored."""
    return bool(_scopes)


def put(a: np.ndarray) -> str:
    """Store `a` (read-only from now on; not copied) and return its key. Inside a scope only."""
    k = _keys.get(id(a))
    if k is not None and _arrays.get(k) is a:
        return k
    a.flags.writeable = False
    k = str(next(_next))
    _arrays[k], _keys[id(a)] = a, k
    _scopes[-1].append(k)
    return k


def ref(a: np.ndarray, name: str) -> onnx.TensorProto:
    """A TensorProto referring to `a` in the store."""
    t = onnx.TensorProto(name=name, data_type=onnx.helper.np_dtype_to_tensor_dtype(a.dtype), dims=a.shape,
                         data_location=onnx.TensorProto.EXTERNAL)
    for k, v in (("location", PREFIX + put(a)), ("length", str(a.nbytes))):
        e = t.external_data.add()
        e.key, e.value = k, v
    return t


def to_array(t: onnx.TensorProto) -> np.ndarray:
    """numpy_helper.to_array that reads store references (the stored array itself: read-only, not a copy)."""
    k = key_of(t)
    if k is None:
        return numpy_helper.to_array(t)
    try:
        return _arrays[k]
    except KeyError:
        raise RuntimeError(f"tensor '{t.name}': its weights were released (packaging run ended)") from None


def from_array(a: np.ndarray, name: str) -> onnx.TensorProto:
    """numpy_helper.from_array, but an array of MIN_BYTES or more becomes a store reference (no copy)."""
    a = np.asarray(a)
    if _scopes and a.nbytes >= MIN_BYTES and a.dtype.byteorder in "=<|" and \
            storable(onnx.helper.np_dtype_to_tensor_dtype(a.dtype)) is not None:
        return ref(np.ascontiguousarray(a), name)
    return numpy_helper.from_array(a, name)


def stow(t: onnx.TensorProto, data: np.ndarray | None = None) -> None:
    """Turn `t` into a store reference in place. data: its bytes as a uint8 array (external data just read);
    else its raw_data is moved. Small tensors and types numpy cannot hold as they are stay as they are."""
    dt = storable(t.data_type)
    if dt is None or not _scopes:
        return
    if data is None:
        if not t.HasField("raw_data") or len(t.raw_data) < MIN_BYTES:
            return
        data = np.frombuffer(t.raw_data, dtype=np.uint8)
    a = data.view(dt).reshape(tuple(t.dims))
    name, dims, dtype = t.name, list(t.dims), t.data_type
    t.Clear()
    t.CopyFrom(ref(a, name))
    assert list(t.dims) == dims and t.data_type == dtype


_T = onnx.TensorProto
_STORABLE = (_T.FLOAT, _T.DOUBLE, _T.FLOAT16, _T.INT8, _T.UINT8, _T.INT16, _T.UINT16, _T.INT32, _T.UINT32,
             _T.INT64, _T.UINT64, _T.BOOL)


def storable(data_type: int) -> np.dtype | None:
    """The numpy dtype a stored tensor of this type has; None for types kept in the protobuf (packed, bfloat16...)."""
    return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(data_type)).newbyteorder("<") \
        if data_type in _STORABLE else None


def stow_model(model: onnx.ModelProto) -> None:
    """Every large inline initializer of the main graph becomes a store reference (in place)."""
    for t in model.graph.initializer:
        if not is_ref(t) and t.data_location == onnx.TensorProto.DEFAULT:
            stow(t)


def _refs(g: onnx.GraphProto) -> Iterator[onnx.TensorProto]:
    """Store references among the main graph's initializers (only those are ever stored)."""
    return (t for t in g.initializer if is_ref(t))


def has_refs(model: onnx.ModelProto) -> bool:
    return any(True for _ in _refs(model.graph))


def light(model: onnx.ModelProto) -> onnx.ModelProto:
    """A weight-free copy for onnx's checker (which opens every external location as a file): stored initializers
    become graph inputs of the same type and shape."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    keep = [t for t in g.initializer if not is_ref(t)]
    stored = [t for t in g.initializer if is_ref(t)]
    have = {vi.name for vi in g.input}
    g.input.extend(onnx.helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)) for t in stored
                   if t.name not in have)
    del g.initializer[:]
    g.initializer.extend(keep)
    return m


def check_model(model: onnx.ModelProto) -> None:
    """onnx.checker.check_model on the model, its stored weights left out."""
    onnx.checker.check_model(light(model) if has_refs(model) else model)


def inline(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy with every store reference replaced by its bytes (an ordinary model: for serializing a small model;
    write_model / save_external do a large one without holding its weights twice)."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    for t in m.graph.initializer:
        if is_ref(t):
            t.CopyFrom(numpy_helper.from_array(np.ascontiguousarray(to_array(t)), t.name))
    return m


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _write_chunks(f, a: np.ndarray) -> None:
    flat = a.reshape(-1).view(np.uint8) if a.size else np.zeros(0, np.uint8)
    for at in range(0, flat.size, CHUNK):
        f.write(memoryview(flat[at:at + CHUNK]))


def write_model(model: onnx.ModelProto, path: Path) -> int:
    """Write `model` as an ordinary .onnx file (weights inline) streaming the stored weights into it: the model's
    protobuf encoding is assembled from the weight-free parts and each weight's bytes, never all in memory at once.
    Returns the bytes written."""
    if not has_refs(model):
        data = model.SerializeToString()
        Path(path).write_bytes(data)
        return len(data)
    # ModelProto.graph = 7, GraphProto.initializer = 5, TensorProto.raw_data = 9 (all length-delimited)
    top = onnx.ModelProto()
    top.CopyFrom(model)
    top.ClearField("graph")
    graph = onnx.GraphProto()
    graph.CopyFrom(model.graph)
    del graph.initializer[:]
    parts: list[tuple[bytes, np.ndarray | None]] = []   # (encoded head, weight bytes streamed after it)
    for t in model.graph.initializer:
        if is_ref(t):
            a = to_array(t)
            head = onnx.TensorProto(name=t.name, data_type=t.data_type, dims=t.dims).SerializeToString()
            head += b"\x4a" + _varint(a.nbytes)
            parts.append((b"\x2a" + _varint(len(head) + a.nbytes) + head, a))
        else:
            body = t.SerializeToString()
            parts.append((b"\x2a" + _varint(len(body)) + body, None))
    g_body = graph.SerializeToString()
    g_len = len(g_body) + sum(len(h) + (a.nbytes if a is not None else 0) for h, a in parts)
    with open(path, "wb") as f:
        f.write(top.SerializeToString())
        f.write(b"\x3a" + _varint(g_len))
        f.write(g_body)
        for h, a in parts:
            f.write(h)
            if a is not None:
                _write_chunks(f, a)
        return f.tell()


def save_external(model: onnx.ModelProto, folder: Path, name: str = "model.onnx",
                  edit: Callable[[onnx.ModelProto], None] | None = None) -> Path:
    """Write `model` to folder/name with its stored weights as ordinary external data in folder/name.data (for
    onnxruntime in a child process: it reads that file itself). edit: applied to the copy before writing."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    if edit is not None:
        edit(m)
    data = f"{name}.data"
    with open(Path(folder) / data, "wb") as f:
        for t in m.graph.initializer:
            k = key_of(t)
            if k is None:
                continue
            a = to_array(t)
            f.write(b"\0" * (-f.tell() % 64))
            offset = f.tell()
            _write_chunks(f, a)
            del t.external_data[:]
            for key, v in (("location", data), ("offset", str(offset)), ("length", str(a.nbytes))):
                e = t.external_data.add()
                e.key, e.value = key, v
    p = Path(folder) / name
    p.write_bytes(m.SerializeToString())
    return p


@contextlib.contextmanager
def scope() -> Iterator[None]:
    """The arrays stored inside are released at its end."""
    _scopes.append([])
    try:
        yield
    finally:
        for k in _scopes.pop():
            a = _arrays.pop(k, None)
            if a is not None and _keys.get(id(a)) == k:
                del _keys[id(a)]


def scoped(fn: Callable) -> Callable:
    """fn's stored weights released when it returns."""
    @functools.wraps(fn)
    def run(*args, **kwargs):
        with scope():
            return fn(*args, **kwargs)
    return run


def ir_open(model) -> None:
    """An onnx-ir model deserialized from a graph holding store references: its stored initializers become
    ir.Tensor views of the stored arrays (onnx-ir would read an ExternalTensor as a file), in place."""
    import onnx_ir as ir
    for v in model.graph.initializers.values():
        t = v.const_value
        if isinstance(t, ir.ExternalTensor) and t.location.startswith(PREFIX):
            v.const_value = ir.Tensor(_arrays[t.location[len(PREFIX):]], name=v.name)


def ir_close(model) -> None:
    """Before serializing an onnx-ir model: large initializers (stored ones, and those its passes made) become
    store references again, so serializing copies no weight."""
    import onnx_ir as ir
    for v in model.graph.initializers.values() if _scopes else ():
        t = v.const_value
        if t is None or isinstance(t, ir.ExternalTensor) or t.nbytes < MIN_BYTES:
            continue
        a = t.numpy()
        if a.dtype.byteorder not in "=<|" or storable(onnx.helper.np_dtype_to_tensor_dtype(a.dtype)) is None:
            continue
        a = np.ascontiguousarray(a)
        v.const_value = ir.ExternalTensor(PREFIX + put(a), offset=0, length=a.nbytes, dtype=t.dtype, shape=t.shape,
                                          name=v.name, base_dir="")
