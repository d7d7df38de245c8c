"""Bundles on disk: writing one (manifest, model, plan, runtime files) and loading one to run it."""
from __future__ import annotations

import ctypes
import hashlib
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .errors import BundleError, InputError, RuntimeFailure
from .plan.opcodes import DTYPES

if TYPE_CHECKING:
    from .runtime.wasm import WasmPlan

FORMAT = "edgepack-bundle"
FORMAT_VERSION = 1
WASM_VARIANTS = {"simd": "edgepack.wasm", "scalar": "edgepack-scalar.wasm", "relaxed": "edgepack-relaxed.wasm",
                 "threads": "edgepack-threads.wasm", "threads-relaxed": "edgepack-threads-relaxed.wasm"}


HASH_CHUNK = 16 << 20
VERIFIED_MAX = 32 << 20   # a larger model.plan is not kept in memory after its check: hashed again as it loads


def sha256(path: Path) -> str:
    """A file's SHA-256, read in chunks (a 2 GB plan never sits in memory to be hashed)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(HASH_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def _load_manifest(mpath: Path, data: bytes | None = None) -> object:
    """manifest.json (or its bytes as read already) parsed; a clean BundleError for bytes that are not JSON or nest
    too deeply to parse."""
    try:
        return json.loads(mpath.read_text() if data is None else data.decode())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise BundleError(f"{mpath}: not valid JSON ({e})") from None
    except RecursionError:   # json recurses per nesting level: a hostile manifest nests 100,000 deep
        raise BundleError(f"{mpath}: JSON nested too deeply to be an edgepack manifest") from None


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def check_io_specs(manifest: dict, mpath: Path) -> None:
    """The manifest's inputs, outputs and dims are what a runner reads without another check: lists of
    {name, dtype (a plan dtype), shape (dims >= 0, symbol names, or null: a run-time output dim no symbol names),
    tensor (an id)} and {symbol: {min, max, example}};
    anything else is a BundleError here, not a TypeError while feeding. (Whether they agree with the plan is checked
    when the plan is opened.)"""
    names = {d.name for d in DTYPES.values()}
    for kind in ("inputs", "outputs"):
        specs = manifest.get(kind)
        if not isinstance(specs, list):
            raise BundleError(f"{mpath}: '{kind}' is not a list")
        for s in specs:
            if not (isinstance(s, dict) and isinstance(s.get("name"), str) and isinstance(s.get("dtype"), str) and
                    s["dtype"] in names and _is_int(s.get("tensor")) and isinstance(s.get("shape"), list) and
                    all((_is_int(d) and d >= 0) or (isinstance(d, str) and d) or d is None for d in s["shape"])):
                raise BundleError(f"{mpath}: {kind[:-1]} {json.dumps(s)[:200]} is not a tensor spec (name, a plan "
                                  f"dtype, shape of dims >= 0, symbols or null, tensor id)")
    dims = manifest.get("dims", {})
    if not isinstance(dims, dict) or not all(
            isinstance(b, dict) and all(b.get(k) is None or _is_int(b[k]) for k in ("min", "max", "example"))
            for b in dims.values()):
        raise BundleError(f"{mpath}: 'dims' is not a table of symbol -> {{min, max, example}}")


def _owned_files(out: Path) -> set[str] | None:
    """The names an existing bundle at `out` owns (its manifest's files + manifest.json + signature);
    None when `out` is not an edgepack bundle."""
    from .signing import SIG_FILE
    mpath = out / "manifest.json"
    if not mpath.is_file() or mpath.is_symlink():
        return None
    try:
        m = _load_manifest(mpath)
    except (BundleError, OSError):
        return None
    if not isinstance(m, dict) or m.get("format") != FORMAT:
        return None
    files = m.get("files")
    return {str(k) for k in files} | {"manifest.json", SIG_FILE} if isinstance(files, dict) else {"manifest.json", SIG_FILE}


def check_output(out: Path | str) -> Path:
    """Refuse, before any work, an output path packaging must not replace: a file, a folder holding
    something other than an edgepack bundle, a path under a file. Returns the absolute path."""
    out = Path(os.path.abspath(out))
    if out.parent == out:
        raise BundleError(f"{out}: cannot write a bundle to a filesystem root")
    for parent in out.parents:   # `-o somefile/out`
        if parent.exists() and not parent.is_dir():
            raise BundleError(f"output {out}: {parent} is a file, not a folder")
        if parent.is_dir():
            break
    if out.is_symlink() and out.is_dir():
        out = Path(os.path.realpath(out))   # replace the folder the link points to, not the link
    if out.exists() or out.is_symlink():
        if not out.is_dir():
            raise BundleError(f"output {out} exists and is not a folder: refusing to overwrite it "
                              f"(choose a folder with -o)")
        if _owned_files(out) is None and any(out.iterdir()):
            raise BundleError(f"output {out} exists and is not an edgepack bundle: refusing to overwrite it "
                              f"(choose an empty or new folder with -o)")
    return out


def _rename_exchange(a: Path, b: Path) -> bool:
    """Atomically swap two paths (Linux renameat2 RENAME_EXCHANGE); False where unsupported."""
    if sys.platform != "linux":
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    rc = fn(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange)
    return rc == 0


class StagedBundle:
    """A complete bundle built in a private temp folder beside its destination. Verification, reports
    and signing run here; commit() swaps it into place. Leaving the `with` block without commit()
    (an error, a failed verification) removes the temp folder and leaves the destination untouched."""

    def __init__(self, out: Path) -> None:
        self.out = check_output(out)
        missing = [p for p in (self.out.parent, *self.out.parent.parents) if not p.exists()]
        self._created_root = missing[-1] if missing else None   # parents we create, removed again on failure
        try:
            self.out.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise BundleError(f"output {self.out}: cannot create its folder ({e.strerror})") from None
        # Unique, ours alone (mode 0700): never a fixed name a user's own folder could have.
        self.path = Path(tempfile.mkdtemp(prefix=f".{self.out.name}.edgepack-", dir=self.out.parent))
        self.committed = False

    def __enter__(self) -> "StagedBundle":
        return self

    def __exit__(self, *exc) -> None:
        if not self.committed:
            self.discard()

    def discard(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)
        if self._created_root is not None:   # drop the empty parent folders we made
            d = self.out.parent
            while True:
                try:
                    d.rmdir()
                except OSError:
                    break
                if d == self._created_root:
                    break
                d = d.parent

    def _keep_user_files(self, owned: set[str]) -> None:
        """Hard-link (or copy) every entry of the old bundle folder its manifest does not list into the
        new one, so the swap keeps them (an `npm pack` tarball, the user's notes)."""
        for root, dirs, names in os.walk(self.out):
            rel_root = Path(root).relative_to(self.out)
            for name in dirs + names:
                rel = rel_root / name
                src = Path(root) / name
                if src.is_dir() and not src.is_symlink():
                    if not (self.path / rel).exists():
                        (self.path / rel).mkdir(parents=True)
                    continue
                if str(rel) in owned:
                    continue
                dst = self.path / rel
                if dst.exists() or dst.is_symlink():
                    raise BundleError(f"{self.out}: your file {rel} has the name of a file the new bundle writes; "
                                      f"move it and package again (nothing was changed)")
                dst.parent.mkdir(parents=True, exist_ok=True)
                try:
                    os.link(src, dst, follow_symlinks=False)
                except OSError:
                    shutil.copy2(src, dst, follow_symlinks=False)

    def commit(self) -> Path:
        """Swap the staged bundle into place. An earlier bundle there loses only the files its manifest lists."""
        out = self.out
        try:
            mode = out.stat().st_mode & 0o7777 if out.is_dir() else 0o777 & ~_umask()
            if out.exists():
                owned = _owned_files(out)
                if owned is None and any(out.iterdir()):   # appeared while we worked
                    raise BundleError(f"output {out} exists and is not an edgepack bundle: refusing to overwrite it")
                self._keep_user_files(owned or set())
                if _rename_exchange(self.path, out):   # atomic: readers see the old or the new bundle
                    shutil.rmtree(self.path, ignore_errors=True)
                else:
                    old = Path(tempfile.mkdtemp(prefix=f".{out.name}.edgepack-old-", dir=out.parent))
                    os.replace(out, old)   # an empty folder may be replaced by rename
                    try:
                        os.replace(self.path, out)
                    except OSError:
                        os.replace(old, out)
                        raise
                    shutil.rmtree(old, ignore_errors=True)
            else:
                os.replace(self.path, out)
            os.chmod(out, mode)   # mkdtemp made it 0700: keep the old folder's mode, else the usual one
        except OSError as e:
            raise BundleError(f"output {out}: could not move the new bundle into place ({e.strerror or e})") from None
        finally:
            if not self.committed:
                shutil.rmtree(self.path, ignore_errors=True)
        self.committed = True
        return out


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def stage_bundle(out: Path, manifest: dict, files: dict[str, "bytes | Path | Callable[[Path], object]"],
                 executables: tuple[str, ...] = ()) -> StagedBundle:
    """Write files (names may hold sub-directories) and a manifest holding their SHA-256 into a private
    temp folder beside `out`; the caller verifies there, then commit()s (use it as a context manager).
    A file given as a callable writes itself to the path it is called with (large files, streamed)."""
    staged = StagedBundle(out)
    try:
        entries = {}
        for name, src in files.items():
            dst = staged.path / name
            dst.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(src, Path):
                shutil.copyfile(src, dst)
            elif callable(src):
                src(dst)
            else:
                dst.write_bytes(src)
            dst.chmod(0o755 if name in executables else 0o644)
            entries[name] = {"bytes": dst.stat().st_size, "sha256": sha256(dst)}
        manifest = dict(manifest, files=entries)
        (staged.path / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    except BaseException:
        staged.discard()
        raise
    return staged


def write_bundle(out: Path, manifest: dict, files: dict[str, bytes | Path], executables: tuple[str, ...] = ()) -> Path:
    """stage_bundle + commit: the bundle appears at `out` whole or not at all; an earlier bundle there
    loses only the files its manifest lists."""
    with stage_bundle(out, manifest, files, executables) as staged:
        return staged.commit()


class Bundle:
    """A packaged model, run with the bundle's own wasm under wasmtime."""

    def __init__(self, path: Path | str, variant: str = "simd", verify: bool = True, public_key=None) -> None:
        self.path = Path(path)
        self._verified: dict[str, bytes] = {}   # plan and wasm bytes as hashed: what runs (no re-read after checks)
        mpath = self.path / "manifest.json"
        if not mpath.is_file():
            raise BundleError(f"{self.path}: no manifest.json (not an edgepack bundle)")
        signed = None
        if public_key is not None:   # before parsing anything: the signature covers the manifest's bytes
            from .signing import verify_signature
            signed = verify_signature(self.path, public_key)
        self.manifest = _load_manifest(mpath, signed)
        if not isinstance(self.manifest, dict) or self.manifest.get("format") != FORMAT:
            raise BundleError(f"{mpath}: not an edgepack bundle manifest")
        if self.manifest.get("target") != "web":
            raise BundleError(f"{self.path}: bundle was packaged for target '{self.manifest.get('target')}'; this runner "
                              f"executes web bundles (run pi5 bundles with edgepack-run or edgepack_runtime.py)")
        if self.manifest.get("format_version") != FORMAT_VERSION:
            raise BundleError(f"{mpath}: bundle format {self.manifest.get('format_version')} not supported")
        check_io_specs(self.manifest, mpath)
        if verify or public_key is not None:
            self.verify(strict=public_key is not None)
        if variant not in WASM_VARIANTS:
            raise BundleError(f"unknown wasm variant '{variant}' (choose from {', '.join(WASM_VARIANTS)})")
        if variant.startswith("threads"):   # docs/threads.md: wasmtime-py cannot import a shared memory yet
            raise BundleError(f"the '{variant}' build runs in browsers and Node (web/src/threads.js); "
                              "this runner (wasmtime) runs the simd, scalar and relaxed builds")
        self.variant = variant
        self._session = None

    def verify(self, strict: bool = False) -> None:
        """Every file listed in the manifest exists and matches its SHA-256; strict: nothing unlisted either."""
        files = self.manifest.get("files")
        if not isinstance(files, dict) or "model.plan" not in files:
            raise BundleError(f"{self.path}: manifest lists no files (or no model.plan)")
        if strict:
            from .signing import SIG_FILE
            listed = set(files) | {"manifest.json", SIG_FILE}
            extra = sorted(str(p.relative_to(self.path)) for p in self.path.rglob("*")
                           if p.is_file() and str(p.relative_to(self.path)) not in listed)
            if extra:
                raise BundleError(f"{self.path}: files not covered by the signed manifest: {', '.join(extra[:5])}")
        for name, meta in files.items():
            p = self.path / name
            if Path(name).is_absolute() or ".." in Path(name).parts:
                raise BundleError(f"manifest lists a file outside the bundle: {name}")
            if not p.is_file():
                raise BundleError(f"bundle file missing: {name}")
            keep = name in WASM_VARIANTS.values() or (name == "model.plan" and p.stat().st_size <= VERIFIED_MAX)
            data = p.read_bytes() if keep else None
            if (hashlib.sha256(data).hexdigest() if keep else sha256(p)) != meta.get("sha256"):
                raise BundleError(f"bundle file {name} does not match its SHA-256 in manifest.json (tampered or corrupt)")
            if keep:   # run exactly the bytes checked here (a larger plan is checked again as it loads: session())
                self._verified[name] = data

    @property
    def inputs(self) -> list[dict]:
        return self.manifest["inputs"]

    @property
    def outputs(self) -> list[dict]:
        return self.manifest["outputs"]

    def example_inputs(self) -> list[dict]:
        """The input specs with every run-time dim at its example extent (a version-2 bundle's "dims")."""
        dims = self.manifest.get("dims", {})
        return [dict(s, shape=[d if isinstance(d, int) else int(dims.get(d, {}).get("example", 1)) for d in s["shape"]])
                for s in self.inputs]

    def session(self):
        if self._session is None:
            from .runtime.wasm import WasmPlan
            wasm_name = WASM_VARIANTS[self.variant]
            code, plan = self._verified.get(wasm_name), self._verified.get("model.plan")
            if code is None:   # loaded without verification: read now
                if not (self.path / wasm_name).is_file():
                    raise BundleError(f"{self.path}: runtime file {wasm_name} missing")
                code = (self.path / wasm_name).read_bytes()
            if plan is None:   # a large plan (or no verification): copied into the instance in chunks
                from .runtime.wasm import PlanFile
                if not (self.path / "model.plan").is_file():
                    raise BundleError(f"{self.path}: model.plan missing")
                files = self.manifest.get("files")
                digest = files.get("model.plan", {}).get("sha256") if self._verified and isinstance(files, dict) else None
                plan = PlanFile(self.path / "model.plan", digest)
            session = WasmPlan(code, plan)
            self._check_io_against_plan(session.plan_head())
            info = self.manifest.get("plan")
            sources = info.get("node_sources") if isinstance(info, dict) else None
            if isinstance(sources, list):
                session.node_names = [str(x) for x in sources]
            self._session = session
        return self._session

    def _check_io_against_plan(self, head: bytes) -> None:
        """The plan is the truth: the manifest's inputs and outputs must name its graph inputs and outputs with their
        dtypes and dims (a run-time dim where the manifest gives a symbol), or data would be reinterpreted.
        head: the plan's header and tables as they are in the instance that runs it."""
        from .plan import layout
        p = layout.decode(head, head_only=True)
        for kind, specs, ids in (("input", self.inputs, p.inputs), ("output", self.outputs, p.outputs)):
            if len(specs) != len(ids):
                raise BundleError(f"manifest.json lists {len(specs)} {kind}s, the plan has {len(ids)}")
            for spec, t in zip(specs, ids):
                if not isinstance(spec, dict) or spec.get("tensor") != t:
                    raise BundleError(f"manifest.json: {kind} {spec.get('name') if isinstance(spec, dict) else spec!r} "
                                      f"is not the plan's {kind} tensor {t}")
                e = p.tensors[t]
                plan_dims = [d if d >= 0 else None for d in e.dims]
                said = [d if isinstance(d, int) else None for d in spec.get("shape", [])]
                if DTYPES.get(e.dtype, np.dtype("V1")).name != spec.get("dtype") or said != plan_dims:
                    raise BundleError(f"manifest.json says {kind} '{spec.get('name')}' is {spec.get('dtype')}"
                                      f"{spec.get('shape')}, but the plan holds {DTYPES[e.dtype].name if e.dtype in DTYPES else e.dtype}"
                                      f"{[d if d is not None else '?' for d in plan_dims]}")

    def check_feeds(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        names = [i["name"] for i in self.inputs]
        unknown = [k for k in feeds if k not in names]
        if unknown:
            raise InputError(f"unknown input(s) {', '.join(map(repr, unknown))}; this model takes "
                             f"{', '.join(repr(n) for n in names)}")
        missing = [n for n in names if n not in feeds]
        if missing:
            raise InputError(f"missing input(s) {', '.join(map(repr, missing))}")
        out = {}
        seen: dict[str, tuple[int, str]] = {}   # symbol -> (extent, the input that set it)
        dims = self.manifest.get("dims", {})
        for spec in self.inputs:
            a = np.asarray(feeds[spec["name"]])
            want = np.dtype(spec["dtype"])
            if a.dtype != want:
                raise InputError(f"input '{spec['name']}': dtype {a.dtype}, expected {want}")
            shape = spec["shape"]
            if a.ndim != len(shape) or any(isinstance(d, int) and d != x for d, x in zip(shape, a.shape)):
                raise InputError(f"input '{spec['name']}': shape {list(a.shape)}, expected {shape}")
            for k, (d, x) in enumerate(zip(shape, a.shape)):
                if isinstance(d, int):
                    continue
                b = dims.get(d, {})
                if x < b.get("min", 0) or (b.get("max") and x > b["max"]):
                    raise InputError(f"input '{spec['name']}': dimension {k} ('{d}') is {x}, outside this bundle's "
                                     f"bounds [{b.get('min', 0)}..{b.get('max') or ''}]")
                if d in seen and seen[d][0] != x:
                    raise InputError(f"input '{spec['name']}': dimension {k} ('{d}') is {x}, but input "
                                     f"'{seen[d][1]}' gives '{d}' = {seen[d][0]}")
                seen[d] = (x, spec["name"])
            out[spec["name"]] = a
        return out

    def run(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        if not isinstance(feeds, Mapping):   # run([x]) or run(None): say what is expected, not a traceback
            raise InputError(f"run() takes a dict of input name -> array (inputs: "
                             f"{', '.join(repr(i['name']) for i in self.inputs)}), got {type(feeds).__name__}")
        feeds = self.check_feeds(feeds)
        s = self.session()
        set_inputs(s, self.inputs, feeds)
        s.run()
        return {o["name"]: s.read(o["tensor"], np.dtype(o["dtype"]), None if s.dynamic else tuple(o["shape"]))
                for o in self.outputs}


def set_inputs(s: WasmPlan, specs: list[dict], feeds: dict[str, np.ndarray]) -> None:
    """Give a session its inputs: dims and the value inputs' values (version 2; values that give no valid shape are
    an InputError naming those inputs), then the other inputs' bytes."""
    values = {i: feeds[specs[i]["name"]] for i in s.value_inputs()}
    try:
        s.set_shapes([tuple(feeds[spec["name"]].shape) for spec in specs], values)
    except RuntimeFailure as e:
        if not values:
            raise
        said = ", ".join(f"'{specs[i]['name']}' = {np.asarray(v).tolist()}" for i, v in values.items())
        raise InputError(f"input values {said} decide shapes and give none this bundle can run: {e}") from None
    for i, spec in enumerate(specs):
        if i not in values:
            s.write(spec["tensor"], feeds[spec["name"]])


def load_bundle(path: Path | str, variant: str = "simd", public_key=None) -> Bundle:
    """Open a bundle directory for running under wasmtime. Checks every file's SHA-256; with a public key
    (hex string, bytes or key file) also requires a valid Ed25519 signature and no unlisted file."""
    return Bundle(path, variant, public_key=public_key)


def dtype_name(code: int) -> str:
    return DTYPES[code].name
