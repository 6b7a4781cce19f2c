"""ai.onnx.ml encoders on tensors: LabelEncoder (ml opsets 1, 2, 4), CategoryMapper, OneHotEncoder,
FeatureVectorizer.

Every lookup is a constant table sorted in Python and binary-searched in C (strings with strcmp over
their UTF-8 bytes, numbers as int64 or double); the per-op duplicate-key rule of onnxruntime is
applied while building it (LabelEncoder 2/4: first key wins; LabelEncoder 1, CategoryMapper,
OneHotEncoder: last wins). LabelEncoder 4 matches a NaN key to NaN inputs, as onnxruntime does;
LabelEncoder 2 never matches NaN. String values are C literals; nothing is allocated per call.
"""
from __future__ import annotations

import math

import numpy as np

from .. import cstring, dtypes
from ..errors import NotImplemented as OrtNotImplemented
from ..symbolic import product
from .common import fail
from .ml_common import HEADERS, ML, c_number, check_len, ints, strings
from .registry import OpSpec, register

STRING, INT64, FLOAT = dtypes.STRING, dtypes.INT64, dtypes.FLOAT
DOUBLE, INT32, INT16 = dtypes.BY_NAME["double"], dtypes.BY_NAME["int32"], dtypes.BY_NAME["int16"]


# ---- constant tables ----------------------------------------------------------------------
def c_ints(values) -> str:
    """int64 initialiser with INT64_MIN spelt so that C reads it without overflow."""
    out = []
    for v in (int(x) for x in values):
        out.append("(-INT64_MAX - 1)" if v == -2**63 else f"INT64_C({v})" if not -2**31 < v < 2**31 else str(v))
    return ",\n    ".join(", ".join(out[i:i + 16]) for i in range(0, len(out), 16)) or "0"


def c_values(values, et: dtypes.ElemType) -> str:
    """Initialiser of a table of output values of element type et."""
    if et is STRING:
        return ",\n    ".join(cstring.literal(s) for s in values) or '""'
    if et.is_float:
        return ",\n    ".join(c_number(v, et.c) for v in values) or "0"
    return c_ints(values)


def c_value(v, et: dtypes.ElemType) -> str:
    return c_values([v], et)


def key_kind(et: dtypes.ElemType) -> str:
    """How C compares keys of this input type: strings, int64 or double (exact for float too)."""
    return "str" if et is STRING else "f64" if et.is_float else "i64"


class Lookup:
    """key -> value table: keys sorted for onnxc_ml_find_{str,i64,f64}, values in the same order."""

    def __init__(self, node, kind: str, keys, values, first_wins: bool, nan_matches: bool = False):
        pairs: dict = {}
        self.nan = None          # value of a NaN key (LabelEncoder 4 only)
        for k, v in zip(keys, values):
            if kind == "str":
                if "\0" in k:
                    continue     # no input string can hold NUL (the session refuses them): never matched
                k = k.encode("utf-8")
            elif kind == "f64":
                k = float(k)
                if math.isnan(k):
                    if nan_matches and (self.nan is None or not first_wins):
                        self.nan = v
                    continue
                k = k + 0.0      # -0.0 and 0.0 are one key (== in C, one hash in onnxruntime)
            else:
                k = int(k)
            if first_wins and k in pairs:
                continue
            pairs[k] = v
        check_len(node, "keys", len(pairs))
        self.kind = kind
        self.keys = sorted(pairs)
        self.values = [pairs[k] for k in self.keys]

    def c_keys(self) -> str:
        if self.kind == "str":
            return ",\n    ".join(cstring.literal(k) for k in self.keys) or '""'
        if self.kind == "f64":
            return ",\n    ".join(c_number(k, "double") for k in self.keys) or "0"
        return c_ints(self.keys)

    def params(self, x_et: dtypes.ElemType, y_et: dtypes.ElemType, default) -> dict:
        """Template parameters of ml_encoders_lookup.c.j2."""
        kct = {"str": "char *const", "f64": "double", "i64": "int64_t"}[self.kind]
        vct = "char *const" if y_et is STRING else y_et.c
        return {"kind": self.kind, "kct": kct, "ktab": self.c_keys(), "nk": len(self.keys),
                "vct": vct, "vals": c_values(self.values, y_et), "dflt": c_value(default, y_et),
                "nan": None if self.nan is None else c_value(self.nan, y_et),
                "check_nan": self.kind == "f64"}


def _no_nul(node, what: str, values) -> None:
    if any("\0" in s for s in values):
        raise OrtNotImplemented(f"{node.describe()}: attribute {what} holds a string with a NUL character, "
                                "which a C string cannot carry")


class _Lookup(OpSpec):
    """Elementwise key -> value ops: output has the input's shape."""
    domain = ML
    template = "ml_encoders_lookup.c.j2"
    headers = HEADERS

    def _model(self, node):
        """(input type, output type, Lookup, default value)."""
        raise NotImplementedError

    def infer(self, node):
        x_et, y_et, _, _ = self._model(node)
        return [(y_et, node.inputs[0].shape)]

    def params(self, node):
        x_et, y_et, table, default = self._model(node)
        p = table.params(x_et, y_et, default)
        p["n"] = product(node.inputs[0].shape)
        return p


def _string_or_int64(node):
    x = node.inputs[0]
    if x.etype is STRING:
        return STRING, INT64
    if x.etype is INT64:
        return INT64, STRING
    raise fail(node, f"input must be string or int64, got {x.etype.name}")


@register
class LabelEncoder1(_Lookup):
    """classes_strings: a string maps to its index (last occurrence), an index to its string."""
    op_type = "LabelEncoder"
    since, until = 1, 1

    def _model(self, node):
        x_et, y_et = _string_or_int64(node)
        classes = strings(node, "classes_strings") or []
        check_len(node, "classes_strings", len(classes))
        if x_et is STRING:
            table = Lookup(node, "str", classes, range(len(classes)), first_wins=False)
            return x_et, y_et, table, int(node.attr("default_int64", -1))
        _no_nul(node, "classes_strings", classes)
        table = Lookup(node, "i64", range(len(classes)), classes, first_wins=True)
        return x_et, y_et, table, node.attr("default_string", "_Unused")


# LabelEncoder 2/4: attribute names of keys and values per element type (list form)
_LIST_ATTR = {"string": "strings", "int64": "int64s", "float": "floats"}
_DEFAULT_ATTR = {"string": "default_string", "int64": "default_int64", "float": "default_float"}


def _le_list(node, prefix: str, opset: int):
    """(element type, values) of keys_* / values_*: one list attribute, or <prefix>_tensor (opset 4)."""
    found = []
    for tname, suffix in _LIST_ATTR.items():
        v = node.attr(f"{prefix}_{suffix}")
        if v is not None:
            found.append((dtypes.BY_NAME.get(tname, STRING), list(v), f"{prefix}_{suffix}"))
    t = node.attr(f"{prefix}_tensor") if opset >= 4 else None
    if t is not None:
        a = np.asarray(t)
        et = STRING if a.dtype.kind in "OUS" else dtypes.from_numpy(a.dtype)
        if et is None:
            raise fail(node, f"attribute {prefix}_tensor has unsupported element type {a.dtype}")
        vals = a.reshape(-1).tolist()
        if et is STRING:
            vals = [s.decode("utf-8", "replace") if isinstance(s, bytes) else str(s) for s in vals]
        found.append((et, vals, f"{prefix}_tensor"))
    if len(found) != 1:
        what = ", ".join(f for _, _, f in found) or "none"
        raise fail(node, f"exactly one {prefix} attribute must be set (found: {what})")
    et, vals, name = found[0]
    check_len(node, name, len(vals))
    return et, vals, name


def _le_default(node, y_et: dtypes.ElemType, opset: int):
    t = node.attr("default_tensor") if opset >= 4 else None
    if t is not None:
        a = np.asarray(t).reshape(-1)
        if a.size != 1:
            raise fail(node, f"attribute default_tensor must hold one value, it holds {a.size}")
        v = a[0]
        if y_et is STRING:
            return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)
        return float(v) if y_et.is_float else int(v)
    if y_et is STRING:
        return node.attr("default_string", "_Unused")
    if y_et.is_float:
        return float(node.attr("default_float", -0.0))
    return int(node.attr("default_int64", -1))


@register
class LabelEncoder2(_Lookup):
    op_type = "LabelEncoder"
    since = 2

    def _model(self, node):
        x = node.inputs[0]
        k_et, keys, k_name = _le_list(node, "keys", node.opset)
        v_et, vals, v_name = _le_list(node, "values", node.opset)
        if len(keys) != len(vals):
            raise fail(node, f"attributes {k_name} and {v_name} have {len(keys)} and {len(vals)} entries")
        allowed = (STRING, INT64, FLOAT) + ((DOUBLE, INT32, INT16) if node.opset >= 4 else ())
        for what, et in (("input", x.etype), (k_name, k_et), (v_name, v_et)):
            if et not in allowed:
                raise fail(node, f"{what} of element type {et.name} is not supported by "
                           f"LabelEncoder-{node.opset}")
        if k_et is not x.etype:
            raise fail(node, f"input of element type {x.etype.name} does not match {k_name} ({k_et.name})")
        if v_et is STRING:
            _no_nul(node, v_name, vals)
        default = _le_default(node, v_et, node.opset)
        if v_et is STRING:
            _no_nul(node, "default", [default])
        if v_et is FLOAT:
            vals = [float(np.float32(v)) for v in vals]
            default = float(np.float32(default))
        table = Lookup(node, key_kind(k_et), keys, vals, first_wins=True, nan_matches=node.opset >= 4)
        return x.etype, v_et, table, default


@register
class CategoryMapper(_Lookup):
    """cats_strings[i] <-> cats_int64s[i], both directions (the last pair for a key wins)."""
    op_type = "CategoryMapper"

    def _model(self, node):
        x_et, y_et = _string_or_int64(node)
        cs = strings(node, "cats_strings") or []
        ci = ints(node, "cats_int64s")
        ci = [] if ci is None else ci.tolist()
        if len(cs) != len(ci):
            raise fail(node, f"attributes cats_strings and cats_int64s have {len(cs)} and {len(ci)} entries")
        check_len(node, "cats_strings", len(cs))
        if x_et is STRING:
            return x_et, y_et, Lookup(node, "str", cs, ci, first_wins=False), int(node.attr("default_int64", -1))
        _no_nul(node, "cats_strings", cs)
        default = node.attr("default_string", "_Unused")
        _no_nul(node, "default_string", [default])
        return x_et, y_et, Lookup(node, "i64", ci, cs, first_wins=False), default


@register
class OneHotEncoder(OpSpec):
    """Y[..., c] = 1 where X's value is category c. Numbers are cast to int64 first (NaN and values
    out of range become INT64_MIN, as x86's conversion in onnxruntime). An unknown value gives a
    row of zeros, or with zeros=0 fails the run (error 3)."""
    op_type = "OneHotEncoder"
    domain = ML
    template = "ml_encoders_onehot.c.j2"
    headers = HEADERS

    def _model(self, node):
        x = node.inputs[0]
        if x.etype not in (STRING, INT64, INT32, FLOAT, DOUBLE):
            raise fail(node, f"input of element type {x.etype.name} is not supported")
        if x.rank > 2:
            raise fail(node, f"input must have rank <= 2, got {x.rank}")
        ci = ints(node, "cats_int64s")
        cs = strings(node, "cats_strings")
        if ci is not None and len(ci) and cs:
            raise fail(node, "attributes cats_int64s and cats_strings are both set")
        if x.etype is STRING:
            if not cs:
                raise fail(node, "a string input needs cats_strings")
            table = Lookup(node, "str", cs, range(len(cs)), first_wins=False)
            c = len(cs)
        else:
            if ci is None or not len(ci):
                raise fail(node, "a numeric input needs cats_int64s")
            table = Lookup(node, "i64", ci.tolist(), range(len(ci)), first_wins=False)
            c = len(ci)
        check_len(node, "categories", c)
        return x, table, c

    def infer(self, node):
        x, table, c = self._model(node)
        return [(FLOAT, tuple(x.shape) + (c,))]

    def params(self, node):
        x, table, c = self._model(node)
        return {"kind": table.kind, "ktab": table.c_keys(), "nk": len(table.keys),
                "kct": "char *const" if table.kind == "str" else "int64_t",
                "idx": c_ints(table.values), "c": c, "n": product(x.shape),
                "zeros": int(node.attr("zeros", 1)) != 0, "cast": x.etype.is_float}


@register
class FeatureVectorizer(OpSpec):
    """Concatenate inputs' features into float rows [N, sum(inputdimensions)]. N comes from input 0
    (1 for a 1-D input); input i contributes its first min(its row size, inputdimensions[i]) values
    per row, zero-padded; rows an input lacks stay zero (onnxruntime reads past them)."""
    op_type = "FeatureVectorizer"
    domain = ML
    template = "ml_encoders_feature_vectorizer.c.j2"
    headers = HEADERS

    def _model(self, node):
        dims = ints(node, "inputdimensions")
        dims = [] if dims is None else [int(d) for d in dims]
        if len(dims) != len(node.inputs):
            raise fail(node, f"attribute inputdimensions has {len(dims)} values for {len(node.inputs)} inputs")
        if any(d < 0 for d in dims):
            raise fail(node, f"attribute inputdimensions has a negative value: {dims}")
        total = sum(dims)
        check_len(node, "inputdimensions (sum)", total)
        for i, v in enumerate(node.inputs):
            if v is None:
                raise fail(node, f"input {i} is missing")
            if v.etype not in (INT32, INT64, FLOAT, DOUBLE):
                raise fail(node, f"input {i} of element type {v.etype.name} is not supported")
            if v.rank == 0:
                raise fail(node, f"input {i} must have rank >= 1")
        x0 = node.inputs[0]
        n = 1 if x0.rank == 1 else x0.shape[0]
        return dims, total, n

    def infer(self, node):
        dims, total, n = self._model(node)
        return [(FLOAT, (n, total))]

    def params(self, node):
        dims, total, n = self._model(node)
        parts, off = [], 0
        for v, d in zip(node.inputs, dims):
            rows = 1 if v.rank == 1 else v.shape[0]
            size = v.shape[0] if v.rank == 1 else product(v.shape[1:])
            parts.append({"rows": rows, "size": size, "d": d, "off": off})
            off += d
        return {"parts": parts, "n": n, "total": total}
