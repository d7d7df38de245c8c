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



MAX_NODES_NAMED = 8   # per op and reason: a model with 400 refused LSTMs still gets a readable report


def reason_of(e: PackagerError) -> str:
    """What is wrong with a node, without the op/node/opset prefix (those are grouped by the report)."""
    if isinstance(e, NeedsConstantError):
        return (f"input(s) {', '.join(e.names)} must be known at package time (they decide output shapes): bind "
                f"them with --const NAME=FILE.npy")
    return getattr(e, "reason", str(e))


def group_refusals(problems: list[PackagerError]) -> list[tuple[str, int, str, list[str]]]:
    """[(op label, opset, reason, node names)] grouped by op (domain.op) then reason, ops in first-seen order."""
    groups: dict[tuple[str, int, str], list[str]] = {}
    for p in problems:
        op = getattr(p, "op", "?")
        dom = getattr(p, "domain", "")
        key = (f"{dom + '.' if dom else ''}{op}", getattr(p, "opset", 0), reason_of(p))
        groups.setdefault(key, []).append(getattr(p, "node", "?"))
    order = list(dict.fromkeys(k[0] for k in groups))
    return [(k[0], k[1], k[2], v) for o in order for k, v in groups.items() if k[0] == o]


def format_refusals(problems: list[PackagerError]) -> str:
    """The report of several refused nodes: a first line with the counts, then one line per op and reason."""
    groups = group_refusals(problems)
    ops = list(dict.fromkeys(g[0] for g in groups))
    opsets = sorted({g[1] for g in groups})
    lines = [f"unsupported: {len(problems)} nodes of {len(ops)} op{'s' if len(ops) > 1 else ''} "
             f"({', '.join(ops)}; opset {', '.join(map(str, opsets))}) cannot run:"]
    for op, opset, reason, nodes in groups:
        named = ", ".join(f"'{n}'" for n in nodes[:MAX_NODES_NAMED])
        more = f" and {len(nodes) - MAX_NODES_NAMED} more" if len(nodes) > MAX_NODES_NAMED else ""
        lines.append(f"  {op} (opset {opset}) x{len(nodes)}: {reason} (node{'s' if len(nodes) > 1 else ''} "
                     f"{named}{more})")
    return "\n".join(lines)


class UnsupportedErrors(UnsupportedError):
    """Several nodes refused at once (every one found, not only the first), grouped by op in the message."""

    def __init__(self, problems: list[PackagerError]) -> None:
        first = problems[0]
        self.problems = problems
        self.op, self.node, self.opset = getattr(first, "op", "?"), getattr(first, "node", "?"), getattr(first, "opset", 0)
        self.reason, self.domain = reason_of(first), getattr(first, "domain", "")
        PackagerError.__init__(self, format_refusals(problems))


def collected(problems: list[PackagerError]) -> PackagerError:
    """One error for every refusal found: the refusal itself when there is one. When some only need constant
    inputs, a NeedsConstantError naming all such inputs (callers can bind them and retry; a node refused because
    another's input was not constant then goes too), its message listing every refusal; else UnsupportedErrors."""
    if len(problems) == 1:
        return problems[0]
    needs = [p for p in problems if isinstance(p, NeedsConstantError)]
    if needs:
        first = needs[0]
        e = NeedsConstantError(first.op, first.node, first.opset,
                               list(dict.fromkeys(n for p in needs for n in p.names)))
        e.args = (format_refusals(problems),)
        e.problems = problems   # type: ignore[attr-defined]
        return e
    return UnsupportedErrors(problems)


def with_opset(e: PackagerError, opset: int) -> PackagerError:
    """The same refusal naming `opset`: the model's own opset when analysis converted it to another one (the user
    knows the model as written; the conversion is stated in a notice)."""
    if isinstance(e, UnsupportedErrors):
        return UnsupportedErrors([with_opset(p, opset) for p in e.problems])
    if getattr(e, "problems", None) and isinstance(e, NeedsConstantError):
        return collected([with_opset(p, opset) for p in e.problems])
    if isinstance(e, UnsupportedError):
        return UnsupportedError(e.op, e.node, opset, e.reason, e.domain)
    if isinstance(e, NeedsConstantError):
        return NeedsConstantError(e.op, e.node, opset, e.names)
    return e
