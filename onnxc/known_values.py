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
    if _derive_dims(node):
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


# ---- symbolic contents: shape arithmetic on symbolic dims -------------------------------------
# Exporters compute shapes from Shape(x) of a tensor with a symbolic batch: Shape -> Gather ->
# Unsqueeze -> Concat -> Reshape. The contents are then symbolic dims (onnxc.symbolic), kept as
# object arrays in ``known_dims`` for the few shape rules that accept them (Reshape, ...).
_DIMS_MAX = 64


def known_dims(v: Value | None) -> np.ndarray | None:
    """v's contents as an object array of Dims (ints where known), when known symbolically."""
    if v is None:
        return None
    k = known(v)
    if k is not None:
        return k.astype(object) if k.dtype.kind in "iu" and k.size <= _DIMS_MAX else None
    return v.known_dims


def _derive_dims(node: Node) -> bool:
    from . import symbolic
    outs = [v for v in node.outputs if v is not None]
    if len(outs) != 1 or outs[0].etype is None or outs[0].etype.np is None or outs[0].etype.np.kind not in "iu":
        return False
    y = outs[0]
    if int(np.prod(y.shape)) > _DIMS_MAX:
        return False
    op = node.op_type
    ins = node.inputs
    try:
        if op == "Shape":
            shape = list(ins[0].shape)
            start, end = node.attrs.get("start", 0) or 0, node.attrs.get("end")
            val = np.array(shape[start:end] if end is not None else shape[start:], dtype=object)
        elif op == "Size":
            val = np.array(symbolic.product(ins[0].shape), dtype=object)
        else:
            arrs = [known_dims(v) if v is not None else None for v in ins]
            if any(a is None for a, v in zip(arrs, ins) if v is not None):
                return False
            if all(all(isinstance(e, int) for e in a.reshape(-1)) for a in arrs if a is not None):
                return False   # all numeric: the reference evaluator's job (or nothing to do)
            val = _dims_rule(node, arrs)
            if val is None:
                return False
    except (TypeError, ValueError, IndexError, ZeroDivisionError):
        return False
    val = np.asarray(val, dtype=object)
    if val.shape != tuple(y.shape):
        try:
            val = val.reshape(y.shape)
        except ValueError:
            return False
    if all(isinstance(e, int) for e in val.reshape(-1)):   # e.g. the static dims of Shape(x)
        y.known = val.astype(y.etype.np)
    else:
        y.known_dims = val
    return True


def _dims_rule(node: Node, arrs: list):
    from . import symbolic
    op, a = node.op_type, arrs
    if op in ("Identity", "Cast", "CastLike"):
        return a[0]
    if op in ("Unsqueeze", "Squeeze", "Reshape", "Flatten"):
        return a[0].reshape(-1)          # reshaped to the output shape by the caller
    if op == "Gather":
        axis = int(node.attrs.get("axis", 0))
        idx = np.asarray(a[1])
        if axis != 0 or a[0].ndim != 1 or not all(isinstance(i, int) for i in idx.reshape(-1)):
            return None
        n = a[0].shape[0]
        return np.array([a[0][int(i) + n if int(i) < 0 else int(i)] for i in idx.reshape(-1)],
                        dtype=object).reshape(idx.shape)
    if op == "Concat":
        if any(x.ndim != 1 for x in a if x is not None):
            return None
        return np.concatenate([x for x in a if x is not None])
    if op == "Slice" and a[0].ndim == 1 and len(a) >= 3:
        starts, ends = a[1], a[2]
        steps = a[4] if len(a) > 4 and a[4] is not None else np.array([1], dtype=object)
        if not all(isinstance(e, int) for e in list(starts) + list(ends) + list(steps)):
            return None
        return a[0][slice(int(starts[0]), int(ends[0]), int(steps[0]))]
    if op in ("Add", "Sub", "Mul"):
        f = {"Add": lambda x, y: x + y, "Sub": lambda x, y: x - y, "Mul": lambda x, y: x * y}[op]
        return f(a[0], a[1])
    if op == "Div":
        return np.vectorize(_floordiv_nonneg, otypes=[object])(a[0], a[1])
    if op in ("Max", "Min") and len(a) == 2:
        f = symbolic.dmax if op == "Max" else symbolic.dmin
        return np.vectorize(f, otypes=[object])(a[0], a[1])
    return None


def _floordiv_nonneg(x, y):
    """ONNX integer Div truncates; for the non-negative sizes of shape arithmetic that is floor."""
    from . import symbolic
    if isinstance(x, int) and isinstance(y, int):
        if y == 0:
            raise ZeroDivisionError
        q = abs(x) // abs(y)
        return q if (x >= 0) == (y > 0) else -q
    return symbolic.floordiv(x, y)
