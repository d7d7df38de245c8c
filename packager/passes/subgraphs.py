"""Subgraphs (If branches, Loop and Scan bodies) at package time: which outer values a body reads, and the two
rewrites that replace a control node by plain nodes when what decides it is known: an If whose condition is a
constant becomes its branch's nodes, a Loop whose trip count is a small constant (and whose condition stays
true) becomes that many copies of its body. Pure functions over NodeProtos: the analyzer (packager/analyze.py)
calls them in its folding loop, so what they produce folds further."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

CONTROL_OPS = ("If", "Loop", "Scan")
UNROLL_MAX_NODES = 512      # a Loop unrolls only while trip count x body nodes stays under this


def subgraphs(node: onnx.NodeProto) -> list[onnx.GraphProto]:
    out = []
    for a in node.attribute:
        if a.type == onnx.AttributeProto.GRAPH:
            out.append(a.g)
        elif a.type == onnx.AttributeProto.GRAPHS:
            out.extend(a.graphs)
    return out


def all_graphs(graph: onnx.GraphProto):
    """graph and every subgraph inside it, outermost first."""
    yield graph
    for n in graph.node:
        for g in subgraphs(n):
            yield from all_graphs(g)


def all_nodes(graph: onnx.GraphProto):
    """Every node of graph and of its subgraphs."""
    for g in all_graphs(graph):
        yield from g.node


def outer_refs(graph: onnx.GraphProto) -> set[str]:
    """Names a subgraph (and the subgraphs inside it) reads from enclosing scopes."""
    local = {i.name for i in graph.input} | {i.name for i in graph.initializer}
    refs: set[str] = set()
    for n in graph.node:
        refs |= {i for i in n.input if i and i not in local}
        for g in subgraphs(n):
            refs |= {r for r in outer_refs(g) if r not in local}
        local |= {o for o in n.output if o}
    refs |= {o.name for o in graph.output if o.name not in local}
    return refs


def node_outer_refs(node: onnx.NodeProto) -> set[str]:
    refs: set[str] = set()
    for g in subgraphs(node):
        refs |= outer_refs(g)
    return refs


def _renamed(graph: onnx.GraphProto, names: dict[str, str]) -> list[onnx.NodeProto]:
    """The graph's nodes (initializers as Constants first) with values renamed by `names` (nested subgraphs'
    reads of renamed values too: ONNX forbids shadowing, so a name means one value everywhere)."""
    out = [helper.make_node("Constant", [], [names[i.name]], value=i) for i in graph.initializer]
    for n in graph.node:
        m = onnx.NodeProto()
        m.CopyFrom(n)
        m.input[:] = [names.get(i, i) for i in n.input]
        m.output[:] = [names.get(o, o) for o in n.output]
        for g in subgraphs(m):
            rename_reads(g, names)
        out.append(m)
    return out


def rename_reads(graph: onnx.GraphProto, names: dict[str, str]) -> None:
    """A subgraph's reads of values renamed by `names` (its nodes', its nested subgraphs', its outputs')."""
    for n in graph.node:
        n.input[:] = [names.get(i, i) for i in n.input]
        for g in subgraphs(n):
            rename_reads(g, names)
    for o in graph.output:
        o.name = names.get(o.name, o.name)


def _local_names(graph: onnx.GraphProto) -> list[str]:
    names = [i.name for i in graph.input] + [i.name for i in graph.initializer]
    return names + [o for n in graph.node for o in n.output if o]


def inline_branch(node: onnx.NodeProto, cond: bool, prefix: str) -> list[onnx.NodeProto]:
    """An If node as the nodes of the branch `cond` selects: the branch's values renamed under `prefix`, its
    outputs bound to the If's outputs by Identity nodes."""
    branch = next(a.g for a in node.attribute if a.name == ("then_branch" if cond else "else_branch"))
    names = {v: f"{prefix}{v}" for v in _local_names(branch)}
    out = _renamed(branch, names)
    for o, res in zip(branch.output, node.output):
        if res:
            out.append(helper.make_node("Identity", [names.get(o.name, o.name)], [res]))
    return out


def condition_stays_true(body: onnx.GraphProto) -> bool:
    """The body's condition output is its condition input, passed through (by name or by an Identity)."""
    cond_in, cond_out = body.input[1].name, body.output[0].name
    if cond_out == cond_in:
        return True
    return any(n.op_type == "Identity" and list(n.output) == [cond_out] and list(n.input) == [cond_in] for n in body.node)


def can_unroll(node: onnx.NodeProto, trips: int | None, cond: bool | None) -> bool:
    body = subgraphs(node)[0]
    return (trips is not None and trips >= 1 and cond is not False and condition_stays_true(body)
            and trips * (len(body.node) + len(body.initializer) + 4) <= UNROLL_MAX_NODES)


def unroll_loop(node: onnx.NodeProto, trips: int, prefix: str, opset: int) -> list[onnx.NodeProto]:
    """A Loop that runs exactly `trips` times (can_unroll) as `trips` renamed copies of its body: iteration i
    reads the constant i, carried values chain from one copy to the next, scan outputs are concatenated."""
    body = subgraphs(node)[0]
    n_carried = len(node.input) - 2
    carried = list(node.input[2:])
    scans: list[list[str]] = [[] for _ in range(len(body.output) - 1 - n_carried)]
    out: list[onnx.NodeProto] = []
    for i in range(trips):
        p = f"{prefix}{i}_"
        names = {v: p + v for v in _local_names(body)}
        out.append(helper.make_node("Constant", [], [names[body.input[0].name]],
                                    value=numpy_helper.from_array(np.array(i, np.int64))))
        out.append(helper.make_node("Constant", [], [names[body.input[1].name]],
                                    value=numpy_helper.from_array(np.array(True))))
        for vi, src in zip(body.input[2:], carried):
            out.append(helper.make_node("Identity", [src], [names[vi.name]]))
        out += _renamed(onnx.helper.make_graph(body.node, body.name, [], [], list(body.initializer)), names)
        res = [names.get(o.name, o.name) for o in body.output]
        carried = res[1:1 + n_carried]
        for k, s in enumerate(res[1 + n_carried:]):
            u = f"{p}scan{k}"
            if opset >= 13:
                axes = f"{p}scan{k}_axes"
                out.append(helper.make_node("Constant", [], [axes], value=numpy_helper.from_array(np.array([0], np.int64))))
                out.append(helper.make_node("Unsqueeze", [s, axes], [u]))
            else:
                out.append(helper.make_node("Unsqueeze", [s], [u], axes=[0]))
            scans[k].append(u)
    for src, res in zip(carried, node.output[:n_carried]):
        if res:
            out.append(helper.make_node("Identity", [src], [res]))
    for parts, res in zip(scans, node.output[n_carried:]):
        if res:
            out.append(helper.make_node("Concat", parts, [res], axis=0))
    return out


def inputs_behind(nodes: list[onnx.NodeProto], graph_inputs: list[str], names: list[str | None]) -> list[str]:
    """The graph inputs the values `names` are computed from (through bodies' outer reads too)."""
    producer = {o: n for n in nodes for o in n.output}
    seen: set[str] = set()
    todo, found = [n for n in names if n], []
    while todo:
        v = todo.pop()
        if v in seen:
            continue
        seen.add(v)
        if v in graph_inputs:
            found.append(v)
        elif v in producer:
            todo += [i for i in producer[v].input if i] + sorted(node_outer_refs(producer[v]))
    return sorted(found)
