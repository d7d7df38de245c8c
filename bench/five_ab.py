"""The five original benchmark models, a given commit against the working tree (issue 19: "the five original
benchmark models do not get slower, paired A/B, <= 1.02x"). Each side packages the same ONNX file with its own
packager and .wasm (the base in a git worktree of --base under .cache/five_ab/, built by its own packager's make);
bench/ab_pair.mjs then runs base, working tree, base again on their bundles in one Node process, CPU time,
paired per round (the third line, base against itself, is the noise floor).

    python3 -m bench.five_ab --base 94394e0 [--models cifar10net,...] [--variants relaxed,simd] [--rounds 16]
                             [--ms 100] [--json bench/results/five_ab.json]

Both sides run under the working tree's JS host (web/src): the .wasm and the plan are what is compared. A base
whose plan format the working tree's host no longer reads cannot be compared this way (ab_pair fails: a row error).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(REPO))

from bench import run  # noqa: E402

WORKTREES = REPO / ".cache" / "five_ab"
WASM = {"relaxed": "edgepack-relaxed.wasm", "simd": "edgepack.wasm"}
LIMIT = 1.02
# ab_pair.mjs prints per build: NAME  MS ms  paired RATIO  min-ratio RATIO
LINE = re.compile(r"^(\S+)\s+([\d.]+) ms\s+paired ([\d.]+)\s+min-ratio ([\d.]+)$")
PACK = "import sys; from packager import package; package(sys.argv[1], out=sys.argv[2], verify=False, dynamic=False)"


def base_tree(ref: str) -> tuple[str, Path]:
    """(short sha, a worktree of it): created once, reused. Its wasm_kernels/node_modules (the relaxed build's
    wasm-opt) is the working tree's."""
    r = subprocess.run(["git", "rev-parse", "--short", f"{ref}^{{commit}}"], capture_output=True, text=True, cwd=REPO)
    if r.returncode != 0:
        raise SystemExit(f"error: --base {ref}: not a commit of this repository")
    sha = r.stdout.strip()
    tree = WORKTREES / sha
    if not (tree / "packager").is_dir():
        WORKTREES.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "worktree", "add", "--detach", str(tree), sha], check=True, cwd=REPO, capture_output=True)
    mods = REPO / "wasm_kernels" / "node_modules"
    link = tree / "wasm_kernels" / "node_modules"
    if mods.exists() and not link.exists():
        link.symlink_to(mods.resolve())
    return sha, tree


def package_with(tree: Path, model: Path, out: Path) -> Path:
    """`model` packaged by the packager of `tree` (its make builds its .wasm into the bundle), static plan, batch 1."""
    r = subprocess.run(["nice", sys.executable, "-c", PACK, str(model), str(out)], cwd=tree, capture_output=True,
                       text=True, env={**os.environ, "PYTHONPATH": str(tree)})
    if r.returncode != 0:
        raise RuntimeError(f"packaging {model.name} at {tree}: {(r.stderr.strip().splitlines() or ['?'])[-1]}")
    return out


def pair(base: Path, new: Path, variant: str, rounds: int, ms: int, flags: list[str]) -> dict:
    """ab_pair.mjs base, new, base: the working tree's ratio to the base and the base's to itself (medians of
    per-round CPU-time ratios)."""
    w = WASM[variant]
    cmd = ["node", *flags, str(BENCH / "ab_pair.mjs"), f"{base}::{base / w}", f"{new}::{new / w}", f"{base}::{base / w}"]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO,
                       env={**os.environ, "ROUNDS": str(rounds), "MS": str(ms)})
    got = [LINE.match(x.strip()) for x in r.stdout.splitlines()]
    got = [g for g in got if g]
    if r.returncode != 0 or len(got) != 3:
        raise RuntimeError(f"ab_pair.mjs failed: {(r.stderr.strip().splitlines() or [r.stdout.strip()])[-1][:200]}")
    return {"base_ms": float(got[0][2]), "new_ms": float(got[1][2]), "ratio": float(got[1][3]), "noise": float(got[2][3])}


def table(rows: list[dict], base: str) -> str:
    out = [f"| model | build | base ({base}) ms | working tree ms | working tree / base | noise (base / base) | <= {LIMIT} |",
           "|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            out.append(f"| {r['model']} | {r['variant']} | {r['error']} | | | | |")
            continue
        out.append(f"| {r['model']} | {r['variant']} | {r['base_ms']:.3f} | {r['new_ms']:.3f} | {r['ratio']:.3f} | "
                   f"{r['noise']:.3f} | {'yes' if r['ratio'] <= LIMIT else '**no**'} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", required=True, help="a commit (sha, branch, tag) to compare the working tree with")
    ap.add_argument("--models", help="comma-separated (default: the five, bench/models/registry.py ORIGINALS)")
    ap.add_argument("--variants", default="relaxed", help=f"comma-separated, of {', '.join(WASM)}")
    ap.add_argument("--rounds", type=int, default=16)
    ap.add_argument("--ms", type=int, default=100, help="CPU ms per build per round")
    ap.add_argument("--json", type=Path, default=BENCH / "results" / "five_ab.json")
    a = ap.parse_args(argv)
    variants = [v.strip() for v in a.variants.split(",") if v.strip()]
    bad = [v for v in variants if v not in WASM]
    if bad or not variants:
        raise SystemExit(f"error: --variants {a.variants}: choose from {', '.join(WASM)}")
    if a.models is None:
        from bench.models.registry import ORIGINALS   # imports torch: only when needed
    names = [n.strip() for n in a.models.split(",") if n.strip()] if a.models else list(ORIGINALS)
    sha, tree = base_tree(a.base)
    flags = run.node_flags()
    if "relaxed" in variants and not flags:
        raise SystemExit("error: this Node does not take --experimental-wasm-relaxed-simd: use --variants simd")
    out_dir = run.BUNDLES_DIR / "five_ab"
    rows = []
    for n in names:
        try:
            src = run.model_file(n)
            print(f"[five_ab] {n}: packaging with {sha} and with the working tree", file=sys.stderr)
            base_b = package_with(tree, src, out_dir / f"{n}_{sha}")
            new_b = package_with(REPO, src, out_dir / f"{n}_work")
        except (RuntimeError, subprocess.CalledProcessError) as e:
            rows += [{"model": n, "variant": v, "error": str(e)[:200]} for v in variants]
            continue
        for v in variants:
            try:
                rows.append({"model": n, "variant": v, **pair(base_b, new_b, v, a.rounds, a.ms, flags)})
            except RuntimeError as e:
                rows.append({"model": n, "variant": v, "error": str(e)})
            print(table(rows[-1:], sha).splitlines()[2], file=sys.stderr)
    md = table(rows, sha)
    load = os.getloadavg()
    print(f"\n{md}\n\nbench/ab_pair.mjs, {a.rounds} rounds x {a.ms} ms CPU per build, order reversed every other round; "
          f"load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} ({run.machine()})")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=REPO).stdout.strip()
    a.json.parent.mkdir(parents=True, exist_ok=True)
    a.json.write_text(json.dumps({"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                                  "base": sha, "head": commit, "load": load, "table": md, "rows": rows}, indent=1) + "\n")
    print(f"wrote {a.json}")
    return 1 if any("error" in r for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
