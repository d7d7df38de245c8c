"""onnxruntime runs the packager needs (shapes at analysis, the reference at verification) in a child process.

onnxruntime is native code fed a graph from a stranger: some graphs abort or segfault it (silero_vad with a zero
batch: "terminate called without an active exception", SIGABRT). In a child, a crash, a hang or a runaway
allocation ends that child only and becomes a clear error here; its log lines (warning floods) stay in the
child's captured stderr. Time and memory are bounded by the model's and the feeds' sizes."""
from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx

ORT_LOG_ERRORS_ONLY = 3          # onnxruntime severities: 0 verbose .. 2 warning, 3 error, 4 fatal
BASE_TIMEOUT_S = 120.0
BASE_MEMORY = 4 << 30            # address space of the child: onnxruntime itself, its threads and arenas


class OrtFailure(Exception):
    """onnxruntime refused, failed on, or crashed running the model (not a PackagerError: callers word it)."""


def quiet_session_options():
    """SessionOptions that log errors only (onnxruntime's warnings flood stderr on exporters' graphs)."""
    import onnxruntime as ort
    ort.set_default_logger_severity(ORT_LOG_ERRORS_ONLY)
    so = ort.SessionOptions()
    so.log_severity_level = ORT_LOG_ERRORS_ONLY
    so.intra_op_num_threads = 1
    return so


def _limits(nbytes: int) -> tuple[float, int]:
    """(seconds, bytes of address space) for a model and feeds of nbytes together: generous, but finite."""
    return BASE_TIMEOUT_S + nbytes / (8 << 20), BASE_MEMORY + 16 * nbytes


def run_isolated(model: onnx.ModelProto, feeds: dict[str, np.ndarray], outputs: list[str] | None = None,
                 optimize: bool = True) -> dict[str, np.ndarray]:
    """Run `model` (one onnxruntime loads: packager.reference.ort_model) once on `feeds` with onnxruntime CPU in a
    child process; the named outputs (default: all)."""
    from .weights import save_external
    with tempfile.TemporaryDirectory(prefix="edgepack-ort-") as tmp:
        d = Path(tmp)
        # large weights go to model.onnx.data, streamed from the weight store: the child reads them from disk
        path = save_external(model, d)
        model_bytes = path.stat().st_size + (d / "model.onnx.data").stat().st_size
        np.savez(d / "feeds.npz", **{f"i{k}": v for k, v in enumerate(feeds.values())})
        (d / "names.txt").write_text("\n".join(["1" if optimize else "0", str(len(feeds)), *feeds,
                                                *(outputs or [])]) + "\n")
        seconds, memory = _limits(model_bytes + sum(v.nbytes for v in feeds.values()))

        def limit() -> None:   # in the child, before exec
            import resource
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))   # a crash leaves no core file behind
        env = dict(os.environ, OMP_NUM_THREADS="1")
        try:
            # -P: this file runs as a script without its folder on sys.path (packager/profile.py would shadow
            # the standard library's); importing the packager would cost more than onnxruntime itself
            r = subprocess.run([sys.executable, "-P", str(Path(__file__).resolve()), str(d)], capture_output=True,
                               timeout=seconds, preexec_fn=limit, env=env)
        except subprocess.TimeoutExpired:
            raise OrtFailure(f"onnxruntime did not finish within {seconds:.0f}s (stopped)") from None
        if r.returncode < 0:
            try:
                sig = signal.Signals(-r.returncode).name
            except ValueError:
                sig = f"signal {-r.returncode}"
            tail = r.stderr.decode(errors="replace").strip().splitlines()
            raise OrtFailure(f"onnxruntime crashed ({sig}) on this model"
                             + (f": {tail[-1][:160]}" if tail else ""))
        err = d / "error.txt"
        if err.exists():
            raise OrtFailure(err.read_text()[:400])
        if r.returncode != 0:
            tail = r.stderr.decode(errors="replace").strip().splitlines()
            raise OrtFailure(f"onnxruntime exited with status {r.returncode}" + (f": {tail[-1][:200]}" if tail else ""))
        with np.load(d / "outputs.npz", allow_pickle=False) as z:
            names = (d / "outputs.txt").read_text().splitlines()
            return {n: z[f"o{k}"] for k, n in enumerate(names)}


def _child(d: Path) -> int:
    """The child's side: run the session, write outputs.npz (or error.txt with onnxruntime's message)."""
    lines = (d / "names.txt").read_text().splitlines()
    optimize, n_in = lines[0] == "1", int(lines[1])
    in_names, out_names = lines[2:2 + n_in], lines[2 + n_in:]
    try:
        import onnxruntime as ort
        so = quiet_session_options()
        if not optimize:
            so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        with np.load(d / "feeds.npz", allow_pickle=False) as z:
            feeds = {n: z[f"i{k}"] for k, n in enumerate(in_names)}
        sess = ort.InferenceSession(str(d / "model.onnx"), so, providers=["CPUExecutionProvider"])
        out_names = out_names or [o.name for o in sess.get_outputs()]
        outs = sess.run(out_names, feeds)
    except Exception as e:  # onnxruntime's own refusal: its message, first line
        (d / "error.txt").write_text((str(e).strip().splitlines() or [type(e).__name__])[0])
        return 0
    buf = io.BytesIO()
    np.savez(buf, **{f"o{k}": np.asarray(v) for k, v in enumerate(outs)})
    (d / "outputs.npz").write_bytes(buf.getvalue())
    (d / "outputs.txt").write_text("\n".join(out_names) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(_child(Path(sys.argv[1])))
