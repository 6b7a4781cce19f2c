"""BitCast (opset 26): the input's bytes reinterpreted as another element type of the same
width (a memcpy). Types of different widths, strings and the sub-byte types (whose in-memory
form here is one value per byte, not their bit pattern) are rejected at compile time."""
from __future__ import annotations

from .. import dtypes
from ..errors import NotImplemented as OrtNotImplemented
from .common import fail
from .registry import OpSpec, register

SUB_BYTE = ("int4", "uint4", "float4e2m1", "int2", "uint2")


@register
class BitCast(OpSpec):
    op_type = "BitCast"
    since = 26
    template = "bitcast.c.j2"

    def infer(self, node):
        x = node.inputs[0]
        to = node.attr("to")
        if to is None:
            raise fail(node, "required attribute to is missing")
        if int(to) == dtypes.STRING.onnx or x.etype == dtypes.STRING:
            raise fail(node, "BitCast from or to string is not defined")
        et = dtypes.from_onnx(int(to), node.describe())
        if x.etype.name in SUB_BYTE or et.name in SUB_BYTE:
            raise OrtNotImplemented(f"{node.describe()}: BitCast between {x.etype.name} and {et.name} "
                                    "(sub-byte types) is not supported")
        if x.etype.itemsize != et.itemsize:
            raise fail(node, f"attribute to: cannot bit-cast {x.etype.name} ({8 * x.etype.itemsize} bits) "
                             f"to {et.name} ({8 * et.itemsize} bits); the widths must be equal")
        return [(et, tuple(x.shape))]

    def inplace(self, node):
        return [(0, 0)]
