"""Transpose/Reshape pair elimination (GraphOptimizationLevel >= BASIC).

  Transpose(p2) . Transpose(p1)  ->  one Transpose with perm p1[p2[i]], or nothing when that
                                     is the identity permutation;
  Reshape(s2) . Reshape(s1)      ->  Reshape(s2) of the first input, when s2 is a constant
                                     without 0 entries (a 0 would copy a dim of the middle
                                     shape) — the element order of a reshape never changes.
The first node must feed the second alone and its output must not be a graph output.
"""
from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from .protoutil import STD, constants, copy, readers, replace_nodes, subgraph_reads


def _perm(n: onnx.NodeProto):
    for a in n.attribute:
        if a.name == "perm":
            return list(helper.get_attribute_value(a))
    return None


def eliminate_pairs(model: onnx.ModelProto) -> onnx.ModelProto:
    """Pairs until none is left (a chain of three collapses in two rounds)."""
    for _ in range(len(model.graph.node) + 1):
        out = _eliminate_once(model)
        if out is model:
            break
        model = out
    return model


def _eliminate_once(model: onnx.ModelProto) -> onnx.ModelProto:
    g = model.graph
    outputs = {o.name for o in g.output}
    consts = constants(g)
    users = readers(g)
    producer = {o: i for i, n in enumerate(g.node) for o in n.output if o}
    out = None
    deep = set().union(*(subgraph_reads(n) for n in g.node)) if len(g.node) else set()
    drop: set[int] = set()
    touched: set[int] = set()     # rewritten nodes: their proto in `g` is stale, never a first node
    rename: dict[str, str] = {}   # an eliminated pair's output -> the first node's input
    for i, n in enumerate(g.node):
        if n.domain not in STD or n.op_type not in ("Transpose", "Reshape") or not n.input[0]:
            continue
        pi = producer.get(n.input[0])
        if pi is None or pi in drop or pi in touched:
            continue
        p = g.node[pi]
        if p.op_type != n.op_type or p.domain not in STD or n.input[0] in outputs \
                or users.get(n.input[0]) != [i] or not p.input[0]:
            continue
        if n.op_type == "Transpose":
            p1, p2 = _perm(p), _perm(n)
            if p1 is None or p2 is None or len(p1) != len(p2) or sorted(p2) != list(range(len(p2))):
                continue   # a missing perm means "reverse", which needs the rank
            q = [p1[k] for k in p2]
            if out is None:
                out = copy(model)
            if q == list(range(len(q))) and n.output[0] not in outputs and n.output[0] not in deep:
                rename[n.output[0]] = p.input[0]
                drop.update((pi, i))
                continue
            m = out.graph.node[i]
            m.input[0] = p.input[0]
            for a in m.attribute:
                if a.name == "perm":
                    a.ints[:] = q
            drop.add(pi)
            touched.add(i)
        else:
            if len(n.input) < 2 or n.input[1] not in consts:
                continue
            s2 = numpy_helper.to_array(consts[n.input[1]])
            if np.any(s2 == 0):
                continue
            if out is None:
                out = copy(model)
            out.graph.node[i].input[0] = p.input[0]
            drop.add(pi)
            touched.add(i)
    if out is None:
        return model
    keep = [n for k, n in enumerate(out.graph.node) if k not in drop]
    for n in keep:
        for k, x in enumerate(n.input):
            while x in rename:
                x = rename[x]
            n.input[k] = x
    replace_nodes(out.graph, keep)
    return out
