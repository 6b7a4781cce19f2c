"""Linear quantization: QuantizeLinear, DequantizeLinear (per-tensor, per-axis, blocked; integer,
float8 and float4 types) and DynamicQuantizeLinear, following onnx.reference bit for bit.

Scales and zero points are indexed as x viewed as [O, D, I] around ``axis``: element (o, d, i)
reads scale[o*so + (d/blk)*sd + i*si] (per-tensor: all strides 0; per-axis: sd=1; blocked:
so=Db*I, sd=I, si=1, blk=block_size).
"""
from __future__ import annotations

import numpy as np

from .. import dtypes
from ..errors import NotImplemented as OrtNotImplemented
from ..symbolic import product
from .cast import compute_type, load
from .common import fail, norm_axis
from .registry import OpSpec, register

D = dtypes.BY_NAME
_F8 = frozenset(D[n] for n in ("float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz"))
_F4 = D["float4e2m1"]
_INT_RANGES = {"uint8": (0, 255), "int8": (-128, 127), "uint16": (0, 65535), "int16": (-32768, 32767),
               "uint4": (0, 15), "int4": (-8, 7), "uint2": (0, 3), "int2": (-2, 1)}
QUANT_TYPES = frozenset({D[n] for n in _INT_RANGES} | _F8 | {_F4})
FLOATS = (D["float"], D["float16"], D["bfloat16"], D["double"])


def _layout(node, x, scale, axis_attr: int, block: int) -> dict:
    """[O, D, I] view of x around the axis and the scale/zero-point strides (C expressions)."""
    shape = x.shape
    per_tensor = scale.rank == 0 or (scale.rank == 1 and isinstance(scale.shape[0], int)
                                     and scale.shape[0] == 1 and not block)
    if per_tensor:
        return {"O": 1, "D": 1, "I": product(shape), "so": 0, "sd": 0, "si": 0, "blk": 1}
    axis = norm_axis(node, axis_attr, x.rank)
    O, Dd, I = product(shape[:axis]), shape[axis], product(shape[axis + 1:])
    if not block:
        if scale.rank != 1:
            raise fail(node, f"the scale has shape {list(scale.shape)}: per-axis quantization needs a "
                       "1-D scale (block_size=0)")
        if isinstance(scale.shape[0], int) and isinstance(Dd, int) and scale.shape[0] != Dd:
            raise fail(node, f"the scale has {scale.shape[0]} values, axis {axis} of the input has {Dd}")
        return {"O": O, "D": Dd, "I": I, "so": 0, "sd": 1, "si": 0, "blk": 1}
    if block < 0:
        raise fail(node, f"attribute block_size={block} must be >= 0")
    if scale.rank != x.rank:
        raise fail(node, f"blocked quantization needs a scale of rank {x.rank}, got {list(scale.shape)}")
    Db = scale.shape[axis]
    for k, (a, b) in enumerate(zip(shape, scale.shape)):
        if k != axis and isinstance(a, int) and isinstance(b, int) and a != b:
            raise fail(node, f"the scale's shape {list(scale.shape)} must equal the input's "
                       f"{list(shape)} except on axis {axis}")
    if isinstance(Dd, int) and isinstance(Db, int) and -(-Dd // block) != Db:
        raise fail(node, f"axis {axis} has {Dd} elements: block_size={block} needs {-(-Dd // block)} "
                   f"scales along it, the scale has {Db}")
    return {"O": O, "D": Dd, "I": I, "so": Db * I, "sd": I, "si": 1, "blk": block}


def _check_zero_point(node, zp_index: int, scale) -> None:
    zp = node.input(zp_index)
    if zp is not None and zp.shape != scale.shape and not (
            product(zp.shape) == 1 and product(scale.shape) == 1 and zp.rank <= 1 and scale.rank <= 1):
        raise fail(node, f"the zero point has shape {list(zp.shape)}, the scale {list(scale.shape)}")


@register
class QuantizeLinear(OpSpec):
    op_type = "QuantizeLinear"
    since = 10
    template = "quantize_linear.c.j2"
    headers = ("onnxc_lowp.h",)

    def _out_type(self, node) -> dtypes.ElemType:
        zp = node.input(2)
        od = int(node.attr("output_dtype", 0) or 0)
        et = zp.etype if zp is not None else dtypes.from_onnx(od, f" ({node.describe()}, output_dtype)") \
            if od else D["uint8"]
        if od and zp is not None and dtypes.from_onnx(od) != zp.etype:
            raise fail(node, f"output_dtype {dtypes.from_onnx(od).name} differs from the zero point's "
                       f"type {zp.etype.name}")
        if et not in QUANT_TYPES:
            raise OrtNotImplemented(f"{node.describe()}: quantizing to {et.name} is not supported")
        return et

    def infer(self, node):
        x, scale = node.inputs[0], node.inputs[1]
        for v, what in ((x, "input x"), (scale, "y_scale")):
            if v.etype not in FLOATS + (D["int32"],):
                raise OrtNotImplemented(f"{node.describe()}: {what} of type {v.etype.name} is not supported")
        _check_zero_point(node, 2, scale)
        return [(self._out_type(node), x.shape)]

    def params(self, node):
        x, scale, zp = node.inputs[0], node.inputs[1], node.input(2)
        y = node.outputs[0]
        sat = int(node.attr("saturate", 1))
        if sat not in (0, 1):
            raise fail(node, f"attribute saturate={sat} must be 0 or 1")
        prec = int(node.attr("precision", 0) or 0)
        if prec:
            div = dtypes.from_onnx(prec, f" ({node.describe()}, precision)")
            if div not in FLOATS:
                raise fail(node, f"attribute precision must name a float type, not {div.name}")
        else:
            div = dtypes.from_numpy(np.result_type(x.etype.np, scale.etype.np))
            if div is None or div not in FLOATS:
                div = D["float"]
        p = _layout(node, x, scale, int(node.attr("axis", 1)), int(node.attr("block_size", 0) or 0))
        ct = "double" if div.name == "double" else "float"
        p.update({
            "ct": ct,
            "ldx": f"({ct}){load('xv', x.etype)}", "lds": f"({ct}){load('sv', scale.etype)}",
            # numpy divides float16 by float16 in float16: round the quotient the same way
            "round_div": f"onnxc_ld_{div.name}(onnxc_st_{div.name}(q))" if div.cc != div.c else "",
            "ldz": load("zv", zp.etype) if zp is not None else "0",
            "work": product(x.shape),
        })
        if y.etype in _F8:
            p["kind"], p["st"] = "f8", f"onnxc_st_{y.etype.name}{'' if sat else '_nosat'}"
        elif y.etype == _F4:
            p["kind"], p["st"] = "f4", "onnxc_st_float4e2m1"
            p["ldz"] = f"(float){p['ldz']}"
        else:
            lo, hi = _INT_RANGES[y.etype.name]
            p.update({"kind": "int", "st": f"onnxc_st_{y.etype.name}", "lo": lo, "hi": hi,
                      "rint": "rint" if ct == "double" else "rintf"})
        return p


@register
class DequantizeLinear(OpSpec):
    op_type = "DequantizeLinear"
    since = 10
    template = "dequantize_linear.c.j2"
    headers = ("onnxc_lowp.h",)

    def infer(self, node):
        x, scale = node.inputs[0], node.inputs[1]
        if x.etype not in QUANT_TYPES | {D["int32"]}:
            raise OrtNotImplemented(f"{node.describe()}: dequantizing {x.etype.name} is not supported")
        if scale.etype not in FLOATS:
            raise OrtNotImplemented(f"{node.describe()}: x_scale of type {scale.etype.name} is not supported")
        zp = node.input(2)
        if zp is not None and zp.etype != x.etype:
            raise fail(node, f"the zero point's type {zp.etype.name} differs from x's {x.etype.name}")
        _check_zero_point(node, 2, scale)
        od = int(node.attr("output_dtype", 0) or 0)
        out = dtypes.from_onnx(od, f" ({node.describe()}, output_dtype)") if od else scale.etype
        if out not in FLOATS:
            raise fail(node, f"output_dtype {out.name} is not a float type")
        return [(out, x.shape)]

    def params(self, node):
        x, scale, zp = node.inputs[0], node.inputs[1], node.input(2)
        p = _layout(node, x, scale, int(node.attr("axis", 1)), int(node.attr("block_size", 0) or 0))
        ct = "double" if x.etype.name == "int32" or scale.etype.name == "double" else "float"
        # onnx.reference ignores the zero point of float8 / float4 inputs (it must be 0)
        use_zp = zp is not None and x.etype not in _F8 and x.etype != _F4
        p.update({"ct": ct, "ldx": f"({ct}){load('xv', x.etype)}", "lds": f"({ct}){load('sv', scale.etype)}",
                  "ldz": f"({ct}){load('zv', zp.etype)}" if use_zp else "", "work": product(x.shape)})
        return p


@register
class DynamicQuantizeLinear(OpSpec):
    op_type = "DynamicQuantizeLinear"
    since = 11
    template = "dynamic_quantize_linear.c.j2"

    def infer(self, node):
        x = node.inputs[0]
        if x.etype != D["float"]:
            raise OrtNotImplemented(f"{node.describe()}: input of type {x.etype.name} is not supported")
        return [(D["uint8"], x.shape), (D["float"], ()), (D["uint8"], ())]

    def params(self, node):
        return {"work": product(node.inputs[0].shape)}


__all__ = ["QUANT_TYPES", "compute_type"]
