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
