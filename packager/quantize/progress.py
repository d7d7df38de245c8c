"""Progress of a long step on stderr: a one-line bar on a terminal; in a log (stderr not a terminal) a plain
line every few seconds, so a CI log or a piped run shows the step is alive without a line per sample."""
from __future__ import annotations

import sys
import time
from typing import TextIO

LOG_INTERVAL_S = 5.0


class Progress:
    def __init__(self, label: str, total: int, stream: TextIO | None = None, width: int = 30,
                 interval: float | None = None) -> None:
        self.label, self.total, self.width = label, max(total, 1), width
        self.interval = LOG_INTERVAL_S if interval is None else interval
        self.stream = stream if stream is not None else sys.stderr
        isatty = getattr(self.stream, "isatty", None)
        self.bar = bool(isatty and isatty())
        self.done = 0
        self.t0 = self.last = time.perf_counter()
        self.logged = False

    def step(self, n: int = 1) -> None:
        self.done = min(self.done + n, self.total)
        now = time.perf_counter()
        if self.bar:
            filled = self.width * self.done // self.total
            self.stream.write(f"\r{self.label} [{'#' * filled}{'.' * (self.width - filled)}] "
                              f"{self.done}/{self.total} {now - self.t0:5.1f}s")
            self.stream.flush()
        elif now - self.last >= self.interval:
            self.last, self.logged = now, True
            self.stream.write(f"{self.label}: {self.done}/{self.total} ({now - self.t0:.0f} s)\n")
            self.stream.flush()

    def close(self) -> float:
        if self.bar:
            self.stream.write("\n")
            self.stream.flush()
        return time.perf_counter() - self.t0
