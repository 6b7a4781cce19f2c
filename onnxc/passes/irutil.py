"""Helpers for the passes that rewrite the IR (after shape inference)."""
from __future__ import annotations

import numpy as np

from ..ir import Graph, Node, Value

# pattern matching: standard nodes, their readers and constant operands
FLOATS = ("float", "double")


def std(n: Node | None, op: str) -> bool:
    return n is not None and n.domain == "" and n.op_type == op


def readers(v: Value) -> list[Node]:
    out: list[Node] = []
    for c in v.consumers:
        if all(c is not o for o in out):
            out.append(c)
    return out


def only(v: Value | None, node_type: str) -> Node | None:
    """The single distinct reader of v when it is a standard node_type and v is no graph output."""
    if v is None or v.is_output:
        return None
    rs = readers(v)
    return rs[0] if len(rs) == 1 and std(rs[0], node_type) else None


def const(v: Value | None) -> np.ndarray | None:
    return None if v is None or v.const is None or v.is_input else np.asarray(v.const)


def scalar(v: Value | None) -> float | None:
    c = const(v)
    return float(c.reshape(-1)[0]) if c is not None and c.size == 1 else None


def other(n: Node, v: Value) -> Value | None:
    a, b = n.inputs[0], n.inputs[1]
    return b if a is v else a if b is v else None


def splice(graph: Graph, absorbed: set[int], place: dict[int, Node], dead_values: set[int]) -> Graph:
    """The graph with fused nodes in: place maps id(node) -> the fused node taking its position;
    the other absorbed nodes (ids) and the values no longer computed (ids) leave."""
    if not place:
        return graph
    nodes = []
    for n in graph.nodes:
        if id(n) in place:
            nodes.append(place[id(n)])
        elif id(n) not in absorbed:
            nodes.append(n)
    for i, n in enumerate(nodes):
        n.index = i
    graph.nodes = nodes
    graph.values = [v for v in graph.values if v.id not in dead_values]
    return graph


def replace(nodes: list[Node], fused: Node, dead_values: set[int]) -> set[int]:
    """Wire `fused` in for `nodes` (the absorbed ones): they no longer read their inputs, their
    outputs other than fused's are no longer computed (added to dead_values), fused reads its
    inputs and produces its outputs. Returns the absorbed nodes' ids (for splice)."""
    gone = {id(n) for n in nodes}
    keep = {id(v) for v in fused.outputs if v is not None}
    for n in nodes:
        for v in n.inputs:
            if v is not None:
                v.consumers = [c for c in v.consumers if id(c) not in gone]
        for v in n.outputs:
            if v is not None and id(v) not in keep:
                dead_values.add(v.id)
    for v in fused.inputs:
        if v is not None:
            v.consumers.append(fused)
    for v in fused.outputs:
        if v is not None:
            v.producer = fused
    return gone


def fuse_matches(graph: Graph, anchor: str, match, build) -> Graph:
    """The fusion passes' loop: for each standard `anchor` node not absorbed yet, match(node) gives
    {"nodes": the nodes to absorb, "last": the one whose place the fused node takes, ...} or None;
    build(m) gives the fused node (None: leave them). Overlapping matches: the first one wins."""
    absorbed: set[int] = set()
    place: dict[int, Node] = {}
    dead: set[int] = set()
    for n in list(graph.nodes):
        if id(n) in absorbed or not std(n, anchor):
            continue
        m = match(n)
        if m is None or any(id(x) in absorbed for x in m["nodes"]):
            continue
        fused = build(m)
        if fused is None:
            continue
        absorbed |= replace(m["nodes"], fused, dead)
        place[id(m["last"])] = fused
    return splice(graph, absorbed, place, dead)
