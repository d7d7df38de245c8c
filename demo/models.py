"""The demo's models and samples, all from PyPI packages (nothing from a model hub), cached under .cache/:

- digits: demo/digits/train.py's CNN trained again on scikit-learn's digits with augmentation (rotation, scale,
  shift, stroke thickness), so that a digit drawn with a mouse, cropped to its ink and scaled to 8x8 the way
  demo.js does it, is classified. Seeded: the same weights every time; a few seconds on one CPU core.
- vad: silero-vad 6.2.3's silero_vad.onnx (the wheel, `pip download --no-deps`).
- detector: nudenet 3.4.2's 320n.onnx (YOLOv8-style) and its class names (the wheel's nudenet.py).
- samples the page offers (and the test uses): espeak-ng speech with silence around it; matplotlib 3.9.2's
  grace_hopper.jpg (a face nudenet detects).

    python3 demo/models.py     # trains / fetches what is missing, prints the digits model's held-out accuracy
"""
from __future__ import annotations

import ast
import importlib.util
import json
import shutil
import subprocess
import sys
import wave
import zipfile
from pathlib import Path
from types import ModuleType

import numpy as np

REPO = Path(__file__).resolve().parent.parent
CACHE = REPO / ".cache"
PUBLISHED = CACHE / "published"   # the wheels, shared with tests/test_published_*.py
DEMO_CACHE = CACHE / "demo"
DIGITS_VERSION = 1   # bump when the training recipe changes: the cached model is retrained
SPEECH = "Edgepack runs this voice activity detector in your browser. Then it waits in silence."
SR = 16000


def load_module(path: Path) -> ModuleType:
    """A script of the repo's (not a package) as a module, under a name of its own."""
    spec = importlib.util.spec_from_file_location(f"edgepack_demo_{path.stem}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class DemoModelError(Exception):
    """A model or sample could not be made (no network for a wheel, espeak-ng missing): the message says which."""


def _augment(x, gen):
    """Random rotation (±12°), scale (0.8-1.1), shift (±1 px of 8) and stroke thickness on [N, 1, 8, 8] in [0, 1],
    done at 32x32 (where a stroke has width) and averaged back to 8x8 like scikit-learn's 4x4 blocks."""
    import torch
    from torch.nn import functional as F
    n = len(x)
    big = F.interpolate(x, size=32, mode="bilinear", align_corners=False)
    ang = (torch.rand(n, generator=gen) - 0.5) * (2 * 0.21)
    scale = 0.8 + 0.3 * torch.rand(n, generator=gen)
    shift = (torch.rand(n, 2, generator=gen) - 0.5) * 0.5
    cos, sin = torch.cos(ang) / scale, torch.sin(ang) / scale
    theta = torch.stack([torch.stack([cos, -sin, shift[:, 0]], 1), torch.stack([sin, cos, shift[:, 1]], 1)], 1)
    big = F.grid_sample(big, F.affine_grid(theta, list(big.shape), align_corners=False), align_corners=False)
    k = torch.randint(0, 3, (n,), generator=gen)   # 0: as is, 1: thicker (max-pool 3x3), 2: thinner (min-pool)
    thick, thin = F.max_pool2d(big, 3, 1, 1), -F.max_pool2d(-big, 3, 1, 1)
    big = torch.where((k == 1)[:, None, None, None], thick, torch.where((k == 2)[:, None, None, None], thin, big))
    return F.avg_pool2d(big, 4).clamp(0, 1)


def train_digits(epochs: int = 60) -> tuple[object, dict]:
    """The drawing-robust digits CNN and its accuracies (held-out split: the same as demo/digits/train.py's)."""
    import torch
    from torch import nn
    t = load_module(REPO / "demo" / "digits" / "train.py")   # the architecture, seed and split of the first model
    SEED, DigitsCNN, data = t.SEED, t.DigitsCNN, t.data
    torch.manual_seed(SEED)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    x_tr, x_te, y_tr, y_te = data()
    model = DigitsCNN()
    opt = torch.optim.Adam(model.parameters(), lr=2e-3, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, epochs)
    xt, yt = torch.from_numpy(x_tr), torch.from_numpy(y_tr)
    gen = torch.Generator().manual_seed(SEED)
    for _ in range(epochs):
        model.train()
        xa = _augment(xt, gen)
        for idx in torch.randperm(len(xt), generator=gen).split(64):
            opt.zero_grad()
            nn.functional.cross_entropy(model(xa[idx]), yt[idx]).backward()
            opt.step()
        sched.step()
    model.eval()
    with torch.no_grad():
        acc = lambda x, y: float((model(torch.from_numpy(x)).argmax(1) == torch.from_numpy(y)).float().mean())  # noqa: E731
        stats = {"train_accuracy": acc(x_tr, y_tr), "test_accuracy": acc(x_te, y_te), "train": len(x_tr),
                 "test": len(x_te), "epochs": epochs, "version": DIGITS_VERSION}
    return model, stats


def digits() -> tuple[Path, dict]:
    """(.cache/demo/digits_draw.onnx, its training stats), trained once."""
    onnx_path, stats_path = DEMO_CACHE / "digits_draw.onnx", DEMO_CACHE / "digits_draw.json"
    if onnx_path.exists() and stats_path.exists():
        stats = json.loads(stats_path.read_text())
        if stats.get("version") == DIGITS_VERSION:
            return onnx_path, stats
    import torch
    model, stats = train_digits()
    DEMO_CACHE.mkdir(parents=True, exist_ok=True)
    tmp = onnx_path.with_suffix(".tmp.onnx")
    torch.onnx.export(model, (torch.zeros(1, 1, 8, 8),), str(tmp), input_names=["image"], output_names=["logits"],
                      opset_version=17, dynamo=False)
    tmp.replace(onnx_path)
    stats_path.write_text(json.dumps(stats))
    return onnx_path, stats


def wheel_member(spec: str, member: str) -> Path:
    """`member` of the wheel of `spec` (name==version), downloaded once into .cache/published/<name>-<version>/."""
    dest = PUBLISHED / spec.replace("==", "-")
    target = dest / member
    if target.exists():
        return target
    dest.mkdir(parents=True, exist_ok=True)
    wheels = list(dest.glob("*.whl"))
    if not wheels:
        try:
            r = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
                                "-q", spec, "-d", str(dest)], capture_output=True, text=True, timeout=300)
        except subprocess.TimeoutExpired:
            raise DemoModelError(f"pip download {spec}: timed out (no network?)") from None
        wheels = list(dest.glob("*.whl"))
        if r.returncode != 0 or not wheels:
            raise DemoModelError(f"pip download {spec} failed (no network?): {r.stderr.strip()[-200:]}")
    with zipfile.ZipFile(wheels[0]) as z:
        if member not in z.namelist():
            raise DemoModelError(f"{wheels[0].name} has no {member}")
        z.extract(member, dest)
    return target


def silero_vad() -> Path:
    return wheel_member("silero-vad==6.2.3", "silero_vad/data/silero_vad.onnx")


def nudenet() -> tuple[Path, list[str]]:
    """320n.onnx and its class names, read from the `__labels` list of the wheel's nudenet.py."""
    model = wheel_member("nudenet==3.4.2", "nudenet/320n.onnx")
    src = wheel_member("nudenet==3.4.2", "nudenet/nudenet.py").read_text()
    for node in ast.parse(src).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__labels" for t in node.targets):
            return model, [str(v) for v in ast.literal_eval(node.value)]
    raise DemoModelError("nudenet.py has no __labels list")


def sample_image() -> Path:
    return wheel_member("matplotlib==3.9.2", "matplotlib/mpl-data/sample_data/grace_hopper.jpg")


def sample_speech() -> tuple[Path, list[tuple[float, float]]]:
    """A 16 kHz mono WAV: 1 s of silence, espeak-ng saying SPEECH, 2 s of silence; and the (start, end) seconds
    of the speech (the espeak-ng output's own extent)."""
    wav = DEMO_CACHE / "speech.wav"
    meta = DEMO_CACHE / "speech.json"
    if wav.exists() and meta.exists():
        return wav, [tuple(s) for s in json.loads(meta.read_text())]
    if shutil.which("espeak-ng") is None:
        raise DemoModelError("espeak-ng is missing (scripts/setup.sh installs it)")
    DEMO_CACHE.mkdir(parents=True, exist_ok=True)
    raw_path = DEMO_CACHE / "speech.espeak.wav"
    subprocess.run(["espeak-ng", "-s", "150", "-w", str(raw_path), SPEECH], check=True, timeout=60,
                   capture_output=True)
    with wave.open(str(raw_path)) as w:
        rate, raw = w.getframerate(), w.readframes(w.getnframes())
    x = np.frombuffer(raw, np.int16).astype(np.float64)
    y = np.interp(np.arange(int(len(x) * SR / rate)) / SR, np.arange(len(x)) / rate, x)
    audio = np.concatenate([np.zeros(SR), y, np.zeros(2 * SR)])
    with wave.open(str(wav), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(SR)
        w.writeframes(np.clip(audio, -32768, 32767).astype(np.int16).tobytes())
    raw_path.unlink()
    spans = [(1.0, 1.0 + len(y) / SR)]
    meta.write_text(json.dumps(spans))
    return wav, spans


if __name__ == "__main__":
    path, s = digits()
    print(f"digits (drawing-robust): {path}: held-out accuracy {s['test_accuracy']:.4f} ({s['test']} images), "
          f"train {s['train_accuracy']:.4f}")
    print(f"silero VAD: {silero_vad()}")
    print(f"nudenet: {nudenet()[0]}")
    print(f"samples: {sample_image()}, {sample_speech()[0]}")
