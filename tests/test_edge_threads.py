"""Edge threads (issue 20): the core's thread pool on aarch64 and in the hosts that drive it, plus the edge
library's surface: exported symbols, the Python module finding its library, the Android SHA-256 check and
README snippet, `edgepack-run --help`.

Every aarch64 binary runs under qemu-aarch64 (correctness only; qemu's timing means nothing). The thread pool
splits work exactly as the threaded wasm build does and keeps every sum's order, so N threads must give the
single thread's bits; both are compared with onnxruntime too.
"""
from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import threading
from pathlib import Path

import numpy as np
import onnx
import pytest

from packager import package
from packager.reference import reference_run
from packager.targets import edge as E

from .conftest import seeded_feeds
from .test_threads import _convnet

pytestmark = pytest.mark.skipif(shutil.which("aarch64-linux-gnu-gcc") is None, reason="gcc-aarch64-linux-gnu missing")
needs_qemu = pytest.mark.skipif(shutil.which("qemu-aarch64") is None, reason="qemu-user missing")
needs_jdk = pytest.mark.skipif(shutil.which("javac") is None, reason="no JDK")
TOL = 1e-4
KERNELS = E.EDGE.parent / "wasm_kernels"


def _make(*goals: str) -> None:
    r = subprocess.run(["make", "-s", "-C", str(E.EDGE), "-j2", *goals], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]


@pytest.fixture(scope="module")
def convnet(tmp_path_factory) -> Path:
    """Every threaded kernel on odd sizes (tests/test_threads.py): CONV, POOL, Winograd, depthwise, MatMul."""
    p = tmp_path_factory.mktemp("m") / "convnet.onnx"
    onnx.save(_convnet(), str(p))
    return p


@pytest.fixture(scope="module")
def pi5_bundle(convnet: Path, tmp_path_factory) -> Path:
    return package(convnet, target="pi5", out=tmp_path_factory.mktemp("pi5") / "b", verify=False)


@pytest.fixture(scope="module")
def android_bundle(convnet: Path, tmp_path_factory) -> Path:
    return package(convnet, target="android", out=tmp_path_factory.mktemp("android") / "b", verify=False)


@pytest.fixture(scope="module")
def feeds(pi5_bundle: Path) -> dict[str, np.ndarray]:
    return seeded_feeds(json.loads((pi5_bundle / "manifest.json").read_text())["inputs"], 3)


@pytest.fixture(scope="module")
def want(convnet: Path, feeds) -> dict[str, np.ndarray]:
    return reference_run(onnx.load(str(convnet)), feeds)


@pytest.fixture(scope="module")
def host_lib() -> Path:
    _make("build/host/libedgepack.so", "build/host/edgepack-run")
    return E.EDGE / "build" / "host" / "libedgepack.so"


def _module(path: Path):
    spec = importlib.util.spec_from_file_location(f"edgepack_runtime_{abs(hash(str(path)))}", path)
    rt = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(rt)
    return rt


# ------------------------------------------------------------------ edgepack-run (pi5, static) under qemu

@needs_qemu
def test_pi5_cli_four_threads_same_bits_as_one(pi5_bundle: Path, feeds, want, tmp_path: Path) -> None:
    np.save(tmp_path / "x.npy", feeds["x"])
    got = {}
    for t in (1, 4):
        r = subprocess.run([*E.qemu_cmd("pi5"), str(pi5_bundle / "edgepack-run"), str(pi5_bundle), "--threads", str(t),
                            "--input", f"x={tmp_path / 'x.npy'}", "--output", str(tmp_path / f"y{t}.npy")],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        got[t] = np.load(tmp_path / f"y{t}.npy")
    np.testing.assert_array_equal(got[4], got[1])
    np.testing.assert_allclose(got[4], want["y"], rtol=TOL, atol=TOL)
    r = subprocess.run([*E.qemu_cmd("pi5"), str(pi5_bundle / "edgepack-run"), str(pi5_bundle), "--bench", "--threads", "4",
                        "--warmup", "0.1", "--seconds", "0.3"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "[neon, 4 threads]" in r.stdout and "p50" in r.stdout
    tasks = [int(v) for v in re.search(r"tasks per thread: ([\d ]+)", r.stdout).group(1).split()]
    assert len(tasks) == 4 and sum(tasks[1:]) > 0, r.stdout   # the workers took part


@needs_qemu
def test_cli_help_exits_zero(pi5_bundle: Path, host_lib: Path) -> None:
    for cmd in ([str(E.EDGE / "build" / "host" / "edgepack-run"), "--help"],
                [*E.qemu_cmd("pi5"), str(pi5_bundle / "edgepack-run"), "-h"]):
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0 and r.stdout.startswith("usage:") and "--threads N" in r.stdout, (cmd, r)
    r = subprocess.run([str(E.EDGE / "build" / "host" / "edgepack-run")], capture_output=True, text=True)
    assert r.returncode == 2 and "usage:" in r.stderr   # a usage error still is one


@pytest.mark.parametrize("value", ["0", "17", "four", "2x", ""])
def test_cli_refuses_bad_thread_counts(pi5_bundle: Path, host_lib: Path, value: str) -> None:
    r = subprocess.run([str(E.EDGE / "build" / "host" / "edgepack-run"), str(pi5_bundle), "--threads", value, "--info"],
                       capture_output=True, text=True)
    assert r.returncode == 2 and f"--threads expects a whole number in [1, 16], got '{value}'" in r.stderr


# ------------------------------------------------------------------ Android library (no libc) under qemu

@needs_qemu
@pytest.mark.parametrize("cpu", ["max", "cortex-a53"])
def test_android_library_threads_under_qemu(android_bundle: Path, feeds, want, tmp_path: Path, cpu: str) -> None:
    """The harness starts pthreads that enter the library's ep_worker_main, as Java threads do on a device:
    the android build's pool (LL/SC atomics, raw futex calls, no libc) on the SDOT and baseline CPUs."""
    harness = E.ensure_harness()
    _one_and_four_threads(["qemu-aarch64", "-cpu", cpu, "-L", E.QEMU_SYSROOT, str(harness),
                           str(android_bundle / "jniLibs/arm64-v8a/libedgepack.so")],
                          android_bundle / "assets/edgepack/model.plan", "pool=host", feeds, want, tmp_path)


@needs_qemu
def test_pi5_library_starts_its_own_threads_under_qemu(pi5_bundle: Path, feeds, want, tmp_path: Path) -> None:
    """The pi5 libedgepack.so (glibc, dlopen'ed as an app or Python would): ep_edge_set_threads(4) starts its
    pthreads; same bits as 1 thread."""
    harness = E.ensure_harness()
    _one_and_four_threads([*E.qemu_cmd("pi5"), str(harness), str(pi5_bundle / "libedgepack.so")],
                          pi5_bundle / "model.plan", "pool=library", feeds, want, tmp_path)


def _one_and_four_threads(harness_cmd: list[str], plan: Path, pool: str, feeds, want, tmp_path: Path) -> None:
    """The dlopen harness (`harness_cmd`: qemu, harness, library) at 1 and 4 threads: the pool it reports, tasks
    on the worker threads, the same bits both ways, and onnxruntime's answer."""
    (tmp_path / "x.bin").write_bytes(np.ascontiguousarray(feeds["x"]).tobytes())
    got = {}
    for t in (1, 4):
        r = subprocess.run([*harness_cmd, "--threads", str(t), str(plan), str(tmp_path / "x.bin"),
                            str(tmp_path / f"y{t}.bin")], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr
        got[t] = np.fromfile(tmp_path / f"y{t}.bin", dtype=np.float32).reshape(want["y"].shape)
    assert pool in r.stdout
    assert sum(int(v) for v in re.search(r"tasks per thread: ([\d ]+)", r.stdout).group(1).split()[1:]) > 0, r.stdout
    np.testing.assert_array_equal(got[4], got[1])
    np.testing.assert_allclose(got[4], want["y"], rtol=TOL, atol=TOL)


# ------------------------------------------------------------------ Python module (host build of the library)

def test_python_module_threads(pi5_bundle: Path, host_lib: Path, feeds, want) -> None:
    rt = _module(pi5_bundle / "edgepack_runtime.py")
    one = rt.Session(pi5_bundle, lib=host_lib).run(feeds)
    s = rt.Session(pi5_bundle, lib=host_lib, threads=4)
    before = s.thread_tasks()
    for _ in range(3):
        four = s.run(feeds)
    np.testing.assert_array_equal(four["y"], one["y"])
    np.testing.assert_allclose(four["y"], want["y"], rtol=TOL, atol=TOL)
    assert sum(s.thread_tasks()[1:]) > sum(before[1:])
    assert s.bench(feeds, warmup=0.05, seconds=0.1)["threads"] == 4
    for bad in (0, 17, 2.0, True, "4"):
        with pytest.raises(rt.EdgepackError, match=r"threads must be a whole number in \[1, 16\]"):
            rt.Session(pi5_bundle, lib=host_lib, threads=bad)


def test_python_sessions_on_several_threads_at_once(pi5_bundle: Path, host_lib: Path, feeds, want) -> None:
    """Sessions on 3 Python threads share one pool: one uses it, the others run serially; all are right."""
    rt = _module(pi5_bundle / "edgepack_runtime.py")
    sessions = [rt.Session(pi5_bundle, lib=host_lib, threads=t) for t in (4, 2, 1)]
    out: dict[int, list] = {i: [] for i in range(3)}
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            for _ in range(4):
                out[i].append(sessions[i].run(feeds)["y"])
        except BaseException as e:   # surfaced below
            errors.append(e)
    ts = [threading.Thread(target=work, args=(i,)) for i in range(3)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
    assert not errors, errors
    one = sessions[2].run(feeds)["y"]
    for i in range(3):
        assert len(out[i]) == 4
        for y in out[i]:
            np.testing.assert_array_equal(y, one)
    np.testing.assert_allclose(one, want["y"], rtol=TOL, atol=TOL)


def test_python_module_finds_its_library_without_lib(pi5_bundle: Path, host_lib: Path, feeds, want, tmp_path: Path,
                                                     monkeypatch) -> None:
    """Session(".") as documented: the bundle's libedgepack.so by absolute path (dlopen of the bare name would
    search the system's paths); else the one next to the module; else a clear error."""
    b = tmp_path / "bundle"
    shutil.copytree(pi5_bundle, b)
    shutil.copy(host_lib, b / "libedgepack.so")   # the host build in place of the aarch64 one
    rt = _module(b / "edgepack_runtime.py")
    monkeypatch.chdir(b)
    s = rt.Session(".")
    np.testing.assert_allclose(s.run(feeds)["y"], want["y"], rtol=TOL, atol=TOL)
    monkeypatch.chdir(tmp_path)
    s = rt.Session("bundle", threads=2)
    np.testing.assert_allclose(s.run(feeds)["y"], want["y"], rtol=TOL, atol=TOL)
    # no library in the bundle: the module's folder
    (b / "libedgepack.so").unlink()
    mod = tmp_path / "mod"
    mod.mkdir()
    shutil.copy(b / "edgepack_runtime.py", mod)
    shutil.copy(host_lib, mod / "libedgepack.so")
    rt2 = _module(mod / "edgepack_runtime.py")
    np.testing.assert_allclose(rt2.Session(b).run(feeds)["y"], want["y"], rtol=TOL, atol=TOL)
    with pytest.raises(rt.EdgepackError, match="libedgepack.so not found"):
        rt.Session(b)
    with pytest.raises(rt.EdgepackError, match="no such file"):
        rt.Session(b, lib=tmp_path / "nope.so")


# ------------------------------------------------------------------ Java wrapper (host JVM, host library)

def _javac(tmp_path: Path) -> Path:
    classes = tmp_path / "classes"
    srcs = [str(p) for p in (E.EDGE / "android" / "java" / "org" / "edgepack").glob("*.java")]
    subprocess.run(["javac", "--release", "8", "-Xlint:-options", "-d", str(classes), *srcs], check=True)
    return classes


@needs_jdk
def test_java_threads_and_plan_hash(android_bundle: Path, host_lib: Path, feeds, want, tmp_path: Path) -> None:
    io = (android_bundle / "assets/edgepack/io.txt").read_text()
    m = json.loads((android_bundle / "manifest.json").read_text())
    assert f"sha256\tmodel.plan\t{m['files']['assets/edgepack/model.plan']['sha256']}\n" in io   # the manifest's hash
    classes = _javac(tmp_path)
    subprocess.run(["javac", "-cp", str(classes), "-d", str(classes), str(E.EDGE / "android" / "test" / "ThreadsTest.java")],
                   check=True)
    x = tmp_path / "in0.bin"
    x.write_bytes(np.ascontiguousarray(feeds["x"]).tobytes())
    r = subprocess.run(["java", f"-Djava.library.path={host_lib.parent}", "-cp", str(classes), "ThreadsTest",
                        str(android_bundle / "assets/edgepack/model.plan"), str(android_bundle / "assets/edgepack/io.txt"),
                        str(x), "4"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "OK" in r.stdout, r.stdout + r.stderr
    y = np.frombuffer((tmp_path / "in0.bin.out").read_bytes(), dtype=np.float32).reshape(want["y"].shape)
    np.testing.assert_allclose(y, want["y"], rtol=TOL, atol=TOL)


@needs_jdk
def test_android_readme_snippet_compiles(android_bundle: Path, tmp_path: Path) -> None:
    """The README's Java lines exactly as written, inside an Activity-like class (getAssets() stubbed)."""
    readme = (android_bundle / "README.md").read_text()
    block = next(b for b in re.findall(r"(?:^    .*\n)+", readme, flags=re.M) if "Session.load(" in b)
    lines = [ln[4:] for ln in block.splitlines()]
    src = tmp_path / "App.java"
    src.write_text("import java.io.*;\nimport java.nio.ByteBuffer;\nimport org.edgepack.Session;\n"
                   "class Assets { InputStream open(String n) throws IOException { return new FileInputStream(n); } }\n"
                   "public class App {\n  Assets getAssets() { return new Assets(); }\n"
                   "  void onCreate(float[] pixels) throws IOException {\n" + "\n".join("    " + ln for ln in lines)
                   + "\n  }\n}\n")
    classes = _javac(tmp_path)
    r = subprocess.run(["javac", "-Xlint:all", "-Werror", "-cp", str(classes), "-d", str(classes), str(src)],
                       capture_output=True, text=True)
    assert r.returncode == 0, src.read_text() + r.stderr


# ------------------------------------------------------------------ exported symbols

def _header_functions() -> set[str]:
    names = set()
    for h in (KERNELS / "include" / "edgepack.h", E.EDGE / "neon" / "ep_edge.h"):
        text = re.sub(r"/\*.*?\*/", "", h.read_text(), flags=re.S)
        names |= set(re.findall(r"^[A-Za-z_][\w \*]*?\b(ep_\w+)\s*\(", text, flags=re.M))
    return names


def _exports(lib: Path) -> set[str]:
    out = subprocess.run(["readelf", "--dyn-syms", "-W", str(lib)], capture_output=True, text=True, check=True).stdout
    return {f[7].split("@")[0] for f in (ln.split() for ln in out.splitlines())
            if len(f) >= 8 and f[6] != "UND" and f[4] in ("GLOBAL", "WEAK") and f[3] in ("FUNC", "OBJECT")}


@pytest.mark.parametrize("target", ["pi5", "android", "host"])
def test_library_exports_only_the_public_api(target: str, host_lib: Path) -> None:
    _make(target)
    lib = E.EDGE / "build" / target / "libedgepack.so"
    api = _header_functions()
    assert {"ep_open", "ep_run", "ep_edge_set_threads", "ep_worker_main", "ep_edge_cpu_features"} <= api
    got = _exports(lib)
    jni = {s for s in got if s.startswith("Java_org_edgepack_Session_")}
    assert not (got - jni) - api, f"exported beyond the API: {sorted((got - jni) - api)}"
    missing = api - got - ({"ep_edge_set_threads"} if target == "android" else set())   # android: no libc, no pthreads
    assert not missing, f"API not exported: {sorted(missing)}"
    assert ("ep_edge_set_threads" in got) == (target != "android")
    assert bool(jni) == (target != "pi5")
    for libc_name in ("memcpy", "memmove", "memset"):
        assert libc_name not in got
    needed = re.findall(r"\(NEEDED\).*\[(.*)\]", subprocess.run(["readelf", "-d", "-W", str(lib)], capture_output=True,
                                                                 text=True, check=True).stdout)
    if target == "pi5":   # pthreads, bound to glibc's first aarch64 versions (2.17): loads before and after 2.34
        assert needed == ["libpthread.so.0", "libc.so.6"]
        vers = subprocess.run(["readelf", "-V", "-W", str(lib)], capture_output=True, text=True, check=True).stdout
        assert set(re.findall(r"Name: (GLIBC_[\d.]+)", vers)) == {"GLIBC_2.17"}, vers
    elif target == "android":
        assert needed == []
