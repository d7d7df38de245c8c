"""The shape of packager/ (issue 20): no import cycles among its modules, the lowering driver apart from the registry
and context it uses, and every target one implementation of the one Target interface the pipeline knows."""
from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

PACKAGER = Path(__file__).resolve().parent.parent / "packager"


def _modules() -> dict[str, Path]:
    out = {}
    for p in PACKAGER.rglob("*.py"):
        parts = list(p.relative_to(PACKAGER.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


def _imported(module: str, path: Path, node: ast.Import | ast.ImportFrom, modules: dict[str, Path]) -> list[str]:
    """The packager modules an import statement names (`from . import x` names module x when it is one)."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
        base = ".".join(package[:len(package) - node.level + 1] + ([node.module] if node.module else [])) \
            if node.level else (node.module or "")
        names = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
    out = []
    for n in names:
        while n and n not in modules:   # packager.x.name (a function) -> packager.x
            n = n.rpartition(".")[0]
        if n:
            out.append(n)
    return out


def import_graph() -> dict[str, set[str]]:
    """module -> the packager modules it imports, at module level or inside a function (a lazy import is still a
    dependency); imports under `if TYPE_CHECKING:` are annotations only and left out."""
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        tree = ast.parse(path.read_text())
        for n in ast.walk(tree):
            if isinstance(n, ast.If) and getattr(n.test, "id", getattr(n.test, "attr", None)) == "TYPE_CHECKING":
                n.body = []
        deps = set()
        for n in ast.walk(tree):
            if isinstance(n, (ast.Import, ast.ImportFrom)):
                # a module's own package (__init__) runs before it anyway: not an edge
                deps.update(d for d in _imported(module, path, n, modules) if d != module and not module.startswith(d + "."))
        graph[module] = deps
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_import_graph_is_read_and_finds_a_cycle() -> None:
    """The check itself: it sees lazy imports, relative imports and `from . import module`, and a cycle."""
    g = import_graph()
    assert "packager.lowering.registry" in g["packager.analyze"]    # a lazy import inside a function
    assert "packager.ops.conv" in g["packager.ops.pool"]             # `from . import conv`
    assert "packager.plan_build" in g["packager.api"]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_cycles_among_packager_modules() -> None:
    found = cycles(import_graph())
    assert not found, "import cycles (a module of each must stop importing the next): " + "; ".join(
        " <-> ".join(c) for c in found)


def test_op_modules_import_the_registry_not_the_driver() -> None:
    """An op module that imports packager.lower (the driver, which imports the QDQ fusion and through it op modules)
    closes a cycle: the registration API is `from ..lowering import LowerCtx, lowers`."""
    g = import_graph()
    wrong = sorted(m for m in g if m.startswith("packager.ops.") and "packager.lower" in g[m])
    assert not wrong, f"import LowerCtx, lowers, REGISTRY from packager.lowering, not packager.lower: {wrong}"


def test_lower_py_is_the_driver_only() -> None:
    """The registry and the lowering context live in packager/lowering/; lower.py defines neither (it may name them,
    so op modules written against `from ..lower import lowers` still import)."""
    tree = ast.parse((PACKAGER / "lower.py").read_text())
    defined = {n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    assigned = {t.id for n in tree.body if isinstance(n, (ast.Assign, ast.AnnAssign))
                for t in (n.targets if isinstance(n, ast.Assign) else [n.target]) if isinstance(t, ast.Name)}
    assert not defined & {"LowerCtx", "Tensor", "Emitted", "LoweredPlan", "lowers", "lowers_fused", "load_ops"}, defined
    assert not assigned & {"REGISTRY", "FUSED_REGISTRY"}, assigned
    assert {"lower", "lower_ctx"} <= defined
    from packager import lower
    from packager.lowering import context, registry
    assert lower.LowerCtx is context.LowerCtx and lower.lowers is registry.lowers


def test_op_modules_and_passes_have_their_places() -> None:
    """Lowerings in ops/ (each registered through packager.lowering), fusion passes in passes/."""
    from packager.lowering import REGISTRY, load_ops
    load_ops()
    homes = {fn.__module__ for fn in REGISTRY.values()}
    assert homes and all(m.startswith("packager.ops.") for m in homes), homes
    assert not (PACKAGER / "ops" / "qdq_fusion.py").exists() and (PACKAGER / "passes" / "qdq_fusion.py").is_file()


def test_every_target_is_one_implementation_of_target() -> None:
    from packager.targets import TARGETS, get_target
    from packager.targets.base import Target
    from packager.errors import PackagerError
    abstract = {n for n, f in vars(Target).items() if getattr(f, "__isabstractmethod__", False)}
    assert abstract == {"stage", "verify", "runner"}
    for name in TARGETS:
        t = get_target(name)
        assert isinstance(t, Target) and t.name == name
        for method in (*abstract, "check"):   # one signature: the pipeline calls each target the same way
            assert inspect.signature(getattr(type(t), method)).parameters.keys() == \
                inspect.signature(getattr(Target, method)).parameters.keys(), (name, method)
    with pytest.raises(PackagerError, match="unknown target 'wasm' \\(available: web, pi5, android\\)"):
        get_target("wasm")


def test_the_pipeline_never_branches_on_a_target_name() -> None:
    """api.py knows a target only through the Target interface: no comparison with a target's name."""
    tree = ast.parse((PACKAGER / "api.py").read_text())
    names = {"web", "pi5", "android"}
    compared = [ast.unparse(n) for n in ast.walk(tree) if isinstance(n, ast.Compare)
                and any(isinstance(c, ast.Constant) and c.value in names for c in [n.left, *n.comparators])]
    assert not compared, compared


def test_the_wasm_builds_tests_run_are_named_once() -> None:
    """tests/conftest.py's VARIANTS (and PORTABLE_AND_VECTOR) are the one list of the wasm builds the tests run: no
    other test module defines its own constant of build names (five did; they drifted apart)."""
    from packager.bundle import WASM_VARIANTS
    tests = Path(__file__).resolve().parent
    own = []
    for path in sorted(tests.rglob("*.py")):
        if path.name == "conftest.py":
            continue
        for node in ast.parse(path.read_text()).body:
            value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
            if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) >= 2 and all(
                    isinstance(e, ast.Constant) and e.value in WASM_VARIANTS for e in value.elts):
                own.append(f"{path.relative_to(tests)}:{node.lineno}")
    assert not own, f"use VARIANTS / PORTABLE_AND_VECTOR from tests/conftest.py: {own}"
