"""Calibration data: load it, check it against the model's inputs, split it, hand out feeds.

DATA is one of
- a `.npz` keyed by input name (samples stacked on the first axis), optionally with a `labels` array;
- a `.npy` (single-input models only);
- a folder of `.npz`/`.npy` files (concatenated in sorted name order);
- a folder of images (png/jpg/bmp...), preprocessed as ImageOptions says; images in class subfolders
  get the subfolder's index (sorted names) as their label.

A sample is one feed of the model: for an input of shape [B, ...] the array is [N*B, ...] (N samples of
B rows) or [N, B, ...]."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import PackagerError

IMAGE_EXTS = {".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp"}
LABELS_KEY = "labels"


@dataclass
class InputSpec:
    name: str
    shape: tuple[int, ...]
    dtype: np.dtype


@dataclass
class ImageOptions:
    """How images become tensors: resize to size (default: the input's spatial dims), scale to [0, 1]
    (times `scale`), subtract mean, divide by std (per channel), in NCHW or NHWC layout."""
    size: tuple[int, int] | None = None
    mean: tuple[float, ...] = (0.0,)
    std: tuple[float, ...] = (1.0,)
    layout: str = "nchw"
    scale: float = 1.0 / 255.0


@dataclass
class CalibrationSet:
    inputs: dict[str, np.ndarray]        # name -> [N, *input shape]: one model feed per sample
    labels: np.ndarray | None            # [N, B] class ids (B = rows per sample) or None
    source: str
    notes: list[str] = field(default_factory=list)

    @property
    def count(self) -> int:
        return next(iter(self.inputs.values())).shape[0]

    def feed(self, i: int) -> dict[str, np.ndarray]:
        return {k: v[i] for k, v in self.inputs.items()}

    def subset(self, idx: np.ndarray) -> "CalibrationSet":
        return CalibrationSet({k: v[idx] for k, v in self.inputs.items()},
                              None if self.labels is None else self.labels[idx], self.source, self.notes)

    def split(self, calibrate_fraction: float = 0.8, seed: int = 0) -> tuple["CalibrationSet", "CalibrationSet", str]:
        """Seeded shuffle, then the first `calibrate_fraction` calibrates and the rest evaluates."""
        n = self.count
        if n < 2:
            return self, self, "1 sample: calibrated and evaluated on the same sample (no held-out split)"
        perm = np.random.default_rng(seed).permutation(n)
        k = min(max(1, int(round(n * calibrate_fraction))), n - 1)
        return self.subset(np.sort(perm[:k])), self.subset(np.sort(perm[k:])), \
            f"{n} samples, shuffled (seed {seed}): {k} calibrate, {n - k} held out for evaluation"


def _read_arrays(path: Path) -> dict[str, np.ndarray] | np.ndarray:
    try:
        if path.suffix == ".npz":
            with np.load(path, allow_pickle=False) as z:
                return {k: z[k] for k in z.files}
        return np.load(path, allow_pickle=False)
    except Exception as e:  # noqa: BLE001 - numpy raises many kinds for a bad file
        raise PackagerError(f"calibration data {path}: not a readable .npz/.npy file ({e})") from None


def _merge(parts: list[dict[str, np.ndarray]], where: Path) -> dict[str, np.ndarray]:
    keys = set(parts[0])
    for p in parts[1:]:
        if set(p) != keys:
            raise PackagerError(f"calibration data {where}: files disagree on their keys "
                                f"({sorted(keys)} vs {sorted(p)})")
    try:
        return {k: np.concatenate([p[k] for p in parts]) for k in keys}
    except ValueError as e:
        raise PackagerError(f"calibration data {where}: files cannot be stacked ({e})") from None


def _as_samples(name: str, a: np.ndarray, spec: InputSpec) -> np.ndarray:
    """[N*B, ...] or [N, B, ...] -> [N, B, ...] with the input's dtype; clear errors otherwise."""
    want = tuple(spec.shape)
    expected = f"[N, {', '.join(map(str, want[1:]))}]" if want else "[N]"
    if a.dtype.kind not in "biuf":
        raise PackagerError(f"calibration data for input '{name}' has dtype {a.dtype}; the model input is {spec.dtype}")
    if spec.dtype.kind == "f" and a.dtype.kind != "f":
        raise PackagerError(f"calibration data for input '{name}' has dtype {a.dtype}; the model input is "
                            f"{spec.dtype} (give floating-point data)")
    if spec.dtype.kind in "iu" and a.dtype.kind not in "iu":
        raise PackagerError(f"calibration data for input '{name}' has dtype {a.dtype}; the model input is "
                            f"{spec.dtype} (give integer data)")
    if spec.dtype.kind == "b" and a.dtype.kind != "b":
        raise PackagerError(f"calibration data for input '{name}' has dtype {a.dtype}; the model input is bool")
    if not want:
        raise PackagerError(f"input '{name}' is a scalar; calibration data cannot stack samples of it")
    if a.ndim == len(want) + 1 and tuple(a.shape[1:]) == want:
        out = a
    elif a.ndim == len(want) and tuple(a.shape[1:]) == want[1:] and want[0] > 0 and a.shape[0] % want[0] == 0:
        out = a.reshape((a.shape[0] // want[0], *want))
    else:
        raise PackagerError(f"calibration data for input '{name}' has shape {list(a.shape)}; expected {expected} "
                            f"(samples stacked on the first axis; the model input is {list(want)})")
    if out.shape[0] == 0:
        raise PackagerError(f"calibration data for input '{name}' holds no samples")
    if spec.dtype.kind in "iu":
        info = np.iinfo(spec.dtype)
        if out.size and (out.min() < info.min or out.max() > info.max):
            raise PackagerError(f"calibration data for input '{name}' has values outside {spec.dtype}")
    if spec.dtype.kind == "f" and not np.all(np.isfinite(out)):
        raise PackagerError(f"calibration data for input '{name}' contains NaN or infinity")
    return np.ascontiguousarray(out.astype(spec.dtype, copy=False))


def _labels(raw: np.ndarray, n: int, rows: int, where: str) -> np.ndarray:
    lab = np.asarray(raw)
    if lab.dtype.kind not in "iu":
        raise PackagerError(f"labels ({where}) must be integer class ids, got dtype {lab.dtype}")
    if lab.size != n * rows:
        raise PackagerError(f"labels ({where}) hold {lab.size} values; the data has {n} samples of {rows} row(s) "
                            f"= {n * rows}")
    return lab.reshape(n, rows).astype(np.int64)


def load_images(folder: Path, spec: InputSpec, opts: ImageOptions) -> tuple[np.ndarray, np.ndarray | None]:
    """A folder of images (or of class subfolders of images) -> ([N*B rows stacked], labels or None)."""
    try:
        from PIL import Image
    except ImportError:
        raise PackagerError("calibration images need Pillow (pip install pillow; scripts/setup.sh installs it)") from None
    nchw = opts.layout.lower() == "nchw"
    if opts.layout.lower() not in ("nchw", "nhwc"):
        raise PackagerError(f"image layout '{opts.layout}': use nchw or nhwc")
    if len(spec.shape) != 4:
        raise PackagerError(f"input '{spec.name}' has shape {list(spec.shape)}; image calibration needs a 4-D "
                            f"[N, C, H, W] or [N, H, W, C] input")
    c = spec.shape[1] if nchw else spec.shape[3]
    h, w = opts.size or ((spec.shape[2], spec.shape[3]) if nchw else (spec.shape[1], spec.shape[2]))
    if c not in (1, 3):
        raise PackagerError(f"input '{spec.name}' has {c} channels; images give 1 (grayscale) or 3 (RGB)")
    classes = sorted(d.name for d in folder.iterdir() if d.is_dir())
    files: list[tuple[Path, int]] = []
    if classes:
        for k, d in enumerate(classes):
            files += [(p, k) for p in sorted((folder / d).iterdir()) if p.suffix.lower() in IMAGE_EXTS]
    else:
        files = [(p, -1) for p in sorted(folder.iterdir()) if p.suffix.lower() in IMAGE_EXTS]
    if not files:
        raise PackagerError(f"calibration folder {folder}: no images or .npz/.npy files")
    mean = np.asarray(opts.mean, np.float32).reshape(-1)
    std = np.asarray(opts.std, np.float32).reshape(-1)
    if mean.size not in (1, c) or std.size not in (1, c) or np.any(std == 0):
        raise PackagerError(f"image mean/std need 1 or {c} values (std nonzero), got {list(mean)} / {list(std)}")
    rows = []
    for p, _ in files:
        try:
            with Image.open(p) as im:
                im = im.convert("L" if c == 1 else "RGB").resize((w, h), Image.BILINEAR)
                x = np.asarray(im, dtype=np.float32).reshape(h, w, c)
        except Exception as e:  # noqa: BLE001 - Pillow raises many kinds for a bad file
            raise PackagerError(f"calibration image {p}: cannot be read ({e})") from None
        x = (x * opts.scale - mean) / std
        rows.append(x.transpose(2, 0, 1) if nchw else x)
    labels = np.array([k for _, k in files]) if classes else None
    return np.stack(rows).astype(np.float32), labels


def load_calibration(path: str | os.PathLike | dict, specs: list[InputSpec], labels: str | os.PathLike | None = None,
                     images: ImageOptions | None = None) -> CalibrationSet:
    """Read DATA (a path, or a dict of arrays from the Python API) and check it against the model's inputs."""
    names = [s.name for s in specs]
    by_name = {s.name: s for s in specs}
    img_labels = None
    if isinstance(path, dict):
        raw: dict[str, np.ndarray] | np.ndarray = {k: np.asarray(v) for k, v in path.items()}
        source = "arrays given to package()"
    else:
        p = Path(path)
        source = str(p)
        if not p.exists():
            raise PackagerError(f"calibration data {p}: no such file or folder")
        if p.is_dir():
            arrays = sorted(q for q in p.iterdir() if q.suffix in (".npz", ".npy"))
            if arrays:
                parts = [_read_arrays(q) for q in arrays]
                if all(isinstance(x, np.ndarray) for x in parts):
                    raw = np.concatenate(parts) if len(parts) > 1 else parts[0]
                elif all(isinstance(x, dict) for x in parts):
                    raw = _merge(parts, p)
                else:
                    raise PackagerError(f"calibration folder {p}: mixes .npz and .npy files")
            else:
                if len(specs) != 1:
                    raise PackagerError(f"calibration images are for single-input models; this one takes "
                                        f"{', '.join(names)}")
                raw, img_labels = load_images(p, specs[0], images or ImageOptions())
        elif p.suffix in (".npz", ".npy"):
            raw = _read_arrays(p)
        else:
            raise PackagerError(f"calibration data {p}: expected a .npz, a .npy or a folder")
    if isinstance(raw, np.ndarray):
        if len(specs) != 1:
            raise PackagerError(f"a .npy holds one array, but the model has {len(specs)} inputs "
                                f"({', '.join(names)}): give a .npz keyed by input name")
        raw = {names[0]: raw}
    label_raw = raw.pop(LABELS_KEY, None)
    unknown = [k for k in raw if k not in by_name]
    if unknown:
        raise PackagerError(f"calibration data has key(s) {', '.join(map(repr, unknown))}, which are not inputs of "
                            f"the model (inputs: {', '.join(map(repr, names))}; '{LABELS_KEY}' holds labels)")
    missing = [n for n in names if n not in raw]
    if missing:
        raise PackagerError(f"calibration data has no array for input(s) {', '.join(map(repr, missing))}")
    inputs = {n: _as_samples(n, raw[n], by_name[n]) for n in names}
    counts = {n: a.shape[0] for n, a in inputs.items()}
    if len(set(counts.values())) > 1:
        raise PackagerError(f"calibration inputs hold different sample counts: {counts}")
    n = next(iter(counts.values()))
    rows = specs[0].shape[0] if specs[0].shape else 1
    lab = None
    if labels is not None:
        given = labels if isinstance(labels, np.ndarray) else _read_arrays(Path(labels))
        if isinstance(given, dict):
            if LABELS_KEY not in given:
                raise PackagerError(f"labels file {labels}: a .npz needs a '{LABELS_KEY}' array")
            given = given[LABELS_KEY]
        lab = _labels(given, n, rows, "given labels" if isinstance(labels, np.ndarray) else str(labels))
    elif label_raw is not None:
        lab = _labels(label_raw, n, rows, f"'{LABELS_KEY}' in {source}")
    elif img_labels is not None:
        lab = _labels(img_labels, n, rows, "class subfolders")
    return CalibrationSet(inputs, lab, source)
