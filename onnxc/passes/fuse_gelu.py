"""GELU as exporters decompose it (opsets before 20 have no Gelu), back into one Gelu node
(GraphOptimizationLevel >= EXTENDED; on the IR after shape inference, before fuse_epilogue, which
then folds it into the producing MatMul/Gemm as its activation):

    e = Add(Erf(Div(x, sqrt 2) | Mul(x, 1/sqrt 2)), 1)                                  (erf form)
    e = Add(Tanh(Mul(sqrt(2/pi), Add(x, Mul(0.044715, x^3)))), 1)                      (tanh form)
    y = Mul(Mul(x, e), 0.5) | Mul(x, Mul(0.5, e)) | Mul(Mul(x, 0.5), e)       (either operand order)

with x^3 as Pow(x, 3), Mul(Mul(x, x), x) or Mul(x, Mul(x, x)), becomes Gelu(x) (approximate
"none" or "tanh": GPT-2's gelu_new is the tanh form), the standard operator (opset 20) whatever the
model's opset. The constants must be those values in float (within 1e-6 relative); every
intermediate is read only inside the pattern and is not a graph output. Gelu computes its formula
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


def _tail(x: Value, e: Value, nodes: list, approximate: str):
    """The Mul by x and by 0.5 after e = 1 + erf(...) or 1 + tanh(...), in the three orders."""
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
    return {"x": x, "nodes": nodes, "last": nodes[-1], "out": y, "approximate": approximate}


def _plus_one(f: Node):
    """The Add(f's output, 1) that reads f alone, or None."""
    add = only(f.outputs[0], "Add")
    return add if add is not None and _is(other(add, f.outputs[0]), 1.0) else None


def _match(erf: Node):
    t = erf.inputs[0]
    x = _erf_input(t) if t is not None else None
    if x is None or x.etype is None or x.etype.name not in FLOATS or t.is_output or readers(t) != [erf]:
        return None
    add = _plus_one(erf)
    if add is None:
        return None
    return _tail(x, add.outputs[0], [t.producer, erf, add], "none")


def _inner(v: Value | None) -> Node | None:
    """v's producer when v is read by one node only (an intermediate of the pattern), else None."""
    if v is None or v.is_output or len(readers(v)) != 1:
        return None
    return v.producer


def _cube_of(v: Value | None):
    """(x, nodes) when v = x^3 as Pow(x, 3), Mul(Mul(x, x), x) or Mul(x, Mul(x, x))."""
    n = _inner(v)
    if std(n, "Pow") and _is(n.inputs[1], 3.0) and scalar(n.inputs[0]) is None:
        return n.inputs[0], [n]
    if not std(n, "Mul"):
        return None
    for a, b in (n.inputs, n.inputs[::-1]):
        sq = _inner(a)
        if std(sq, "Mul") and sq.inputs[0] is sq.inputs[1] and sq.inputs[0] is b:
            return b, [sq, n]
    return None


def _match_tanh(tanh: Node):
    """0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), anchored at the Tanh."""
    m2, add = _inner(tanh.inputs[0]), _plus_one(tanh)
    if not std(m2, "Mul") or add is None:
        return None
    a1 = next((v for v, c in (m2.inputs, m2.inputs[::-1]) if _is(c, math.sqrt(2 / math.pi), 1e-6)), None)
    add1 = _inner(a1)
    if not std(add1, "Add"):
        return None
    for x, m1v in (add1.inputs, add1.inputs[::-1]):
        m1 = _inner(m1v)
        if not std(m1, "Mul") or x is None or x.etype is None or x.etype.name not in FLOATS:
            continue
        cube = next((v for v, c in (m1.inputs, m1.inputs[::-1]) if _is(c, 0.044715, 1e-6)), None)
        found = _cube_of(cube)
        if found is None or found[0] is not x:
            continue
        return _tail(x, add.outputs[0], found[1] + [m1, add1, m2, tanh, add], "tanh")
    return None


def _gelu(m) -> Node:
    last = m["last"]
    return Node(last.index, "Gelu", "", 20, last.name, {"approximate": m["approximate"]}, [m["x"]], [m["out"]],
                last.proto)


def fuse_gelu(graph: Graph) -> Graph:
    graph = fuse_matches(graph, "Erf", _match, _gelu)
    return fuse_matches(graph, "Tanh", _match_tanh, _gelu)
