"""Stage 2: element types and shapes for every value, symbolic dims carried through.

Graph inputs take their declared shapes: ``dim_value`` -> int, ``dim_param`` -> a symbol of
that name, nothing -> a fresh symbol ``unk__N``. Each node's shape rule (its OpSpec.infer)
derives its outputs. Free-dimension overrides replace symbols by integers.
"""
from __future__ import annotations

from typing import Mapping

import onnx

from . import dtypes
from .errors import InvalidGraph
from .ir import Graph, Value
from . import known_values
from .ops import lookup
from .symbolic import Dim, Expr, dim_repr, sym


def declared_shape(vi: onnx.ValueInfoProto, fresh, overrides: Mapping[str, int]) -> tuple[Dim, ...] | None:
    t = vi.type.tensor_type
    if not t.HasField("shape"):
        return None
    out: list[Dim] = []
    for d in t.shape.dim:
        if d.HasField("dim_value"):
            out.append(int(d.dim_value))
        elif d.HasField("dim_param") and d.dim_param:
            out.append(int(overrides[d.dim_param]) if d.dim_param in overrides else sym(d.dim_param))
        else:
            out.append(fresh())
    return tuple(out)


def infer(graph: Graph, overrides: Mapping[str, int] | None = None) -> None:
    overrides = dict(overrides or {})
    counter = [0]

    def fresh() -> Expr:
        counter[0] += 1
        return sym(f"unk__{counter[0]}")

    for vi, v in _input_infos(graph):
        if v.etype is not None and v.shape is not None and v.producer is None and v.const is None:
            continue   # a subgraph's input, typed by its node (onnxc.subgraph)
        tt = vi.type.tensor_type
        if vi.type.HasField("map_type"):
            map_input(graph, vi, v)
            continue
        if vi.type.WhichOneof("value") in ("sequence_type", "optional_type"):
            v.etype, v.shape = dtypes.from_type_proto(vi.type, f" (graph input {vi.name!r})"), ()
            continue
        if not vi.type.HasField("tensor_type"):
            raise InvalidGraph(f"graph input {vi.name!r} is not a tensor, a sequence or an optional")
        v.etype = dtypes.from_onnx(tt.elem_type, f" (graph input {vi.name!r})", strings=True)
        shape = declared_shape(vi, fresh, overrides)
        if shape is None:
            raise InvalidGraph(f"graph input {vi.name!r} has no shape; onnxc needs at least its rank")
        if v.const is not None and v.shape is not None:
            shape = v.shape   # overridable initializer: its own shape is the contract
        v.shape = shape
    for node in graph.nodes:
        spec = lookup(node)
        for i, v in enumerate(node.inputs):
            if v is not None and (v.etype is None or v.shape is None):
                raise InvalidGraph(f"{node.describe()}: input {i} ({v.name!r}) has no known type")
        results = spec.infer(node)
        for v, (et, shape) in zip(node.outputs, results):
            if v is None:
                continue
            v.etype, v.shape = et, tuple(shape)
            for d in v.shape:
                if isinstance(d, int) and d < 0:
                    raise InvalidGraph(f"{node.describe()}: output {v.name!r} would have a negative "
                                       f"dimension {d}")
        known_values.derive(node)
    for vi, v in zip(graph.declared_outputs, graph.outputs):
        _check_declared(vi, v)


def _input_infos(graph: Graph):
    by_name = {v.name: v for v in graph.inputs + graph.overridable}
    for vi in graph.declared_inputs:
        yield vi, by_name[vi.name]


def _check_declared(vi: onnx.ValueInfoProto, v: Value) -> None:
    if vi.type.WhichOneof("value") not in (None, "tensor_type"):
        _check_declared_non_tensor(vi, v)
        return
    tt = vi.type.tensor_type
    if tt.elem_type and dtypes.from_onnx(tt.elem_type, strings=True).onnx != v.etype.onnx:
        raise InvalidGraph(f"graph output {vi.name!r} is declared {dtypes.from_onnx(tt.elem_type, strings=True).name} "
                           f"but computes {v.etype.name}")
    if tt.HasField("shape") and len(tt.shape.dim) and len(tt.shape.dim) != len(v.shape):
        raise InvalidGraph(f"graph output {vi.name!r} is declared with rank {len(tt.shape.dim)} but "
                           f"computes shape ({', '.join(dim_repr(d) for d in v.shape)})")
    for k, d in enumerate(tt.shape.dim if tt.HasField("shape") else ()):
        if d.HasField("dim_value") and isinstance(v.shape[k], int) and d.dim_value != v.shape[k]:
            raise InvalidGraph(f"graph output {vi.name!r} dim {k} is declared {d.dim_value} but "
                               f"computes {v.shape[k]}")


def _check_declared_non_tensor(vi: onnx.ValueInfoProto, v: Value) -> None:
    """Sequence/optional outputs of tensors; sequences of maps: only ZipMap's seq(map(key, tensor(float)))."""
    zm = getattr(v, "zipmap", None)
    t = vi.type
    if isinstance(v.etype, dtypes.ContainerType) and zm is None:
        try:
            declared = dtypes.from_type_proto(t)
        except Exception:   # noqa: BLE001 - reported below as a mismatch
            declared = None
        if declared != v.etype and not _loosely_equal(declared, v.etype):
            raise InvalidGraph(f"graph output {vi.name!r} is declared {declared.ort if declared else t} but "
                               f"computes {v.etype.ort}")
        return
    ok = (zm is not None and t.HasField("sequence_type") and t.sequence_type.elem_type.HasField("map_type"))
    if ok:
        mt = t.sequence_type.elem_type.map_type
        key = {onnx.TensorProto.INT64: "int64", onnx.TensorProto.STRING: "string"}.get(mt.key_type)
        ok = key == zm["key_type"] and mt.value_type.tensor_type.elem_type in (0, onnx.TensorProto.FLOAT)
    if not ok:
        raise InvalidGraph(f"graph output {vi.name!r} is declared as a {t.WhichOneof('value')} that onnxc "
                           "does not compute (only ZipMap's sequence of maps is supported)")


def _loosely_equal(declared, got) -> bool:
    """An optional declared where its value is always there (or the other way) holds the same data."""
    if declared is None:
        return False
    strip = lambda t: t.elem if isinstance(t, dtypes.ContainerType) and t.kind == "optional" else t  # noqa: E731
    return strip(declared) == strip(got)


# ---- map inputs (ai.onnx.ml DictVectorizer, CastMap) ------------------------------------------
MAP_KEYS = {onnx.TensorProto.INT64: "int64", onnx.TensorProto.STRING: "string"}


def map_input(graph: Graph, vi: onnx.ValueInfoProto, v: Value) -> None:
    """A graph input of type map(K, V) enters C as two arrays of one symbolic length: the values
    (this Value, element type V) and the keys (a new graph input right after it, element type K),
    both in ascending key order. Every node reading the map gets the keys as one more input.
    ``map_input`` on both Values tells emit's metadata and the session (which turns a dict into
    the two arrays)."""
    mt = vi.type.map_type
    key = MAP_KEYS.get(mt.key_type)
    vt = mt.value_type
    if key is None or not vt.HasField("tensor_type"):
        raise InvalidGraph(f"graph input {vi.name!r}: only maps from int64 or string to a tensor type "
                           "are supported")
    v.etype = dtypes.from_onnx(vt.tensor_type.elem_type, f" (values of map input {vi.name!r})", strings=True)
    if v.is_output or v in graph.overridable:
        raise InvalidGraph(f"graph input {vi.name!r}: a map that is also a graph output or has an "
                           "initializer is not supported")
    n = sym(f"entries({vi.name})")
    v.shape = (n,)
    k = graph.new_value(f"{vi.name} (map keys)")
    k.etype = dtypes.from_onnx(mt.key_type, strings=True)
    k.shape = (n,)
    k.is_input = True
    graph.inputs.insert(graph.inputs.index(v) + 1, k)
    type_str = f"map({key},tensor({v.etype.name}))"
    v.map_input = {"role": "values", "type": type_str, "key_type": key, "keys_input": k.name}
    k.map_input = {"role": "keys", "type": type_str, "key_type": key, "values_input": v.name}
    for node in dict.fromkeys(v.consumers):
        node.inputs.append(k)
        k.consumers.append(node)
