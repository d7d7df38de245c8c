"""ONNX backend node conformance: every case of onnx.backend.test.case.node through package -> bundle -> wasmtime.

    python -m tests.conformance.runner [--ops Relu,Conv] [--json results.json] [--variant simd|scalar]
                                       [--mode bound|runtime]

Each case ends as one of:
  pass      packaged, ran, outputs match the case's expected outputs (rtol 1e-3, atol 1e-5)
  rejected  refused at package time with a PackagerError naming op, node and opset (the designed outcome
            for ops, dtypes and attributes edgepack does not support)
  fail      packaged but outputs differ, or the runtime refused the plan   <- a bug
  crash     any other exception                                             <- a bug
Two modes:
  bound     inputs that an op needs at package time (Reshape's shape, Slice's starts, ...) are bound as constants
            (the CLI's --const), as an exporter would have made them initializers, and input shapes are fixed
            to the case's (--input-shape)
  runtime   each case packaged as it comes (package(..., dynamic=True): no constants, no shapes given) and every
            graph input fed at run time, as a user would feed it
"""
from __future__ import annotations

import argparse
import json
import signal
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import onnx
import onnx.numpy_helper

RTOL, ATOL = 1e-3, 1e-5
CASE_TIMEOUT_S = 60


def collect(ops: set[str] | None = None):
    from onnx.backend.test.case import node
    from onnx.backend.test.case.utils import import_recursive
    import_recursive(node)
    cases = node.collect_testcases("all") if hasattr(node, "collect_testcases") else []
    out = []
    for c in cases:
        if ops and not (ops & {n.op_type for n in c.model.graph.node}):
            continue
        out.append((c, _op_of(c)))
    return out


def _op_of(case) -> str:
    types = [n.op_type for n in case.model.graph.node]
    name = case.name.lower().replace("test_", "", 1).replace("_", "")
    for t in sorted(set(types), key=len, reverse=True):
        if name.startswith(t.lower()):
            return t
    return types[0] if types else "?"


def is_float32_case(case) -> bool:
    import onnx
    g = case.model.graph
    elem = [vi.type.tensor_type.elem_type for vi in list(g.input) + list(g.output)]
    return bool(elem) and onnx.TensorProto.FLOAT in elem and all(
        e in (onnx.TensorProto.FLOAT, onnx.TensorProto.INT64, onnx.TensorProto.BOOL) for e in elem)


class _Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise _Timeout()


def _array(v):
    """A data-set value as numpy: some cases (float16 casts) store TensorProtos; sequences stay lists."""
    if isinstance(v, onnx.TensorProto):
        return onnx.numpy_helper.to_array(v)
    return v if isinstance(v, (np.ndarray, list)) else np.asarray(v)


MODES = ("bound", "runtime")


def package_case(case, out: Path, mode: str = "bound") -> dict:
    """Package a case's model into `out` as a web bundle. Inputs the packager needs at package time are
    bound as constants (as an exporter makes them initializers). Returns the feeds left for run time;
    raises PackagerError when the case is refused."""
    from packager import package
    from packager.errors import NeedsConstantError, PackagerError
    ins, _ = case.data_sets[0]
    g = case.model.graph
    init_names = {i.name for i in g.initializer}
    in_names = [vi.name for vi in g.input if vi.name not in init_names]
    # sequence/optional inputs stay lists: the packager refuses their graph inputs with a clear error
    feeds = {n: _array(v) for n, v in zip(in_names, ins)}
    if mode == "runtime":   # as it comes: the packager sees only the model, every input is fed at run time
        package(case.model, target="web", out=out, verify=False, dynamic=True)
        return feeds
    consts: dict[str, np.ndarray] = {}
    for _ in range(4):
        try:
            # dynamic=False: a shape-deciding input is refused (then bound), not taken as a value input; every
            # numeric input's shape fixed to its data's (kind V: the low-precision ml_dtypes, e.g. CastLike's like)
            package(case.model, target="web", out=out, constants=consts, verify=False, dynamic=False,
                    input_shapes={n: tuple(v.shape) for n, v in feeds.items()
                                  if n not in consts and isinstance(v, np.ndarray) and v.dtype.kind in "biufV"})
            return {n: v for n, v in feeds.items() if n not in consts}
        except NeedsConstantError as e:
            new = [n for n in e.names if n in feeds and n not in consts]
            if not new:
                raise
            consts.update({n: feeds[n] for n in new})
    raise PackagerError("too many inputs must be bound as constants")


def _small_float(dt: np.dtype) -> bool:
    """A float dtype, numpy's or ml_dtypes' (bfloat16, float8, float4: numpy's kind for most is 'V')."""
    import ml_dtypes
    try:
        ml_dtypes.finfo(dt)
        return True
    except (TypeError, ValueError):
        return False


def check_outputs(got: dict, expected, out_names: list[str]) -> tuple[str, str]:
    """('pass', '') when every output matches the case's expected value, else ('fail', why)."""
    for name, want in zip(out_names, expected):
        want = _array(want)
        have = got.get(name)
        if have is None or have.shape != want.shape:
            return "fail", f"output {name}: shape {None if have is None else have.shape} != {want.shape}"
        if want.dtype.kind == "f" or _small_float(want.dtype):
            if want.dtype.char not in "efd":   # bfloat16, float8, float4 (ml_dtypes), compared as values
                if have.dtype != want.dtype:
                    return "fail", f"output {name}: dtype {have.dtype} != {want.dtype}"
                have, want = have.astype(np.float64), want.astype(np.float64)
            if not np.allclose(have, want, rtol=RTOL, atol=ATOL, equal_nan=True):
                err = np.nanmax(np.abs(have.astype(np.float64) - want))
                return "fail", f"output {name}: max abs diff {err:.3g}"
        elif not np.array_equal(have, want):
            return "fail", f"output {name}: values differ"
    return "pass", ""


def refusal(e: Exception) -> tuple[str, str]:
    """A PackagerError as a status: the runtime refusing a packaged plan is a bug, anything else a rejection."""
    return ("fail" if type(e).__name__ == "RuntimeFailure" else "rejected"), str(e).splitlines()[0][:300]


def run_case(case, workdir: Path, variant: str = "simd", mode: str = "bound") -> tuple[str, str]:
    from packager import load_bundle
    from packager.errors import PackagerError
    if not case.data_sets:
        return "rejected", "no data set"
    _, expected = case.data_sets[0]
    out = workdir / "bundle"
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(CASE_TIMEOUT_S)
    try:
        feeds = package_case(case, out, mode)
        got = load_bundle(out, variant).run(feeds)
    except PackagerError as e:
        return refusal(e)
    except _Timeout:
        return "crash", f"timeout after {CASE_TIMEOUT_S}s"
    except Exception as e:  # noqa: BLE001 - everything else is a bug to report
        return "crash", f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"
    finally:
        signal.alarm(0)
    return check_outputs(got, expected, [o.name for o in case.model.graph.output])


def run_beside_wasm(case, workdir: Path, other: str, run_other, mode: str = "bound") -> dict[str, tuple[str, str]]:
    """{'wasm': (status, why), other: (status, why)} for one case packaged once (`mode` as in run_case) and run on
    the same plan by the
    wasm SIMD build and by `run_other(bundle_dir, feeds, loaded_bundle, wasm_status, judge)`, which returns its
    (status, why); `judge(outputs)` compares outputs with the case's expected ones."""
    import subprocess
    from packager import load_bundle
    from packager.errors import PackagerError
    kinds = ("wasm", other)
    if not case.data_sets:
        return {k: ("rejected", "no data set") for k in kinds}
    _, expected = case.data_sets[0]
    out = workdir / "bundle"
    out_names = [o.name for o in case.model.graph.output]

    def judge(got: dict) -> tuple[str, str]:
        return check_outputs(got, expected, out_names)

    res: dict[str, tuple[str, str]] = {}
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(CASE_TIMEOUT_S)
    try:
        b_feeds = package_case(case, out, mode)
        b = load_bundle(out, "simd")
        run_feeds = b.check_feeds(b_feeds)
        try:
            res["wasm"] = judge(b.run(run_feeds))
        except PackagerError as e:
            res["wasm"] = refusal(e)
        res[other] = run_other(out, run_feeds, b, res["wasm"][0], judge)
    except PackagerError as e:
        return {k: res.get(k, refusal(e)) for k in kinds}
    except (_Timeout, subprocess.TimeoutExpired):
        return {k: res.get(k, ("crash", f"timeout after {CASE_TIMEOUT_S}s")) for k in kinds}
    except Exception as e:  # noqa: BLE001 - everything else is a bug to report
        why = f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"
        return {k: res.get(k, ("crash", why)) for k in kinds}
    finally:
        signal.alarm(0)
    return res


def beside_row(case, op: str, r: dict[str, tuple[str, str]], other: str, t0: float) -> dict:
    """One result of run_beside_wasm as runner_aarch64 and runner_asan keep it: both statuses, both reasons."""
    return {"case": case.name, "op": op, "float32": is_float32_case(case),
            "wasm": r["wasm"][0], "wasm_why": r["wasm"][1], other: r[other][0], f"{other}_why": r[other][1],
            "seconds": round(time.perf_counter() - t0, 3)}


def report_beside(results: list[dict], other: str, bad: tuple[str, ...], why_chars: int, json_path: str | None) -> int:
    """Prints each case where `other` ended in a `bad` status or disagrees with wasm, writes the JSON if asked;
    the exit status (1 if any case was printed)."""
    n = 0
    for r in results:
        if r[other] in bad or r["wasm"] != r[other]:
            n += 1
            print(f"  {r['case']}: wasm {r['wasm']} {r['wasm_why'][:80]} | {other} {r[other]} {r[other + '_why'][:why_chars]}")
    if json_path:
        Path(json_path).write_text(json.dumps(results, indent=1))
    return 1 if n else 0


def run_all(ops: set[str] | None = None, variant: str = "simd", float32_only: bool = False,
            progress: bool = False, mode: str = "bound", only: set[str] | None = None) -> list[dict]:
    """only: these case names (default: all)."""
    results = []
    cases = collect(ops)
    with tempfile.TemporaryDirectory() as tmp:
        for i, (case, op) in enumerate(cases):
            t = time.perf_counter()
            f32 = is_float32_case(case)
            if (float32_only and not f32) or (only is not None and case.name not in only):
                continue
            status, why = run_case(case, Path(tmp), variant, mode)
            results.append({"case": case.name, "op": op, "float32": f32, "status": status, "why": why,
                            "seconds": round(time.perf_counter() - t, 3)})
            if progress and (i % 100 == 0):
                print(f"  {i}/{len(cases)}", file=sys.stderr)
    return results


def table(results: list[dict]) -> str:
    per = defaultdict(lambda: defaultdict(int))
    for r in results:
        per[r["op"]][r["status"]] += 1
        if r["float32"]:
            per[r["op"]]["f32"] += 1
    rows = [f"{'op':<28}{'cases':>6}{'f32':>6}{'pass':>6}{'rej':>6}{'fail':>6}{'crash':>6}"]
    tot = defaultdict(int)
    for op in sorted(per):
        c = per[op]
        n = sum(c[k] for k in ("pass", "rejected", "fail", "crash"))
        if not c["pass"] and not c["fail"] and not c["crash"]:
            tot["rejected_ops"] += 1
        for k in ("pass", "rejected", "fail", "crash", "f32"):
            tot[k] += c[k]
        tot["cases"] += n
        if c["pass"] or c["fail"] or c["crash"]:
            rows.append(f"{op:<28}{n:>6}{c['f32']:>6}{c['pass']:>6}{c['rejected']:>6}{c['fail']:>6}{c['crash']:>6}")
    rows.append(f"{'(' + str(tot['rejected_ops']) + ' ops rejected whole)':<28}")
    rows.append(f"{'total':<28}{tot['cases']:>6}{tot['f32']:>6}{tot['pass']:>6}{tot['rejected']:>6}"
                f"{tot['fail']:>6}{tot['crash']:>6}")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ops", help="comma-separated op types to run (default: all)")
    ap.add_argument("--variant", default="simd", choices=["simd", "scalar", "relaxed"])
    ap.add_argument("--mode", default="bound", choices=MODES,
                    help="bound: shape-deciding inputs as constants, shapes fixed (default); runtime: every case "
                         "packaged as it comes (dynamic=True) and every input fed at run time")
    ap.add_argument("--json", help="write per-case results here")
    ap.add_argument("--show", choices=["fail", "crash", "rejected", "pass"], action="append", default=[],
                    help="list cases with this status")
    a = ap.parse_args(argv)
    ops = set(a.ops.split(",")) if a.ops else None
    results = run_all(ops, a.variant, progress=True, mode=a.mode)
    print(table(results))
    for r in results:
        if r["status"] in a.show or r["status"] in ("fail", "crash"):
            print(f"{r['status']:>8}  {r['case']}: {r['why']}")
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=1))
    return 0 if not any(r["status"] in ("fail", "crash") for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
