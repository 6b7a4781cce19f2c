"""ScatterElements, ScatterND and the old Scatter. The output starts as a copy of data (shared
with it when the planner allows); updates are then applied serially in index order, so
duplicate indices behave as onnx.reference (the last write wins, reductions accumulate).
Every index is range-checked (negative values wrap once); a bad one fails the run with
ONNXC_ERR_INDEX before it can write outside the output."""
from __future__ import annotations

from ..symbolic import Expr, product
from .common import attr_enum, contiguous_strides, fail, norm_axis
from .gather import index_input
from .registry import OpSpec, register


def _reduction(node, nan_propagates: bool) -> str | None:
    """C expression combining the current value a with the update u (compute type)."""
    if node.opset < 16:
        return None
    allowed = ("none", "add", "mul") + (("max", "min") if node.opset >= 18 else ())
    r = attr_enum(node, "reduction", allowed)
    et = node.inputs[0].etype
    if r == "none":
        return None
    if et.name == "bool":
        return {"add": "(a || u)", "mul": "(a && u)", "max": "(a || u)", "min": "(a && u)"}[r]
    if r == "add":
        return "a + u"
    if r == "mul":
        return "a * u"
    cmp = ">" if r == "max" else "<"
    if nan_propagates and et.is_float:      # np.maximum / np.minimum
        return f"((u {cmp} a || u != u) ? u : a)"
    return f"(u {cmp} a ? u : a)"            # Python's max()/min(): the first argument wins ties/NaN


class _Scatter(OpSpec):
    template = "scatter.c.j2"

    def inplace(self, node):
        return [(0, 0)]

    def _check_types(self, node):
        x, u = node.inputs[0], node.input(2)
        if u is None:
            raise fail(node, "input 2 (updates) is missing")
        if u.etype != x.etype:
            raise fail(node, f"updates are {u.etype.name} but data is {x.etype.name}")
        return x, index_input(node, 1), u


@register
class ScatterElements(_Scatter):
    op_type = "ScatterElements"
    since = 11

    def _axis(self, node):
        x, ind, u = self._check_types(node)
        if x.rank == 0 or ind.rank != x.rank:
            raise fail(node, f"data (rank {x.rank}) and indices (rank {ind.rank}) must have the same "
                       "rank >= 1")
        for k, (a, b) in enumerate(zip(ind.shape, u.shape)):
            if isinstance(a, int) and isinstance(b, int) and a != b or ind.rank != u.rank:
                raise fail(node, "indices and updates must have the same shape")
        a = norm_axis(node, int(node.attr("axis", 0)), x.rank)
        for k, (dx, di) in enumerate(zip(x.shape, ind.shape)):
            if k != a and isinstance(dx, int) and isinstance(di, int) and di > dx:
                raise fail(node, f"indices dim {k} = {di} exceeds data dim {dx}")
        return a

    def infer(self, node):
        self._axis(node)
        return [(node.inputs[0].etype, tuple(node.inputs[0].shape))]

    def params(self, node):
        x, ind, u = node.inputs[0], node.inputs[1], node.inputs[2]
        a = self._axis(node)
        checks = [(di, dx) for k, (dx, di) in enumerate(zip(x.shape, ind.shape))
                  if k != a and (isinstance(dx, Expr) or isinstance(di, Expr)) and not (dx == di)]
        eq = [(di, du) for di, du in zip(ind.shape, u.shape) if not (di == du)]
        return {"kind": "elements", "dims": list(ind.shape), "ystr": contiguous_strides(x.shape),
                "axis": a, "dim": x.shape[a], "le_checks": checks, "eq_checks": eq,
                "reduce": _reduction(node, False)}


@register
class Scatter(ScatterElements):
    """Scatter (opsets 9-10): ScatterElements without reduction."""
    op_type = "Scatter"
    since = 9
    until = 10


@register
class ScatterND(_Scatter):
    op_type = "ScatterND"
    since = 11

    def _spec(self, node):
        x, ind, u = self._check_types(node)
        if x.rank < 1 or ind.rank < 1:
            raise fail(node, "data and indices must have rank >= 1")
        k = ind.shape[-1]
        if not isinstance(k, int) or not 1 <= k <= x.rank:
            raise fail(node, f"the last dim of indices must be static and in [1, {x.rank}]")
        want = tuple(ind.shape[:-1]) + tuple(x.shape[k:])
        if len(want) != u.rank or any(isinstance(a, int) and isinstance(b, int) and a != b
                                      for a, b in zip(want, u.shape)):
            raise fail(node, f"updates must have shape indices.shape[:-1] + data.shape[{k}:]")
        return k, want

    def infer(self, node):
        self._spec(node)
        return [(node.inputs[0].etype, tuple(node.inputs[0].shape))]

    def params(self, node):
        x, ind, u = node.inputs[0], node.inputs[1], node.inputs[2]
        k, want = self._spec(node)
        xstr = contiguous_strides(x.shape)
        eq = [(a, b) for a, b in zip(want, u.shape) if not (a == b)]
        return {"kind": "nd", "n": product(ind.shape[:-1]), "k": k, "kdims": list(x.shape[:k]),
                "kstr": xstr[:k], "inner": product(x.shape[k:]), "eq_checks": eq,
                "reduce": _reduction(node, True)}
