"""What a model asks of one core, from its ONNX graph alone: the float32 multiply-adds of its compute ops and the
bytes of its constant weights. Divided by the machine's measured ceilings (bench/ceilings.mjs: the multiply-add
rate and the memory streaming rate of one wasm thread) they give the run time no implementation on that thread can
beat, the bounds issue 19's 1.15x rule refers to (bench/zoo.py prints them).

Counted (2 FLOPs per multiply-add; shapes from onnx shape inference at the given input shapes, onnxruntime's symbolic
shape inference where onnx's leaves a counted node's shape unknown):
  Conv (groups, dilations: dilated taps are still taps; padded taps count, as a direct convolution computes them),
  ConvTranspose, MatMul (batched and broadcast, 1-D operands), Gemm, Attention (ONNX, opset 23: Q·Kᵀ and P·V),
  LSTM / GRU / RNN (input and recurrent products of every step and direction), Einsum of two operands without an
  ellipsis (the product of all index sizes).
Not counted: elementwise ops, activations, normalizations, Softmax, pooling and reductions (no multiply-add work a
wider FMA unit speeds up; they are why a model cannot reach its compute bound exactly), integer ops (MatMulInteger,
QLinearConv...: the float32 ceiling does not apply to them), contrib-domain ops, the bodies of If / Loop / Scan, and
any counted op whose shapes stay unknown. `uncounted` names them.

The FLOPs are those of the direct algorithms: a convolution run as Winograd F(2x2) / F(4x4) does 2.25x / 4x fewer
multiplies on its 3x3 layers, so a Winograd model can run under its compute "bound".

    python3 -m bench.bounds MODEL.onnx [MODEL.onnx ...] [--input-shape name=1x3x224x224]
"""
from __future__ import annotations

import argparse
import hashlib
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper, shape_inference

Shapes = dict[str, tuple[int, ...]]


@dataclass(frozen=True)
class ModelWork:
    flops: int                                   # float32 FLOPs (2 per multiply-add) of the counted ops
    weight_bytes: int                            # constant tensors, each distinct tensor once (a transposed copy too)
    flops_by_op: dict[str, int] = field(default_factory=dict)
    uncounted: dict[str, int] = field(default_factory=dict)   # op (or "op: why") -> nodes whose FLOPs are not counted


def _dims(vi: onnx.ValueInfoProto) -> tuple[int, ...] | None:
    t = vi.type.tensor_type
    if not t.HasField("shape") or any(not d.HasField("dim_value") for d in t.shape.dim):
        return None
    return tuple(d.dim_value for d in t.shape.dim)


def _fix_inputs(m: onnx.ModelProto, input_shapes: Shapes | None) -> onnx.ModelProto:
    """A copy of m whose graph inputs have concrete dims: `input_shapes` where given, a symbolic dim 1 otherwise (the
    batch-1 static plan the benchmarks package)."""
    out = onnx.ModelProto()
    out.CopyFrom(m)
    inits = {i.name for i in out.graph.initializer}
    for vi in out.graph.input:
        if vi.name in inits:
            continue
        want = (input_shapes or {}).get(vi.name)
        dims = vi.type.tensor_type.shape.dim
        if want is not None and len(want) != len(dims):
            raise ValueError(f"input '{vi.name}' has rank {len(dims)}, the shape given has {len(want)} dims")
        for i, d in enumerate(dims):
            v = want[i] if want is not None else (d.dim_value if d.HasField("dim_value") else 1)
            d.Clear()
            d.dim_value = int(v)
    return out


def _shapes(m: onnx.ModelProto) -> Shapes:
    shapes: Shapes = {}
    for vi in [*m.graph.input, *m.graph.value_info, *m.graph.output]:
        s = _dims(vi)
        if s is not None:
            shapes[vi.name] = s
    for t in m.graph.initializer:
        shapes[t.name] = tuple(t.dims)
    for n in m.graph.node:
        if n.op_type == "Constant" and n.domain in ("", "ai.onnx"):
            for a in n.attribute:
                if a.name == "value":
                    shapes[n.output[0]] = tuple(a.t.dims)
    return shapes


def infer(m: onnx.ModelProto) -> Shapes:
    """Every tensor shape onnx's shape inference (with data propagation) resolves; onnxruntime's symbolic shape
    inference fills in when a counted node's shapes stay unknown (Reshapes fed by computed shapes)."""
    try:
        shapes = _shapes(shape_inference.infer_shapes(m, data_prop=True))
    except Exception:  # noqa: BLE001 - onnx refuses some graphs onnxruntime's inference takes
        shapes = _shapes(m)
    if all(_known(n, shapes) for n in m.graph.node if n.op_type in COUNTERS):
        return shapes
    try:
        from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference
        more = _shapes(SymbolicShapeInference.infer_shapes(m, auto_merge=True))
    except Exception:  # noqa: BLE001 - a model it cannot infer keeps onnx's shapes; those nodes are listed uncounted
        return shapes
    return {**more, **shapes}


def _known(n: onnx.NodeProto, shapes: Shapes) -> bool:
    return all(x in shapes for x in [*n.input, *n.output] if x)


def _attr(n: onnx.NodeProto, name: str, default: object) -> object:
    for a in n.attribute:
        if a.name == name:
            return onnx.helper.get_attribute_value(a)
    return default


def _conv(n: onnx.NodeProto, s: Shapes) -> int:
    w, y = s[n.input[1]], s[n.output[0]]            # W [M, C/group, k...], Y [N, M, out...]
    return y[0] * y[1] * math.prod(y[2:]) * w[1] * math.prod(w[2:])


def _conv_transpose(n: onnx.NodeProto, s: Shapes) -> int:
    x, w = s[n.input[0]], s[n.input[1]]             # X [N, C, in...], W [C, M/group, k...]: every input pixel
    return x[0] * x[1] * math.prod(x[2:]) * w[1] * math.prod(w[2:])   # scatters a k-window to M/group channels


def _matmul(n: onnx.NodeProto, s: Shapes) -> int:
    a, b = s[n.input[0]], s[n.input[1]]
    a2 = (1, *a) if len(a) == 1 else a
    b2 = (*b, 1) if len(b) == 1 else b
    batch = np.broadcast_shapes(a2[:-2], b2[:-2])
    return math.prod(batch) * a2[-2] * a2[-1] * b2[-1]


def _gemm(n: onnx.NodeProto, s: Shapes) -> int:
    a, b = s[n.input[0]], s[n.input[1]]
    m, k = (a[1], a[0]) if _attr(n, "transA", 0) else a
    nn = b[0] if _attr(n, "transB", 0) else b[1]
    return m * k * nn


def _attention(n: onnx.NodeProto, s: Shapes) -> int:
    q, k, v, y = s[n.input[0]], s[n.input[1]], s[n.input[2]], s[n.output[0]]
    if len(q) == 4:                                  # Q [B, Hq, S, D], K [B, Hkv, L, D], V [B, Hkv, L, Dv]
        b, hq, sq, d = q
        return b * hq * sq * k[2] * (d + v[3])
    return q[0] * q[1] * k[1] * (q[2] + y[2])        # Q [B, S, Hq*D], K [B, L, Hkv*D], Y [B, S, Hq*Dv]


def _recurrent(n: onnx.NodeProto, s: Shapes) -> int:
    x, w, r = s[n.input[0]], s[n.input[1]], s[n.input[2]]   # W [D, G*H, I], R [D, G*H, H]
    steps, batch = (x[1], x[0]) if _attr(n, "layout", 0) else (x[0], x[1])
    return w[0] * steps * batch * (w[1] * w[2] + r[1] * r[2])


def _einsum(n: onnx.NodeProto, s: Shapes) -> int:
    eq = _attr(n, "equation", b"")
    eq = (eq.decode() if isinstance(eq, bytes) else eq).replace(" ", "")
    lhs = eq.split("->")[0].split(",")
    if len(lhs) != 2 or "." in eq:
        raise _Uncounted("not a product of two operands without an ellipsis")
    size: dict[str, int] = {}
    for term, name in zip(lhs, n.input):
        for c, d in zip(term, s[name]):
            size[c] = max(size.get(c, 1), d)
    return math.prod(size.values())


class _Uncounted(Exception):
    pass


COUNTERS = {"Conv": _conv, "ConvTranspose": _conv_transpose, "MatMul": _matmul, "Gemm": _gemm, "Attention": _attention,
            "LSTM": _recurrent, "GRU": _recurrent, "RNN": _recurrent, "Einsum": _einsum}
# integer products: real multiply-add work, but not float32 work the FMA ceiling measures
INTEGER = {"MatMulInteger", "ConvInteger", "QLinearConv", "QLinearMatMul"}


def _float_input(n: onnx.NodeProto, elem: dict[str, int]) -> bool:
    t = elem.get(n.input[0])
    return t is None or t == onnx.TensorProto.FLOAT


def count_flops(m: onnx.ModelProto, shapes: Shapes) -> tuple[dict[str, int], dict[str, int]]:
    """(FLOPs per op type, uncounted nodes per op type) over the main graph's nodes."""
    elem = {vi.name: vi.type.tensor_type.elem_type for vi in [*m.graph.input, *m.graph.value_info, *m.graph.output]}
    elem.update({t.name: t.data_type for t in m.graph.initializer})
    by: dict[str, int] = {}
    skipped: dict[str, int] = {}

    def skip(why: str) -> None:
        skipped[why] = skipped.get(why, 0) + 1
    for n in m.graph.node:
        if n.domain not in ("", "ai.onnx"):
            skip(f"{n.domain}.{n.op_type}")
        elif n.op_type in INTEGER:
            skip(f"{n.op_type}: integer")
        elif n.op_type in ("If", "Loop", "Scan"):
            skip(f"{n.op_type}: body")
        elif n.op_type in COUNTERS:
            if not _known(n, shapes):
                skip(f"{n.op_type}: shape unknown")
            elif not _float_input(n, elem):
                skip(f"{n.op_type}: not float32")
            else:
                try:
                    by[n.op_type] = by.get(n.op_type, 0) + 2 * COUNTERS[n.op_type](n, shapes)
                except _Uncounted as e:
                    skip(f"{n.op_type}: {e}")
    return by, skipped


def _constants(m: onnx.ModelProto) -> list[onnx.TensorProto]:
    out = list(m.graph.initializer)
    for n in m.graph.node:
        if n.op_type == "Constant" and n.domain in ("", "ai.onnx"):
            out += [a.t for a in n.attribute if a.name == "value"]
    return out


def weight_bytes(m: onnx.ModelProto) -> int:
    """Bytes of the model's constant tensors, each distinct tensor once: a tensor stored twice, or once as the
    transpose of another (GPT-2's output projection is its token embedding's transpose), is read once per run by
    an implementation that notices."""
    seen: set[bytes] = set()
    mats: dict[tuple[int, tuple[int, int]], list[np.ndarray]] = {}
    total = 0
    for t in _constants(m):
        a = numpy_helper.to_array(t)
        key = hashlib.blake2b(a.tobytes(), digest_size=16).digest() + str((a.dtype.str, a.shape)).encode()
        if key in seen:
            continue
        seen.add(key)
        if a.ndim == 2 and a.size > 1:
            tkey = (t.data_type, (a.shape[1], a.shape[0]))
            if any(np.array_equal(b, a.T) for b in mats.get(tkey, [])):
                continue
            mats.setdefault((t.data_type, a.shape), []).append(a)
        total += a.nbytes
    return total


def model_work(model: str | Path | onnx.ModelProto, input_shapes: Shapes | None = None) -> ModelWork:
    """FLOPs and constant bytes of `model` at `input_shapes` (symbolic dims not given: 1)."""
    m = model if isinstance(model, onnx.ModelProto) else onnx.load(str(model))
    fixed = _fix_inputs(m, input_shapes)
    by, skipped = count_flops(fixed, infer(fixed))
    return ModelWork(flops=sum(by.values()), weight_bytes=weight_bytes(m), flops_by_op=by, uncounted=skipped)


def last_level_cache_bytes() -> int:
    """The largest CPU cache's size (Linux sysfs; 32 MB where unreadable): weights that fit stay cached across runs,
    so the memory streaming rate does not bound them."""
    sizes = []
    for f in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        t = f.read_text().strip()
        mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(t[-1:], 1)
        try:
            sizes.append(int(t.rstrip("KMG")) * mult)
        except ValueError:
            continue
    return max(sizes, default=32 << 20)


def _median(xs: list[float]) -> float:
    return float(np.median(xs))


def paired_bounds(work: ModelWork, ceilings: dict, ep_ms: list[float], ort_ms: list[float] | None,
                  cache_bytes: int) -> dict:
    """The bounds of one model against the ceilings node_bench.mjs measured in the same rounds (`ceilings`: its
    JSON's, rates per round), with edgepack's and onnxruntime-web's CPU ms per round: per round, compute bound =
    FLOPs at the better of the two multiply-add peaks, memory bound = weight bytes at the streaming rate (none when
    the weights fit in the last-level cache), bound = the larger; ratios are medians of the per-round ratios."""
    peaks = [ceilings[k]["per_round"] for k in ("peak-simd", "peak-relaxed") if k in ceilings]
    peak = [max(r) for r in zip(*peaks)]
    bw = ceilings["stream"]["per_round"]
    compute = [work.flops / p * 1e3 for p in peak]
    memory = [work.weight_bytes / b * 1e3 for b in bw] if work.weight_bytes > cache_bytes else None
    bound = [max(c, m) for c, m in zip(compute, memory or compute)]
    out: dict = {"gflop": work.flops / 1e9, "weight_mb": work.weight_bytes / 1e6, "peak_gflops": _median(peak) / 1e9,
                 "stream_gbs": _median(bw) / 1e9, "compute_ms": _median(compute),
                 "memory_ms": _median(memory) if memory else None, "edgepack_cpu_ms": _median(ep_ms),
                 "bound": "memory" if memory and _median(memory) > _median(compute) else "compute",
                 "flops_by_op": work.flops_by_op, "uncounted": work.uncounted}
    if not all(b > 0 for b in bound):
        return out
    out["x_of_bound"] = _median([e / b for e, b in zip(ep_ms, bound)])
    out["within_1_15"] = out["x_of_bound"] <= 1.15
    if ort_ms:
        out["half_ort_web_over_bound"] = _median([0.5 * o / b for o, b in zip(ort_ms, bound)])
        out["half_unreachable"] = out["half_ort_web_over_bound"] < 1.0
    return out


def _shape_arg(s: str) -> tuple[str, tuple[int, ...]]:
    name, _, dims = s.partition("=")
    if not dims:
        raise argparse.ArgumentTypeError(f"--input-shape wants name=1x3x224x224, got '{s}'")
    try:
        return name, tuple(int(d) for d in dims.split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--input-shape wants name=1x3x224x224, got '{s}'") from None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="+", type=Path)
    ap.add_argument("--input-shape", type=_shape_arg, action="append", default=[])
    a = ap.parse_args(argv)
    for p in a.models:
        try:
            w = model_work(p, dict(a.input_shape) or None)
        except Exception as e:  # noqa: BLE001 - a file that is not a model (protobuf's DecodeError...) is an error line
            print(f"error: {p}: {str(e).splitlines()[0] if str(e) else type(e).__name__}", file=sys.stderr)
            return 1
        ops = ", ".join(f"{k} {v / 1e9:.3f}" for k, v in sorted(w.flops_by_op.items(), key=lambda kv: -kv[1]))
        print(f"{p.stem}: {w.flops / 1e9:.3f} GFLOP ({ops}), weights {w.weight_bytes / 1e6:.1f} MB"
              + (f"; not counted: {', '.join(f'{k} x{v}' for k, v in w.uncounted.items())}" if w.uncounted else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
