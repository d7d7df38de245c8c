"""Targets: one implementation of targets/base.Target each (web: targets/web.py; pi5, android: targets/edge.py)."""
from __future__ import annotations

from ..errors import PackagerError
from .base import Target
from .edge import EDGE_TARGETS, EdgeTarget
from .web import WebTarget

TARGETS = ("web", *EDGE_TARGETS)


def get_target(name: str) -> Target:
    """The target called `name`; an error naming the available ones otherwise."""
    if name == "web":
        return WebTarget()
    if name in EDGE_TARGETS:
        return EdgeTarget(name)
    raise PackagerError(f"unknown target '{name}' (available: {', '.join(TARGETS)})")
