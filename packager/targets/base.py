"""The one interface every target implements (web: targets/web.py; pi5, android: targets/edge.py).

The pipeline (packager/api.py) knows a target only through it: what plans it runs, the files its bundle holds,
how that bundle is checked against onnxruntime, and how it runs for the accuracy report."""
from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import Callable

import onnx

from ..bundle import StagedBundle
from ..reference import Runner

Log = Callable[[str], None]


class Target(ABC):
    name: str

    def check(self, control_flow: bool) -> None:
        """Refuse, before anything is written, a plan of fixed input shapes this target's runtime does not run:
        control_flow, one with If/Loop/Scan (a version-2 plan). Default: every plan runs."""

    @abstractmethod
    def stage(self, out: Path, manifest: dict, shipped: onnx.ModelProto, plan: Path, *, emit_onnx: bool,
              signed: bool, log: Log) -> StagedBundle:
        """The bundle in its staging folder (packager/bundle.py): the plan (a file: large plans are never held in
        memory), runtime files, manifest; the optimized graph as model.onnx only when emit_onnx."""

    @abstractmethod
    def verify(self, path: Path, reference: onnx.ModelProto, log: Log, strict: bool = False) -> None:
        """Run the staged bundle and onnxruntime on the same seeded inputs; record the difference in its manifest."""

    @abstractmethod
    def runner(self, path: Path) -> tuple[Runner, str]:
        """A function running the bundle at `path` on feeds, and the words saying what runs it."""
