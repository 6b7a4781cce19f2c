"""ai.onnx.ml operators on maps: DictVectorizer, CastMap.

A map is a graph input that reaches C as two arrays of one symbolic length, values (input 0) and
keys (the extra input shapes.map_input appends), in ascending key order. Outputs are [1, ...] as
onnxruntime returns them.
"""
from __future__ import annotations

from .. import dtypes
from ..errors import NotImplemented as OrtNotImplemented
from .common import attr_enum, fail
from .ml_common import HEADERS, ML, check_len, ints, strings
from .ml_encoders import Lookup, c_ints, c_value
from .registry import OpSpec, register

STRING, INT64, FLOAT = dtypes.STRING, dtypes.INT64, dtypes.FLOAT
DOUBLE = dtypes.BY_NAME["double"]


def map_parts(node):
    """(values Value, keys Value, key type name) of the node's map input."""
    v = node.inputs[0]
    m = getattr(v, "map_input", None)
    if m is None or m["role"] != "values" or len(node.inputs) != 2:
        raise OrtNotImplemented(f"{node.describe()}: input 0 must be a map graph input (maps computed "
                                "inside the graph are not supported)")
    return v, node.inputs[1], m["key_type"]


@register
class DictVectorizer(OpSpec):
    """Y[0, i] = map[vocabulary[i]], or 0 ("" for strings) where the map lacks that key. A key
    listed several times in the vocabulary fills each of its columns."""
    op_type = "DictVectorizer"
    domain = ML
    template = "ml_maps_dict_vectorizer.c.j2"
    headers = HEADERS

    def _model(self, node):
        v, k, key = map_parts(node)
        if (key, v.etype.name) not in {("string", "int64"), ("int64", "string"), ("int64", "float"),
                                      ("int64", "double"), ("string", "float"), ("string", "double")}:
            raise fail(node, f"input map({key},tensor({v.etype.name})) is not one DictVectorizer accepts")
        if key == "string":
            vocab = strings(node, "string_vocabulary") or []
        else:
            vi = ints(node, "int64_vocabulary")
            vocab = [] if vi is None else vi.tolist()
        check_len(node, "vocabulary", len(vocab))
        # sorted distinct keys; cols[starts[j]:starts[j+1]] are the columns of key j
        table = Lookup(node, "str" if key == "string" else "i64", vocab, range(len(vocab)), first_wins=True)
        cols: dict = {}
        for i, w in enumerate(vocab):
            cols.setdefault(w.encode("utf-8") if key == "string" else int(w), []).append(i)
        starts, flat = [0], []
        for w in table.keys:
            flat += cols[w]
            starts.append(len(flat))
        return v, table, starts, flat, len(vocab)

    def infer(self, node):
        v, table, starts, flat, n = self._model(node)
        return [(v.etype, (1, n))]

    def params(self, node):
        v, table, starts, flat, n = self._model(node)
        return {"kind": table.kind, "kct": "char *const" if table.kind == "str" else "int64_t",
                "ktab": table.c_keys(), "nk": len(table.keys), "starts": c_ints(starts), "cols": c_ints(flat),
                "v": n, "zero": c_value("" if v.etype is STRING else 0, v.etype), "entries": v.shape[0]}


CAST_TO = {"TO_FLOAT": FLOAT, "TO_INT64": INT64, "TO_STRING": STRING}


@register
class CastMap(OpSpec):
    """map(int64, string|float) -> [1, n] in key order (DENSE), or [1, max_map] with entry k at
    column k and the rest padded (SPARSE: 0, or "0.f" for strings, as onnxruntime). Strings parse
    as std::stof / std::stoll; a string that does not parse fails the run (error 3)."""
    op_type = "CastMap"
    domain = ML
    template = "ml_maps_cast_map.c.j2"
    headers = HEADERS

    def _model(self, node):
        v, k, key = map_parts(node)
        if key != "int64" or v.etype not in (STRING, FLOAT):
            raise fail(node, f"input map({key},tensor({v.etype.name})) is not one CastMap accepts "
                       "(map(int64, string) or map(int64, float))")
        to = CAST_TO[attr_enum(node, "cast_to", CAST_TO)]
        form = attr_enum(node, "map_form", ("DENSE", "SPARSE"))
        if v.etype is FLOAT and to is STRING:
            raise OrtNotImplemented(f"{node.describe()}: CastMap from float to string makes new strings "
                                    "(std::to_string), which compiled code does not allocate")
        max_map = int(node.attr("max_map", 1))
        if form == "SPARSE":
            if max_map < 0:
                raise fail(node, f"attribute max_map={max_map} must be >= 0")
            check_len(node, "max_map", max_map)
        return v, to, form, max_map

    def infer(self, node):
        v, to, form, max_map = self._model(node)
        return [(to, (1, v.shape[0] if form == "DENSE" else max_map))]

    def params(self, node):
        v, to, form, max_map = self._model(node)
        pad = "0.f" if to is STRING else 0
        return {"sparse": form == "SPARSE", "max_map": max_map, "entries": v.shape[0],
                "src": "str" if v.etype is STRING else "f32", "to": to.name,
                "pad": c_value(pad, to)}
