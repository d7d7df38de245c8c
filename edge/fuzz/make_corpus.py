"""Seeds for edgepack-run's parser fuzzers (edge/fuzz/fuzz_*.c), written to edge/fuzz/corpus/<harness>/:
  json    manifest.json of bundles the packager builds (static and run-time-shape plans, pi5 target), plus small
          documents reaching the reader's edge cases (escapes, surrogates, nesting, numbers)
  npy     .npy files numpy writes for every dtype edgepack-run reads, ranks 0-4, and variants it must refuse
  crypto  SHA mode inputs, and Ed25519 (signature | public key | message) triples that verify (RFC 8032 test 1
          and manifests signed here with a fresh key), so mutation starts inside the accepted set
  python3 edge/fuzz/make_corpus.py"""
from __future__ import annotations

import hashlib
import io
import json
import shutil
import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

HERE = Path(__file__).resolve().parent


def _tiny_model(dynamic: bool) -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch" if dynamic else 2, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch" if dynamic else 2, 3])
    w = helper.make_tensor("w", TensorProto.FLOAT, [4, 3], np.arange(12, dtype=np.float32).tolist())
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Relu", ["m"], ["y"])],
                          "tiny", [x], [y], [w])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def manifests(tmp: Path) -> dict[str, bytes]:
    from packager.api import package
    out: dict[str, bytes] = {}
    for name, dynamic, target in [("static_web", False, "web"), ("dynamic_web", True, "web"),
                                  ("static_pi5", False, "pi5")]:
        b = package(_tiny_model(dynamic), target=target, out=tmp / name, dynamic=dynamic, verify=False)
        out[name] = (b / "manifest.json").read_bytes()
    out["escapes"] = json.dumps({"name": "a\"b\\c\u00e9\U0001F600\n", "shape": [1, -2, 3.5e2, 0],
                                 "t": [True, False, None]}, ensure_ascii=True).encode()
    out["nested"] = b"[" * 31 + b"{}" + b"]" * 31
    out["dims"] = json.dumps({"dims": {"batch": {"min": 1, "max": None, "example": 1},
                                       "seq": {"min": 2, "max": 512, "example": 8}}}).encode()
    return out


def npys() -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    shapes = [(), (3,), (2, 3), (1, 2, 2, 2), (0, 4)]
    for dt in ["<f4", "<i8", "|b1", "|i1", "|u1", "<i4", "<f2", "<f8", "<i2", "<u2", "<u4", "<u8"]:
        for k, s in enumerate(shapes):
            buf = io.BytesIO()
            np.save(buf, np.zeros(s, dtype=np.dtype(dt)))
            out[f"{np.dtype(dt).name}_{k}"] = buf.getvalue()
    for name, arr in [("fortran", np.asfortranarray(np.zeros((2, 3), np.float32))),
                      ("bigendian", np.zeros(3, ">f4")), ("complex64", np.zeros(2, np.complex64))]:
        buf = io.BytesIO()
        np.save(buf, arr)
        out[name] = buf.getvalue()
    # regression seed: a repeated key (the reader once appended the second shape's dims to the first's)
    h = b"{'descr': '<i4', 'fortran_order': False, 'shape': (5, 4), 'shape': (0, 2), }"
    h += b" " * (-(10 + len(h) + 1) % 64) + b"\n"
    out["dup_shape_key"] = b"\x93NUMPY\x01\x00" + len(h).to_bytes(2, "little") + h
    return out


def crypto(manifest_texts: list[bytes]) -> dict[str, bytes]:
    from cryptography.hazmat.primitives.asymmetric import ed25519
    from cryptography.hazmat.primitives import serialization
    out = {"sha_empty": b"\x00", "sha_block": b"\x01" + bytes(range(256)) * 2}
    # RFC 8032 7.1, test 1 (empty message)
    pk = bytes.fromhex("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a")
    sig = bytes.fromhex("e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46b"
                        "d25bf5f0595bbe24655141438e7a100b")
    out["rfc8032_1"] = b"\x02" + sig + pk
    key = ed25519.Ed25519PrivateKey.from_private_bytes(hashlib.sha256(b"edgepack fuzz seed").digest())
    pub = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    for k, text in enumerate(manifest_texts):
        out[f"signed_manifest_{k}"] = bytes([3 + k]) + key.sign(text) + pub + text
    return out


def main() -> None:
    corpus = HERE / "corpus"
    with tempfile.TemporaryDirectory() as t:
        m = manifests(Path(t))
    sets = {"json": m, "npy": npys(), "crypto": crypto([m["static_web"], m["dynamic_web"]])}
    for harness, files in sets.items():
        d = corpus / harness
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
        for name, data in files.items():
            (d / name).write_bytes(data)
        print(f"{d}: {len(files)} seeds, {sum(map(len, files.values()))} bytes")


if __name__ == "__main__":
    main()
