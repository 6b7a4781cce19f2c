"""Softmax and LogSoftmax, numerically stable (the row maximum is subtracted first).

Before opset 13 the input is coerced to 2-D at ``axis`` (default 1) and each row of
prod(shape[axis:]) elements is normalised; from 13 the op works along one axis (default -1).
Either way the kernel sees (outer, D, inner): D elements with stride ``inner``.
NaN anywhere in a row makes the whole row NaN, +inf too (inf - inf), as in onnx.reference.

float16/bfloat16 Softmax follows its function body in the element type: x - max, Exp and the
row sum are each rounded to it before the division (what onnx.reference and the Attention
reference compute; exact to float16 numpy along a row). LogSoftmax in those types is computed in
float and rounded once: onnx.reference takes Log of the rounded Softmax there (-inf where it
underflows), and rounding the function body's sum before its Log loses up to half an ulp of the
type in absolute terms near 0, so neither is followed.
"""
from __future__ import annotations

from .. import dtypes
from ..errors import NotImplemented as OrtNotImplemented
from ..symbolic import product
from .common import fail, norm_axis
from .registry import OpSpec, register

FLOATS = (dtypes.BY_NAME["float"], dtypes.BY_NAME["double"])
LOWP = (dtypes.BY_NAME["float16"], dtypes.BY_NAME["bfloat16"])   # computed in a float buffer (scratch)
LANES = 64    # columns handled together when the axis is not the innermost one
UNROLL = 16   # partial max/sum accumulators along a contiguous row


class _Softmax(OpSpec):
    template = "softmax.c.j2"
    headers = ("onnxc_softmax.h",)   # float Softmax along a contiguous row
    log = False

    def infer(self, node):
        x = node.inputs[0]
        if x.etype not in FLOATS + LOWP:
            raise OrtNotImplemented(f"{node.describe()}: element type {x.etype.name} is not supported "
                                    "(float, double, float16, bfloat16)")
        if x.rank == 0:
            raise fail(node, "input must have rank >= 1")
        self._split(node)
        return [(x.etype, x.shape)]

    def _split(self, node):
        x = node.inputs[0]
        default = 1 if node.opset < 13 else -1
        axis = norm_axis(node, int(node.attr("axis", default)), x.rank)
        if node.opset < 13:   # coerce to 2-D: rows of prod(shape[axis:])
            return product(x.shape[:axis]), product(x.shape[axis:]), 1
        return product(x.shape[:axis]), x.shape[axis], product(x.shape[axis + 1:])

    def params(self, node):
        x = node.inputs[0]
        outer, d, inner = self._split(node)
        f = "f" if x.etype.c == "float" else ""
        lowp = x.etype in LOWP
        return {"lowp": lowp, "steps": lowp and not self.log, "outer": outer, "d": d, "inner": inner,
                "log": self.log, "exp": "exp" + f, "logf": "log" + f, "lanes": LANES, "unroll": UNROLL,
                "work": product(x.shape)}

    def inplace(self, node):
        return [(0, 0)]

    def scratch(self, node):
        x = node.inputs[0]
        return product(x.shape) * 4 if x.etype in LOWP else 0


@register
class Softmax(_Softmax):
    op_type = "Softmax"


@register
class LogSoftmax(_Softmax):
    op_type = "LogSoftmax"
    log = True
