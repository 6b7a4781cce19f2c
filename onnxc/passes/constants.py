"""Constant nodes become initializers, so every later stage sees one kind of constant."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ..errors import InvalidGraph, NotImplemented as OrtNotImplemented

_SCALARS = {
    "value_float": np.float32, "value_int": np.int64,
}
_LISTS = {"value_floats": np.float32, "value_ints": np.int64}


def constant_value(node: onnx.NodeProto, index: int) -> onnx.TensorProto:
    if len(node.attribute) != 1:
        raise InvalidGraph(f"node {index} (Constant, name {node.name!r}) must have exactly one value attribute")
    a = node.attribute[0]
    name = node.output[0]
    if a.name == "value":
        t = onnx.TensorProto()
        t.CopyFrom(a.t)
    elif a.name in _SCALARS:
        t = numpy_helper.from_array(np.array(helper.get_attribute_value(a), _SCALARS[a.name]))
    elif a.name in _LISTS:
        t = numpy_helper.from_array(np.array(list(helper.get_attribute_value(a)), _LISTS[a.name]))
    elif a.name == "sparse_value":
        sp = a.sparse_tensor
        dense = np.zeros(tuple(sp.dims), numpy_helper.to_array(sp.values).dtype)
        idx = numpy_helper.to_array(sp.indices)
        vals = numpy_helper.to_array(sp.values)
        if idx.ndim == 1:
            dense.reshape(-1)[idx] = vals
        else:
            dense[tuple(idx.T)] = vals
        t = numpy_helper.from_array(dense)
    else:
        raise OrtNotImplemented(f"node {index} (Constant, name {node.name!r}): attribute {a.name} is not "
                                "supported")
    t.name = name
    return t


def fold_constant_nodes(model: onnx.ModelProto) -> onnx.ModelProto:
    """Returns a copy whose main graph has no Constant nodes (their values are initializers)."""
    g = model.graph
    if not any(n.op_type == "Constant" and n.domain in ("", "ai.onnx") for n in g.node):
        return model
    out = onnx.ModelProto()
    out.CopyFrom(model)
    keep, inits = [], []
    for i, n in enumerate(out.graph.node):
        if n.op_type == "Constant" and n.domain in ("", "ai.onnx"):
            inits.append(constant_value(n, i))
        else:
            keep.append(n)
    del out.graph.node[:]
    out.graph.node.extend(keep)
    out.graph.initializer.extend(inits)
    return out
