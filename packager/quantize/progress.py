"""A one-line progress bar on stderr (only when stderr is a terminal: logs and tests stay clean)."""
from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    def __init__(self, label: str, total: int, stream: TextIO | None = None, width: int = 30) -> None:
        self.label, self.total, self.width = label, max(total, 1), width
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = stream is not None or sys.stderr.isatty()
        self.done = 0
        self.t0 = time.perf_counter()

    def step(self, n: int = 1) -> None:
        self.done = min(self.done + n, self.total)
        if self.enabled:
            filled = self.width * self.done // self.total
            self.stream.write(f"\r{self.label} [{'#' * filled}{'.' * (self.width - filled)}] "
                              f"{self.done}/{self.total} {time.perf_counter() - self.t0:5.1f}s")
            self.stream.flush()

    def close(self) -> float:
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()
        return time.perf_counter() - self.t0
