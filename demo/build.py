"""Builds the web demo into demo/out/: each model packaged for the web (edgepack bundle), the same ONNX model for
onnxruntime-web, a few samples, the web runtime and onnxruntime-web's wasm build, and the page (index.html,
demo.js). Serve it with `python3 scripts/serve.py demo/out` and open the URL it prints.

    python3 demo/build.py [--out demo/out] [--models cifar10net,digits]

Models: cifar10net (.cache/models, seeded random weights: its predictions mean nothing, it shows the pipeline
and the latency) and the digits CNN (demo/digits/digits_cnn.onnx, trained on scikit-learn's digits, with its
held-out test images and labels), when present."""
from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
HERE = REPO / "demo"
ORT_DIST = REPO / "bench" / "node_modules" / "onnxruntime-web" / "dist"
ORT_FILES = ("ort.wasm.min.mjs", "ort-wasm-simd-threaded.mjs", "ort-wasm-simd-threaded.wasm")
CIFAR10 = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
DIGITS_SAMPLES = 60


def _cifar10net() -> dict | None:
    onnx_path = REPO / ".cache" / "models" / "cifar10net.onnx"
    if not onnx_path.exists():
        return None
    rng = np.random.default_rng(7)   # smooth random colour fields, normalised like CIFAR-10 inputs
    base = rng.standard_normal((8, 3, 4, 4)).astype(np.float32)
    images = np.repeat(np.repeat(base, 8, axis=2), 8, axis=3) + 0.3 * rng.standard_normal((8, 3, 32, 32)).astype(np.float32)
    return {"name": "cifar10net", "title": "cifar10net (CIFAR-10 CNN, seeded random weights)", "onnx": onnx_path,
            "images": images[:, None], "labels": None, "classes": CIFAR10, "display": "rgb",
            "note": "Random weights: the predicted classes mean nothing; the page shows that both runtimes agree and how fast they are."}


def _digits() -> dict | None:
    d = HERE / "digits"
    if not (d / "digits_cnn.onnx").exists() or not (d / "digits_test.npz").exists():
        return None
    z = np.load(d / "digits_test.npz")
    return {"name": "digits", "title": "digits CNN (scikit-learn digits, 8x8)", "onnx": d / "digits_cnn.onnx",
            "images": z["image"][:DIGITS_SAMPLES, None].astype(np.float32), "labels": z["labels"][:DIGITS_SAMPLES].tolist(),
            "classes": [str(i) for i in range(10)], "display": "gray",
            "note": f"The first {DIGITS_SAMPLES} images of the held-out test split (never seen in training); accuracy against their labels."}


MODELS = {"cifar10net": _cifar10net, "digits": _digits}


def build(out: Path, names: list[str], log=print) -> list[dict]:
    from packager import package
    if not all((ORT_DIST / f).exists() for f in ORT_FILES):
        raise SystemExit(f"onnxruntime-web is not installed in {ORT_DIST.parent} (run scripts/setup.sh)")
    if out.exists():
        shutil.rmtree(out)
    (out / "models").mkdir(parents=True)
    shutil.copytree(REPO / "web" / "src", out / "edgepack")
    (out / "ort").mkdir()
    for f in ORT_FILES:
        shutil.copyfile(ORT_DIST / f, out / "ort" / f)
    for f in ("index.html", "demo.js"):
        shutil.copyfile(HERE / f, out / f)
    entries = []
    for name in names:
        m = MODELS[name]()
        if m is None:
            log(f"[demo] {name}: model not available here, skipped")
            continue
        d = out / "models" / name
        bundle = package(m["onnx"], out=d / "bundle", dynamic=False)   # the static plan next to onnxruntime-web, batch 1
        shutil.copyfile(m["onnx"], d / "model.onnx")
        manifest = json.loads((bundle / "manifest.json").read_text())
        (inp,), (outp,) = manifest["inputs"], manifest["outputs"]
        images = m["images"].reshape(len(m["images"]), *inp["shape"]).astype(np.float32)
        (d / "samples.bin").write_bytes(images.tobytes())
        entries.append({"name": name, "title": m["title"], "note": m["note"], "bundle": f"models/{name}/bundle/",
                        "onnx": f"models/{name}/model.onnx", "samples": f"models/{name}/samples.bin", "count": len(images),
                        "input": inp["name"], "dims": inp["shape"], "output": outp["name"], "labels": m["labels"],
                        "classes": m["classes"], "display": m["display"],
                        "verification": manifest.get("verification", {})})
        log(f"[demo] {name}: bundle {bundle.relative_to(out)}, {len(images)} samples")
    (out / "models.json").write_text(json.dumps(entries, indent=1))
    return entries


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=HERE / "out")
    ap.add_argument("--models", default=",".join(MODELS))
    a = ap.parse_args()
    names = [n for n in a.models.split(",") if n]
    bad = [n for n in names if n not in MODELS]
    if bad:
        sys.exit(f"unknown demo model(s) {', '.join(bad)} (available: {', '.join(MODELS)})")
    if not build(a.out, names):
        sys.exit("no demo model could be built")


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    main()
