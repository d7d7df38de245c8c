"""Builds the web demo into demo/out/: three models packaged for the web (edgepack bundles) next to the same ONNX
files for onnxruntime-web, two samples to try them on, the web runtime, onnxruntime-web's wasm build and the page
(index.html, demo.js). Serve it with `python3 scripts/serve.py demo/out` and open the URL it prints.

    python3 demo/build.py [--out demo/out]

- digits: a CNN trained here on scikit-learn's digits, robust to mouse drawing (demo/models.py): draw a digit.
- vad: silero VAD 6.2.3 (its PyPI wheel), 32 ms frames carrying its state: the microphone or an audio file.
- detector: nudenet 3.4.2's 320n.onnx (its PyPI wheel), YOLOv8-style boxes: drop an image.
Models and samples are fetched or trained once into .cache/ (demo/models.py)."""
from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
HERE = REPO / "demo"
ORT_DIST = REPO / "bench" / "node_modules" / "onnxruntime-web" / "dist"
ORT_FILES = ("ort.wasm.min.mjs", "ort-wasm-simd-threaded.mjs", "ort-wasm-simd-threaded.wasm")
VAD_FRAME, VAD_CONTEXT = 512, 64   # silero at 16 kHz: 32 ms frames, each with the previous 64 samples in front


def _io(bundle: Path) -> tuple[list[dict], list[dict]]:
    manifest = json.loads((bundle / "manifest.json").read_text())
    return manifest["inputs"], manifest["outputs"]


def build(out: Path, log=print) -> dict:
    from packager import package
    spec = importlib.util.spec_from_file_location("edgepack_demo_models", HERE / "models.py")
    M = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(M)
    if not all((ORT_DIST / f).exists() for f in ORT_FILES):
        raise SystemExit(f"error: onnxruntime-web is not installed in {ORT_DIST.parent} (run scripts/setup.sh)")
    try:
        digits, digits_stats = M.digits()
        vad = M.silero_vad()
        detector, labels = M.nudenet()
        image = M.sample_image()
        speech, speech_spans = M.sample_speech()
    except M.DemoModelError as e:
        raise SystemExit(f"error: {e}") from None
    out = out.resolve()
    if out.exists():
        shutil.rmtree(out)
    (out / "models").mkdir(parents=True)
    (out / "samples").mkdir()
    shutil.copytree(REPO / "web" / "src", out / "edgepack")
    (out / "ort").mkdir()
    for f in ORT_FILES:
        shutil.copyfile(ORT_DIST / f, out / "ort" / f)
    for f in ("index.html", "demo.js"):
        shutil.copyfile(HERE / f, out / f)
    shutil.copyfile(image, out / "samples" / "image.jpg")
    shutil.copyfile(speech, out / "samples" / "speech.wav")

    def pack(name: str, onnx_path: Path, **kw) -> tuple[list[dict], list[dict]]:
        d = out / "models" / name
        bundle = package(onnx_path, out=d / "bundle", dynamic=False, **kw)
        shutil.copyfile(onnx_path, d / "model.onnx")
        log(f"[demo] {name}: {bundle.relative_to(out)}")
        return _io(bundle)

    (di,), (do,) = pack("digits", digits)
    vi, vo = pack("vad", vad, input_shapes={"input": (1, VAD_FRAME + VAD_CONTEXT), "state": (2, 1, 128)},
                  constants={"sr": np.array(16000, np.int64)})
    (ni,), (no,) = pack("detector", detector, input_shapes={"images": (1, 3, 320, 320)})
    config = {
        "digits": {"bundle": "models/digits/bundle/", "onnx": "models/digits/model.onnx", "input": di["name"],
                   "dims": di["shape"], "output": do["name"], "testAccuracy": digits_stats["test_accuracy"],
                   "testImages": digits_stats["test"]},
        "vad": {"bundle": "models/vad/bundle/", "onnx": "models/vad/model.onnx", "frame": VAD_FRAME,
                "context": VAD_CONTEXT, "sampleRate": 16000, "inputs": [i["name"] for i in vi],
                "outputs": [o["name"] for o in vo], "stateDims": next(i["shape"] for i in vi if i["name"] == "state")},
        "detector": {"bundle": "models/detector/bundle/", "onnx": "models/detector/model.onnx", "input": ni["name"],
                     "size": ni["shape"][-1], "output": no["name"], "labels": labels},
        "samples": {"image": "samples/image.jpg", "speech": "samples/speech.wav", "speechSpans": speech_spans},
    }
    (out / "models.json").write_text(json.dumps(config, indent=1))
    log(f"[demo] digits CNN: held-out accuracy {digits_stats['test_accuracy']:.3f} ({digits_stats['test']} images)")
    return config


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=HERE / "out")
    a = ap.parse_args()
    build(a.out)


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    main()
