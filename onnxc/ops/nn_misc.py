"""Hardmax, LpPool, GlobalLpPool and MaxUnpool.

Hardmax: before opset 13 the input is coerced to 2-D at ``axis`` (rows of prod(shape[axis:]));
from 13 it works along one axis. The first maximum wins; NaN counts as the maximum (np.argmax).
LpPool: (sum of |x|^p over the window taps inside the input)^(1/p) (padding adds zeros), on
the 3-D window geometry of pool.py. MaxUnpool scatters X to the flat indices of the unpooled
shape (zeros elsewhere); with output_shape (a constant) that tensor is placed at the origin of
the requested shape, as onnx's reference and backend tests do.
"""
from __future__ import annotations

import numpy as np

from .. import dtypes
from ..errors import NotImplemented as OrtNotImplemented
from ..symbolic import dim_repr, product
from .common import attr_ints, const_input, fail, norm_axis
from .gemm import c_float
from .normalization import FLOATS, check_float
from .pool import _Pool
from .registry import OpSpec, register


@register
class Hardmax(OpSpec):
    op_type = "Hardmax"
    template = "hardmax.c.j2"

    def _split(self, node):
        x = node.inputs[0]
        default = 1 if node.opset < 13 else -1
        axis = norm_axis(node, int(node.attr("axis", default)), x.rank)
        if node.opset < 13:
            return product(x.shape[:axis]), product(x.shape[axis:]), 1
        return product(x.shape[:axis]), x.shape[axis], product(x.shape[axis + 1:])

    def infer(self, node):
        x = node.inputs[0]
        check_float(node, x.etype)
        if x.rank == 0:
            raise fail(node, "input must have rank >= 1")
        self._split(node)
        return [(x.etype, x.shape)]

    def params(self, node):
        outer, d, inner = self._split(node)
        return {"outer": outer, "d": d, "inner": inner, "work": product(node.inputs[0].shape)}


def _lp_p(node) -> float:
    p = node.attr("p", 2)
    p = float(p)
    if not p > 0 or p != p or p == float("inf"):
        raise fail(node, f"attribute p={p} must be a positive finite number")
    return p


def _lp_exprs(p: float, ct: str) -> dict:
    f = "f" if ct == "float" else ""
    if p == 1:
        return {"acc": f"fabs{f}(v)", "fin": "s"}
    if p == 2:
        return {"acc": "v * v", "fin": f"sqrt{f}(s)"}
    return {"acc": f"pow{f}(fabs{f}(v), {c_float(p, ct)})", "fin": f"pow{f}(s, {c_float(1.0 / p, ct)})"}


@register
class LpPool(_Pool):
    op_type = "LpPool"
    template = "lppool.c.j2"

    def types(self, node):
        return FLOATS

    def infer(self, node):
        _lp_p(node)
        if len(node.outputs) > 1:
            raise fail(node, "LpPool has one output")
        return super().infer(node)

    def params(self, node):
        x = node.inputs[0]
        g = self.geometry(node)
        unit = {"in": 1, "out": 1, "k": 1, "s": 1, "d": 1, "pb": 0, "pe": 0}
        dims = [dict(unit) for _ in range(3 - g["ns"])] + g["dims"]
        return {"dims": dims, "nc": x.shape[0] * x.shape[1], "taps": product(d["k"] for d in dims),
                **_lp_exprs(_lp_p(node), x.etype.cc)}


@register
class GlobalLpPool(OpSpec):
    op_type = "GlobalLpPool"
    template = "globallppool.c.j2"

    def infer(self, node):
        x = node.inputs[0]
        check_float(node, x.etype)
        _lp_p(node)
        if x.rank < 2:
            raise fail(node, f"input must be N x C x spatial..., got rank {x.rank}")
        return [(x.etype, (x.shape[0], x.shape[1], *[1] * (x.rank - 2)))]

    def params(self, node):
        x = node.inputs[0]
        return {"nc": x.shape[0] * x.shape[1], "S": product(x.shape[2:]), "work": product(x.shape),
                **_lp_exprs(_lp_p(node), x.etype.cc)}


@register
class MaxUnpool(OpSpec):
    op_type = "MaxUnpool"
    since = 9
    template = "maxunpool.c.j2"

    def _shapes(self, node):
        x, ind = node.inputs[0], node.inputs[1]
        if x.rank < 3:
            raise fail(node, f"input X must be N x C x spatial..., got rank {x.rank}")
        if ind.etype != dtypes.INT64:
            raise fail(node, f"input I must be int64, got {ind.etype.name}")
        if tuple(ind.shape) != tuple(x.shape):
            raise fail(node, "input I must have the shape of X")
        ns = x.rank - 2
        ks = attr_ints(node, "kernel_shape")
        if ks is None or len(ks) != ns or any(k < 1 for k in ks):
            raise fail(node, f"attribute kernel_shape={ks} must give {ns} values >= 1")
        strides = attr_ints(node, "strides") or [1] * ns
        pads = attr_ints(node, "pads") or [0] * (2 * ns)
        if len(strides) != ns or any(s < 1 for s in strides):
            raise fail(node, f"attribute strides={strides} must give {ns} values >= 1")
        if len(pads) != 2 * ns or any(p < 0 for p in pads):
            raise fail(node, f"attribute pads={pads} must give {2 * ns} values >= 0")
        inferred = [x.shape[0], x.shape[1]]
        for k in range(ns):
            inferred.append((x.shape[2 + k] - 1) * strides[k] - pads[k] - pads[ns + k] + ks[k])
        for d in inferred[2:]:
            if isinstance(d, int) and d < 0:
                raise fail(node, f"the unpooled shape ({', '.join(map(dim_repr, inferred))}) is negative")
        out = inferred
        if node.input(2) is not None:
            from .. import dynamic
            from ..ir import Value
            from .common import data_input
            from .slice_pad import check_before_run
            os_ = getattr(node, "dyn_params", None) or data_input(node, 2, "output_shape")
            if isinstance(os_, Value):   # from the caller: every output dim resolved before the run
                if os_.etype != dtypes.INT64 or os_.rank != 1 or os_.shape[0] != x.rank:
                    raise fail(node, f"input output_shape must be a 1-D int64 tensor of {x.rank} values")
                check_before_run(node, x.shape)
                node.dyn_params = dynamic.resolved(node, x.rank, "maxunpool.c.j2", [os_],
                                                   {"inferred": inferred})
                os_ = node.dyn_params
            if isinstance(os_, list):
                return inferred, os_
            os_ = [int(v) for v in np.asarray(os_).reshape(-1)]
            if len(os_) != x.rank or any(v < 0 for v in os_):
                raise fail(node, f"input output_shape={os_} must have {x.rank} non-negative values")
            out = os_
        return inferred, out

    def infer(self, node):
        x = node.inputs[0]
        check_float(node, x.etype, FLOATS + tuple(dtypes.BY_NAME[n] for n in (
            "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")))
        _, out = self._shapes(node)
        return [(x.etype, tuple(out))]

    def params(self, node):
        inferred, out = self._shapes(node)
        same = [a == b for a, b in zip(inferred, out)]
        return {"same": all(same), "pairs": list(zip(inferred, out))[::-1], "n": product(node.inputs[0].shape),
                "inf_numel": product(inferred)}
