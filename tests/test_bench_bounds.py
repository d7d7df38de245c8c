"""bench/bounds.py against hand-computed FLOPs and bytes on tiny models, its pairing with measured ceilings, and
the ceilings measured for real: fma_peak.c built, node_bench.mjs timing a packaged model with --ceilings in one Node
process, the bound computed from what it wrote (a benchmark's plumbing, not its figures)."""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from bench.bounds import ModelWork, main, model_work, paired_bounds, weight_bytes
from tests.conftest import MODELS, f32, make_model

REPO = Path(__file__).resolve().parent.parent


def _w(name: str, shape: tuple[int, ...], seed: int = 0) -> onnx.TensorProto:
    return numpy_helper.from_array(np.random.default_rng(seed).standard_normal(shape).astype(np.float32), name)


def test_conv_groups_dilations_pads() -> None:
    # X [1,4,8,8], W [6,2,3,3], group 2, dilation 2 (a 5x5 reach), pads 1: Y [1,6,6,6]; each output sums 2*9 taps
    m = make_model([helper.make_node("Conv", ["x", "w"], ["y"], group=2, dilations=[2, 2], pads=[1, 1, 1, 1])],
                   [f32("x", [1, 4, 8, 8])], [f32("y", None)], [_w("w", (6, 2, 3, 3))])
    w = model_work(m)
    assert w.flops == 2 * (6 * 6 * 6) * (2 * 9) == 7776
    assert w.flops_by_op == {"Conv": 7776} and w.uncounted == {}
    assert w.weight_bytes == 6 * 2 * 9 * 4


def test_conv_transpose() -> None:
    # every one of the 3*4*4 input values scatters a 3x3 window into 2 output channels (W [3,2,3,3])
    m = make_model([helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2])],
                   [f32("x", [1, 3, 4, 4])], [f32("y", None)], [_w("w", (3, 2, 3, 3))])
    assert model_work(m).flops == 2 * 3 * 16 * 2 * 9


def test_matmul_batched_broadcast_and_vectors() -> None:
    nodes = [helper.make_node("MatMul", ["a", "b"], ["c"]),            # [2,1,5,7] x [3,7,4]: batch (2,3), 5x7x4
             helper.make_node("MatMul", ["v", "w"], ["d"]),            # [7] x [7,4]: 1x7x4
             helper.make_node("MatMul", ["w2", "v"], ["e"])]           # [4,7] x [7]: 4x7x1
    m = make_model(nodes, [f32("a", [2, 1, 5, 7]), f32("b", [3, 7, 4]), f32("v", [7])],
                   [f32("c", None), f32("d", None), f32("e", None)], [_w("w", (7, 4)), _w("w2", (4, 7), 1)])
    assert model_work(m).flops == 2 * (6 * 5 * 7 * 4 + 28 + 28)


def test_gemm_transposes() -> None:
    m = make_model([helper.make_node("Gemm", ["a", "b", "c"], ["y"], transA=1, transB=1)],
                   [f32("a", [7, 5])], [f32("y", None)], [_w("b", (4, 7)), _w("c", (4,), 1)])
    assert model_work(m).flops == 2 * 5 * 7 * 4


def test_recurrent() -> None:
    # LSTM, bidirectional, S=3, B=2, I=5, H=4: per step and direction 4H x (I + H) multiply-adds per batch row
    lstm = make_model([helper.make_node("LSTM", ["x", "w", "r"], ["y"], hidden_size=4, direction="bidirectional")],
                      [f32("x", [3, 2, 5])], [f32("y", None)], [_w("w", (2, 16, 5)), _w("r", (2, 16, 4), 1)])
    assert model_work(lstm).flops == 2 * 2 * 3 * 2 * 16 * (5 + 4)
    # GRU, batch-first layout: X [B=2, S=3, I=5], H=4, 3 gates
    gru = make_model([helper.make_node("GRU", ["x", "w", "r"], ["y"], hidden_size=4, layout=1)],
                     [f32("x", [2, 3, 5])], [f32("y", None)], [_w("w", (1, 12, 5)), _w("r", (1, 12, 4), 1)], opset=14)
    assert model_work(gru).flops == 2 * 3 * 2 * 12 * (5 + 4)
    rnn = make_model([helper.make_node("RNN", ["x", "w", "r"], ["y"], hidden_size=4)],
                     [f32("x", [3, 2, 5])], [f32("y", None)], [_w("w", (1, 4, 5)), _w("r", (1, 4, 4), 1)])
    assert model_work(rnn).flops == 2 * 3 * 2 * 4 * (5 + 4)


def test_einsum_and_attention() -> None:
    nodes = [helper.make_node("Einsum", ["a", "b"], ["c"], equation="bij,bjk->bik"),
             helper.make_node("Einsum", ["s"], ["t"], equation="ii->i"),
             helper.make_node("Attention", ["q", "k", "v"], ["y"])]
    m = make_model(nodes, [f32("a", [2, 3, 4]), f32("b", [2, 4, 5]), f32("s", [3, 3]), f32("q", [1, 2, 3, 4]),
                           f32("k", [1, 2, 5, 4]), f32("v", [1, 2, 5, 6])],
                   [f32("c", None), f32("t", None), f32("y", None)], opset=23)
    w = model_work(m)
    # Einsum: 2*3*4*5 products; Attention: per head 3x5 scores of depth 4, then 3x6 outputs of depth 5
    assert w.flops_by_op == {"Einsum": 2 * 120, "Attention": 2 * 2 * (3 * 5 * 4 + 3 * 6 * 5)}
    assert w.uncounted == {"Einsum: not a product of two operands without an ellipsis": 1}


def test_attention_3d_heads() -> None:
    # Q [B=1, S=3, 2 heads x 4], K [1, L=5, 8], V [1, 5, 2 heads x 6]: the same work as the 4-D case above
    m = make_model([helper.make_node("Attention", ["q", "k", "v"], ["y"], q_num_heads=2, kv_num_heads=2)],
                   [f32("q", [1, 3, 8]), f32("k", [1, 5, 8]), f32("v", [1, 5, 12])], [f32("y", None)], opset=23)
    assert model_work(m).flops == 2 * 2 * (3 * 5 * 4 + 3 * 6 * 5)


def test_symbolic_batch_and_input_shapes() -> None:
    m = make_model([helper.make_node("MatMul", ["x", "w"], ["y"])], [f32("x", ["N", 8])], [f32("y", None)],
                   [_w("w", (8, 3))])
    assert model_work(m).flops == 2 * 8 * 3                 # a symbolic dim is 1, as the benchmarks' static plans
    assert model_work(m, {"x": (5, 8)}).flops == 2 * 5 * 8 * 3
    with pytest.raises(ValueError, match="rank"):
        model_work(m, {"x": (5,)})


def test_shapes_through_computed_reshape() -> None:
    # the Reshape's target comes from Shape -> Slice -> Concat: onnx's data propagation (or onnxruntime's
    # symbolic inference) must carry it for the MatMul after it to be counted
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Slice", ["s", "zero", "one"], ["s0"]),
             helper.make_node("Concat", ["s0", "minus1"], ["target"], axis=0),
             helper.make_node("Reshape", ["x", "target"], ["x2"]),
             helper.make_node("MatMul", ["x2", "w"], ["y"])]
    ints = [numpy_helper.from_array(np.array(v, np.int64), n) for n, v in (("zero", [0]), ("one", [1]), ("minus1", [-1]))]
    m = make_model(nodes, [f32("x", [2, 3, 4])], [f32("y", None)], [*ints, _w("w", (12, 5))])
    w = model_work(m)
    assert w.flops == 2 * 2 * 12 * 5 and w.uncounted == {}


def test_uncounted_ops_are_named() -> None:
    nodes = [helper.make_node("MatMulInteger", ["a", "b"], ["c"]),
             helper.make_node("Relu", ["x"], ["y"])]
    m = make_model(nodes, [helper.make_tensor_value_info("a", TensorProto.UINT8, [2, 3]),
                           helper.make_tensor_value_info("b", TensorProto.UINT8, [3, 4]), f32("x", [3])],
                   [helper.make_tensor_value_info("c", TensorProto.INT32, None), f32("y", None)])
    w = model_work(m)
    assert w.flops == 0 and w.uncounted == {"MatMulInteger: integer": 1}


def test_weight_bytes_counts_each_tensor_once() -> None:
    a = np.arange(12, dtype=np.float32).reshape(4, 3)
    inits = [numpy_helper.from_array(a, "w"), numpy_helper.from_array(a.copy(), "w_copy"),
             numpy_helper.from_array(np.ascontiguousarray(a.T), "w_t"),          # a tied transpose (GPT-2's head)
             numpy_helper.from_array(a[:, ::-1].copy(), "other")]               # same shape, other values: counted
    const = helper.make_node("Constant", [], ["k"], value=numpy_helper.from_array(np.array([3, 4], np.int64)))
    m = make_model([const, helper.make_node("Identity", ["x"], ["y"])], [f32("x", [1])], [f32("y", None)], inits)
    assert weight_bytes(m) == 48 + 48 + 16


def test_paired_bounds_compute_and_memory() -> None:
    ceil = {"peak-simd": {"per_round": [40e9, 30e9]}, "peak-relaxed": {"per_round": [50e9, 25e9]},
            "stream": {"per_round": [20e9, 25e9]}}
    cpu = ModelWork(flops=int(1e9), weight_bytes=10 << 20)             # 1 GFLOP, weights fit a 32 MB cache
    b = paired_bounds(cpu, ceil, ep_ms=[22.0, 36.0], ort_ms=[30.0, 60.0], cache_bytes=32 << 20)
    # per round: bound 20 ms (50 GFLOP/s) and 33.3 ms (30 GFLOP/s); edgepack 1.1x and 1.08x; 0.5x ort-web 0.75, 0.9
    assert b["bound"] == "compute" and b["memory_ms"] is None
    assert b["compute_ms"] == pytest.approx((20 + 1e3 / 30) / 2)
    assert b["x_of_bound"] == pytest.approx((1.1 + 36 / (1e3 / 30)) / 2)
    assert b["half_unreachable"] and b["within_1_15"]
    mem = ModelWork(flops=int(1e6), weight_bytes=500_000_000)
    b = paired_bounds(mem, ceil, ep_ms=[30.0, 30.0], ort_ms=[40.0, 40.0], cache_bytes=32 << 20)
    assert b["bound"] == "memory" and b["memory_ms"] == pytest.approx((25 + 20) / 2)
    assert not b["within_1_15"] and b["half_unreachable"]
    none = paired_bounds(ModelWork(flops=0, weight_bytes=0), ceil, [1.0, 1.0], None, 32 << 20)
    assert "x_of_bound" not in none


def test_cli_prints_and_refuses(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    m = make_model([helper.make_node("MatMul", ["x", "w"], ["y"])], [f32("x", ["N", 8])], [f32("y", None)],
                   [_w("w", (8, 3))])
    onnx.save(m, str(tmp_path / "m.onnx"))
    assert main([str(tmp_path / "m.onnx"), "--input-shape", "x=4x8"]) == 0
    assert "m: 0.000 GFLOP (MatMul 0.000), weights 0.0 MB" in capsys.readouterr().out
    (tmp_path / "bad.onnx").write_bytes(b"not a model")
    assert main([str(tmp_path / "bad.onnx")]) == 1
    assert capsys.readouterr().err.startswith("error: ")


@pytest.mark.skipif(not (MODELS / "resnet18.onnx").exists(), reason="benchmark models not built (scripts/setup.sh)")
def test_benchmark_models_match_session_8_figures() -> None:
    # docs/benchmarks.md session 8: resnet18 3.628, mobilenetv2 0.602, minilm_like 2.869 GFLOP (direct convolution)
    for name, gflop in (("resnet18", 3.628), ("mobilenetv2", 0.602), ("minilm_like", 2.869)):
        w = model_work(MODELS / f"{name}.onnx")
        assert w.flops / 1e9 == pytest.approx(gflop, abs=6e-4), name


@pytest.mark.skipif(not shutil.which("node") or not shutil.which("clang-19"), reason="needs node and clang-19")
def test_ceilings_in_the_bench_process(tmp_path: Path) -> None:
    """fma_peak.c's two builds and node_bench.mjs --ceilings on a packaged MatMul: rates per round, CPU ms per
    round for the runtimes, and a bound from them."""
    from bench.fma_peak import build_all
    from bench.run import node_flags
    from packager import package
    m = make_model([helper.make_node("MatMul", ["x", "w"], ["y"])], [f32("x", [64, 256])], [f32("y", [64, 256])],
                   [_w("w", (256, 256))])
    onnx.save(m, str(tmp_path / "mm.onnx"))
    bundle = package(tmp_path / "mm.onnx", out=tmp_path / "b", verify=False, dynamic=False)
    out = tmp_path / "r.json"
    subprocess.run(["node", *node_flags(), str(REPO / "bench" / "node_bench.mjs"), str(tmp_path / "mm.onnx"), str(bundle),
                    "--seconds", "0.1", "--rounds", "2", "--slice", "0.05", "--no-native", "--variants", "simd",
                    "--ceilings", str(build_all(tmp_path / "ceil")), "--stream-mb", "48", "--json", str(out)],
                   check=True, capture_output=True, cwd=REPO / "bench", timeout=120)
    rep = json.loads(out.read_text())
    c = rep["ceilings"]
    assert {"peak-simd", "stream"} <= set(c) and all(len(v["per_round"]) == 2 and v["median"] > 0 for v in c.values())
    assert 1e9 < c["peak-simd"]["median"] < 1e12 and 1e8 < c["stream"]["median"] < 1e12   # FLOP/s, byte/s
    assert len(rep["cpu_round_ms"]["edgepack-simd"]) == 2 and len(rep["cpu_round_ms"]["ort-web"]) == 2
    b = paired_bounds(model_work(tmp_path / "mm.onnx"), c, rep["cpu_round_ms"]["edgepack-simd"],
                      rep["cpu_round_ms"]["ort-web"], cache_bytes=32 << 20)
    assert b["gflop"] == pytest.approx(2 * 64 * 256 * 256 / 1e9) and b["x_of_bound"] > 0.8   # no run beats the peak
    assert isinstance(b["half_unreachable"], bool)


def test_zoo_bounds_table() -> None:
    from bench.zoo import bounds_table
    ceil = {"peak-simd": {"per_round": [50e9]}, "stream": {"per_round": [25e9]}}
    rows = [{"model": "big", "bounds": {"edgepack": "edgepack-relaxed", **paired_bounds(
                ModelWork(flops=int(1e9), weight_bytes=0), ceil, [22.0], [30.0], 32 << 20)}},
            {"model": "small", "bounds": {"edgepack": "edgepack-simd", **paired_bounds(
                ModelWork(flops=int(1e8), weight_bytes=1 << 20), ceil, [4.0], [20.0], 32 << 20)}},
            {"model": "broken", "error": "packaging failed"}]
    md = bounds_table(rows, 32 << 20, "test machine").splitlines()
    assert md[2] == "| big | 1.000 | 0.0 | 20.00 | cached | 22.00 (relaxed) | 1.10 (compute) | 0.75 (**yes**) | **yes** |"
    assert md[3] == "| small | 0.100 | 1.0 | 2.00 | cached | 4.00 (simd) | 2.00 (compute) | 5.00 (no) |  |"
    assert len(md) == 6 and "for 1 of 2: big; within 1.15x of their bound: big (test machine)" in md[5]
