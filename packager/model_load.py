"""Loading ONNX models from strangers safely.

The model file and every external-data file it names are read by us, never by onnx's loader, under the
defences of the ONNX project's external-data security model: a location must be a relative path inside
the model's folder (no '..', not absolute), no path component may be a symbolic link (each is opened with
O_NOFOLLOW relative to its parent's descriptor, so there is no check-then-open race), the data file must
be a regular file with a single hard link (checked before open, which is non-blocking: a FIFO cannot
stall us), only the keys location/offset/length/checksum are accepted, offset and length must be
non-negative decimal integers, and offset+length must lie inside the file, so a crafted length can never
allocate more than the file holds; all tensors together read at most their files' sizes, each file counted
once. Sparse tensors' external data goes through the same reader (then sparse tensors are refused), and
every tensor must hold exactly the bytes its dims and type need. Graphs must be acyclic with every input
defined; ops from custom domains are refused unless the user allows the domain (no code is ever loaded
from a model)."""
from __future__ import annotations

import os
import stat
from pathlib import Path, PurePosixPath, PureWindowsPath

import numpy as np
import onnx

from . import weights
from .errors import ModelLoadError
from .passes import contrib
from .passes.expand_functions import preview_function

MAX_MODEL_BYTES = 2 * 1024**3 - 1          # protobuf's hard limit
ALLOWED_KEYS = frozenset({"location", "offset", "length", "checksum"})
STANDARD_DOMAINS = frozenset({"", "ai.onnx"})
MAX_INLINED_NODES = 1_000_000              # model-local functions calling each other can multiply nodes


def _parse_uint(value: str, key: str, tensor: str) -> int:
    if not value.isdigit() or not value.isascii():
        raise ModelLoadError(f"tensor '{tensor}': external data {key} must be a non-negative integer, got '{value}'")
    return int(value)


def _check_location(location: str, tensor: str) -> list[str]:
    if not location:
        raise ModelLoadError(f"tensor '{tensor}': external data has no location")
    if "\0" in location:
        raise ModelLoadError(f"tensor '{tensor}': external data location contains a NUL byte")
    if PurePosixPath(location).is_absolute() or PureWindowsPath(location).is_absolute() or \
            PureWindowsPath(location).drive or location.startswith("\\"):
        raise ModelLoadError(f"tensor '{tensor}': external data location '{location}' is an absolute path; "
                             f"it must be relative to the model's folder")
    parts = [p for p in location.replace("\\", "/").split("/") if p not in ("", ".")]
    if ".." in parts:
        raise ModelLoadError(f"tensor '{tensor}': external data location '{location}' escapes the model's "
                             f"folder ('..' is not allowed)")
    if not parts:
        raise ModelLoadError(f"tensor '{tensor}': external data location '{location}' names no file")
    return parts


def _open_beneath(base: Path, parts: list[str], location: str, tensor: str) -> int:
    """Open base/parts... refusing a symlink in ANY component; returns a read-only fd of a regular file."""
    flags_dir = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as e:
        raise ModelLoadError(f"cannot open the model's folder {base}: {e.strerror}") from None
    try:
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            try:
                st = os.stat(part, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                raise ModelLoadError(f"tensor '{tensor}': external data file '{location}' not found") from None
            if stat.S_ISLNK(st.st_mode):
                raise ModelLoadError(f"tensor '{tensor}': external data location '{location}': path component "
                                     f"'{part}' is a symbolic link (refused)")
            if last and not stat.S_ISREG(st.st_mode):   # before open(): opening a FIFO waits for a writer
                raise ModelLoadError(f"tensor '{tensor}': external data '{location}' is not a regular file")
            try:
                # O_NONBLOCK: should a FIFO replace the file after the stat, open() still returns at once
                nfd = os.open(part, (os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK) if last else flags_dir,
                              dir_fd=fd)
            except OSError as e:
                raise ModelLoadError(f"tensor '{tensor}': cannot open external data '{location}': {e.strerror}") from None
            os.close(fd)
            fd = nfd
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ModelLoadError(f"tensor '{tensor}': external data '{location}' is not a regular file")
        if st.st_nlink > 1:
            raise ModelLoadError(f"tensor '{tensor}': external data file '{location}' has {st.st_nlink} hard links "
                                 f"(refused: it may alias a file outside the model's folder)")
        return fd
    except BaseException:
        os.close(fd)
        raise


def _graphs_and_nodes(model: onnx.ModelProto) -> tuple[list[onnx.GraphProto], list[onnx.NodeProto]]:
    """Every graph (the main one, If/Loop/Scan bodies, also inside functions) and every node, iteratively."""
    graphs: list[onnx.GraphProto] = []
    nodes: list[onnx.NodeProto] = []
    stack = [f.node for f in model.functions]
    graph_stack = [model.graph]
    while stack or graph_stack:
        while graph_stack:
            g = graph_stack.pop()
            graphs.append(g)
            stack.append(g.node)
        if stack:
            for n in stack.pop():
                nodes.append(n)
                for a in n.attribute:
                    if a.HasField("g"):
                        graph_stack.append(a.g)
                    graph_stack.extend(a.graphs)
    return graphs, nodes


def _sparse_tensors(model: onnx.ModelProto):
    """(where, SparseTensorProto) for every sparse tensor: sparse initializers and sparse attributes."""
    graphs, nodes = _graphs_and_nodes(model)
    for g in graphs:
        for sp in g.sparse_initializer:
            yield f"sparse initializer '{sp.values.name}'", sp
    for n in nodes:
        for a in n.attribute:
            where = f"{n.op_type} node '{n.name or (n.output[0] if n.output else '?')}' attribute '{a.name}'"
            if a.HasField("sparse_tensor"):
                yield where, a.sparse_tensor
            for sp in a.sparse_tensors:
                yield where, sp


def _dense_tensors(model: onnx.ModelProto):
    graphs, nodes = _graphs_and_nodes(model)
    for g in graphs:
        yield from g.initializer
    for n in nodes:
        for a in n.attribute:
            if a.HasField("t"):
                yield a.t
            yield from a.tensors


def _all_tensors(model: onnx.ModelProto):
    """Every TensorProto, sparse tensors' values and indices included (onnx's own helper skips those, and
    onnx would then read their external data itself, relative to the working directory)."""
    yield from _dense_tensors(model)
    for _, sp in _sparse_tensors(model):
        yield sp.values
        yield sp.indices


def _load_external(model: onnx.ModelProto, base: Path) -> None:
    """Read every external tensor through _open_beneath. The bytes read in all are bounded by the data
    files' sizes, each file counted once: 64 tensors naming one 16 MiB file cannot make 1 GiB."""
    budget, used, seen = 0, 0, set()
    main = len(model.graph.initializer)   # _all_tensors yields these first; large ones go to packager/weights.py
    for at, t in enumerate(_all_tensors(model)):
        if t.data_location != onnx.TensorProto.EXTERNAL:
            if t.external_data:
                raise ModelLoadError(f"tensor '{t.name}': has external_data entries but is not marked external")
            continue
        info: dict[str, str] = {}
        for entry in t.external_data:
            if entry.key not in ALLOWED_KEYS:
                raise ModelLoadError(f"tensor '{t.name}': unknown external data key '{entry.key}' (allowed: "
                                     f"{', '.join(sorted(ALLOWED_KEYS))})")
            if entry.key in info:
                raise ModelLoadError(f"tensor '{t.name}': external data key '{entry.key}' given twice")
            info[entry.key] = entry.value
        location = info.get("location", "")
        parts = _check_location(location, t.name)
        offset = _parse_uint(info.get("offset", "0"), "offset", t.name)
        length = _parse_uint(info["length"], "length", t.name) if "length" in info else None
        fd = _open_beneath(base, parts, location, t.name)
        try:
            size = os.fstat(fd).st_size
            if offset > size:
                raise ModelLoadError(f"tensor '{t.name}': external data offset {offset} is past the end of "
                                     f"'{location}' ({size} bytes)")
            if length is None:
                length = size - offset
            if length > size - offset:
                raise ModelLoadError(f"tensor '{t.name}': external data offset {offset} + length {length} is past "
                                     f"the end of '{location}' ({size} bytes)")
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                budget += size
            if used + length > budget:
                raise ModelLoadError(f"tensor '{t.name}': external data tensors read {used + length} bytes in all, "
                                     f"more than their files hold ({budget} bytes, each file counted once): "
                                     f"tensors overlap in '{location}' (refused: it multiplies memory)")
            used += length
            data = _pread(fd, length, offset)
        finally:
            os.close(fd)
        if data is None:
            raise ModelLoadError(f"tensor '{t.name}': short read from '{location}'")
        if at < main and weights.active() and length >= weights.MIN_BYTES and length == _nbytes(t):
            weights.stow(t, data)   # read once, into the array the packager uses: no copy in the protobuf
            continue
        t.raw_data = data.tobytes()
        del t.external_data[:]
        t.data_location = onnx.TensorProto.DEFAULT


def _pread(fd: int, length: int, offset: int) -> np.ndarray | None:
    """length bytes at offset, read straight into one array (a large read in several calls); None if short."""
    out = np.empty(length, dtype=np.uint8)
    view, at = memoryview(out), 0
    while at < length:
        n = os.preadv(fd, [view[at:at + (1 << 30)]], offset + at)
        if n <= 0:
            return None
        at += n
    return out


def _nbytes(t: onnx.TensorProto) -> int | None:
    """The bytes a tensor of its dims and type holds, for the types the weight store keeps (else None)."""
    dt = weights.storable(t.data_type)
    if dt is None or any(d < 0 for d in t.dims):
        return None
    n = dt.itemsize
    for d in t.dims:
        n *= d
    return n


_PACKED_BITS = {onnx.TensorProto.INT4: 4, onnx.TensorProto.UINT4: 4, onnx.TensorProto.FLOAT4E2M1: 4,
                onnx.TensorProto.INT2: 2, onnx.TensorProto.UINT2: 2}
_T = onnx.TensorProto
_TYPED_FIELD = {_T.FLOAT: ("float_data", 1), _T.COMPLEX64: ("float_data", 2), _T.DOUBLE: ("double_data", 1),
                _T.COMPLEX128: ("double_data", 2), _T.INT64: ("int64_data", 1), _T.UINT32: ("uint64_data", 1),
                _T.UINT64: ("uint64_data", 1), **{d: ("int32_data", 1) for d in (
                    _T.INT32, _T.INT16, _T.INT8, _T.UINT16, _T.UINT8, _T.BOOL, _T.FLOAT16, _T.BFLOAT16)}}


def check_tensor_data(model: onnx.ModelProto) -> None:
    """Each dense tensor holds exactly the data its dims and type call for (numpy would fail on it later,
    deep in the packager, or read a wrong value); sparse tensors are refused, clearly."""
    for where, _ in _sparse_tensors(model):
        raise ModelLoadError(f"{where}: sparse tensors are not supported (store the tensor dense)")
    for t in _dense_tensors(model):
        if any(d < 0 for d in t.dims):
            raise ModelLoadError(f"tensor '{t.name}': negative dimension in {list(t.dims)}")
        if weights.is_ref(t):   # stored only when its length was the bytes its dims and type need
            continue
        n = 1
        for d in t.dims:
            n *= d
        if t.HasField("raw_data"):
            if t.data_type in _PACKED_BITS:
                want = (n * _PACKED_BITS[t.data_type] + 7) // 8
            else:
                try:
                    want = n * onnx.helper.tensor_dtype_to_np_dtype(t.data_type).itemsize
                except (KeyError, ValueError, TypeError):
                    continue   # a type edgepack does not read: refused later, by name
            if len(t.raw_data) != want:
                raise ModelLoadError(f"tensor '{t.name}': raw_data holds {len(t.raw_data)} bytes; its dims "
                                     f"{list(t.dims)} and type {onnx.TensorProto.DataType.Name(t.data_type)} "
                                     f"need {want}")
        elif t.data_type in _TYPED_FIELD:
            fld, per = _TYPED_FIELD[t.data_type]
            have = len(getattr(t, fld))
            if have != n * per:
                raise ModelLoadError(f"tensor '{t.name}': {fld} holds {have} values; its dims {list(t.dims)} "
                                     f"need {n * per}")


def _read_model_file(p: Path) -> bytes:
    """The model's bytes: a regular file only, opened without blocking (a FIFO would wait for a writer)."""
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        raise ModelLoadError(f"{p}: cannot open ({e.strerror})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ModelLoadError(f"{p}: not a regular file")
        if st.st_size > MAX_MODEL_BYTES:
            raise ModelLoadError(f"{p}: {st.st_size} bytes exceeds protobuf's 2 GiB limit (store weights as "
                                 f"external data)")
        chunks, left = [], st.st_size
        while left > 0:   # never more than the size fstat gave: a growing file cannot make us read on
            b = os.read(fd, min(left, 1 << 24))
            if not b:
                break
            chunks.append(b)
            left -= len(b)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _implemented(n: onnx.NodeProto) -> bool:
    """A custom-domain op edgepack lowers itself (packager/lowering/registry.py lowers("domain.Op")): its own code, not the
    model's, so it needs no --allow-domain."""
    from .lowering.registry import lowered_custom_op   # (lazily: it imports every op module)
    return lowered_custom_op(n.domain, n.op_type)


def check_graph(model: onnx.ModelProto, allow_domains: frozenset[str] = frozenset()) -> None:
    """Acyclic, every input defined before use, custom domains only where allowed."""
    g = model.graph
    defined = {i.name for i in g.input} | {i.name for i in g.initializer} | {""}
    custom: dict[str, list[onnx.NodeProto]] = {}   # every refused custom-domain node, grouped by op, in one error
    for n in g.node:
        if n.domain not in STANDARD_DOMAINS and n.domain not in allow_domains and not contrib.supported(n) and \
                not _implemented(n) and not preview_function(n, model):
            custom.setdefault(f"{n.domain}.{n.op_type}", []).append(n)
        for i in n.input:
            if i not in defined:
                later = any(i in m.output for m in g.node)
                raise ModelLoadError(f"node '{n.name or n.op_type}' ({n.op_type}) reads '{i}', which "
                                     + ("is produced later: the graph has a cycle or is not in topological order"
                                        if later else "no input, initializer or earlier node defines (dangling input)"))
        defined.update(n.output)
    if custom:
        def version(dom: str):
            return next((i.version for i in model.opset_import if i.domain == dom), "?")

        def why(n: onnx.NodeProto) -> str:
            return contrib.refusal(n.op_type) if n.domain == contrib.DOMAIN else "edgepack has no kernel for it"
        domains = sorted({ns[0].domain for ns in custom.values()})
        allow = " ".join(f"--allow-domain {d}" for d in domains)
        tail = f"{allow} accepts the model only where such nodes are unused (they are then dropped)"
        groups = list(custom.values())
        if len(groups) == 1 and len(groups[0]) == 1:
            n = groups[0][0]
            raise ModelLoadError(f"node '{n.name or n.output[0]}' uses op {n.domain}.{n.op_type} (opset {n.domain} "
                                 f"v{version(n.domain)}) from custom domain '{n.domain}', which is refused: {why(n)} "
                                 f"(and never loads code from a model). {tail}")
        lines = []
        for op, nodes in custom.items():
            dom = nodes[0].domain
            names = ", ".join(f"'{x.name or x.output[0]}'" for x in nodes[:8]) + (
                f" and {len(nodes) - 8} more" if len(nodes) > 8 else "")
            lines.append(f"op {op} (opset {dom} v{version(dom)}) x{len(nodes)}: {why(nodes[0])}; "
                         f"node{'s' if len(nodes) > 1 else ''} {names}")
        raise ModelLoadError(f"{sum(len(v) for v in groups)} nodes use ops from custom domain(s) "
                             f"{', '.join(f'{d!r} (opset v{version(d)})' for d in domains)}, which are refused "
                             f"(edgepack never loads code from a model). {tail}:\n" + "\n".join(f"  {ln}" for ln in lines))
    for o in g.output:
        if o.name not in defined:
            raise ModelLoadError(f"graph output '{o.name}' is not produced by any node, input or initializer")


def inline_functions(model: onnx.ModelProto) -> onnx.ModelProto:
    """Model-local functions (graphs of ops, not code: edgepack's own bundles ship fused groups as such)
    inlined by onnx.inliner, after checking the expansion stays bounded and has no cycle."""
    funcs = {(f.domain, f.name): f for f in model.functions}
    sizes: dict[tuple[str, str], int] = {}

    def nodes(ns):   # nodes, and those of subgraphs (If/Loop/Scan bodies)
        for n in ns:
            yield n
            for a in n.attribute:
                for g in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                    yield from nodes(g.node)

    def count(ns, path: tuple) -> int:
        return sum(size((n.domain, n.op_type), path) if (n.domain, n.op_type) in funcs else 1 for n in nodes(ns))

    def size(key: tuple[str, str], path: tuple) -> int:
        if key in path:
            raise ModelLoadError(f"model-local function {key[0]}.{key[1]} calls itself (recursion is not allowed)")
        if key not in sizes:
            sizes[key] = count(funcs[key].node, path + (key,))
        return sizes[key]
    total = count(model.graph.node, ())
    if total > MAX_INLINED_NODES:
        raise ModelLoadError(f"inlining the model-local functions would make {total} nodes (limit {MAX_INLINED_NODES})")
    import onnx.inliner
    try:
        return onnx.inliner.inline_local_functions(model)
    except Exception as e:
        raise ModelLoadError(f"model-local functions could not be inlined: {str(e).splitlines()[0][:200]}") from None


def load_model(model: str | os.PathLike | onnx.ModelProto, allow_domains: frozenset[str] = frozenset()) -> onnx.ModelProto:
    """Read, validate and return a model with all external data loaded (see the module doc for the checks)."""
    if isinstance(model, onnx.ModelProto):
        m = model
        if any(t.data_location == onnx.TensorProto.EXTERNAL for t in _all_tensors(m)):
            raise ModelLoadError("this ModelProto references external data: pass the model's path instead, so its "
                                 "files can be found and checked")
    else:
        p = Path(model)
        if not p.exists():
            raise ModelLoadError(f"{p}: no such file")
        data = _read_model_file(p)
        try:
            m = onnx.load_model_from_string(data)
        except Exception as e:
            raise ModelLoadError(f"{p}: not a readable ONNX model ({type(e).__name__}: {str(e)[:200]})") from None
        _load_external(m, p.resolve().parent)
    check_tensor_data(m)   # before onnx (checker, inliner) reads any tensor
    if not isinstance(model, onnx.ModelProto):   # (never the caller's own ModelProto)
        weights.stow_model(m)   # large inline initializers too: the graph protobuf is copied often, its weights not
    if len(m.functions):
        m = inline_functions(m)
    m = contrib.adopt_ort_ops(m)   # onnxruntime's default-domain contrib ops (SimplifiedLayerNormalization)
    check_graph(m, allow_domains)
    try:
        weights.check_model(m)
    except Exception as e:
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ModelLoadError(f"invalid ONNX model: {msg}") from None
    return m
