"""Integer matmul/conv: MatMulInteger, QLinearMatMul, ConvInteger, QLinearConv.

Products are exact in int32 ((a - a_zero) * (b - b_zero) summed), as onnx.reference computes them.
The QLinear ops then requantize like the reference does in numpy: the multiplier
a_scale * b_scale / y_scale is formed in the scales' type (float16 rounds after each step), the
int32 sum is multiplied by it in double (numpy promotes int32 x float to float64), the output
zero point is added, then rint and clip to the output type.
"""
from __future__ import annotations

from .. import dtypes
from ..errors import NotImplemented as OrtNotImplemented
from ..symbolic import product
from .cast import load
from .common import broadcast, fail
from .conv import conv_geometry
from .registry import OpSpec, register

D = dtypes.BY_NAME
INT8S = (D["int8"], D["uint8"])
_RANGE = {"int8": (-128, 127), "uint8": (0, 255)}
SCALES = (D["float"], D["float16"], D["bfloat16"])


def _static(node, dims, what) -> list[int]:
    if not all(isinstance(d, int) for d in dims):
        raise OrtNotImplemented(f"{node.describe()}: {what} must be static for now, got {list(dims)}")
    return list(dims)


def _vec(node, v, n: int, what: str) -> int:
    """Stride of a scale/zero-point input: 0 for one value, 1 for a vector of n."""
    if v is None:
        return 0
    size = product(v.shape)
    if v.rank <= 1 and size == 1:
        return 0
    if v.rank == 1 and size == n:
        return 1
    raise fail(node, f"{what} has shape {list(v.shape)}: expected one value or {n}")


def _mult(node, scales) -> dict:
    """C expression of a_scale * b_scale / y_scale (operands sa, sb, sy) in the scales' type."""
    et = scales[0].etype
    for v in scales:
        if v.etype not in SCALES:
            raise OrtNotImplemented(f"{node.describe()}: scale of type {v.etype.name} is not supported")
        if v.etype != et:
            raise fail(node, f"the scales have different types ({', '.join(s.etype.name for s in scales)})")
    la, lb, ly = (load(n, et) for n in ("sa", "sb", "sy"))
    if et.cc != et.c:
        r = f"onnxc_ld_{et.name}(onnxc_st_{et.name}"
        return {"mult": f"{r}({r}({la} * {lb})) / {ly}))"}
    return {"mult": f"{la} * {lb} / {ly}"}


def _zp_type(node, x, zp, what):
    if x.etype not in INT8S:
        raise OrtNotImplemented(f"{node.describe()}: {what} of type {x.etype.name} is not supported")
    if zp is not None and zp.etype != x.etype:
        raise fail(node, f"the zero point of {what} has type {zp.etype.name}, {what} is {x.etype.name}")


class _MatMulBase(OpSpec):
    template = "qgemm.c.j2"
    headers = ("onnxc_lowp.h",)
    A, B, AZ, BZ = 0, 1, 2, 3

    def _shapes(self, node):
        a, b = node.inputs[self.A], node.inputs[self.B]
        if a.rank < 2 or b.rank < 2:
            raise OrtNotImplemented(f"{node.describe()}: 1-D operands are not supported yet")
        if isinstance(a.shape[-1], int) and isinstance(b.shape[-2], int) and a.shape[-1] != b.shape[-2]:
            raise fail(node, f"A {list(a.shape)} and B {list(b.shape)} do not fit for a matrix product")
        batch = broadcast(node, [a.shape[:-2], b.shape[:-2]])
        return a, b, batch

    def _common(self, node) -> dict:
        a, b, batch = self._shapes(node)
        batch = _static(node, batch, "the batch dims")
        ab, bb = _static(node, a.shape[:-2], "A's batch dims"), _static(node, b.shape[:-2], "B's batch dims")
        M, K, N = a.shape[-2], a.shape[-1], b.shape[-1]

        def strides(dims, size):
            dims = [1] * (len(batch) - len(dims)) + dims
            out, s = [], size
            for d in reversed(dims):
                out.append(0 if d == 1 else s)
                s = s * d
            return list(reversed(out))
        az, bz = node.input(self.AZ), node.input(self.BZ)
        return {"M": M, "K": K, "N": N, "batch": batch, "nb": product(batch) if batch else 1,
                "astr": strides(ab, M * K), "bstr": strides(bb, K * N),
                "za": _vec(node, az, M, "a_zero_point") if az is not None else None,
                "zb": _vec(node, bz, N, "b_zero_point") if bz is not None else None,
                "lda": load("av", a.etype), "ldb": load("bv", b.etype),
                "ldza": load("zv", az.etype) if az is not None else "0",
                "ldzb": load("zv", bz.etype) if bz is not None else "0",
                "work": product(batch) * M * N * K if batch else M * N * K}


@register
class MatMulInteger(_MatMulBase):
    op_type = "MatMulInteger"
    since = 10

    def infer(self, node):
        a, b, batch = self._shapes(node)
        _zp_type(node, a, node.input(2), "A")
        _zp_type(node, b, node.input(3), "B")
        return [(D["int32"], tuple(batch) + (a.shape[-2], b.shape[-1]))]

    def params(self, node):
        p = self._common(node)
        p["requant"] = False
        return p


@register
class QLinearMatMul(_MatMulBase):
    op_type = "QLinearMatMul"
    since = 10
    A, B, AZ, BZ = 0, 3, 2, 5

    def infer(self, node):
        a, b, batch = self._shapes(node)
        _zp_type(node, a, node.input(2), "a")
        _zp_type(node, b, node.input(5), "b")
        yz = node.input(7)
        out = yz.etype if yz is not None else a.etype
        if out not in INT8S:
            raise OrtNotImplemented(f"{node.describe()}: output type {out.name} is not supported")
        return [(out, tuple(batch) + (a.shape[-2], b.shape[-1]))]

    def params(self, node):
        p = self._common(node)
        M, N = p["M"], p["N"]
        y, yz = node.outputs[0], node.input(7)
        p.update(_mult(node, [node.inputs[1], node.inputs[4], node.inputs[6]]))
        lo, hi = _RANGE[y.etype.name]
        p.update({"requant": True, "lo": lo, "hi": hi,
                  "sas": _vec(node, node.inputs[1], M, "a_scale"), "sbs": _vec(node, node.inputs[4], N, "b_scale"),
                  "sys": _vec(node, node.inputs[6], M, "y_scale"),
                  "zys": _vec(node, yz, M, "y_zero_point") if yz is not None else None,
                  "ldzy": load("zv", yz.etype) if yz is not None else "0"})
        return p


class _ConvBase(OpSpec):
    template = "qconv.c.j2"
    headers = ("onnxc_lowp.h",)
    X, W, XZ, WZ = 0, 1, 2, 3

    class _View:
        """The node as conv_geometry sees it: inputs X and W at positions 0 and 1."""
        def __init__(self, node, x, w):
            self.inputs, self.attr, self.describe = [x, w], node.attr, node.describe

    def _geometry(self, node) -> dict:
        x, w = node.inputs[self.X], node.inputs[self.W]
        g = conv_geometry(self._View(node, x, w))
        _static(node, x.shape[:1], "the batch dim")
        return g

    def infer(self, node):
        x, w = node.inputs[self.X], node.inputs[self.W]
        _zp_type(node, x, node.input(self.XZ), "x")
        _zp_type(node, w, node.input(self.WZ), "w")
        g = self._geometry(node)
        return [(self.out_type(node), (x.shape[0], g["M"]) + tuple(g["O"][3 - g["ns"]:]))]

    def params(self, node):
        g = self._geometry(node)
        x, w = node.inputs[self.X], node.inputs[self.W]
        xz, wz = node.input(self.XZ), node.input(self.WZ)
        if xz is not None and _vec(node, xz, 1, "x_zero_point") != 0:
            raise fail(node, "x_zero_point must be one value")
        g.update({"N": x.shape[0], "ldx": load("xv", x.etype), "ldw": load("wv", w.etype),
                  "ldzx": load("zv", xz.etype) if xz is not None else "0",
                  "zw": _vec(node, wz, g["M"], "w_zero_point") if wz is not None else None,
                  "ldzw": load("zv", wz.etype) if wz is not None else "0", "requant": False, "bias": False,
                  "work": x.shape[0] * g["M"] * product(g["O"]) * g["Cg"] * product(g["KS"])})
        return g


@register
class ConvInteger(_ConvBase):
    op_type = "ConvInteger"
    since = 10

    def out_type(self, node):
        return D["int32"]


@register
class QLinearConv(_ConvBase):
    op_type = "QLinearConv"
    since = 10
    X, W, XZ, WZ = 0, 3, 2, 5

    def out_type(self, node):
        yz = node.input(7)
        out = yz.etype if yz is not None else node.inputs[0].etype
        if out not in INT8S:
            raise OrtNotImplemented(f"{node.describe()}: output type {out.name} is not supported")
        return out

    def params(self, node):
        p = super().params(node)
        y, yz, bias = node.outputs[0], node.input(7), node.input(8)
        if bias is not None and (bias.etype != D["int32"] or list(bias.shape) != [p["M"]]):
            raise fail(node, f"bias B must be int32 of shape [{p['M']}], got {bias.etype.name} "
                       f"{list(bias.shape)}")
        if _vec(node, node.inputs[1], 1, "x_scale") or _vec(node, node.inputs[6], 1, "y_scale"):
            raise fail(node, "x_scale and y_scale must be one value")
        p.update(_mult(node, [node.inputs[1], node.inputs[4], node.inputs[6]]))
        lo, hi = _RANGE[y.etype.name]
        p.update({"requant": True, "bias": bias is not None, "lo": lo, "hi": hi,
                  "sws": _vec(node, node.inputs[4], p["M"], "w_scale"),
                  "ldzy": load("zv", yz.etype) if yz is not None else "0"})
        return p
