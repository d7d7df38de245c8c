"""Bundles on disk: writing one (manifest, model, plan, runtime files) and loading one to run it."""
from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np

from .errors import BundleError, InputError
from .plan.opcodes import DTYPES

FORMAT = "edgepack-bundle"
FORMAT_VERSION = 1
WASM_VARIANTS = {"simd": "edgepack.wasm", "scalar": "edgepack-scalar.wasm", "relaxed": "edgepack-relaxed.wasm",
                 "threads": "edgepack-threads.wasm", "threads-relaxed": "edgepack-threads-relaxed.wasm"}


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write_bundle(out: Path, manifest: dict, files: dict[str, bytes | Path], executables: tuple[str, ...] = ()) -> Path:
    """Write files (names may hold sub-directories) and a manifest holding their SHA-256. Writes into a
    temp dir first: a failed packaging never leaves a half bundle behind or destroys an earlier one."""
    out = Path(out)
    tmp = out.with_name(out.name + ".partial")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    entries = {}
    for name, src in files.items():
        dst = tmp / name
        dst.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(src, Path):
            shutil.copyfile(src, dst)
        else:
            dst.write_bytes(src)
        if name in executables:
            dst.chmod(0o755)
        entries[name] = {"bytes": dst.stat().st_size, "sha256": sha256(dst)}
    manifest = dict(manifest, files=entries)
    (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    if out.exists():
        if not (out / "manifest.json").exists() and any(out.iterdir()):
            shutil.rmtree(tmp)
            raise BundleError(f"{out} exists and is not an edgepack bundle: refusing to overwrite it")
        shutil.rmtree(out)
    tmp.rename(out)
    return out


class Bundle:
    """A packaged model, run with the bundle's own wasm under wasmtime."""

    def __init__(self, path: Path | str, variant: str = "simd", verify: bool = True, public_key=None) -> None:
        self.path = Path(path)
        mpath = self.path / "manifest.json"
        if not mpath.is_file():
            raise BundleError(f"{self.path}: no manifest.json (not an edgepack bundle)")
        if public_key is not None:   # before parsing anything: the signature covers the manifest's bytes
            from .signing import verify_signature
            verify_signature(self.path, public_key)
        try:
            self.manifest = json.loads(mpath.read_text())
        except json.JSONDecodeError as e:
            raise BundleError(f"{mpath}: not valid JSON ({e})") from None
        if self.manifest.get("format") != FORMAT:
            raise BundleError(f"{mpath}: not an edgepack bundle manifest")
        if self.manifest.get("target") != "web":
            raise BundleError(f"{self.path}: bundle was packaged for target '{self.manifest.get('target')}'; this runner "
                              f"executes web bundles (run pi5 bundles with edgepack-run or edgepack_runtime.py)")
        if self.manifest.get("format_version") != FORMAT_VERSION:
            raise BundleError(f"{mpath}: bundle format {self.manifest.get('format_version')} not supported")
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
            if sha256(p) != meta.get("sha256"):
                raise BundleError(f"bundle file {name} does not match its SHA-256 in manifest.json (tampered or corrupt)")

    @property
    def inputs(self) -> list[dict]:
        return self.manifest["inputs"]

    @property
    def outputs(self) -> list[dict]:
        return self.manifest["outputs"]

    def session(self):
        if self._session is None:
            from .runtime.wasm import WasmPlan
            wasm = self.path / WASM_VARIANTS[self.variant]
            if not wasm.is_file():
                raise BundleError(f"{self.path}: runtime file {wasm.name} missing")
            self._session = WasmPlan(wasm, (self.path / "model.plan").read_bytes())
        return self._session

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
        feeds = self.check_feeds(feeds)
        s = self.session()
        s.set_shapes([tuple(feeds[spec["name"]].shape) for spec in self.inputs])
        for spec in self.inputs:
            s.write(spec["tensor"], feeds[spec["name"]])
        s.run()
        return {o["name"]: s.read(o["tensor"], np.dtype(o["dtype"]), None if s.dynamic else tuple(o["shape"]))
                for o in self.outputs}


def load_bundle(path: Path | str, variant: str = "simd", public_key=None) -> Bundle:
    """Open a bundle directory for running under wasmtime. Checks every file's SHA-256; with a public key
    (hex string, bytes or key file) also requires a valid Ed25519 signature and no unlisted file."""
    return Bundle(path, variant, public_key=public_key)


def dtype_name(code: int) -> str:
    return DTYPES[code].name
