"""Edge targets (pi5, android): bundles, the static CLI and the Android library under qemu-aarch64,
the Java wrapper on the host JVM, the Python runtime, the NEON GEMM against the portable one.

No ARM hardware here: every aarch64 binary runs under qemu-aarch64 (correctness, never timing).
"""
from __future__ import annotations

import json
import shutil
import subprocess
import zipfile
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from packager import package
from packager.reference import random_inputs, reference_run
from packager.targets import edge as E

from .conftest import f32, make_model, model_path, seeded_feeds

pytestmark = pytest.mark.skipif(shutil.which("aarch64-linux-gnu-gcc") is None, reason="gcc-aarch64-linux-gnu missing")
needs_qemu = pytest.mark.skipif(shutil.which("qemu-aarch64") is None, reason="qemu-user missing")
TOL = 1e-4


def _make(goal: str) -> Path:
    r = subprocess.run(["make", "-s", "-C", str(E.EDGE), "-j2", goal], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    return E.EDGE / goal


def _small_model() -> onnx.ModelProto:
    """x[2,3] -> Reshape -> y[3,2] (runs with the plan machinery alone), plus an int64 passthrough."""
    shape = numpy_helper.from_array(np.array([3, 2], dtype=np.int64), "s")
    m = make_model([helper.make_node("Reshape", ["x", "s"], ["y"], name="reshape0"),
                    helper.make_node("Identity", ["i"], ["j"], name="id0")],
                   [f32("x", [2, 3]), helper.make_tensor_value_info("i", TensorProto.INT64, [4])],
                   [f32("y", [3, 2]), helper.make_tensor_value_info("j", TensorProto.INT64, [4])], [shape])
    m.graph.name = "small"
    return m


@pytest.fixture(scope="module")
def pi5_small(tmp_path_factory) -> Path:
    return package(_small_model(), target="pi5", out=tmp_path_factory.mktemp("pi5") / "small")


@pytest.fixture(scope="module")
def host_cli() -> Path:
    return _make("build/host/edgepack-run")


def _save_inputs(tmp: Path, feeds: dict[str, np.ndarray]) -> list[str]:
    args = []
    for i, (n, v) in enumerate(feeds.items()):
        p = tmp / f"in{i}.npy"
        np.save(p, v)
        args += ["--input", f"{n}={p}"]
    return args


def _cli(cli: Path, bundle: Path, *args: str, qemu: bool = False) -> subprocess.CompletedProcess:
    pre = E.qemu_cmd("pi5") if qemu else []
    return subprocess.run([*pre, str(cli), str(bundle), *args], capture_output=True, text=True, timeout=600)


# ------------------------------------------------------------------ pi5 bundle and CLI

@needs_qemu
def test_pi5_bundle_layout_and_consistency(pi5_small: Path) -> None:
    m = json.loads((pi5_small / "manifest.json").read_text())
    for f in ("libedgepack.so", "edgepack-run", "edgepack.h", "edgepack_runtime.py", "model.plan", "README.md"):
        assert f in m["files"], f
    assert "model.onnx" not in m["files"] and not (pi5_small / "model.onnx").exists()   # only with emit_onnx
    assert (pi5_small / "edgepack-run").stat().st_mode & 0o111
    elf = subprocess.run(["readelf", "-h", "-l", str(pi5_small / "edgepack-run")], capture_output=True, text=True).stdout
    assert "AArch64" in elf and "INTERP" not in elf  # static: no dynamic loader needed on the Pi
    c = m["consistency"]
    assert c["onnxruntime_vs_neon"]["max_abs_diff"] == 0 and c["wasm_vs_neon"]["max_abs_diff"] == 0
    assert "qemu-aarch64 -cpu cortex-a76" in c["neon_runner"]
    assert m["verification"]["build"] == "neon"


def test_consistency_says_when_qemu_is_missing(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(E, "qemu_available", lambda: False)
    p = package(_small_model(), target="pi5", out=tmp_path / "b")
    c = json.loads((p / "manifest.json").read_text())["consistency"]
    assert "not run: qemu-aarch64 is not installed" in c["neon"]
    assert "onnxruntime_vs_wasm" in c and "wasm_vs_neon" not in c


@needs_qemu
def test_pi5_cli_runs_under_qemu_and_checks_inputs(pi5_small: Path, tmp_path: Path) -> None:
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    i = np.array([5, -1, 7, 0], dtype=np.int64)
    args = _save_inputs(tmp_path, {"x": x, "i": i})
    r = _cli(pi5_small / "edgepack-run", pi5_small, *args, "--output", str(tmp_path / "y.npy"),
             "--output", f"j={tmp_path / 'j.npy'}", qemu=True)
    assert r.returncode == 0, r.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), x.reshape(3, 2))
    np.testing.assert_array_equal(np.load(tmp_path / "j.npy"), i)
    r = _cli(pi5_small / "edgepack-run", pi5_small, "--bench", "--warmup", "0.1", "--seconds", "0.2", qemu=True)
    assert r.returncode == 0 and "p50" in r.stdout and "p99" in r.stdout and "[neon, 1 thread]" in r.stdout


def _npy_bytes(header: str, data: bytes, version: bytes = b"\x01\x00") -> bytes:
    h = header.encode()
    pad = 64 - (10 + len(h) + 1) % 64
    h = h + b" " * pad + b"\n"
    return b"\x93NUMPY" + version + len(h).to_bytes(2, "little") + h + data


@pytest.mark.parametrize("case,content,msg", [
    ("name", None, "unknown input 'nope'; this model takes: 'x', 'i'"),
    ("dtype", np.zeros((2, 3), np.float64), "dtype float64, expected float32"),
    ("int32", np.zeros((2, 3), np.int32), "dtype int32, expected float32"),
    ("complex", np.zeros((2, 3), np.complex64), "not supported"),
    ("shape", np.zeros((3, 2), np.float32), "shape [3, 2], expected [2, 3]"),
    ("fortran", np.asfortranarray(np.zeros((2, 3), np.float32)), "Fortran order"),
    ("bigendian", np.zeros((2, 3), ">f4"), "big-endian"),
    ("v2", _npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", bytes(24), b"\x02\x00"),
     "version 2.0 not supported"),
    ("truncated", _npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", bytes(20)),
     "data is 20 bytes, header says 24"),
    ("object", _npy_bytes("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2, 3), }", bytes(24)),
     "structured arrays unsupported"),
    ("garbage", b"\x93NUMPY\x01\x00\xff\xff" + b"{" * 40, "header truncated"),
    # numpy reads such a header as shape (2, 3) (the last key wins); the reader once appended the dims: (1, 6, 2, 3)
    ("duplicate", _npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 6), 'shape': (2, 3), }", bytes(24)),
     "key 'shape' given twice"),
    ("missing", None, "missing input 'i'"),
])
def test_cli_rejects_bad_inputs(pi5_small: Path, host_cli: Path, tmp_path: Path, case: str, content, msg: str) -> None:
    good_i = tmp_path / "i.npy"
    np.save(good_i, np.zeros(4, np.int64))
    p = tmp_path / "x.npy"
    if isinstance(content, np.ndarray):
        if case == "fortran":
            np.lib.format.write_array(open(p, "wb"), content, version=(1, 0))
        else:
            np.save(p, content)
    elif content is not None:
        p.write_bytes(content)
    else:
        np.save(p, np.zeros((2, 3), np.float32))
    name = "nope" if case == "name" else "x"
    args = ["--input", f"{name}={p}"] + ([] if case == "missing" else ["--input", f"i={good_i}"])
    r = _cli(host_cli, pi5_small, *args)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert msg in r.stderr, r.stderr


def test_cli_rejects_tampered_bundles(pi5_small: Path, host_cli: Path, tmp_path: Path) -> None:
    b = tmp_path / "b"
    shutil.copytree(pi5_small, b)
    plan = bytearray((b / "model.plan").read_bytes())
    plan[-1] ^= 1
    (b / "model.plan").write_bytes(bytes(plan))
    r = _cli(host_cli, b, "--info")
    assert r.returncode == 3 and "does not match its SHA-256" in r.stderr
    manifest = (pi5_small / "manifest.json").read_text()
    for bad, msg in [(manifest[: len(manifest) // 2], "not valid JSON"), ("[" * 100000 + "]" * 100000, "not valid JSON"),
                     ('{"format": "edgepack-bundle"}', "no SHA-256 for model.plan"), ("", "not valid JSON"),
                     ('{"format": "x\\ud800"}', "not an edgepack bundle")]:
        (b / "manifest.json").write_text(bad)
        r = _cli(host_cli, b, "--info")
        assert r.returncode == 3 and msg in r.stderr, (bad[:40], r.stderr)
    # a manifest whose I/O disagrees with the plan
    m = json.loads(manifest)
    m["inputs"][0]["shape"] = [6]
    shutil.copy(pi5_small / "model.plan", b / "model.plan")
    (b / "manifest.json").write_text(json.dumps(m))
    r = _cli(host_cli, b, "--info")
    assert r.returncode == 3 and "disagrees with the plan" in r.stderr


def test_cli_every_dtype(tmp_path: Path, host_cli: Path) -> None:
    """The CLI reads and writes .npy of the dtypes a plan holds beyond float32/int64 (float64, (u)int16, uint32,
    uint64): Casts and an integer Add against onnxruntime."""
    import onnxruntime as ort
    T = TensorProto
    m = make_model([helper.make_node("Cast", ["d"], ["u64"], to=T.UINT64), helper.make_node("Cast", ["h"], ["i16"], to=T.INT16),
                    helper.make_node("Add", ["w", "w"], ["u32"]), helper.make_node("Cast", ["h"], ["f64"], to=T.DOUBLE)],
                   [helper.make_tensor_value_info(n, t, [3]) for n, t in (("d", T.DOUBLE), ("h", T.UINT16), ("w", T.UINT32))],
                   [helper.make_tensor_value_info(n, t, [3]) for n, t in
                    (("u64", T.UINT64), ("i16", T.INT16), ("u32", T.UINT32), ("f64", T.DOUBLE))])
    feeds = {"d": np.array([0.5, 1e12, 3.9]), "h": np.array([1, 40000, 65535], np.uint16),
             "w": np.array([1, 2**31 + 5, 4000000000], np.uint32)}
    b = package(m, target="pi5", out=tmp_path / "b", verify=False)
    outs = [a for n in ("u64", "i16", "u32", "f64") for a in ("--output", f"{n}={tmp_path / n}.npy")]
    r = _cli(host_cli, b, *_save_inputs(tmp_path, feeds), *outs)
    assert r.returncode == 0, r.stderr
    m.ir_version = min(m.ir_version, 10)
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    for n, w in zip(("u64", "i16", "u32", "f64"), want):
        got = np.load(tmp_path / f"{n}.npy")
        assert got.dtype == w.dtype, n
        np.testing.assert_array_equal(got, w, err_msg=n)


def test_cli_json_unicode_names(tmp_path: Path, host_cli: Path) -> None:
    """Input names with non-ASCII characters (escaped as \\uXXXX by json.dumps) round-trip."""
    m = make_model([helper.make_node("Identity", ["x\u00e9\U0001F600"], ["y"], name="id")],
                   [f32("x\u00e9\U0001F600", [2])], [f32("y", [2])])
    b = package(m, target="pi5", out=tmp_path / "u", verify=False)
    np.save(tmp_path / "x.npy", np.ones(2, np.float32))
    r = _cli(host_cli, b, "--input", f"x\u00e9\U0001F600={tmp_path / 'x.npy'}")
    assert r.returncode == 0, r.stderr
    assert "y: float32[2] = [1, 1]" in r.stdout


# ------------------------------------------------------------------ android

@pytest.fixture(scope="module")
def android_bundle(tmp_path_factory) -> tuple[Path, str]:
    return package(model_path("cifar10net"), target="android", out=tmp_path_factory.mktemp("android") / "c10",
                   verify=False, dynamic=False, emit_onnx=True), "cifar10net"


def test_android_library_has_no_libc(android_bundle) -> None:
    lib = android_bundle[0] / "jniLibs" / "arm64-v8a" / "libedgepack.so"
    d = subprocess.run(["readelf", "-d", "-W", str(lib)], capture_output=True, text=True, check=True).stdout
    assert "NEEDED" not in d and "TEXTREL" not in d
    syms = subprocess.run(["readelf", "--dyn-syms", "-W", str(lib)], capture_output=True, text=True, check=True).stdout
    assert "GLIBC" not in syms and "@" not in syms
    assert " UND " not in "\n".join(line for line in syms.splitlines()[3:] if not line.strip().startswith("0:"))
    vers = subprocess.run(["readelf", "-V", "-W", str(lib)], capture_output=True, text=True, check=True).stdout
    assert "GLIBC" not in vers
    h = subprocess.run(["readelf", "-h", str(lib)], capture_output=True, text=True, check=True).stdout
    assert "AArch64" in h and "DYN" in h
    for jni in ("Java_org_edgepack_Session_nOpen", "Java_org_edgepack_Session_nRun", "ep_open", "ep_edge_cpu_features"):
        assert jni in syms


def test_android_bundle_aar_and_ort(android_bundle) -> None:
    b, _ = android_bundle
    m = json.loads((b / "manifest.json").read_text())
    for f in ("jniLibs/arm64-v8a/libedgepack.so", "edgepack.aar", "assets/edgepack/model.plan", "assets/edgepack/io.txt",
              "java/org/edgepack/Session.java", "ort/model.ort", "ort/model.required_operators.config"):
        assert f in m["files"], f
    with zipfile.ZipFile(b / "edgepack.aar") as z:
        names = set(z.namelist())
        assert {"AndroidManifest.xml", "classes.jar", "jni/arm64-v8a/libedgepack.so"} <= names
        assert z.read("jni/arm64-v8a/libedgepack.so") == (b / "jniLibs/arm64-v8a/libedgepack.so").read_bytes()
        jar = z.read("classes.jar")
    import io
    with zipfile.ZipFile(io.BytesIO(jar)) as j:
        cls = j.read("org/edgepack/Session.class")
        assert cls[:4] == b"\xca\xfe\xba\xbe" and int.from_bytes(cls[6:8], "big") == 52  # Java 8 class files
    import onnxruntime as ort
    s = ort.InferenceSession(str(b / "ort" / "model.ort"), providers=["CPUExecutionProvider"])
    assert [i.name for i in s.get_inputs()] == [i["name"] for i in m["inputs"]]
    assert (b / "ort" / "model.required_operators.config").read_text().strip()


@needs_qemu
@pytest.mark.parametrize("cpu,path,qgemm", [("max", "sdot", "neon-sdot-8x8"), ("cortex-a53", "baseline", "portable-4x8")])
def test_android_library_feature_detection_under_qemu(android_bundle, cpu: str, path: str, qgemm: str) -> None:
    harness = E.ensure_harness()
    lib = android_bundle[0] / "jniLibs" / "arm64-v8a" / "libedgepack.so"
    r = subprocess.run(["qemu-aarch64", "-cpu", cpu, "-L", E.QEMU_SYSROOT, str(harness), str(lib), "--selftest"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert f"dot_i8 ok ({path} path)" in r.stdout and "vec=neon" in r.stdout
    assert f"qgemm={qgemm}" in r.stdout  # the int8 GEMM takes the same runtime decision


@needs_qemu
def test_android_library_runs_plan_under_qemu(android_bundle) -> None:
    b, _ = android_bundle
    m = json.loads((b / "manifest.json").read_text())
    feeds = random_inputs(m["inputs"], seed=3)
    got = E.run_neon(b, "android", feeds)
    want = reference_run(onnx.load(str(b / "model.onnx")), feeds)
    for k, w in want.items():
        np.testing.assert_allclose(got[k], w, rtol=TOL, atol=TOL)


def test_java_wrapper_on_host_jvm(android_bundle, tmp_path: Path) -> None:
    if shutil.which("javac") is None:
        pytest.skip("no JDK")
    b, _ = android_bundle
    lib = _make("build/host/libedgepack.so")
    m = json.loads((b / "manifest.json").read_text())
    feeds = random_inputs(m["inputs"], seed=4)
    want = reference_run(onnx.load(str(b / "model.onnx")), feeds)
    exp = tmp_path / "exp"
    exp.mkdir()
    for i, s in enumerate(m["inputs"]):
        (exp / f"in{i}.bin").write_bytes(np.ascontiguousarray(feeds[s["name"]]).tobytes())
    for i, s in enumerate(m["outputs"]):
        (exp / f"out{i}.bin").write_bytes(np.ascontiguousarray(want[s["name"]]).tobytes())
    classes = tmp_path / "classes"
    srcs = [str(p) for p in (E.EDGE / "android" / "java" / "org" / "edgepack").glob("*.java")]
    subprocess.run(["javac", "--release", "8", "-Xlint:-options", "-d", str(classes), *srcs], check=True)
    subprocess.run(["javac", "-cp", str(classes), "-d", str(classes), str(E.EDGE / "android" / "test" / "SessionTest.java")],
                   check=True)
    r = subprocess.run(["java", f"-Djava.library.path={lib.parent}", "-cp", str(classes), "SessionTest",
                        str(b / "assets/edgepack/model.plan"), str(b / "assets/edgepack/io.txt"), str(exp)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "OK" in r.stdout


# ------------------------------------------------------------------ Python runtime (host build of the same library)

def test_python_runtime_with_host_library(pi5_small: Path, tmp_path: Path) -> None:
    import importlib.util
    lib = _make("build/host/libedgepack.so")
    spec = importlib.util.spec_from_file_location("edgepack_runtime", pi5_small / "edgepack_runtime.py")
    rt = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(rt)
    s = rt.Session(pi5_small, lib=lib)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    out = s.run({"x": x, "i": np.arange(4, dtype=np.int64)})
    np.testing.assert_array_equal(out["y"], x.reshape(3, 2))
    np.testing.assert_array_equal(out["j"], np.arange(4))
    with pytest.raises(rt.EdgepackError, match="shape"):
        s.run({"x": x.T.copy(), "i": np.arange(4, dtype=np.int64)})
    with pytest.raises(rt.EdgepackError, match="unknown input"):
        s.run({"z": x})
    assert s.bench(warmup=0.05, seconds=0.05)["runs"] >= 10
    b = tmp_path / "b"
    shutil.copytree(pi5_small, b)
    (b / "model.plan").write_bytes(b"EPLN" + bytes(200))
    with pytest.raises(rt.EdgepackError, match="SHA-256"):
        rt.Session(b, lib=lib)


# ------------------------------------------------------------------ NEON micro-kernel and models

@needs_qemu
def test_pi5_library_runs_model_under_qemu(tmp_path: Path) -> None:
    """The Pi 5 shared library (not only the CLI), dlopen()ed by the harness on a Cortex-A76 model."""
    b = _pi5_model("cifar10net", tmp_path)
    m = json.loads((b / "manifest.json").read_text())
    feeds = random_inputs(m["inputs"], seed=5)
    got = E.run_harness(b / "libedgepack.so", b / "model.plan", [feeds[s["name"]] for s in m["inputs"]], m["outputs"],
                        E.qemu_cmd("pi5"))
    want = reference_run(onnx.load(str(b / "model.onnx")), feeds)
    for k, w in want.items():
        np.testing.assert_allclose(got[k], w, rtol=TOL, atol=TOL)


@needs_qemu
def test_neon_gemm_matches_portable_bits() -> None:
    t = _make("build/aarch64/gemm_neon_test")
    r = subprocess.run(["qemu-aarch64", "-cpu", "cortex-a76", str(t)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert " 0 mismatches" in r.stdout


def _pi5_model(name: str, tmp: Path) -> Path:
    return package(model_path(name), target="pi5", out=tmp / name, verify=False, dynamic=False, emit_onnx=True)


@needs_qemu
@pytest.mark.parametrize("name", ["cifar10net", "minilm_like", "resnet18", "mobilenetv2"])
def test_pi5_model_matches_onnxruntime_under_qemu(name: str, tmp_path: Path) -> None:
    b = _pi5_model(name, tmp_path)
    m = json.loads((b / "manifest.json").read_text())
    feeds = seeded_feeds(m["inputs"], 1)
    got = E.run_cli(b, feeds, m["outputs"], qemu=E.qemu_cmd("pi5"))
    want = reference_run(onnx.load(str(b / "model.onnx")), feeds)
    for k, w in want.items():
        np.testing.assert_allclose(got[k], w, rtol=TOL, atol=TOL, err_msg=f"{name} output {k} [pi5 NEON under qemu]")


@needs_qemu
def test_conformance_subset_aarch64_matches_wasm() -> None:
    """A fast slice of the ONNX node cases on the Pi 5 CLI under qemu: same status as wasm, case by case.
    The whole suite: python -m tests.conformance.runner_aarch64."""
    from .conformance.runner_aarch64 import run_all
    from .test_conformance import KNOWN_FAILURES
    results = run_all({"Conv", "Gemm", "MaxPool", "Softmax", "Clip", "Gather", "Where"}, "cortex-a76")
    assert results
    diff = [(r["case"], r["wasm"], r["aarch64"], r["aarch64_why"]) for r in results if r["wasm"] != r["aarch64"]]
    assert not diff, diff
    assert not [r for r in results if r["aarch64"] in ("fail", "crash") and r["case"] not in KNOWN_FAILURES]
    assert sum(r["aarch64"] == "pass" for r in results) >= 30


def test_cli_readers_survive_mutated_files_under_asan(pi5_small: Path, tmp_path: Path) -> None:
    """manifest.json and .npy are untrusted: byte flips, truncations and insertions never make the
    CLI's JSON/npy readers touch memory they should not (ASan + UBSan build); they end in a clean error."""
    cli = _make("build/asan/edgepack-run")
    rng = np.random.default_rng(0)
    b = tmp_path / "b"
    shutil.copytree(pi5_small, b)
    manifest = (pi5_small / "manifest.json").read_bytes()
    np.save(tmp_path / "i.npy", np.zeros(4, np.int64))
    np.save(tmp_path / "x.npy", np.zeros((2, 3), np.float32))
    npy = (tmp_path / "x.npy").read_bytes()

    def mutate(data: bytes) -> bytes:
        d = bytearray(data)
        for _ in range(int(rng.integers(1, 4))):
            k = int(rng.integers(0, 4))
            pos = int(rng.integers(0, len(d))) if d else 0
            if k == 0 and d:
                d[pos] = int(rng.integers(0, 256))
            elif k == 1:
                d = d[:pos]
            elif k == 2:
                d[pos:pos] = bytes(rng.choice(list(b'{}[]",:\\u0123456789 -.eE\'()'), int(rng.integers(1, 8))))
            elif d:
                del d[pos:pos + int(rng.integers(1, 16))]
        return bytes(d)

    codes = set()
    for it in range(300):
        (b / "manifest.json").write_bytes(mutate(manifest) if it % 2 == 0 else manifest)
        (tmp_path / "m.npy").write_bytes(mutate(npy) if it % 2 == 1 else npy)
        r = subprocess.run([str(cli), str(b), "--input", f"x={tmp_path / 'm.npy'}", "--input", f"i={tmp_path / 'i.npy'}",
                            "--output", str(tmp_path / "y.npy")], capture_output=True, text=True, errors="replace", timeout=60)
        assert "Sanitizer" not in r.stderr and "runtime error" not in r.stderr, r.stderr[-2000:]
        assert r.returncode in (0, 2, 3), (r.returncode, r.stderr[-500:])
        codes.add(r.returncode)
    assert {2, 3} <= codes


def test_core_source_basenames_are_unique() -> None:
    """edge/Makefile compiles the core's sources into one object folder by basename: two files of one name
    (src/x.c and src/kernels/x.c) would overwrite each other's object and leave symbols undefined."""
    from collections import Counter
    from packager.toolchain import KERNELS
    names = Counter(p.name for p in (KERNELS / "src").rglob("*.c"))
    assert [n for n, k in names.items() if k > 1] == []
