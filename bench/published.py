"""The published models of issue 18 as benchmark zoo entries (bench/zoo.py --published), each with the input its
users feed it: silero-vad 6.2.3's ONNX files and faster-whisper 1.1.1's silero v5 encoder/decoder on a 32 ms frame of
espeak-ng speech with the recurrent state carried over the frames before it (as a streaming app calls them),
nudenet 3.4.2's 320n.onnx on a photograph (matplotlib's grace_hopper.jpg), and the onnx wheel's nine light_*.onnx on
the same photograph, ImageNet-normalised. The wheels come from PyPI (`pip download --no-deps`, cached in
.cache/published) through demo/models.py, which the demo and its test use too."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from demo import models as demo_models

SILERO = "silero-vad==6.2.3"
WHISPER = "faster-whisper==1.1.1"
SR = 16000
FRAME, CONTEXT = 512, 64            # a 32 ms frame at 16 kHz, and the samples of the frame before (silero's wrapper)
WARM_FRAMES = 40                    # frames run before the timed one: the state a stream carries by then
LIGHT = ("bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50", "shufflenet", "squeezenet",
         "vgg19", "zfnet512")

Feeds = dict[str, np.ndarray]


@dataclass(frozen=True)
class Published:
    fetch: Callable[[], Path]                       # the .onnx file (downloaded once)
    feeds: Callable[[Path], Feeds]                  # the realistic input, given the model file
    input_shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    constants: dict[str, np.ndarray] = field(default_factory=dict)   # bound at package time (--const)


def _speech_frames() -> list[np.ndarray]:
    """[1, CONTEXT + FRAME] frames of the demo's espeak-ng sentence (16 kHz), each with the end of the one before."""
    import wave
    wav, _ = demo_models.sample_speech()
    with wave.open(str(wav)) as w:
        audio = np.frombuffer(w.readframes(w.getnframes()), np.int16).astype(np.float32) / 32768.0
    start = SR   # the speech begins after 1 s of silence
    prev, out = audio[start - CONTEXT:start], []
    for k in range(WARM_FRAMES + 1):
        chunk = audio[start + k * FRAME:start + (k + 1) * FRAME]
        out.append(np.concatenate([prev, chunk])[None, :].astype(np.float32))
        prev = chunk[-CONTEXT:]
    return out


def _ort(path: Path):
    import onnxruntime as rt
    so = rt.SessionOptions()
    so.log_severity_level = 3
    return rt.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def _vad_feeds(state_in: dict[str, str], extra: Feeds | None = None) -> Callable[[Path], Feeds]:
    """The feeds of the frame after WARM_FRAMES frames, the state (inputs -> outputs state_in) carried by onnxruntime."""
    def feeds(path: Path) -> Feeds:
        s = _ort(path)
        dims = {i.name: [d if isinstance(d, int) else 1 for d in i.shape] for i in s.get_inputs()}
        state = {k: np.zeros(dims[k], np.float32) for k in state_in}
        fixed = {k: v for k, v in (extra or {}).items() if k in dims}
        names = [o.name for o in s.get_outputs()]
        frames = _speech_frames()
        for x in frames[:-1]:
            out = dict(zip(names, s.run(None, {"input": x, **state, **fixed})))
            state = {k: out[o] for k, o in state_in.items()}
        return {"input": frames[-1], **state, **fixed}
    return feeds


def _whisper_decoder_feeds(path: Path) -> Feeds:
    """The decoder's input is the encoder's output for the frame (the pair as faster-whisper runs it)."""
    enc, dec = _ort(path.with_name("silero_encoder_v5.onnx")), _ort(path)
    state, names = np.zeros((2, 1, 128), np.float32), [o.name for o in dec.get_outputs()]
    h = None
    for x in _speech_frames():
        h = enc.run(None, {"input": x})[0].reshape(1, 128)
        out = dict(zip(names, dec.run(None, {"input": h, "state": state})))
        last, state = state, out[names[1]]
    return {"input": h, "state": last}


def _photo(size: int, imagenet: bool) -> np.ndarray:
    """grace_hopper.jpg as [1, 3, size, size] float32 in [0, 1] (ImageNet mean/std normalised if asked)."""
    from PIL import Image
    img = Image.open(demo_models.sample_image()).convert("RGB").resize((size, size), Image.BILINEAR)
    x = np.asarray(img, np.float32).transpose(2, 0, 1)[None] / 255.0
    if imagenet:
        x = (x - np.array([0.485, 0.456, 0.406], np.float32)[:, None, None]) / np.array([0.229, 0.224, 0.225], np.float32)[:, None, None]
    return np.ascontiguousarray(x, np.float32)


def _light_path(name: str) -> Callable[[], Path]:
    import onnx
    return lambda: Path(onnx.__file__).resolve().parent / "backend" / "test" / "data" / "light" / f"light_{name}.onnx"


def _light_feeds(path: Path) -> Feeds:
    import onnx
    m = onnx.load(str(path), load_external_data=False)
    inits = {i.name for i in m.graph.initializer}
    (vi,) = [vi for vi in m.graph.input if vi.name not in inits]
    dims = [d.dim_value for d in vi.type.tensor_type.shape.dim]
    return {vi.name: _photo(dims[2], imagenet=True)}


def _wheel(spec: str, member: str) -> Callable[[], Path]:
    return lambda: demo_models.wheel_member(spec, member)


_STATE = {"state": "stateN"}
_SR = {"sr": np.array(SR, np.int64)}
_VAD_SHAPES = {"input": (1, CONTEXT + FRAME), "state": (2, 1, 128)}
PUBLISHED: dict[str, Published] = {
    # silero_vad.onnx's 8 kHz branch cannot be packaged at a fixed 576-sample input: sr is bound (--const sr=16000)
    "silero_vad": Published(_wheel(SILERO, "silero_vad/data/silero_vad.onnx"), _vad_feeds(_STATE, _SR), _VAD_SHAPES, _SR),
    "silero_vad_16k_op15": Published(_wheel(SILERO, "silero_vad/data/silero_vad_16k_op15.onnx"),
                                     _vad_feeds(_STATE, _SR), _VAD_SHAPES),
    "silero_vad_half": Published(_wheel(SILERO, "silero_vad/data/silero_vad_half.onnx"), _vad_feeds(_STATE), _VAD_SHAPES),
    "silero_vad_op18_ifless": Published(_wheel(SILERO, "silero_vad/data/silero_vad_op18_ifless.onnx"),
                                        _vad_feeds(_STATE, _SR), _VAD_SHAPES),
    "silero_vad_16k_sequence": Published(_wheel(SILERO, "silero_vad/data/silero_vad_16k_sequence.onnx"),
                                         _vad_feeds({"h": "hn", "c": "cn"}), {"input": (1, CONTEXT + FRAME)}),
    "silero_vad_openvino_16k": Published(_wheel(SILERO, "silero_vad/data/silero_vad_openvino_16k.onnx"), _vad_feeds(_STATE)),
    "silero_encoder_v5": Published(_wheel(WHISPER, "faster_whisper/assets/silero_encoder_v5.onnx"),
                                   lambda p: {"input": _speech_frames()[-1]}, {"input": (1, CONTEXT + FRAME)}),
    "silero_decoder_v5": Published(lambda: (_wheel(WHISPER, "faster_whisper/assets/silero_encoder_v5.onnx")(),
                                            _wheel(WHISPER, "faster_whisper/assets/silero_decoder_v5.onnx")())[1],
                                   _whisper_decoder_feeds, {"input": (1, 128), "state": (2, 1, 128)}),
    "nudenet_320n": Published(_wheel("nudenet==3.4.2", "nudenet/320n.onnx"), lambda p: {"images": _photo(320, False)},
                              {"images": (1, 3, 320, 320)}),
    **{f"light_{n}": Published(_light_path(n), _light_feeds) for n in LIGHT},
}
