"""Where an int8 bundle's time goes in Node (relaxed SIMD, one thread), per node, with each integer GEMM's rate:
bench/profile_node.mjs (per node ms, warm: the node repeated with its operands in cache) on one .wasm, the plan's
shapes, and for QCONV / QWINOGRAD_CONV / QMATMUL the multiply-adds of the direct product (Winograd counted as the
direct 3x3 it replaces) per ns. Compare the GMAC/s column with bench/int8_dot_peak.py's ceiling.

    python3 -m bench.int8_profile BUNDLE WASM [--seconds 2] [--rounds 6] [--top 25]
"""
from __future__ import annotations

import argparse
import json
import subprocess
from collections import defaultdict
from pathlib import Path

from packager.plan.layout import decode
from packager.plan.opcodes import Op

REPO = Path(__file__).resolve().parent.parent


def macs(op: str, params: list[int], ins: list[tuple[int, ...]], out: tuple[int, ...]) -> int:
    """Multiply-adds of the direct product of an integer GEMM node (0 for other kernels)."""
    if op in ("QCONV", "QWINOGRAD_CONV") and len(out) >= 3 and ins and len(ins[0]) >= 3:
        g, kh, kw = (params[0], params[1], params[2]) if op == "QCONV" else (1, 3, 3)
        plane = 1
        for d in out[2:]:
            plane *= d
        return out[0] * out[1] * plane * (ins[0][1] // g) * kh * kw
    if op == "QMATMUL" and len(out) >= 2 and ins and ins[0]:
        n = 1
        for d in out:
            n *= d
        return n * ins[0][-1]
    return 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("bundle", type=Path)
    ap.add_argument("wasm", type=Path)
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--top", type=int, default=25)
    a = ap.parse_args()
    plan = decode((a.bundle / "model.plan").read_bytes())
    out = subprocess.run(["node", "--experimental-wasm-relaxed-simd", str(REPO / "bench" / "profile_node.mjs"),
                          str(a.bundle), str(a.seconds), str(a.rounds), str(a.wasm)],
                         check=True, capture_output=True, text=True).stdout
    res = json.loads(out)[0]
    names = {int(o): o.name for o in Op}
    rows, by = [], defaultdict(lambda: [0.0, 0])
    for k, (n, ms) in enumerate(zip(plan.nodes, res["warm_ms"])):
        op = names.get(n.op, str(n.op))
        ins = [plan.tensors[t].dims if t >= 0 else () for t in n.inputs]
        o = plan.tensors[n.outputs[0]].dims if n.outputs else ()
        m = macs(op, n.params, ins, o)
        rows.append((ms, k, op, ins[0] if ins else (), o, m))
        by[op][0] += ms
        by[op][1] += m
    total = sum(r[0] for r in rows) or 1.0
    print(f"{a.bundle.name} on {a.wasm.name}: run {res['run_ms']:.2f} ms, nodes (warm) {total:.2f} ms")
    print(f"{'kernel':<18}{'ms':>9}{'share':>7}{'GMAC/s':>8}")
    for op, (ms, m) in sorted(by.items(), key=lambda kv: -kv[1][0]):
        print(f"{op:<18}{ms:>9.2f}{ms / total:>7.1%}" + (f"{m / ms / 1e6:>8.1f}" if m else ""))
    print(f"\n{'node':>5} {'kernel':<16}{'input':<20}{'output':<20}{'ms':>8}{'GMAC/s':>8}")
    for ms, k, op, i, o, m in sorted(rows, reverse=True)[:a.top]:
        print(f"{k:>5} {op:<16}{'x'.join(map(str, i)):<20}{'x'.join(map(str, o)):<20}{ms:>8.3f}"
              + (f"{m / ms / 1e6:>8.1f}" if m else ""))


if __name__ == "__main__":
    main()
