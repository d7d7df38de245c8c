"""Published voice-activity models, streamed as their users run them: silero-vad 6.2.3's ONNX files and
faster-whisper 1.1.1's silero v5 encoder/decoder pair, 100 successive 32 ms frames of speech (espeak-ng, resampled
with numpy), the recurrent state carried from call to call, each frame against onnxruntime CPU.

The wheels are fetched once with `pip download --no-deps` into .cache/published/ (the test skips, saying why,
without network). Which of silero-vad's six files run, and why the others do not: docs/recurrent.md."""
from __future__ import annotations

import json
import shutil
import subprocess
import wave
import zipfile
from pathlib import Path

import numpy as np
import onnx
import pytest

from packager import load_bundle, package
from packager.errors import PackagerError

from .conftest import REPO

CACHE = REPO / ".cache" / "published"
FRAMES = 100
SENTENCE = ("Voice activity detection finds the parts of a recording where somebody speaks, "
            "and skips the silence between the words.")
# file -> (wheel, static input shapes at 16 kHz, context samples prepended to each frame, sr bound at package time)
SILERO = "silero_vad/data/"
WHISPER = "faster_whisper/assets/"
MODELS: dict[str, tuple[str, dict, int, bool]] = {
    "silero_vad.onnx": ("silero-vad==6.2.3", {"input": (1, 576), "state": (2, 1, 128)}, 64, True),
    "silero_vad_16k_op15.onnx": ("silero-vad==6.2.3", {"input": (1, 576), "state": (2, 1, 128)}, 64, False),
    "silero_vad_16k_sequence.onnx": ("silero-vad==6.2.3", {"input": (1, 576)}, 64, False),
    "silero_vad_half.onnx": ("silero-vad==6.2.3", {"input": (1, 576), "state": (2, 1, 128)}, 64, False),
    "silero_vad_op18_ifless.onnx": ("silero-vad==6.2.3", {"input": (1, 576), "state": (2, 1, 128)}, 64, False),
    "silero_vad_openvino_16k.onnx": ("silero-vad==6.2.3", {}, 64, False),
    "silero_v5_encoder+decoder": ("faster-whisper==1.1.1", {}, 64, False),
}
# Refused at package time (docs/recurrent.md): silero_vad.onnx with sr left to run time. With its input fixed to
# 1x576, the 8 kHz branch hands its LSTM a rank-2 tensor (onnxruntime refuses that model too): --const sr=16000.
REFUSED = {"silero_vad.onnx": "If"}


def _wheel_files(spec: str, inner: str) -> Path:
    """The wheel's files under `inner`, unzipped into .cache/published/<name>-<version>/ (downloaded once)."""
    name, version = spec.split("==")
    d = CACHE / f"{name}-{version}"
    d.mkdir(parents=True, exist_ok=True)
    wheels = list(d.glob("*.whl"))
    if not wheels:
        try:
            r = subprocess.run(["python3", "-m", "pip", "download", "--no-deps", "-q", spec, "-d", str(d)],
                               capture_output=True, text=True, timeout=180)
        except subprocess.TimeoutExpired:
            pytest.skip(f"pip download {spec}: timed out (no network?)")
        wheels = list(d.glob("*.whl"))
        if r.returncode != 0 or not wheels:
            pytest.skip(f"pip download {spec} failed (no network?): {r.stderr.strip()[-200:]}")
    with zipfile.ZipFile(wheels[0]) as z:
        want = [n for n in z.namelist() if n.startswith(inner) and n.endswith(".onnx") and not (d / n).exists()]
        if want:
            z.extractall(d, want)
    return d / inner


def _speech(rate: int) -> np.ndarray:
    """FRAMES frames of espeak-ng speaking SENTENCE, resampled to `rate` by linear interpolation, float32."""
    if shutil.which("espeak-ng") is None:
        pytest.skip("espeak-ng missing (scripts/setup.sh installs it)")
    wav = CACHE / "espeak_sentence.wav"
    if not wav.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        subprocess.run(["espeak-ng", "-s", "150", "-w", str(wav), SENTENCE], check=True, timeout=60)
    with wave.open(str(wav)) as w:
        src_rate, raw = w.getframerate(), w.readframes(w.getnframes())
    x = np.frombuffer(raw, np.int16).astype(np.float64) / 32768.0
    t = np.arange(int(len(x) * rate / src_rate)) / rate
    y = np.interp(t, np.arange(len(x)) / src_rate, x)
    need = FRAMES * (512 if rate == 16000 else 256)
    y = np.concatenate([np.zeros(rate // 10), y, np.zeros(max(0, need - len(y)))])[:need]   # 0.1 s of silence first
    return y.astype(np.float32)


def _frames(rate: int, context: int) -> list[np.ndarray]:
    """Each 32 ms frame with the last `context` samples of the one before (silero's OnnxWrapper), [1, n]."""
    audio, n = _speech(rate), 512 if rate == 16000 else 256
    prev = np.zeros(context, np.float32)
    out = []
    for k in range(FRAMES):
        chunk = audio[k * n:(k + 1) * n]
        out.append(np.concatenate([prev, chunk])[None, :])
        prev = chunk[-context:]
    return out


class Ort:
    def __init__(self, path: Path) -> None:
        import onnxruntime as rt
        self.s = rt.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        self.names = [o.name for o in self.s.get_outputs()]

    def run(self, feeds: dict) -> dict:
        return dict(zip(self.names, self.s.run(None, feeds)))


def _stream(step_ours, step_ref, frames: list[np.ndarray], state_ours: dict, state_ref: dict) -> tuple[float, float]:
    """Run every frame through both, each carrying its own state; returns (worst difference, output scale)."""
    worst, scale = 0.0, 0.0
    for x in frames:
        got, state_ours = step_ours(x, state_ours)
        want, state_ref = step_ref(x, state_ref)
        for k, w in want.items():
            scale = max(scale, float(np.abs(w).max()))
            worst = max(worst, float(np.abs(got[k] - w).max()))
    return worst, scale


def _single(run, out_names: tuple[str, ...], state_map: dict[str, str], extra: dict):
    """A step function for a model with input `input`, state inputs -> state outputs (state_map), extra feeds."""
    def step(x: np.ndarray, state: dict) -> tuple[dict, dict]:
        out = run({"input": x, **state, **extra})
        return {k: out[k] for k in out_names}, {i: out[o] for i, o in state_map.items()}
    return step


def _bundle(path: Path, tmp: Path, shapes: dict, target: str = "web", consts: dict | None = None) -> Path:
    return package(path, target=target, out=tmp / f"{path.stem}-{target}", input_shapes=shapes or None,
                   constants=consts, verify=False)


def _case(name: str, tmp: Path, rate: int = 16000, target: str = "web"):
    """(our step, onnxruntime's step, our initial state, its initial state, context samples) for one model."""
    spec, shapes, context, bind_sr = MODELS[name]
    if rate == 8000:   # 256-sample frames with 32 samples of context
        shapes, context = {**shapes, "input": (1, 288)}, 32
    zeros = np.zeros((2, 1, 128), np.float32)
    if name == "silero_v5_encoder+decoder":
        d = _wheel_files(spec, WHISPER)
        enc, dec = d / "silero_encoder_v5.onnx", d / "silero_decoder_v5.onnx"
        be = load_bundle(_bundle(enc, tmp, {"input": (1, 576)}))
        bd = load_bundle(_bundle(dec, tmp, {"input": (1, 128), "state": (2, 1, 128)}))
        oe, od = Ort(enc), Ort(dec)
        dec_out = onnx.load(str(dec)).graph.output

        def pair(run_e, run_d):
            def step(x, state):
                h = run_e({"input": x})
                h = next(iter(h.values())).reshape(1, 128)
                out = run_d({"input": h, "state": state["state"]})
                return {dec_out[0].name: out[dec_out[0].name]}, {"state": out[dec_out[1].name]}
            return step
        return pair(be.run, bd.run), pair(oe.run, od.run), {"state": zeros}, {"state": zeros}, context
    path = _wheel_files(spec, SILERO) / name
    sr = {"sr": np.array(rate, np.int64)}
    b = _bundle(path, tmp, shapes, target, sr if bind_sr else None)
    ref = Ort(path)
    if name == "silero_vad_16k_sequence.onnx":
        z = np.zeros((1, 1, 128), np.float32)
        mk = lambda run, extra: _single(run, ("speech_probs",), {"h": "hn", "c": "cn"}, extra)  # noqa: E731
        state = {"h": z, "c": z}
    else:
        mk = lambda run, extra: _single(run, ("output",), {"state": "stateN"}, extra)  # noqa: E731
        state = {"state": zeros}
    has_sr = "sr" in [i.name for i in ref.s.get_inputs()]
    if target == "web":
        ours = load_bundle(b).run
    else:
        from packager.targets import edge as E
        outs = json.loads((b / "manifest.json").read_text())["outputs"]
        ours = lambda feeds: E.run_cli(b, feeds, outs, qemu=E.qemu_cmd("pi5"))  # noqa: E731
    return mk(ours, sr if has_sr and not bind_sr else {}), mk(ref.run, sr if has_sr else {}), state, dict(state), context


@pytest.mark.parametrize("name", list(MODELS))
def test_streaming_matches_onnxruntime(name: str, tmp_path: Path) -> None:
    ours, ref, s0, s1, context = _case(name, tmp_path)
    worst, scale = _stream(ours, ref, _frames(16000, context), s0, s1)
    print(f"{name}: {FRAMES} frames, worst difference {worst:.3g}, output scale {scale:.3g}")
    assert worst <= 1e-3 * scale, f"{name}: worst difference {worst:.3g} at output scale {scale:.3g}"


@pytest.mark.parametrize("name", ["silero_vad.onnx", "silero_vad_op18_ifless.onnx"])
def test_8khz_stream(tmp_path: Path, name: str) -> None:
    """At 8 kHz: sr = 8000 bound at package time (silero_vad.onnx) or fed at run time (the If on it takes the other
    branch)."""
    ours, ref, s0, s1, context = _case(name, tmp_path, rate=8000)
    worst, scale = _stream(ours, ref, _frames(8000, context), s0, s1)
    assert worst <= 1e-3 * scale, f"{name} at 8 kHz: worst difference {worst:.3g} at output scale {scale:.3g}"


@pytest.mark.skipif(shutil.which("qemu-aarch64") is None or shutil.which("aarch64-linux-gnu-gcc") is None,
                    reason="qemu-user / gcc-aarch64-linux-gnu missing")
def test_pi5_stream_under_qemu(tmp_path: Path) -> None:
    """silero_vad_16k_sequence (an ONNX LSTM) as a pi5 bundle, edgepack-run under qemu: 20 frames (one process
    per call under qemu)."""
    ours, ref, s0, s1, context = _case("silero_vad_16k_sequence.onnx", tmp_path, target="pi5")
    worst, scale = _stream(ours, ref, _frames(16000, context)[40:60], s0, s1)
    assert worst <= 1e-3 * scale, f"pi5: worst difference {worst:.3g} at output scale {scale:.3g}"


@pytest.mark.parametrize("name", list(REFUSED))
def test_refused_with_a_clear_error(name: str, tmp_path: Path) -> None:
    """Without --const sr: refused at package time, naming the node and opset (no traceback)."""
    path = _wheel_files("silero-vad==6.2.3", SILERO) / name
    with pytest.raises(PackagerError, match=rf"{REFUSED[name]} \(node '.*', opset \d+\)"):
        package(path, out=tmp_path / "b", input_shapes={"input": (1, 576), "state": (2, 1, 128)}, verify=False)
