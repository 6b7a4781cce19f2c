"""Linear algebra and cumulative math: Det (batched LU with partial pivoting, in double) and
CumProd (opset 26; like CumSum, the axis may be read at run time)."""
from __future__ import annotations

from ..errors import NotImplemented as OrtNotImplemented
from ..known_values import known
from ..symbolic import product
from .common import fail, norm_axis, schema_types
from .registry import OpSpec, register

MAX_DIM = 1 << 14          # Det: an M x M double workspace per slot
SLOTS = 8


@register
class Det(OpSpec):
    """det of each [M, M] matrix in [*, M, M]: LU with partial pivoting on a double copy."""
    op_type = "Det"
    since = 11
    template = "det.c.j2"
    headers = ("onnxc_fft.h",)          # ONNXC_FFT_THREAD(): the thread's workspace slot

    def _m(self, node):
        schema_types(node)
        x = node.inputs[0]
        if x.rank < 2 or x.shape[-1] != x.shape[-2]:
            raise fail(node, "input must be [*, M, M] (square matrices)")
        m = x.shape[-1]
        if not isinstance(m, int):
            raise OrtNotImplemented(f"{node.describe()}: the matrix size must be known at compile time")
        if m > MAX_DIM:
            raise fail(node, f"matrix size {m} is larger than onnxc supports ({MAX_DIM})")
        return m

    def _slots(self, node):
        b = product(node.inputs[0].shape[:-2])
        return max(1, min(SLOTS, b)) if isinstance(b, int) else SLOTS

    def infer(self, node):
        self._m(node)
        x = node.inputs[0]
        return [(x.etype, tuple(x.shape[:-2]))]

    def params(self, node):
        return {"m": self._m(node), "batch": product(node.inputs[0].shape[:-2]),
                "slots": self._slots(node)}

    def scratch(self, node):
        m = self._m(node)
        return self._slots(node) * max(1, m * m) * 8


@register
class CumProd(OpSpec):
    op_type = "CumProd"
    since = 26
    template = "cumprod.c.j2"

    def _axis(self, node):
        schema_types(node)
        x, a = node.inputs[0], node.input(1)
        if x.rank == 0:
            raise fail(node, "input 0 must have rank >= 1")
        if a is None or product(a.shape) != 1:
            raise fail(node, "input 1 (axis) must be a scalar")
        value = known(a)
        if value is None:
            return None
        return norm_axis(node, int(value.reshape(())), x.rank)

    def infer(self, node):
        self._axis(node)
        return [(node.inputs[0].etype, node.inputs[0].shape)]

    def params(self, node):
        x = node.inputs[0]
        axis = self._axis(node)
        et = x.etype
        flags = {"exclusive": int(node.attr("exclusive", 0)) != 0, "reverse": int(node.attr("reverse", 0)) != 0,
                 # integers multiply in uint64_t: wrap-around instead of signed overflow
                 "acc": et.cc if et.is_float else "uint64_t"}
        if axis is None:
            return {"runtime_axis": True, "dims": list(x.shape), **flags}
        return {"runtime_axis": False, "outer": product(x.shape[:axis]), "n": x.shape[axis],
                "inner": product(x.shape[axis + 1:]), **flags}

    def inplace(self, node):
        return [(0, 0)]
