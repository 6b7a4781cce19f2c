"""Ops whose output comes from shapes or constants rather than input data: Shape, Size,
ConstantOfShape, Range, EyeLike. The output shape must be known at compile time (constant
inputs); the values are written by generated C — Shape and Size write symbolic dims as the
run-time values of their C expressions."""
from __future__ import annotations

import math

import numpy as np

from .. import dtypes
from ..errors import NotImplemented as OrtNotImplemented
from ..symbolic import product
from .common import const_input, fail
from .registry import OpSpec, register
from .tile_expand import c_literal, check_size

D = dtypes.BY_NAME


class _Gen(OpSpec):
    template = "generate.c.j2"


@register
class Shape(_Gen):
    op_type = "Shape"

    def _dims(self, node):
        x = node.inputs[0]
        r = x.rank
        start, end = 0, r
        if node.opset >= 15:
            start = int(node.attr("start", 0))
            end = node.attr("end")
            end = r if end is None else int(end)
            start = min(max(start + r if start < 0 else start, 0), r)
            end = min(max(end + r if end < 0 else end, 0), r)
        return list(x.shape[start:max(start, end)])

    def infer(self, node):
        return [(dtypes.INT64, (len(self._dims(node)),))]

    def params(self, node):
        return {"kind": "values", "vals": self._dims(node)}


@register
class Size(_Gen):
    op_type = "Size"

    def infer(self, node):
        return [(dtypes.INT64, ())]

    def params(self, node):
        return {"kind": "values", "vals": [product(node.inputs[0].shape)]}


@register
class ConstantOfShape(_Gen):
    op_type = "ConstantOfShape"
    since = 9

    def _value(self, node):
        v = node.attr("value")
        if v is None:
            return D["float"], np.zeros((), np.float32)
        arr = np.asarray(v)
        if arr.size != 1:
            raise fail(node, f"attribute value must hold one element, it has {arr.size}")
        et = dtypes.from_numpy(arr.dtype)
        if et is None:
            raise OrtNotImplemented(f"{node.describe()}: value of type {arr.dtype} is not supported")
        return et, arr.reshape(())

    def _shape(self, node):
        arr = const_input(node, 0, "shape")
        if arr is None or arr.ndim != 1:
            raise fail(node, "input 0 (shape) must be a 1-D tensor")
        shape = [int(d) for d in arr.tolist()]
        if any(d < 0 for d in shape):
            raise fail(node, f"input 0 (shape) {shape} has a negative dimension")
        check_size(node, shape)
        return shape

    def infer(self, node):
        et, _ = self._value(node)
        return [(et, tuple(self._shape(node)))]

    def params(self, node):
        et, v = self._value(node)
        lit = c_literal(v, et)
        zero = not np.any(np.asarray(v).reshape(1).view(np.uint8))   # all-zero bits: memset
        return {"kind": "fill", "value": lit, "zero": zero}


@register
class Range(_Gen):
    op_type = "Range"
    since = 11
    TYPES = ("float", "double", "int16", "int32", "int64", "float16", "bfloat16")

    def _spec(self, node):
        vals = []
        for i, what in enumerate(("start", "limit", "delta")):
            a = const_input(node, i, what)
            if a is None or a.size != 1:
                raise fail(node, f"input {i} ({what}) must be a scalar")
            vals.append(a.reshape(()))
        et = node.inputs[0].etype
        if et.name not in self.TYPES:
            raise OrtNotImplemented(f"{node.describe()}: Range of {et.name} is not supported")
        if any(node.inputs[i].etype != et for i in (1, 2)):
            raise fail(node, "start, limit and delta must have the same type")
        if et.is_float:
            s, l, d = (float(np.asarray(v, np.float64)) for v in vals)
            if d == 0 or not all(map(math.isfinite, (s, l, d))):
                raise fail(node, f"cannot make a range from {s} to {l} by {d}")
            n = max(int(math.ceil((l - s) / d)), 0)
        else:
            s, l, d = (int(v) for v in vals)
            if d == 0:
                raise fail(node, "input 2 (delta) is 0")
            n = max(-(-(l - s) // d), 0)
        check_size(node, [n])
        return et, s, d, n

    def infer(self, node):
        et, _, _, n = self._spec(node)
        return [(et, (n,))]

    def params(self, node):
        et, s, d, n = self._spec(node)
        if et.is_float:   # numpy.arange: double, the step re-derived from the first two values
            low = et.name in ("float16", "bfloat16") and node.opset >= 27
            cs = "float" if low and int(node.attr("stash_type", 1)) == 1 else "double"
            return {"kind": "range", "ctype": cs, "start": repr(s), "delta": repr(d), "float": True}
        return {"kind": "range", "ctype": "int64_t", "start": f"INT64_C({s})", "delta": f"INT64_C({d})",
                "float": False}


@register
class EyeLike(_Gen):
    op_type = "EyeLike"
    since = 9

    def infer(self, node):
        x = node.inputs[0]
        if x.rank != 2:
            raise fail(node, f"input must be 2-D, got rank {x.rank}")
        dt = node.attr("dtype")
        et = x.etype if dt is None else dtypes.from_onnx(int(dt), f" ({node.describe()} dtype)")
        return [(et, tuple(x.shape))]

    def params(self, node):
        y = node.outputs[0]
        return {"kind": "eye", "k": int(node.attr("k", 0)), "one": c_literal(1, y.etype),
                "rows": y.shape[0], "cols": y.shape[1]}
