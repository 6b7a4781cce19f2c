"""GELU as exporters decompose it (opsets before 20 have no Gelu), back into one Gelu node
(GraphOptimizationLevel >= EXTENDED; on the IR after shape inference, before fuse_epilogue, which
then folds it into the producing MatMul/Gemm as its activation):

    e = Add(Erf(Div(x, sqrt 2) | Mul(x, 1/sqrt 2)), 1)
    y = Mul(Mul(x, e), 0.5) | Mul(x, Mul(0.5, e)) | Mul(Mul(x, 0.5), e)       (either operand order)

becomes Gelu(x) (approximate "none"), the standard operator (opset 20) whatever the model's
opset. The constants must be those values in float (sqrt 2 within 1e-6); every intermediate is
read only inside the pattern and is not a graph output. Gelu computes 0.5 x (1 + erf(x / sqrt 2))
with its own rounding: results agree to a few ulp.
"""
from __future__ import annotations

import math

from ..ir import Graph, Node, Value
from .irutil import FLOATS, fuse_matches, only, other, readers, scalar, std


def _is(v: Value | None, want: float, rel: float = 0.0) -> bool:
    c = scalar(v)
    return c is not None and abs(c - want) <= rel * abs(want)


def _erf_input(t: Value) -> Value | None:
    """x when t = x / sqrt(2) or x * (1/sqrt(2))."""
    n = t.producer
    if std(n, "Div") and _is(n.inputs[1], math.sqrt(2), 1e-6):
        return n.inputs[0]
    if std(n, "Mul"):
        for x, c in (n.inputs, n.inputs[::-1]):
            if _is(c, math.sqrt(0.5), 1e-6) and scalar(x) is None:
                return x
    return None


def _match(erf: Node):
    t = erf.inputs[0]
    x = _erf_input(t) if t is not None else None
    if x is None or x.etype is None or x.etype.name not in FLOATS or t.is_output or readers(t) != [erf]:
        return None
    add = only(erf.outputs[0], "Add")
    if add is None or not _is(other(add, erf.outputs[0]), 1.0):
        return None
    e = add.outputs[0]
    nodes = [t.producer, erf, add]
    m1 = only(e, "Mul")
    if m1 is None:
        return None
    o = other(m1, e)
    if o is x:                                   # (x * e) * 0.5
        m2 = only(m1.outputs[0], "Mul")
        if m2 is None or not _is(other(m2, m1.outputs[0]), 0.5):
            return None
        nodes += [m1, m2]
    elif _is(o, 0.5):                            # x * (0.5 * e)
        m2 = only(m1.outputs[0], "Mul")
        if m2 is None or other(m2, m1.outputs[0]) is not x:
            return None
        nodes += [m1, m2]
    else:                                        # (x * 0.5) * e
        h = o.producer if o is not None else None
        if not std(h, "Mul") or other(h, x) is None or not _is(other(h, x), 0.5) \
                or o.is_output or readers(o) != [m1]:
            return None
        nodes += [h, m1]
    y = nodes[-1].outputs[0]
    if y.shape is None or x.shape is None or tuple(y.shape) != tuple(x.shape) or y.etype != x.etype:
        return None
    return {"x": x, "nodes": nodes, "last": nodes[-1], "out": y}


def _gelu(m) -> Node:
    last = m["last"]
    return Node(last.index, "Gelu", "", 20, last.name, {"approximate": "none"}, [m["x"]], [m["out"]], last.proto)


def fuse_gelu(graph: Graph) -> Graph:
    return fuse_matches(graph, "Erf", _match, _gelu)
