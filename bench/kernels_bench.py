"""Micro-benchmark of the linalg kernels: single Conv / Gemm / MatMul models at real layer sizes,
packaged and timed under wasmtime (the exact wasm a browser runs), reported in GFLOP/s.

    python -m bench.kernels_bench [--variant simd|relaxed|scalar] [--seconds 1] [--only NAME]
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
from onnx import TensorProto, helper

# name: (cin, cout, hw, k, stride, group)
CONVS = {
    "r18_conv1_7x7s2": (3, 64, 224, 7, 2, 1),
    "r18_l1_3x3": (64, 64, 56, 3, 1, 1),
    "r18_l2_3x3": (128, 128, 28, 3, 1, 1),
    "r18_l3_3x3": (256, 256, 14, 3, 1, 1),
    "r18_l4_3x3": (512, 512, 7, 3, 1, 1),
    "r18_l2_down_3x3s2": (64, 128, 56, 3, 2, 1),
    "r18_l2_1x1s2": (64, 128, 56, 1, 2, 1),
    "mv2_conv0_3x3s2": (3, 32, 224, 3, 2, 1),
    "mv2_dw_112": (32, 32, 112, 3, 1, 32),
    "mv2_dw_112s2": (96, 96, 112, 3, 2, 96),
    "mv2_dw_14": (384, 384, 14, 3, 1, 384),
    "mv2_dw_7": (960, 960, 7, 3, 1, 960),
    "mv2_pw_112_32_16": (32, 16, 112, 1, 1, 1),
    "mv2_pw_56_24_144": (24, 144, 56, 1, 1, 1),
    "mv2_pw_14_64_384": (64, 384, 14, 1, 1, 1),
    "mv2_pw_7_160_960": (160, 960, 7, 1, 1, 1),
    "mv2_pw_7_320_1280": (320, 1280, 7, 1, 1, 1),
    "cifar_3x3_64": (64, 64, 32, 3, 1, 1),
    "cifar_3x3_128": (128, 128, 16, 3, 1, 1),
}
# name: (M, K, N) as Gemm(A[M,K], W[N,K]^T) / MatMul
GEMMS = {"fc_512_1000": (1, 512, 1000), "minilm_ffn": (128, 384, 1536), "minilm_qkv": (128, 384, 384)}


def conv_model(cin, cout, hw, k, s, g):
    rng = np.random.default_rng(0)
    w = helper.make_tensor("w", TensorProto.FLOAT, [cout, cin // g, k, k], rng.standard_normal((cout, cin // g, k, k)).astype(np.float32).ravel())
    b = helper.make_tensor("b", TensorProto.FLOAT, [cout], rng.standard_normal(cout).astype(np.float32))
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], kernel_shape=[k, k], strides=[s, s], group=g, pads=[k // 2] * 4)
    oh = (hw + 2 * (k // 2) - k) // s + 1
    graph = helper.make_graph([node], "c", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, cin, hw, hw])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, cout, oh, oh])], [w, b])
    flops = 2 * cout * oh * oh * (cin // g) * k * k
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), flops


def gemm_model(m, k, n):
    rng = np.random.default_rng(0)
    w = helper.make_tensor("w", TensorProto.FLOAT, [n, k], rng.standard_normal((n, k)).astype(np.float32).ravel())
    b = helper.make_tensor("b", TensorProto.FLOAT, [n], rng.standard_normal(n).astype(np.float32))
    node = helper.make_node("Gemm", ["x", "w", "b"], ["y"], transB=1)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [m, k])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [m, n])], [w, b])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), 2 * m * n * k


def time_bundle(path: Path, variant: str, seconds: float) -> float:
    from packager import load_bundle
    from packager.reference import random_inputs
    b = load_bundle(path, variant)
    feeds = b.check_feeds(random_inputs(b.inputs))
    s = b.session()
    for spec in b.inputs:
        s.write(spec["tensor"], feeds[spec["name"]])
    s.run()
    times = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end or len(times) < 3:
        t = time.thread_time()   # CPU time of this thread: not inflated by other processes' time slices
        s.run()
        times.append(time.thread_time() - t)
    return float(np.min(times))   # min: robust to other processes sharing the machine


def main() -> None:
    from packager import package
    ap = argparse.ArgumentParser()
    ap.add_argument("--variant", default="simd")
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--only", default="")
    ap.add_argument("--verify", action="store_true")
    a = ap.parse_args()
    cases = {**{n: conv_model(*c) for n, c in CONVS.items()}, **{n: gemm_model(*c) for n, c in GEMMS.items()}}
    tot_t = tot_f = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for name, (model, flops) in cases.items():
            if a.only and a.only not in name:
                continue
            out = Path(tmp) / name
            package(model, target="web", out=out, verify=a.verify)
            t = time_bundle(out, a.variant, a.seconds)
            tot_t += t
            tot_f += flops
            print(f"{name:<22} {t * 1e3:9.3f} ms  {flops / t / 1e9:7.2f} GFLOP/s", flush=True)
    print(f"{'total':<22} {tot_t * 1e3:9.3f} ms  {tot_f / tot_t / 1e9:7.2f} GFLOP/s")


if __name__ == "__main__":
    main()
