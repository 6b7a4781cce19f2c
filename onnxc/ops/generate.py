"""Ops whose output comes from shapes or constants rather than input data: Shape, Size,
ConstantOfShape, Range, EyeLike. ConstantOfShape's shape and Range's start/limit/delta may be
graph inputs: the output dims are then run-time dims (onnxc.dynamic) that onnxc_resolve computes
from the data (templates/c/resolve/); the values are written by generated C — Shape and Size write
symbolic dims as the run-time values of their C expressions."""
from __future__ import annotations

import math

import numpy as np

from .. import dtypes, dynamic
from ..errors import NotImplemented as OrtNotImplemented
from ..ir import Value
from ..symbolic import Expr, ceildiv, dmax, product
from .common import const_input, data_input, fail
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
        dyn = getattr(node, "dyn_params", None)
        if dyn is not None:
            return dyn["shape"]
        arr = data_input(node, 0, "shape", dims=True)
        if isinstance(arr, Value):
            if arr.rank != 1 or arr.etype != dtypes.INT64:
                raise fail(node, "input 0 (shape) must be a 1-D int64 tensor")
            n = arr.shape[0]
            shape = dynamic.resolved(node, n, "constantofshape.c.j2", [arr]) if n else []
            node.dyn_params = {"shape": shape}
            return shape
        if arr is None or arr.ndim != 1:
            raise fail(node, "input 0 (shape) must be a 1-D tensor")
        # ints, or symbolic dims from shape arithmetic (known_values.known_dims)
        shape = [d if isinstance(d, Expr) else int(d) for d in arr.tolist()]
        if any(isinstance(d, int) and d < 0 for d in shape):
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
        dyn = getattr(node, "dyn_params", None)
        if dyn is not None:
            return dyn
        et = node.inputs[0].etype
        if et.name not in self.TYPES:
            raise OrtNotImplemented(f"{node.describe()}: Range of {et.name} is not supported")
        if any(node.inputs[i].etype != et for i in (1, 2)):
            raise fail(node, "start, limit and delta must have the same type")
        vals = []
        for i, what in enumerate(("start", "limit", "delta")):
            a = data_input(node, i, what, dims=(i == 1 and not et.is_float))
            if a is None or product(a.shape) != 1:
                raise fail(node, f"input {i} ({what}) must be a scalar")
            vals.append(a if isinstance(a, Value) else a.reshape(()))
        lim = vals[1]
        if not isinstance(lim, Value) and lim.dtype == object and isinstance(lim.item(), Expr):
            return self._symbolic_limit(node, et, vals)
        if any(isinstance(v, Value) for v in vals):
            node.dyn_params = self._from_data(node, et, vals)
            return node.dyn_params
        if et.is_float:
            s, l, d = (float(np.asarray(v, np.float64)) for v in vals)
            if d == 0 or not all(map(math.isfinite, (s, l, d))):
                raise fail(node, f"cannot make a range from {s} to {l} by {d}")
            cv = [np.asarray(v, self._count_type(node, et)) for v in vals]
            with np.errstate(all="ignore"):   # the count in the input's (or stash) type
                q = float(np.asarray((cv[1] - cv[0]) / cv[2], np.float64))
            if not math.isfinite(q):
                raise fail(node, f"cannot make a range from {s} to {l} by {d}")
            n = max(int(math.ceil(q)), 0)
        else:
            s, l, d = (int(v) for v in vals)
            if d == 0:
                raise fail(node, "input 2 (delta) is 0")
            n = max(-(-(l - s) // d), 0)
        check_size(node, [n])
        return {"et": et, "start": s, "delta": d, "n": n}

    def _symbolic_limit(self, node, et, vals) -> dict:
        """arange(start, n) with n a symbolic dim from shape arithmetic (position ids): the count
        is ceil((n - start) / delta), symbolic too; start and delta must be known."""
        if any(isinstance(v, Value) for v in (vals[0], vals[2])):
            raise OrtNotImplemented(f"{node.describe()}: a symbolic limit needs known start and delta")
        s, d = int(vals[0]), int(vals[2])
        if d <= 0:
            raise OrtNotImplemented(f"{node.describe()}: a symbolic limit needs a positive delta")
        n = dmax(ceildiv(vals[1].item() - s, d), 0)
        return {"et": et, "start": s, "delta": d, "n": n}

    @staticmethod
    def _count_type(node, et):
        """The element count is computed in the inputs' type; float16/bfloat16 in stash_type
        (float unless double is asked for), as their inputs are cast to it (opset 27)."""
        if et.name in ("float16", "bfloat16"):
            return np.float64 if int(node.attr("stash_type", 1)) == 11 else np.float32
        return et.np

    def _from_data(self, node, et, vals) -> dict:
        """Some of start/limit/delta are graph inputs: the count is a run-time dim; the kernel
        reads start and delta from the data."""
        for i, v in enumerate(vals):
            if not isinstance(v, Value) and et.is_float and not math.isfinite(float(v)):
                raise fail(node, f"input {i} is {float(v)}: cannot make a range")
        ins = [v for v in vals if isinstance(v, Value)]
        src = [ins.index(v) if isinstance(v, Value) else None for v in vals]
        lit = [None if isinstance(v, Value) else c_literal(v, et) for v in vals]
        ct = "int64_t" if not et.is_float else np.dtype(self._count_type(node, et)).name
        n, = dynamic.resolved(node, 1, "range.c.j2", ins, {"et": et.name, "src": src, "lit": lit,
                                                          "ct": {"float32": "float", "float64": "double"}.get(ct, ct)})
        return {"et": et, "start": None if src[0] is not None else float(vals[0]) if et.is_float
                else int(vals[0]), "delta": None if src[2] is not None else float(vals[2])
                if et.is_float else int(vals[2]), "n": n}

    def infer(self, node):
        s = self._spec(node)
        return [(s["et"], (s["n"],))]

    def params(self, node):
        s = self._spec(node)
        et = s["et"]
        start, delta = s["start"], s["delta"]
        if et.is_float:   # numpy.arange: double, the step re-derived from the first two values
            low = et.name in ("float16", "bfloat16") and node.opset >= 27
            cs = "float" if low and int(node.attr("stash_type", 1)) == 1 else "double"
            return {"kind": "range", "ctype": cs, "float": True,
                    "start": None if start is None else repr(start),
                    "delta": None if delta is None else repr(delta)}
        return {"kind": "range", "ctype": "int64_t", "float": False,
                "start": None if start is None else f"INT64_C({start})",
                "delta": None if delta is None else f"INT64_C({delta})"}


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
