"""Normalizations over rows: LayerNormalization, RMSNormalization, InstanceNormalization,
GroupNormalization (opset 18: scale/bias per group; 21: per channel), MeanVarianceNormalization,
LpNormalization and LRN.

LayerNorm/RMSNorm/InstanceNorm/GroupNorm view X as R rows of D contiguous elements and render
normalization.c.j2: mean (two-pass variance, as onnx.reference; the second pass shifted by the
first's mean, whose rounding it repairs), then y = (x - mean) * inv_std * scale + bias. Arithmetic in the compute type (float for float16/bfloat16, float for float,
double for double) with partial accumulators so the sums vectorise without -ffast-math.
MeanVarianceNormalization reduces over arbitrary axes (mvn.c.j2) with onnx's function body:
var = E[x^2] - E[x]^2, y = (x - mean) / (sqrt(var) + 1e-9).
"""
from __future__ import annotations

from .. import dtypes
from ..errors import NotImplemented as OrtNotImplemented
from ..symbolic import dim_repr, product
from .common import attr_ints, fail, norm_axis
from .gemm import c_float
from .registry import OpSpec, register

D = dtypes.BY_NAME
FLOATS = (D["float"], D["double"], D["float16"], D["bfloat16"])
UNROLL = 16   # partial accumulators along a row


def _fmt(shape) -> str:
    return "(" + ", ".join(dim_repr(d) for d in shape) + ")"


def check_float(node, et, allowed=FLOATS):
    if et not in allowed:
        raise OrtNotImplemented(f"{node.describe()}: element type {et.name} is not supported "
                                f"(supported: {', '.join(t.name for t in allowed)})")


def _stash(node, x) -> dtypes.ElemType:
    """Type of the Mean/InvStdDev outputs: stash_type as onnx's shape inference sets it."""
    st = int(node.attr("stash_type", 1))
    if st in dtypes.BY_ONNX and dtypes.BY_ONNX[st] in FLOATS:
        return dtypes.BY_ONNX[st]
    if st == 0:
        return x.etype
    raise fail(node, f"attribute stash_type={st} is not a floating-point type")


def _param_index(node, v, what: str, norm_shape) -> str:
    """How scale/bias of shape v.shape index a row of norm_shape: 'd' (elementwise) or '0'."""
    shape = list(v.shape)
    while shape and shape[0] == 1 and len(shape) > len(norm_shape):
        shape.pop(0)
    if len(shape) > len(norm_shape):
        raise fail(node, f"input {what} has shape {_fmt(v.shape)}, more dims than the normalized "
                   f"shape {_fmt(norm_shape)}")
    full = [1] * (len(norm_shape) - len(shape)) + shape
    if all(d == 1 for d in full):
        return "0"
    if list(full) == list(norm_shape):
        return "d"
    for a, b in zip(full, norm_shape):
        if a != 1 and a != b and isinstance(a, int) and isinstance(b, int):
            raise fail(node, f"input {what} of shape {_fmt(v.shape)} cannot be broadcast to the "
                       f"normalized shape {_fmt(norm_shape)}")
    raise OrtNotImplemented(f"{node.describe()}: input {what} of shape {_fmt(v.shape)} partially "
                            f"broadcast over {_fmt(norm_shape)} is not supported")


class _RowNorm(OpSpec):
    template = "normalization.c.j2"
    rms = False

    def rows(self, node):
        """(R, D, scale index, bias index). An index is ('d',): per element of the row, ('0',):
        one value, ('row_mod', K): value r % K per row r, ('group_ch', G, Cg, S): channel
        (r % G) * Cg + d / S (GroupNormalization-21)."""
        raise NotImplementedError

    def epsilon(self, node) -> float:
        return float(node.attr("epsilon", 1e-5))

    def params(self, node):
        x, y = node.inputs[0], node.outputs[0]
        R, Dn, sidx, bidx = self.rows(node)
        ct = x.etype.cc
        mean_out = len(node.outputs) > 1 and node.outputs[1] is not None
        inv_out = len(node.outputs) > 2 and node.outputs[2] is not None
        return {"R": R, "D": Dn, "sidx": sidx, "bidx": bidx, "rms": self.rms, "unroll": UNROLL,
                "eps": c_float(self.epsilon(node), ct), "sqrt": "sqrtf" if ct == "float" else "sqrt",
                "mean_out": mean_out, "inv_out": inv_out, "work": product(x.shape),
                "has_bias": bidx is not None}

    def inplace(self, node):
        return [(0, 0)]


@register
class LayerNormalization(_RowNorm):
    op_type = "LayerNormalization"
    since = 17

    def _axis(self, node):
        x = node.inputs[0]
        return norm_axis(node, int(node.attr("axis", -1)), x.rank)

    def infer(self, node):
        x, s, b = node.inputs[0], node.inputs[1], node.input(2)
        check_float(node, x.etype)
        for v, n in ((s, "Scale"), (b, "B")):
            if v is not None and v.etype != x.etype:
                raise fail(node, f"input {n} has element type {v.etype.name}, X has {x.etype.name}")
        if x.rank == 0:
            raise fail(node, "input X must have rank >= 1")
        self.rows(node)
        axis = self._axis(node)
        st = _stash(node, x)
        red = tuple(x.shape[:axis]) + (1,) * (x.rank - axis)
        return [(x.etype, x.shape), (st, red), (st, red)]

    def rows(self, node):
        x = node.inputs[0]
        axis = self._axis(node)
        ns = x.shape[axis:]
        sidx = _param_index(node, node.inputs[1], "Scale", ns)
        b = node.input(2)
        bidx = _param_index(node, b, "B", ns) if b is not None else None
        return product(x.shape[:axis]), product(ns), (sidx,), (bidx,) if bidx else None


@register
class RMSNormalization(LayerNormalization):
    op_type = "RMSNormalization"
    since = 23
    rms = True

    def infer(self, node):
        return super().infer(node)[:1]


@register
class InstanceNormalization(_RowNorm):
    op_type = "InstanceNormalization"

    def infer(self, node):
        x, s, b = node.inputs[0], node.input(1), node.input(2)
        check_float(node, x.etype)
        if s is None or b is None:
            raise fail(node, "InstanceNormalization needs inputs input, scale and B")
        if x.rank < 3:
            raise fail(node, f"input must be N x C x D1 x ..., got shape {_fmt(x.shape)}")
        for v, n in ((s, "scale"), (b, "B")):
            if v.etype != x.etype:
                raise fail(node, f"input {n} has element type {v.etype.name}, input has {x.etype.name}")
            if v.rank != 1 or (isinstance(v.shape[0], int) and isinstance(x.shape[1], int)
                               and v.shape[0] != x.shape[1]):
                raise fail(node, f"input {n} has shape {_fmt(v.shape)}, expected ({dim_repr(x.shape[1])},)")
        return [(x.etype, x.shape)]

    def rows(self, node):
        x = node.inputs[0]
        C = x.shape[1]
        return x.shape[0] * C, product(x.shape[2:]), ("row_mod", C), ("row_mod", C)


@register
class GroupNormalization(_RowNorm):
    """Opset 18: scale and bias have one value per group; opset 21: one per channel."""
    op_type = "GroupNormalization"
    since = 18

    def _groups(self, node):
        x = node.inputs[0]
        G = node.attr("num_groups")
        if G is None:
            raise fail(node, "required attribute num_groups is missing")
        G = int(G)
        C = x.shape[1]
        if not isinstance(C, int):
            raise OrtNotImplemented(f"{node.describe()}: the channel dimension must be static")
        if G < 1 or C % G:
            raise fail(node, f"num_groups={G} must be >= 1 and divide the channel count {C}")
        return G, C

    def infer(self, node):
        x = node.inputs[0]
        check_float(node, x.etype)
        if x.rank < 2:
            raise fail(node, f"input X must be N x C x ..., got shape {_fmt(x.shape)}")
        G, C = self._groups(node)
        want = C if node.opset >= 21 else G
        for i, n in ((1, "scale"), (2, "bias")):
            v = node.input(i)
            if v is None:
                raise fail(node, f"input {n} is required")
            if v.etype != x.etype:
                raise fail(node, f"input {n} has element type {v.etype.name}, X has {x.etype.name}")
            if tuple(v.shape) != (want,):
                raise fail(node, f"input {n} has shape {_fmt(v.shape)}, expected ({want},) at opset "
                           f"{node.opset} (num_groups={G}, channels={C})")
        return [(x.etype, x.shape)]

    def rows(self, node):
        x = node.inputs[0]
        G, C = self._groups(node)
        S = product(x.shape[2:])
        if node.opset >= 21:
            idx = ("group_ch", G, C // G, S)
        else:
            idx = ("row_mod", G)
        return x.shape[0] * G, (C // G) * S, idx, idx


@register
class MeanVarianceNormalization(OpSpec):
    op_type = "MeanVarianceNormalization"
    since = 9
    template = "mvn.c.j2"

    def _split(self, node):
        x = node.inputs[0]
        axes = attr_ints(node, "axes") or [0, 2, 3]
        axes = sorted({norm_axis(node, a, x.rank, "axes") for a in axes})
        strides = []
        acc = 1
        for d in reversed(x.shape):
            strides.append(acc)
            acc = acc * d
        strides = strides[::-1]
        kept = [(x.shape[k], strides[k]) for k in range(x.rank) if k not in axes]
        red = [(x.shape[k], strides[k]) for k in axes]
        return kept, red

    def infer(self, node):
        x = node.inputs[0]
        check_float(node, x.etype)
        self._split(node)
        return [(x.etype, x.shape)]

    def params(self, node):
        kept, red = self._split(node)
        ct = node.inputs[0].etype.cc
        return {"kept": kept, "red": red, "K": product([d for d, _ in kept]),
                "RN": product([d for d, _ in red]), "sqrt": "sqrtf" if ct == "float" else "sqrt",
                "eps": c_float(1e-9, ct), "work": product(node.inputs[0].shape)}


@register
class LpNormalization(OpSpec):
    """y = x / ||x||_p along axis (p = 1 or 2); a zero norm gives 0."""
    op_type = "LpNormalization"
    template = "lpnorm.c.j2"

    def infer(self, node):
        x = node.inputs[0]
        check_float(node, x.etype)
        if x.rank == 0:
            raise fail(node, "input must have rank >= 1")
        norm_axis(node, int(node.attr("axis", -1)), x.rank)
        if int(node.attr("p", 2)) not in (1, 2):
            raise fail(node, f"attribute p={node.attr('p')} must be 1 or 2")
        return [(x.etype, x.shape)]

    def params(self, node):
        x = node.inputs[0]
        axis = norm_axis(node, int(node.attr("axis", -1)), x.rank)
        ct = x.etype.cc
        return {"outer": product(x.shape[:axis]), "d": x.shape[axis], "inner": product(x.shape[axis + 1:]),
                "p": int(node.attr("p", 2)), "sqrt": "sqrtf" if ct == "float" else "sqrt",
                "fabs": "fabsf" if ct == "float" else "fabs", "work": product(x.shape)}

    def inplace(self, node):
        return []


@register
class LRN(OpSpec):
    """Across-channel local response normalization:
    y = x / (bias + alpha / size * sum of x^2 over channels [c - (size-1)//2, c + ceil((size-1)/2)])^beta."""
    op_type = "LRN"
    template = "lrn.c.j2"

    def infer(self, node):
        x = node.inputs[0]
        check_float(node, x.etype)
        if x.rank < 3:
            raise fail(node, f"input must be N x C x D1 x ..., got shape {_fmt(x.shape)}")
        size = node.attr("size")
        if size is None or int(size) < 1:
            raise fail(node, f"attribute size={size} must be given and >= 1")
        return [(x.etype, x.shape)]

    def params(self, node):
        x = node.inputs[0]
        ct = x.etype.cc
        size = int(node.attr("size"))
        alpha, beta, bias = (float(node.attr(k, d)) for k, d in (("alpha", 1e-4), ("beta", 0.75), ("bias", 1.0)))
        return {"N": x.shape[0], "C": x.shape[1], "S": product(x.shape[2:]),
                "lo": (size - 1) // 2, "hi": -(-(size - 1) // 2), "pow": "powf" if ct == "float" else "pow",
                "alpha": c_float(alpha / size, ct), "beta": c_float(beta, ct), "bias": c_float(bias, ct),
                "work": product(x.shape) * size}
