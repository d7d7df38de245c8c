"""Loading ONNX models from strangers safely.

The model file and every external-data file it names are read by us, never by onnx's loader, under the
defences of the ONNX project's external-data security model: a location must be a relative path inside
the model's folder (no '..', not absolute), no path component may be a symbolic link (each is opened with
O_NOFOLLOW relative to its parent's descriptor, so there is no check-then-open race), the data file must
be a regular file with a single hard link, only the keys location/offset/length/checksum are accepted,
offset and length must be non-negative decimal integers, and offset+length must lie inside the file, so
a crafted length can never allocate more than the file holds. Graphs must be acyclic with every input
defined; ops from custom domains are refused unless the user allows the domain (no code is ever loaded
from a model)."""
from __future__ import annotations

import os
import stat
from pathlib import Path, PurePosixPath, PureWindowsPath

import onnx

from .errors import ModelLoadError

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
            try:
                nfd = os.open(part, (os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC) if last else flags_dir, dir_fd=fd)
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


def _load_external(model: onnx.ModelProto, base: Path) -> None:
    tensors = list(onnx.external_data_helper._get_all_tensors(model))
    for t in tensors:
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
            data = os.pread(fd, length, offset)
        finally:
            os.close(fd)
        if len(data) != length:
            raise ModelLoadError(f"tensor '{t.name}': short read from '{location}'")
        t.raw_data = data
        del t.external_data[:]
        t.data_location = onnx.TensorProto.DEFAULT


def check_graph(model: onnx.ModelProto, allow_domains: frozenset[str] = frozenset()) -> None:
    """Acyclic, every input defined before use, custom domains only where allowed."""
    g = model.graph
    defined = {i.name for i in g.input} | {i.name for i in g.initializer} | {""}
    for n in g.node:
        if n.domain not in STANDARD_DOMAINS and n.domain not in allow_domains:
            version = next((i.version for i in model.opset_import if i.domain == n.domain), "?")
            raise ModelLoadError(f"node '{n.name or n.output[0]}' uses op {n.domain}.{n.op_type} (opset {n.domain} "
                                 f"v{version}) from custom domain "
                                 f"'{n.domain}', which is refused (edgepack never loads code from a model; pass "
                                 f"--allow-domain {n.domain} to accept the model)")
        for i in n.input:
            if i not in defined:
                later = any(i in m.output for m in g.node)
                raise ModelLoadError(f"node '{n.name or n.op_type}' ({n.op_type}) reads '{i}', which "
                                     + ("is produced later: the graph has a cycle or is not in topological order"
                                        if later else "no input, initializer or earlier node defines (dangling input)"))
        defined.update(n.output)
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
        if any(t.data_location == onnx.TensorProto.EXTERNAL for t in onnx.external_data_helper._get_all_tensors(m)):
            raise ModelLoadError("this ModelProto references external data: pass the model's path instead, so its "
                                 "files can be found and checked")
    else:
        p = Path(model)
        if not p.is_file():
            raise ModelLoadError(f"{p}: no such file")
        size = p.stat().st_size
        if size > MAX_MODEL_BYTES:
            raise ModelLoadError(f"{p}: {size} bytes exceeds protobuf's 2 GiB limit (store weights as external data)")
        try:
            m = onnx.load_model_from_string(p.read_bytes())
        except Exception as e:
            raise ModelLoadError(f"{p}: not a readable ONNX model ({type(e).__name__}: {str(e)[:200]})") from None
        _load_external(m, p.resolve().parent)
    if len(m.functions):
        m = inline_functions(m)
    check_graph(m, allow_domains)
    try:
        onnx.checker.check_model(m)
    except Exception as e:
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ModelLoadError(f"invalid ONNX model: {msg}") from None
    return m
