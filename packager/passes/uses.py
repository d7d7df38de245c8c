"""Who reads each value of a pass's step list (ONNX nodes, or records an earlier pass left in their place)."""
from __future__ import annotations


def consumers_of(nodes: list) -> dict[str, list]:
    """value name -> the steps that read it, in step order (optional inputs, named '', are no value)."""
    consumers: dict[str, list] = {}
    for n in nodes:
        for i in getattr(n, "input", ()):
            if i:
                consumers.setdefault(i, []).append(n)
    return consumers
