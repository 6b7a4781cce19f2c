"""Compile-time known contents of computed values (shape arithmetic).

Exporters build shapes with small subgraphs: Shape -> Gather -> Concat -> Reshape. When a node's
inputs are all known at compile time (initializers, or values this module already derived) and
its outputs are small, their contents are derived here, at compile time, so that an operator
needing a constant (Reshape's shape, Range's limits, ...) can read it. The node is still compiled
and run in C like any other: this only tells later shape rules what it will compute.
"""
from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from .ir import Node, Value

MAX_ELEMENTS = 4096          # shape-sized tensors only: never fold real data at compile time
NONDETERMINISTIC = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
                    "Multinomial", "Bernoulli", "Dropout"}
_SHAPE_OPS = {"Shape", "Size"}


def known(v: Value | None) -> np.ndarray | None:
    """The value's contents if known at compile time (overridable initializers never are)."""
    if v is None:
        return None
    if v.const is not None and not v.is_input:
        return v.const
    return v.known


def derive(node: Node) -> None:
    """Set ``known`` on the node's outputs when they follow from compile-time facts."""
    if node.domain not in ("", "ai.onnx") or node.op_type in NONDETERMINISTIC:
        return
    if any(_has_subgraph(a) for a in node.proto.attribute):
        return
    outs = [v for v in node.outputs if v is not None]
    if not outs or any(not all(isinstance(d, int) for d in v.shape) for v in outs):
        return
    if sum(int(np.prod(v.shape)) for v in outs) > MAX_ELEMENTS:
        return
    if node.op_type in _SHAPE_OPS:
        x = node.inputs[0]
        if not all(isinstance(d, int) for d in x.shape):
            return
        feeds = {}   # only the input's shape matters
        arrays = [np.zeros(x.shape, x.etype.np) if x.etype.np is not None else None]
        if arrays[0] is None or arrays[0].size > MAX_ELEMENTS * 64:
            arrays = None
    else:
        arrays = [known(v) if v is not None else None for v in node.inputs]
        if any(a is None for a, v in zip(arrays, node.inputs) if v is not None):
            return
    values = _evaluate(node, arrays) if arrays is not None else (
        [np.array(x.shape, np.int64)] if node.op_type == "Shape" and not node.attrs.get("start") and
        node.attrs.get("end") is None else None)
    if values is None:
        return
    for v, val in zip(node.outputs, values):
        if v is not None and val is not None:
            val = np.asarray(val)
            if val.shape == tuple(v.shape) and val.dtype == v.etype.np:
                v.known = val


def _has_subgraph(a: onnx.AttributeProto) -> bool:
    return a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)


def _evaluate(node: Node, arrays: list) -> list | None:
    """Run the one node with onnx's reference evaluator (compile time only)."""
    from onnx.reference import ReferenceEvaluator
    names = [f"i{k}" if v is not None else "" for k, v in enumerate(node.inputs)]
    onames = [f"o{k}" if v is not None else "" for k, v in enumerate(node.outputs)]
    n = onnx.NodeProto()
    n.CopyFrom(node.proto)
    del n.input[:]
    n.input.extend(names)
    del n.output[:]
    n.output.extend(onames)
    inits = [numpy_helper.from_array(a, nm) for a, nm in zip(arrays, names) if nm]
    outs = [onnx.ValueInfoProto(name=o) for o in onames if o]
    g = helper.make_graph([n], "fold", [], outs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", node.opset)])
    try:
        res = ReferenceEvaluator(m).run(None, {})
    except Exception:   # noqa: BLE001 - folding is an optimisation: when in doubt, don't
        return None
    it = iter(res)
    return [next(it) if o else None for o in onames]
