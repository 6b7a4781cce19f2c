"""Helpers shared by the ModelProto passes: who reads a name, renaming, copies."""
from __future__ import annotations

import onnx

STD = ("", "ai.onnx")


def copy(model: onnx.ModelProto) -> onnx.ModelProto:
    out = onnx.ModelProto()
    out.CopyFrom(model)
    return out


def subgraphs(node: onnx.NodeProto):
    for a in node.attribute:
        if a.HasField("g"):
            yield a.g
        yield from a.graphs


def subgraph_reads(node: onnx.NodeProto) -> set[str]:
    """Every name a node's subgraphs (If/Loop/Scan bodies, nested) read: outer-scope names among
    them count as uses of the outer value."""
    out: set[str] = set()
    stack = list(subgraphs(node))
    while stack:
        g = stack.pop()
        for n in g.node:
            out.update(x for x in n.input if x)
            stack.extend(subgraphs(n))
        out.update(o.name for o in g.output)
    return out


def readers(graph: onnx.GraphProto) -> dict[str, list[int]]:
    """name -> indices of main-graph nodes that read it (directly or from a subgraph)."""
    out: dict[str, list[int]] = {}
    for i, n in enumerate(graph.node):
        for x in set(x for x in n.input if x) | subgraph_reads(n):
            out.setdefault(x, []).append(i)
    return out


def constants(graph: onnx.GraphProto) -> dict[str, onnx.TensorProto]:
    """Initializers that cannot change at run time (not also graph inputs)."""
    fed = {v.name for v in graph.input}
    return {t.name: t for t in graph.initializer if t.name not in fed}


def all_names(graph: onnx.GraphProto) -> set[str]:
    names = {v.name for v in graph.input} | {v.name for v in graph.output}
    names |= {t.name for t in graph.initializer}
    for n in graph.node:
        names.update(n.input)
        names.update(n.output)
    return names


def fresh_name(taken: set[str], base: str) -> str:
    """A tensor name not used anywhere in the graph (recorded in `taken`)."""
    k, name = 0, base
    while name in taken:
        k += 1
        name = f"{base}_{k}"
    taken.add(name)
    return name


def replace_nodes(graph: onnx.GraphProto, keep: list[onnx.NodeProto]) -> None:
    kept = [onnx.NodeProto() for _ in keep]
    for dst, src in zip(kept, keep):
        dst.CopyFrom(src)
    del graph.node[:]
    graph.node.extend(kept)
