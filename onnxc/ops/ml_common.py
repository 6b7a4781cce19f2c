"""Shared pieces of the ai.onnx.ml operators: attribute parsing (lists or *_as_tensor tensors),
post transforms, class labels, constant tables rendered as C initialisers.

Model strings (class labels, categories) reach C only as ``cstring.literal`` text; numbers are
printed so that C reads back exactly the same float/double.
"""
from __future__ import annotations

import math

import numpy as np

from .. import cstring, dtypes
from ..errors import NotImplemented as OrtNotImplemented
from ..ir import Node
from .common import fail

ML = "ai.onnx.ml"
HEADERS = ("onnxc_ml.h",)
POST = {"NONE": 0, "LOGISTIC": 1, "SOFTMAX": 2, "SOFTMAX_ZERO": 3, "PROBIT": 4}
NUMERIC_IN = tuple(dtypes.BY_NAME[n] for n in ("float", "double", "int64", "int32"))
MAX_TABLE = 1 << 28     # entries in one constant table: beyond this the C source is unreasonable


def post_transform(node: Node) -> int:
    v = node.attr("post_transform", "NONE")
    if isinstance(v, bytes):
        v = v.decode()
    if v not in POST:
        raise fail(node, f"attribute post_transform={v!r} is not one of {', '.join(map(repr, POST))}")
    return POST[v]


def floats(node: Node, name: str, required: bool = False) -> np.ndarray | None:
    """A float attribute list, or its ``<name>_as_tensor`` twin (float or double); None if absent."""
    t = node.attr(name + "_as_tensor")
    v = node.attr(name)
    if t is not None and v is not None:
        raise fail(node, f"attributes {name} and {name}_as_tensor are both set")
    if t is not None:
        a = np.asarray(t)
        if a.dtype not in (np.float32, np.float64):
            raise fail(node, f"attribute {name}_as_tensor must be float or double, not {a.dtype}")
        return a.reshape(-1)
    if v is not None:
        return np.asarray(v, np.float32).reshape(-1)
    if required:
        raise fail(node, f"required attribute {name} is missing")
    return None


def ints(node: Node, name: str, required: bool = False) -> np.ndarray | None:
    v = node.attr(name)
    if v is None:
        if required:
            raise fail(node, f"required attribute {name} is missing")
        return None
    return np.asarray(v, np.int64).reshape(-1)


def strings(node: Node, name: str) -> list[str] | None:
    v = node.attr(name)
    if v is None:
        return None
    return [s.decode("utf-8", "replace") if isinstance(s, bytes) else str(s) for s in v]


def check_len(node: Node, what: str, n: int, expected: int | None = None) -> None:
    if n > MAX_TABLE:
        raise fail(node, f"attribute {what} has {n} entries (more than {MAX_TABLE})")
    if expected is not None and n != expected:
        raise fail(node, f"attribute {what} has {n} entries, expected {expected}")


def numeric_input(node: Node, i: int = 0):
    x = node.inputs[i]
    if x.etype not in NUMERIC_IN:
        raise OrtNotImplemented(f"{node.describe()}: input {i} of element type {x.etype.name} is not supported "
                                f"({', '.join(t.name for t in NUMERIC_IN)})")
    return x


def rows_features(node: Node, x):
    """onnxruntime's reading of a classic-ML input: [N, F], or [F] as one row."""
    if x.rank == 1:
        return 1, x.shape[0]
    if x.rank == 2:
        return x.shape[0], x.shape[1]
    raise fail(node, f"input must be 1-D or 2-D, got rank {x.rank}")


# ---- C initialisers -----------------------------------------------------------------------
def c_number(v: float, ctype: str) -> str:
    """A literal C reads back as exactly v (v already rounded to ctype)."""
    v = float(v)
    if math.isnan(v):
        return "NAN"
    if math.isinf(v):
        return "INFINITY" if v > 0 else "-INFINITY"
    r = repr(v)
    if "e" not in r and "." not in r and "inf" not in r:
        r += ".0"
    return r + ("f" if ctype == "float" else "")


def c_array(values, ctype: str) -> str:
    """Comma-separated initialiser (never empty: a lone 0 keeps zero-length arrays legal C)."""
    a = np.asarray(values).reshape(-1)
    if a.size == 0:
        return "0"
    if ctype in ("float", "double"):
        a = a.astype(np.float32 if ctype == "float" else np.float64)
        out = [c_number(x, ctype) for x in a.tolist()]
    elif ctype == "int64_t":
        out = [f"INT64_C({int(x)})" if not -2**31 < int(x) < 2**31 else str(int(x)) for x in a.tolist()]
    else:
        out = [str(int(x)) for x in a.tolist()]
    lines = [", ".join(out[i:i + 16]) for i in range(0, len(out), 16)]
    return ",\n    ".join(lines)


def c_strings(values: list[str]) -> str:
    """Initialiser of a ``const char *const[]``: one escaped literal per string."""
    if not values:
        return "\"\""
    return ",\n    ".join(cstring.literal(s) for s in values)


class Labels:
    """Class labels: int64 (classlabels_ints / classlabels_int64s) or strings."""

    def __init__(self, node: Node, ints_name: str, strings_name: str, required: bool = True):
        self.ints = ints(node, ints_name)
        self.strs = strings(node, strings_name)
        if self.ints is not None and len(self.ints) and self.strs:
            raise fail(node, f"attributes {ints_name} and {strings_name} are both set")
        if self.strs:
            self.ints = None
        elif self.ints is None or not len(self.ints):
            if required:
                raise fail(node, f"one of {ints_name}, {strings_name} is required")
            self.ints = np.zeros(0, np.int64)
        n = len(self.strs) if self.strs else len(self.ints)
        check_len(node, "class labels", n)
        self.n = n

    @property
    def is_str(self) -> bool:
        return bool(self.strs)

    @property
    def etype(self):
        return dtypes.STRING if self.is_str else dtypes.INT64

    def c_init(self) -> str:
        return c_strings(self.strs) if self.is_str else c_array(self.ints, "int64_t")
