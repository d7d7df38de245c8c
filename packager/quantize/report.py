"""The accuracy report: the packaged bundle, run by its real runtime, against the float32 model in onnxruntime.

Per output: worst absolute error, cosine similarity (per sample: mean and worst), top-1 agreement (argmax
over the last axis, per row); with labels, the accuracy of both. Written to manifest.json ("accuracy")
and, readable, to accuracy.md in the bundle."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import numpy as np
import onnx

from ..bundle import sha256
from .calib_data import CalibrationSet

Runner = Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]]


def bundle_runner(path: Path, target: str) -> tuple[Runner, str]:
    """Run the bundle's plan with its runtime: the bundle's wasm under wasmtime for web; for pi5/android the
    same C core built as wasm SIMD on the bundle's own plan (the consistency report compares it with the
    aarch64 build under qemu on seeded inputs)."""
    m = json.loads((path / "manifest.json").read_text())
    if target == "web":
        from ..bundle import load_bundle
        b = load_bundle(path)
        return b.run, "the bundle's edgepack.wasm (SIMD) under wasmtime"
    from ..runtime.wasm import WasmPlan
    from ..toolchain import ensure_wasm
    wasm = WasmPlan(ensure_wasm()["edgepack.wasm"], (path / m["runtime"]["plan"]).read_bytes())

    def run(feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        for s in m["inputs"]:
            wasm.write(s["tensor"], feeds[s["name"]])
        wasm.run()
        return {o["name"]: wasm.read(o["tensor"], np.dtype(o["dtype"]), tuple(o["shape"])) for o in m["outputs"]}
    return run, "the bundle's plan on the edgepack C core (wasm SIMD build, wasmtime)"


def reference_session(model: onnx.ModelProto) -> Runner:
    """onnxruntime CPU, one session for every sample. QDQ models run with graph optimizations off, as in
    packager.reference.reference_run: their Q/DQ nodes execute as written (exact QDQ semantics)."""
    import onnxruntime as ort
    from ..reference import QDQ_OPS, ort_model
    from ..weights import inline
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.log_severity_level = 3
    if any(n.op_type in QDQ_OPS for n in model.graph.node):
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(inline(ort_model(model)).SerializeToString(), so, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return lambda feeds: dict(zip(names, sess.run(names, feeds)))


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    if na == 0 or nb == 0:
        return 1.0 if na == nb else 0.0
    return float(a @ b / (na * nb))


def measure(run: Runner, reference: Runner, data: CalibrationSet) -> dict:
    """Compare `run` with `reference` on every sample of `data`."""
    per: dict[str, dict[str, list]] = {}
    for i in range(data.count):
        feed = data.feed(i)
        got, want = run(feed), reference(feed)
        for name, w in want.items():
            g = got[name]
            d = per.setdefault(name, {"err": [], "cos": [], "agree": [], "ref_top1": [], "got_top1": []})
            if w.dtype.kind != "f":
                d["err"].append(float(np.abs(g.astype(np.int64) - w.astype(np.int64)).max()) if w.size else 0.0)
                continue
            d["err"].append(float(np.abs(g.astype(np.float64) - w.astype(np.float64)).max()) if w.size else 0.0)
            d["cos"].append(cosine(g, w))
            if w.ndim >= 1 and w.shape[-1] > 1:
                rt, gt = w.reshape(-1, w.shape[-1]).argmax(-1), g.reshape(-1, g.shape[-1]).argmax(-1)
                d["agree"] += list(rt == gt)
                d["ref_top1"].append(rt)
                d["got_top1"].append(gt)
    outputs = {}
    for name, d in per.items():
        o: dict = {"max_abs_error": max(d["err"]) if d["err"] else 0.0}
        if d["cos"]:
            o["cosine_mean"] = float(np.mean(d["cos"]))
            o["cosine_min"] = float(np.min(d["cos"]))
        if d["agree"]:
            o["top1_agreement"] = float(np.mean(d["agree"]))
            if data.labels is not None and len(d["ref_top1"]) == data.count:
                lab = data.labels.reshape(data.count, -1)
                ref_rows, got_rows = np.stack(d["ref_top1"]), np.stack(d["got_top1"])
                if ref_rows.shape == lab.shape:
                    o["accuracy_float32"] = float(np.mean(ref_rows == lab))
                    o["accuracy_bundle"] = float(np.mean(got_rows == lab))
        outputs[name] = o
    return outputs


def accuracy_report(path: Path, target: str, float_model: onnx.ModelProto, data: CalibrationSet,
                    precision: str, samples_note: str) -> dict:
    run, how = bundle_runner(path, target)
    outputs = measure(run, reference_session(float_model), data)
    return {"precision": precision, "reference": "float32 model, onnxruntime CPU", "runtime": how,
            "samples": data.count, "data": samples_note, "outputs": outputs}


def summary_line(rep: dict) -> str:
    """One line for the end of `package`."""
    parts = []
    for name, o in rep["outputs"].items():
        s = [f"max abs err {o['max_abs_error']:.3g}"]
        if "cosine_mean" in o:
            s.append(f"cosine {o['cosine_mean']:.5f}")
        if "top1_agreement" in o:
            s.append(f"top-1 agreement {o['top1_agreement']:.1%}")
        if "accuracy_bundle" in o:
            s.append(f"accuracy {o['accuracy_bundle']:.1%} (float32 {o['accuracy_float32']:.1%})")
        parts.append(f"{name}: " + ", ".join(s))
    return f"accuracy ({rep['precision']} vs float32, {rep['samples']} samples): " + "; ".join(parts)


def markdown(rep: dict, precision_info: dict) -> str:
    lines = [f"# Accuracy of this bundle ({rep['precision']})", "",
             f"- bundle run by: {rep['runtime']}", f"- compared with: {rep['reference']}",
             f"- samples: {rep['samples']} ({rep['data']})"]
    for k, v in precision_info.items():
        if k not in ("accuracy",) and not isinstance(v, dict):
            lines.append(f"- {k.replace('_', ' ')}: {v}")
    lines += ["", "| output | max abs error | cosine (mean) | cosine (worst) | top-1 agreement | accuracy float32 | accuracy bundle |",
              "|---|---|---|---|---|---|---|"]
    fmt = lambda o, k, f: f.format(o[k]) if k in o else "-"  # noqa: E731
    for name, o in rep["outputs"].items():
        lines.append(f"| {name} | {o['max_abs_error']:.4g} | {fmt(o, 'cosine_mean', '{:.6f}')} | "
                     f"{fmt(o, 'cosine_min', '{:.6f}')} | {fmt(o, 'top1_agreement', '{:.2%}')} | "
                     f"{fmt(o, 'accuracy_float32', '{:.2%}')} | {fmt(o, 'accuracy_bundle', '{:.2%}')} |")
    lines += ["", "Top-1 agreement: the share of rows whose argmax (last axis) equals the float32 model's. "
              "Accuracy: the share equal to the labels. See docs/quantization.md.", ""]
    return "\n".join(lines)


def attach(path: Path, rep: dict, precision_info: dict) -> None:
    """Write accuracy.md and record it (and the report) in manifest.json with its SHA-256."""
    md = path / "accuracy.md"
    md.write_text(markdown(rep, precision_info))
    mpath = path / "manifest.json"
    m = json.loads(mpath.read_text())
    m["accuracy"] = rep
    m.setdefault("files", {})["accuracy.md"] = {"bytes": md.stat().st_size, "sha256": sha256(md)}
    mpath.write_text(json.dumps(m, indent=2) + "\n")
