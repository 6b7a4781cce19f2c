"""Constant folding (GraphOptimizationLevel >= BASIC): a standard-domain node whose inputs are
all constant initializers is computed now, with onnx.reference, and its outputs become
initializers.

This is compile-time arithmetic on constants (what onnxruntime's constant folding does), so the
results are exactly onnx.reference's. It only folds
  * deterministic operators (no Random*, Multinomial, Bernoulli; no subgraphs),
  * results of at most MAX_FOLD_BYTES in all: a folded tensor is stored in the weights, and a
    large one (e.g. an Expand of a scalar) would cost more to load than to compute;
and it leaves a node alone when the reference evaluator cannot run it or returns something that
is not a plain tensor (sequences, optionals).

Shape and Size only read their input's shape: they fold when that shape is statically known --
a graph input or value_info whose dims are all numbers (a symbolic dim never folds: free-dimension
overrides come later; the session rejects a fed input whose fixed dims differ).
"""
from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from .protoutil import STD, constants, copy, replace_nodes

MAX_FOLD_BYTES = 1 << 20
NONDETERMINISTIC = {"RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike",
                    "Multinomial", "Bernoulli", "Dropout"}
# ops whose result may be larger than its inputs by a data-dependent factor: the output size is
# checked after evaluating, so cap what they may allocate while evaluating too
EXPANDING = {"Expand", "Tile", "ConstantOfShape", "Range", "Resize", "Upsample", "Pad"}


def static_shapes(graph: onnx.GraphProto) -> dict[str, tuple[int, ...]]:
    """name -> shape, for graph inputs and value_info entries whose dims are all numbers."""
    out: dict[str, tuple[int, ...]] = {}
    for vi in list(graph.value_info) + list(graph.input):
        if not vi.type.HasField("tensor_type") or not vi.type.tensor_type.HasField("shape"):
            continue
        dims = vi.type.tensor_type.shape.dim
        if all(d.HasField("dim_value") and d.dim_value >= 0 for d in dims):
            out[vi.name] = tuple(int(d.dim_value) for d in dims)
    return out


def _shape_fold(n: onnx.NodeProto, shapes: dict) -> list | None:
    """Shape/Size of a value whose shape is statically known: [(output, array)] or None."""
    if n.domain not in STD or n.op_type not in ("Shape", "Size") or len(n.input) != 1 \
            or n.input[0] not in shapes or len(n.output) != 1 or not n.output[0]:
        return None
    shape = shapes[n.input[0]]
    if n.op_type == "Size":
        size = 1
        for d in shape:
            size *= d
        if size >= 1 << 63:
            return None
        return [(n.output[0], np.array(size, np.int64))]
    attrs = {a.name: a.i for a in n.attribute if a.type == onnx.AttributeProto.INT}
    rank = len(shape)
    start, end = attrs.get("start", 0), attrs.get("end", rank)
    start, end = (min(max(x + rank if x < 0 else x, 0), rank) for x in (start, end))   # Shape-15 clamping
    return [(n.output[0], np.array(shape[start:end], np.int64).reshape(-1))]


def _foldable(n: onnx.NodeProto, consts: dict) -> bool:
    if n.domain not in STD or n.op_type in NONDETERMINISTIC or n.op_type == "Constant":
        return False
    if any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in n.attribute):
        return False
    ins = [x for x in n.input if x]
    if not ins or not all(x in consts for x in ins):
        return False
    if sum(_nbytes(consts[x]) for x in ins) > 16 * MAX_FOLD_BYTES:
        return False
    return True


def _nbytes(t: onnx.TensorProto) -> int:
    n = 1
    for d in t.dims:
        n *= int(d)
    return n * max(1, helper.tensor_dtype_to_np_dtype(t.data_type).itemsize) \
        if t.data_type != onnx.TensorProto.STRING else n * 16


def _guess_too_big(n: onnx.NodeProto, arrays: list) -> bool:
    """Expanding ops whose target shape is an input: refuse before evaluating a huge result."""
    if n.op_type in ("Expand", "ConstantOfShape") and arrays:
        shape = arrays[1] if n.op_type == "Expand" else arrays[0]
        try:
            count = int(np.prod([max(int(d), 1) for d in np.asarray(shape).reshape(-1)], dtype=object))
        except (TypeError, ValueError, OverflowError):
            return True
        return count * 8 > MAX_FOLD_BYTES
    return n.op_type in EXPANDING and n.op_type not in ("Expand", "ConstantOfShape") and \
        sum(a.nbytes for a in arrays if isinstance(a, np.ndarray)) * 64 > MAX_FOLD_BYTES


def _evaluate(n: onnx.NodeProto, model: onnx.ModelProto, consts: dict):
    from onnx.reference import ReferenceEvaluator
    ins = [x for x in n.input if x]
    arrays = [numpy_helper.to_array(consts[x]) for x in ins]
    if _guess_too_big(n, arrays):
        return None
    node = onnx.NodeProto()
    node.CopyFrom(n)
    try:
        ev = ReferenceEvaluator(node, opsets={o.domain: o.version for o in model.opset_import
                                              if o.domain in STD} or None)
        res = ev.run(None, dict(zip(ins, arrays)))
    except Exception:  # noqa: BLE001 - anything the reference cannot do stays in the graph
        return None
    outs = [o for o in n.output]
    if len(res) < len([o for o in outs if o]):
        return None
    tensors = []
    for name, r in zip(outs, res):
        if not name:
            continue
        if not isinstance(r, np.ndarray) or r.dtype == object:
            return None
        tensors.append((name, r))
    if sum(r.nbytes for _, r in tensors) > MAX_FOLD_BYTES:
        return None
    return tensors


def fold_constants(model: onnx.ModelProto) -> onnx.ModelProto:
    g = model.graph
    consts = constants(g)
    shapes = {k: v for k, v in static_shapes(g).items() if k not in consts}
    folded: set[int] = set()
    new_inits: list[onnx.TensorProto] = []
    changed = True
    while changed:           # a folded result may make its readers foldable
        changed = False
        for i, n in enumerate(g.node):
            if i in folded:
                continue
            tensors = _shape_fold(n, shapes)
            if tensors is None and _foldable(n, consts):
                tensors = _evaluate(n, model, consts)
            if tensors is None:
                continue
            for name, arr in tensors:
                t = numpy_helper.from_array(arr, name)
                consts[name] = t
                new_inits.append(t)
            folded.add(i)
            changed = True
    if not folded:
        return model
    out = copy(model)
    replace_nodes(out.graph, [n for i, n in enumerate(out.graph.node) if i not in folded])
    out.graph.initializer.extend(new_inits)
    return out
