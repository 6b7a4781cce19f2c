"""LayerNorm as exporters decompose it (opsets before 17 have no LayerNormalization), back into
one LayerNormalization node (GraphOptimizationLevel >= EXTENDED; on the IR after shape inference):

    mean = ReduceMean(x, trailing axes, keepdims=1)
    d    = Sub(x, mean)
    var  = ReduceMean(Pow(d, 2) | Mul(d, d), same axes, keepdims=1)
    y    = Div(d, Sqrt(Add(var, eps)))  [* gamma]  [+ beta]        (either operand order)

becomes LayerNormalization(x, gamma or ones, beta; axis = first reduced axis, epsilon = eps),
the standard operator (opset 17) whatever the model's opset. eps is a scalar constant, gamma and
beta have the normalized shape (x's trailing dims); every intermediate is read only inside the
pattern and is not a graph output. The kernel computes the same quantities in float (its row
sums are ordered differently: results agree to rounding).
"""
from __future__ import annotations

import numpy as np

from ..ir import Graph, Node, Value
from .irutil import FLOATS, const, fuse_matches, only, other, readers, scalar, std

def _reduced_axes(r: Node, rank: int) -> list[int] | None:
    """Normalized axes of a keepdims ReduceMean, or None when they cannot be told."""
    if int(r.attr("keepdims", 1)) != 1:
        return None
    if r.opset >= 18:
        axes = const(r.input(1))
        if axes is None:
            return None
        axes = axes.reshape(-1).tolist()
    else:
        axes = r.attr("axes")
        if axes is None:
            return None
    try:
        out = sorted({int(a) + rank if int(a) < 0 else int(a) for a in axes})
    except (TypeError, ValueError):
        return None
    return out if out and all(0 <= a < rank for a in out) else None


def _match(r1: Node):
    x = r1.inputs[0]
    if x is None or x.etype is None or x.etype.name not in FLOATS or x.shape is None or not x.shape:
        return None
    rank = len(x.shape)
    axes = _reduced_axes(r1, rank)
    if axes is None or axes != list(range(axes[0], rank)):
        return None
    sub = only(r1.outputs[0], "Sub")
    if sub is None or sub.inputs[0] is not x or sub.inputs[1] is not r1.outputs[0]:
        return None
    d = sub.outputs[0]
    rs = readers(d)
    if d.is_output or len(rs) != 2:
        return None
    sq = next((n for n in rs if (std(n, "Pow") and n.inputs[0] is d and scalar(n.input(1)) == 2.0)
               or (std(n, "Mul") and n.inputs[0] is d and n.inputs[1] is d)), None)
    div = next((n for n in rs if std(n, "Div") and n.inputs[0] is d), None)
    if sq is None or div is None:
        return None
    r2 = only(sq.outputs[0], "ReduceMean")
    if r2 is None or _reduced_axes(r2, rank) != axes:
        return None
    add = only(r2.outputs[0], "Add")
    eps = scalar(other(add, r2.outputs[0])) if add is not None else None
    if eps is None:
        return None
    sqrt = only(add.outputs[0], "Sqrt")
    if sqrt is None or div.inputs[1] is not sqrt.outputs[0] or readers(sqrt.outputs[0]) != [div] \
            or sqrt.outputs[0].is_output:
        return None
    nodes, y = [r1, sub, sq, r2, add, sqrt, div], div.outputs[0]
    ns = tuple(x.shape[axes[0]:])
    gamma = beta = None
    for op in ("Mul", "Add"):                    # [* gamma] [+ beta], each with the normalized shape
        n = only(y, op)
        p = other(n, y) if n is not None else None
        if p is None or p.etype != x.etype or p.shape is None or tuple(p.shape) != ns \
                or n.outputs[0].shape is None or tuple(n.outputs[0].shape) != tuple(x.shape):
            continue
        gamma, beta = (p, beta) if op == "Mul" else (gamma, p)
        nodes.append(n)
        y = n.outputs[0]
    return {"x": x, "axis": axes[0], "eps": eps, "gamma": gamma, "beta": beta, "nodes": nodes, "last": nodes[-1], "out": y,
            "ns": ns}


def fuse_layernorm(graph: Graph) -> Graph:
    next_id = [max((v.id for v in graph.values), default=-1) + 1]

    def build(m) -> Node | None:
        x, gamma = m["x"], m["gamma"]
        if gamma is None:                        # LayerNormalization needs a Scale: ones
            if not all(isinstance(d, int) for d in m["ns"]):
                return None
            gamma = Value(name=f"{x.name} (ones)", id=next_id[0], etype=x.etype, shape=m["ns"],
                          const=np.ones(m["ns"], np.float32 if x.etype.name == "float" else np.float64))
            next_id[0] += 1
            graph.values.append(gamma)
        last = m["last"]
        return Node(last.index, "LayerNormalization", "", 17, last.name,
                    {"axis": m["axis"], "epsilon": m["eps"], "stash_type": 1},
                    [x, gamma] + ([m["beta"]] if m["beta"] is not None else []), [m["out"]], last.proto)

    return fuse_matches(graph, "ReduceMean", _match, build)
