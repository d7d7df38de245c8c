"""Peak memory of packaging a big model, and the time to package a long chain (issue 21).

    python3 scripts/bigmodel_rss.py --size-mb 400 [--target web --target pi5] [--chain 200000]

Builds, in a temp dir, a model of one MatMul y = x @ W whose float32 weight W (the model's size) is stored as external
data, then runs `/usr/bin/time -v python3 -m packager.cli MODEL ...` on it and reports the peak RSS (the largest
process of the run: the packager, or its onnxruntime / qemu child) as a multiple of the model's size. --chain N also
packages a chain of N Relu/Neg nodes end to end and reports its wall time. Figures go in docs/security.md."""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

ROOT = Path(__file__).resolve().parent.parent
COLS = 4096   # W is [rows, COLS]: one MatMul from a [1, rows] input


def matmul_model(folder: Path, nbytes: int) -> Path:
    """model.onnx + w.bin (about nbytes of float32 weight, written in chunks: the builder holds little)."""
    rows = max(1, nbytes // (4 * COLS))
    rng = np.random.default_rng(0)
    with open(folder / "w.bin", "wb") as f:
        step = max(1, (64 << 20) // (4 * COLS))
        for r in range(0, rows, step):
            f.write(rng.standard_normal((min(step, rows - r), COLS), dtype=np.float32).tobytes())
    w = TensorProto(name="W", data_type=TensorProto.FLOAT, dims=[rows, COLS], data_location=TensorProto.EXTERNAL)
    for k, v in (("location", "w.bin"), ("offset", "0"), ("length", str(rows * COLS * 4))):
        e = w.external_data.add()
        e.key, e.value = k, v
    g = helper.make_graph([helper.make_node("MatMul", ["x", "W"], ["y"], name="mm")], "big",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, rows])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, COLS])], [w])
    p = folder / "model.onnx"
    onnx.save_model(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), p)
    return p


def chain_model(folder: Path, n: int) -> Path:
    """n elementwise nodes in a chain (Relu, Neg alternating) on a [1, 16] input."""
    nodes = [helper.make_node("Relu" if k % 2 else "Neg", [f"t{k}"], [f"t{k + 1}"], name=f"n{k}") for k in range(n)]
    g = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("t0", TensorProto.FLOAT, [1, 16])],
                          [helper.make_tensor_value_info(f"t{n}", TensorProto.FLOAT, [1, 16])])
    p = folder / "chain.onnx"
    onnx.save_model(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), p)
    return p


def package_rss(model: Path, target: str, out: Path, extra: tuple[str, ...] = ()) -> tuple[int, float, float, str]:
    """(peak RSS bytes, wall seconds, CPU seconds (user + system, children included: less sensitive to the load
    than wall time), verification line) of one `package` run under /usr/bin/time -v."""
    cmd = ["/usr/bin/time", "-v", sys.executable, "-m", "packager.cli", str(model), "--target", target,
           "-o", str(out), *extra]
    t0 = time.perf_counter()
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", r.stderr)
    if r.returncode != 0 or m is None:
        raise SystemExit(f"package failed ({r.returncode}):\n{r.stderr[-3000:]}")
    cpu = sum(float(x) for x in re.findall(r"(?:User|System) time \(seconds\): ([\d.]+)", r.stderr))
    tail = [ln for ln in r.stderr.splitlines() if "verified" in ln or "consistency" in ln.lower()]
    return int(m.group(1)) * 1024, wall, cpu, (tail[-1].strip() if tail else "not verified (see the manifest)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-mb", type=float, action="append", default=[], help="model size in MB (repeatable)")
    ap.add_argument("--target", action="append", default=[], help="web (default), pi5, android (repeatable)")
    ap.add_argument("--chain", type=int, default=0, help="also package a chain of this many nodes, timed")
    ap.add_argument("--tmp", default=None, help="folder for the temp models (default: the system's)")
    args = ap.parse_args()
    targets = args.target or ["web"]
    load = os.getloadavg()[0]
    print(f"load average {load:.1f} on {os.cpu_count()} cores")
    for mb in args.size_mb:
        with tempfile.TemporaryDirectory(prefix="edgepack-big-", dir=args.tmp) as tmp:
            model = matmul_model(Path(tmp), int(mb * 1e6))
            size = model.stat().st_size + (Path(tmp) / "w.bin").stat().st_size
            for target in targets:
                rss, wall, cpu, tail = package_rss(model, target, Path(tmp) / f"out-{target}")
                print(f"{size / 1e6:.0f} MB model, --target {target}: peak RSS {rss / 1e6:.0f} MB = "
                      f"{rss / size:.2f}x the model, {wall:.0f} s ({cpu:.0f} s CPU)  {tail}", flush=True)
    if args.chain:
        with tempfile.TemporaryDirectory(prefix="edgepack-chain-", dir=args.tmp) as tmp:
            model = chain_model(Path(tmp), args.chain)
            rss, wall, cpu, tail = package_rss(model, targets[0], Path(tmp) / "out")
            verification = json.loads((Path(tmp) / "out" / "manifest.json").read_text()).get("verification")
            print(f"chain of {args.chain} nodes, --target {targets[0]}: {wall:.1f} s end to end ({cpu:.1f} s CPU), "
                  f"peak RSS {rss / 1e6:.0f} MB  {tail}; verification {verification}", flush=True)


if __name__ == "__main__":
    main()
