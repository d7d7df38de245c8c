"""Errors the packager raises: each names what is wrong and where, so a user can act on it."""
from __future__ import annotations


class PackagerError(Exception):
    """Base class: a model or option edgepack cannot package, with a message meant for users."""


class ModelLoadError(PackagerError):
    """The file is not a readable, valid ONNX model."""


class UnsupportedError(PackagerError):
    """An op, opset, dtype or attribute value outside what edgepack supports."""

    def __init__(self, op: str, node: str, opset: int, reason: str, domain: str = "") -> None:
        self.op, self.node, self.opset, self.reason, self.domain = op, node, opset, reason, domain
        where = f"{domain + '.' if domain else ''}{op} (node '{node}', opset {opset})"
        super().__init__(f"unsupported: {where}: {reason}")


class NeedsConstantError(PackagerError):
    """An input that sets a shape (Reshape's shape, Slice's starts, ...) is not known at package time."""

    def __init__(self, op: str, node: str, opset: int, names: list[str]) -> None:
        self.op, self.node, self.opset, self.names = op, node, opset, names
        super().__init__(
            f"unsupported: {op} (node '{node}', opset {opset}): input(s) {', '.join(names)} must be known at package "
            f"time (an initializer or constant) because they decide output shapes; bind a graph input with "
            f"--const NAME=FILE.npy")


class InputError(PackagerError):
    """Wrong inputs given to a bundle at run time (name, dtype, shape)."""


class BundleError(PackagerError):
    """A bundle that is incomplete, tampered with, or for another target."""


class RuntimeFailure(PackagerError):
    """The runtime core refused the plan or failed while running it."""
