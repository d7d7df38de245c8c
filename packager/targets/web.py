"""The web target: the plan, the five wasm builds of the runtime and the files that make the bundle an npm package
(targets/web_npm.py), verified by running the bundle's SIMD build under wasmtime."""
from __future__ import annotations

import json
from functools import partial
from pathlib import Path

import onnx

from ..bundle import WASM_VARIANTS, StagedBundle, load_bundle, stage_bundle
from ..errors import PackagerError
from ..reference import Runner, check_finite, compare, reference_run, verification_feeds
from ..toolchain import ensure_wasm
from ..weights import write_model
from .base import Log, Target
from .web_npm import npm_files


class WebTarget(Target):
    name = "web"

    def stage(self, out: Path, manifest: dict, shipped: onnx.ModelProto, plan: Path, *, emit_onnx: bool,
              signed: bool, log: Log) -> StagedBundle:
        runtime = ensure_wasm()
        files: dict = {"model.plan": plan}   # copied file to file: a 1-2 GB plan is never joined in memory
        if emit_onnx:
            files["model.onnx"] = partial(write_model, shipped)   # streamed from the weight store
        files.update({f: runtime[f] for f in WASM_VARIANTS.values()})
        files.update(npm_files(manifest, files, signed=signed))   # the bundle is an npm package too
        return stage_bundle(out, manifest, files)

    def verify(self, path: Path, reference: onnx.ModelProto, log: Log, strict: bool = False) -> None:
        """The bundle (SIMD build) and onnxruntime on the same seeded inputs. Strict: also run it again and require
        identical bits, and record the exact memory bound. A version-2 bundle runs at its example shape
        (manifest "dims")."""
        b = load_bundle(path)
        feeds, ranges = verification_feeds(reference, b.example_inputs())
        got = b.run(feeds)
        profile_facts = {}
        if strict:
            again = b.run(feeds)
            if any(got[k].tobytes() != again[k].tobytes() for k in got):
                raise PackagerError("--profile strict: two runs on the same input gave different bits")
            profile_facts = {"deterministic": "two runs on the same input gave identical bits",
                             "memory_bound_bytes": b.session().memory_bound,
                             "memory_bound_note": "highest byte of wasm linear memory used: runtime image + plan + arena"}
        versioned = bool(b.manifest.get("dims"))
        del b   # the wasm instance's arena (up to 4 GiB) is freed before onnxruntime's child process runs
        try:
            want = reference_run(reference, feeds, isolated=True)
            result = dict(compare(got, want), reference="onnxruntime CPU", inputs="seeded random (seed 0)")
            if ranges:
                result["input_ranges"] = ranges
        except PackagerError:
            raise
        except Exception as e:  # onnxruntime itself cannot run this model
            result = {"reference": "unavailable", "reason": str(e).splitlines()[0][:200]}
        manifest = json.loads((path / "manifest.json").read_text())
        if versioned:
            result["input_shapes"] = {k: list(v.shape) for k, v in feeds.items()}
        manifest["verification"] = result
        manifest["profile"].update(profile_facts)
        (path / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
        if "max_abs_diff" in result:
            log(f"verified against onnxruntime: max abs diff {result['max_abs_diff']:.3g}")
            check_finite(result, log, strict)

    def runner(self, path: Path) -> tuple[Runner, str]:
        return load_bundle(path).run, "the bundle's edgepack.wasm (SIMD) under wasmtime"
