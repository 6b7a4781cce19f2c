"""Cast and CastLike between the numeric types and bool.

Float -> integer conversion is undefined behaviour in C when the value is NaN or out of
range, so every such conversion is a guarded expression. In range it truncates toward zero
(as numpy does); outside, it reproduces what numpy and onnxruntime give on x86-64: a
conversion through int32 (for targets of 32 bits or fewer, signed) or int64, whose
"indefinite" value is the type minimum, then wrapped to the target width.
"""
from __future__ import annotations

import re

from .. import dtypes
from ..errors import NotImplemented as OrtNotImplemented
from ..symbolic import product
from .common import fail
from .registry import OpSpec, register

D = dtypes.BY_NAME
SUPPORTED = tuple(D[n] for n in ("float", "double", "int8", "int16", "int32", "int64", "uint8", "uint16",
                                 "uint32", "uint64", "bool"))

# opset 1 spells the target type as a string
_OPSET1_NAMES = {"FLOAT": "float", "DOUBLE": "double", "INT8": "int8", "INT16": "int16", "INT32": "int32",
                 "INT64": "int64", "UINT8": "uint8", "UINT16": "uint16", "UINT32": "uint32",
                 "UINT64": "uint64", "BOOL": "bool", "FLOAT16": "float16"}

_I32 = "(({v}) >= -2147483648.0 && ({v}) < 2147483648.0 ? (int32_t)({v}) : INT32_MIN)"
_I64 = "(({v}) >= -9223372036854775808.0 && ({v}) < 9223372036854775808.0 ? (int64_t)({v}) : INT64_MIN)"
_U64 = ("(({v}) >= 0 && ({v}) < 18446744073709551616.0 ? (uint64_t)({v}) : "
        "(({v}) > -9223372036854775808.0 && ({v}) < 0 ? (uint64_t)(int64_t)({v}) : "
        "(uint64_t)1 << 63))")


def convert(v: str, src: dtypes.ElemType, dst: dtypes.ElemType) -> str:
    """C expression converting variable ``v`` (a plain name: it is read several times) of type
    ``src`` to ``dst``, defined for every input value."""
    if dst == dtypes.BOOL:
        return f"(uint8_t)({v} != 0)"
    if src == dst:
        return v
    if dst.is_float or not src.is_float:
        return f"({dst.c})({v})"   # exact, rounded, or modular: all defined
    if dst.c == "int64_t":
        e = _I64.format(v=v)
    elif dst.c == "uint64_t":
        e = _U64.format(v=v)
    elif dst.c == "uint32_t":
        e = "(uint32_t)" + _I64.format(v=v)
    else:
        e = f"({dst.c})" + _I32.format(v=v)
    # the bounds are powers of two, exact in float too: compare without widening to double
    return re.sub(r"(\d\.0)\b", r"\1f", e) if src.c == "float" else e


def _check(node, et: dtypes.ElemType, what: str):
    if et not in SUPPORTED:
        raise OrtNotImplemented(f"{node.describe()}: Cast {what} element type {et.name} is not supported yet")


class _CastBase(OpSpec):
    template = "cast.c.j2"

    def target(self, node) -> dtypes.ElemType:
        raise NotImplementedError

    def infer(self, node):
        x = node.inputs[0]
        to = self.target(node)
        _check(node, x.etype, "from")
        _check(node, to, "to")
        return [(to, x.shape)]

    def params(self, node):
        x, y = node.inputs[0], node.outputs[0]
        return {"expr": convert("v", x.etype, y.etype), "same": x.etype == y.etype, "work": product(x.shape)}

    def inplace(self, node):
        x, y = node.inputs[0], node.outputs[0]
        return [(0, 0)] if x.etype.itemsize == y.etype.itemsize else []


@register
class Cast(_CastBase):
    op_type = "Cast"

    def target(self, node):
        to = node.attr("to")
        if to is None:
            raise fail(node, "required attribute to is missing")
        if isinstance(to, str):   # opset 1
            if to.upper() not in _OPSET1_NAMES:
                raise fail(node, f"attribute to={to!r} is not a known type name")
            name = _OPSET1_NAMES[to.upper()]
            if name not in D:
                raise OrtNotImplemented(f"{node.describe()}: Cast to {name} is not supported yet")
            return D[name]
        return dtypes.from_onnx(int(to), f" ({node.describe()}, attribute to)")


@register
class CastLike(_CastBase):
    op_type = "CastLike"

    def target(self, node):
        if node.input(1) is None:
            raise fail(node, "input 1 (target_type) is missing")
        return node.inputs[1].etype
