"""Helpers for the passes that rewrite the IR (after shape inference)."""
from __future__ import annotations

from ..ir import Graph, Node


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
