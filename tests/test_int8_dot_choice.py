"""The relaxed build's int8 dot form, chosen per engine at load (web/src/int8_dot_choice.js): the pair form
(i16x8 relaxed dot + dot_i16x8) and the fused i32x4 relaxed dot write the same bytes as the SIMD build on int8
bundles (i7 strips and their fallback), 'auto' times both and reports the one it runs in session.features.int8Dot,
and builds without a relaxed dot report null; in Node and in Chromium."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto

from packager import load_bundle, package

from .browser_env import ISOLATED, chromium, chromium_missing, serving
from .test_int8 import I7_FEEDS, _qdq_conv_model
from .test_web_node import REPO, RELAXED_FLAG, _node_major, _node_run, _outputs

pytestmark = pytest.mark.skipif(_node_major() < 20, reason="needs Node >= 20")

CASES = [  # conv case (tests/test_int8.py I7_CASES), feed
    ((1, 8, 16, 3, 1, 1, 1, "relu", TensorProto.INT8, 0), "mixed"),       # i7 strips, then the dot_i16x8 fallback
    ((1, 3, 13, 3, 2, 1, 1, "none", TensorProto.UINT8, 128), "narrow"),  # uint8, zero point, K = 27 (odd pairs)
    ((1, 24, 40, 3, 1, 1, 1, "leaky", TensorProto.UINT8, 20), "narrow"), # general epilogue, 10 row panels
]


@pytest.mark.parametrize("case,feed", CASES, ids=[f"{c[1]}x{c[2]}_k{c[3]}_{f}" for c, f in CASES])
def test_both_dot_forms_same_bytes_and_auto_reports_its_choice(case, feed: str, tmp_path: Path) -> None:
    m = _qdq_conv_model(*case, hw=13)
    out = package(m, out=tmp_path / "b", verify=False)
    feeds = {"x": I7_FEEDS[feed](np.random.default_rng(5), (1, case[1], 13, 13)).astype(np.float32)}
    want = load_bundle(out, "simd").run(feeds)["y"].tobytes()
    # --no-liftoff: Node 20's baseline compiler doubles the fused dot's sums (the chooser then refuses it, below)
    for form, flags in (("pair", ()), ("auto", ()), ("fused", ()), ("fused", ("--no-liftoff",))):
        res = _node_run(tmp_path / f"{form}{len(flags)}", out, feeds, "relaxed", options={"int8Dot": form, "threads": 1},
                        node_flags=(RELAXED_FLAG, *flags))
        assert res["ok"], res.get("error")
        got = res["features"]["int8Dot"]
        assert res["features"]["relaxed"] and got in ("pair", "fused"), res["features"]
        if form == "pair" or flags:
            assert got == form
        if form == "fused" and got == "pair":   # refused: this engine's fused dot was not exact
            assert any(n.startswith("int8Dot: 'fused' not used") for n in res["notes"]), res["notes"]
        assert _outputs(res)["y"].tobytes() == want, (form, flags, got)


def test_no_choice_without_relaxed_dot_and_bad_option_refused(tmp_path: Path) -> None:
    m = _qdq_conv_model(1, 8, 16, 3, 1, 1, 1, "relu", TensorProto.INT8, 0, hw=13)
    out = package(m, out=tmp_path / "b", verify=False)
    feeds = {"x": I7_FEEDS["nonneg"](np.random.default_rng(1), (1, 8, 13, 13)).astype(np.float32)}
    res = _node_run(tmp_path / "simd", out, feeds, "simd", options={"threads": 1})
    assert res["ok"] and res["features"]["int8Dot"] is None, res
    res = _node_run(tmp_path / "bad", out, feeds, "relaxed", options={"int8Dot": "vnni"}, node_flags=(RELAXED_FLAG,))
    assert not res["ok"] and res["error_name"] == "EdgepackError" and "unknown int8Dot 'vnni'" in res["error"], res


CHROMIUM_RUN = """async ({ x, dims, bundle }) => {
  const { load } = await import('/edgepack/index.js');
  const res = {};
  for (const [form, threads] of [['pair', 1], ['fused', 1], ['auto', 1], ['fused', 2]]) {
    const s = await load(bundle, { variant: 'relaxed', threads, int8Dot: form });
    const out = await s.run({ x: { data: new Float32Array(x), dims } });
    res[`${form}${threads}`] = { form, threads: s.features.threads, int8Dot: s.features.int8Dot, notes: [...s.notes], y: Array.from(out.y.data) };
    s.destroy();
  }
  return res;
}"""


@pytest.mark.skipif(chromium_missing() is not None, reason=str(chromium_missing()))
def test_chromium_both_dot_forms_same_bytes(tmp_path: Path) -> None:
    """In Chromium (the engine whose fused relaxed dot maps to vpdpbusd where the CPU has it): each form asked for
    runs (the fused one unless the engine's was not exact, said in a note) and gives the SIMD build's bytes, on one
    thread and on the threaded build's two; 'auto' reports its choice."""
    case = (1, 8, 16, 3, 1, 1, 1, "relu", TensorProto.INT8, 0)
    out = package(_qdq_conv_model(*case, hw=13), out=tmp_path / "b", verify=False)
    x = I7_FEEDS["mixed"](np.random.default_rng(5), (1, 8, 13, 13)).astype(np.float32)
    want = load_bundle(out, "simd").run({"x": x})["y"].ravel()
    with serving({"/": tmp_path, "/edgepack": REPO / "web" / "src"}) as url, chromium() as browser:
        page = browser.new_page()
        page.goto(url + ISOLATED + "/b/manifest.json")   # isolated: the threaded build can start its workers
        res = page.evaluate(CHROMIUM_RUN, {"x": x.ravel().tolist(), "dims": list(x.shape), "bundle": ISOLATED + "/b/"})
    assert res["fused2"]["threads"] == 2   # its workers read the form from the shared memory
    for key, r in res.items():
        form = r["form"]
        assert r["int8Dot"] == form or (form == "fused" and any("not used" in n for n in r["notes"])) or \
            (form == "auto" and r["int8Dot"] in ("pair", "fused")), (key, r["int8Dot"], r["notes"])
        assert np.array_equal(np.asarray(r["y"], np.float32), want), key
    print("chromium int8Dot auto:", res["auto1"]["int8Dot"], res["fused1"]["notes"])
