"""Fuse a 1x1 convolution into the depthwise convolution that alone reads its output
(ops/pwdw.py PwDwConv), after prepack (the 1x1 must run on its compile-time packed panels).

    X -> Conv 1x1 [+ bias, activation] -> E -> Conv depthwise [+ bias, residual, activation] -> Y

becomes X -> PwDwConv -> Y, and E (MobileNet's expanded tensor, 6x the channels) is never stored.
Only where both halves have their fast kernels: the 1x1 on onnxc_pw_rows (read in place: the
last partial tile is copied per panel) and no residual, the depthwise with a depthwise_flat
layout; float, static shapes.
"""
from __future__ import annotations

from ..ir import Graph, Node
from . import PRIVATE_DOMAIN


def _pointwise(node: Node) -> dict | None:
    from ..ops import lookup
    if node.op_type not in ("Conv", "FusedConv") or node.domain not in ("", PRIVATE_DOMAIN):
        return None
    if node.inputs[0].etype.name != "float" or not (node.attrs.get("_prepacked") or {}).get("pw"):
        return None
    p = lookup(node).params(node)
    if p["kind"] != "pointwise" or not p["pw"] or p["G"] != 1 or p["has_res"] \
            or p["lowp"] or not isinstance(p["N"], int):
        return None
    return p


def _depthwise(node: Node, e) -> dict | None:
    from ..ops import lookup
    if node.op_type not in ("Conv", "FusedConv") or node.domain not in ("", PRIVATE_DOMAIN):
        return None
    if node.inputs[0] is not e or any(v is e for v in node.inputs[1:]):
        return None
    p = lookup(node).params(node)
    if p["kind"] != "depthwise" or not p["dwf"] or p["lowp"]:
        return None
    return p


def fuse_pointwise_depthwise(graph: Graph) -> Graph:
    place: dict[int, Node] = {}       # id of the depthwise node -> fused node
    absorbed: set[int] = set()
    dead: set[int] = set()
    for a in graph.nodes:
        e = a.outputs[0] if a.outputs else None
        if e is None or e.is_output or len(e.consumers) != 1 or id(a) in absorbed:
            continue
        b = e.consumers[0]
        pa = _pointwise(a)
        if pa is None:
            continue
        pb = _depthwise(b, e)
        if pb is None or pb["C"] != pa["M"]:
            continue
        ins = [a.inputs[0], a.inputs[1], a.input(2), None, a.inputs[4], b.inputs[1], b.input(2), b.input(3)]
        fused = Node(b.index, "PwDwConv", PRIVATE_DOMAIN, 1, b.name, {"_pw": a, "_dw": b, "_unread": (1,)},
                     ins, [b.outputs[0]], b.proto)
        for v in ins:
            if v is not None:
                v.consumers = [c for c in v.consumers if c is not a and c is not b] + [fused]
        b.outputs[0].producer = fused
        dead.add(e.id)
        absorbed.update((id(a), id(b)))
        place[id(b)] = fused
    if not place:
        return graph
    nodes = [place.get(id(n), n) for n in graph.nodes if id(n) not in absorbed or id(n) in place]
    for i, n in enumerate(nodes):
        n.index = i
    graph.nodes = nodes
    graph.values = [v for v in graph.values if v.id not in dead]
    return graph
