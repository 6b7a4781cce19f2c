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
SUPPORTED = tuple(dtypes.BY_ONNX.values())
_F8 = frozenset(D[n] for n in ("float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz"))
_E8M0 = D["float8e8m0"]
_ROUND_MODES = {"up": 0, "nearest": 1, "down": 2}

# opset 1 spells the target type as a string
_OPSET1_NAMES = {"FLOAT": "float", "DOUBLE": "double", "INT8": "int8", "INT16": "int16", "INT32": "int32",
                 "INT64": "int64", "UINT8": "uint8", "UINT16": "uint16", "UINT32": "uint32",
                 "UINT64": "uint64", "BOOL": "bool", "FLOAT16": "float16"}

_I32 = "(({v}) >= -2147483648.0 && ({v}) < 2147483648.0 ? (int32_t)({v}) : INT32_MIN)"
_I64 = "(({v}) >= -9223372036854775808.0 && ({v}) < 9223372036854775808.0 ? (int64_t)({v}) : INT64_MIN)"
_U64 = ("(({v}) >= 0 && ({v}) < 18446744073709551616.0 ? (uint64_t)({v}) : "
        "(({v}) > -9223372036854775808.0 && ({v}) < 0 ? (uint64_t)(int64_t)({v}) : "
        "(uint64_t)1 << 63))")


def compute_type(et: dtypes.ElemType) -> dtypes.ElemType:
    """The plain type a value of ``et`` is held in after onnxc_ld_<et>(): float for float16,
    bfloat16, the 8/4-bit floats; int8/uint8 for the sub-byte integers."""
    if et.cc == et.c and et not in dtypes.LOWP:
        return et
    return {"float": dtypes.FLOAT, "int8_t": D["int8"], "uint8_t": D["uint8"]}[et.cc]


def load(v: str, et: dtypes.ElemType) -> str:
    """C expression: stored element ``v`` of type ``et`` as its compute type."""
    return v if et.cc == et.c and et not in dtypes.LOWP else f"onnxc_ld_{et.name}({v})"


def convert(v: str, src: dtypes.ElemType, dst: dtypes.ElemType, saturate: bool = True,
            round_mode: str = "up") -> str:
    """C expression converting variable ``v`` (a plain name: it is read several times), already
    in ``src``'s compute type (see load), to ``dst``'s storage, defined for every input value.
    ``saturate`` and ``round_mode`` are Cast's attributes (float8 / float8e8m0 targets only)."""
    src = compute_type(src)
    if dst == dtypes.BOOL:
        return f"(uint8_t)({v} != 0)"
    if dst in _F8 and not saturate:
        return f"onnxc_st_{dst.name}_nosat({v})"
    if dst == _E8M0:
        return f"onnxc_f2e8m0((float)({v}), {_ROUND_MODES[round_mode]}, {int(saturate)})"
    if dst.cc != dst.c or dst in dtypes.LOWP:
        if dst.is_float:
            return f"onnxc_st_{dst.name}({v})"
        # sub-byte integers: the low bits of the value converted as to int32 (as ml_dtypes does)
        return f"onnxc_st_{dst.name}({convert(v, src, D['int32'])})"
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
    headers = ("onnxc_lowp.h",)

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
        sat = node.attr("saturate", 1)
        if sat not in (0, 1):
            raise fail(node, f"attribute saturate={sat!r} must be 0 or 1")
        mode = node.attr("round_mode", "up")
        if mode not in _ROUND_MODES:
            raise fail(node, f"attribute round_mode={mode!r} is not one of {', '.join(_ROUND_MODES)}")
        return {"load": load("v", x.etype), "expr": convert("w", x.etype, y.etype, bool(sat), mode),
                "same": x.etype == y.etype, "work": product(x.shape)}

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
