"""Gather, GatherElements, GatherND. Indices are ordinary run-time tensors (int32 or int64):
negative values wrap once, and every index is checked against its dim in a serial pass before
any copy, so an out-of-range index makes the run fail with ONNXC_ERR_INDEX instead of reading
outside the data (onnxruntime also rejects them). Elements move in their storage type."""
from __future__ import annotations

from .. import dtypes
from ..symbolic import Dim, Expr, product
from .common import attr_int, contiguous_strides, fail, norm_axis
from .registry import OpSpec, register

INDEX_TYPES = ("int32", "int64")


def index_input(node, i: int, what: str = "indices"):
    v = node.input(i)
    if v is None:
        raise fail(node, f"input {i} ({what}) is missing")
    if v.etype.name not in INDEX_TYPES:
        raise fail(node, f"input {i} ({what}) must be int32 or int64, got {v.etype.name}")
    return v


@register
class Gather(OpSpec):
    op_type = "Gather"
    template = "gather.c.j2"

    def _axis(self, node) -> int:
        x = node.inputs[0]
        if x.rank == 0:
            raise fail(node, "input 0 (data) must have rank >= 1")
        return norm_axis(node, int(node.attr("axis", 0)), x.rank)

    def infer(self, node):
        x, ind = node.inputs[0], index_input(node, 1)
        a = self._axis(node)
        return [(x.etype, tuple(x.shape[:a]) + tuple(ind.shape) + tuple(x.shape[a + 1:]))]

    def params(self, node):
        x, ind = node.inputs[0], node.inputs[1]
        a = self._axis(node)
        return {"kind": "gather", "outer": product(x.shape[:a]), "n": product(ind.shape), "dim": x.shape[a],
                "inner": product(x.shape[a + 1:]), "work": product(node.outputs[0].shape)}


@register
class GatherElements(OpSpec):
    op_type = "GatherElements"
    since = 11
    template = "gather.c.j2"

    def _axis(self, node) -> int:
        x, ind = node.inputs[0], index_input(node, 1)
        if x.rank == 0 or ind.rank != x.rank:
            raise fail(node, f"data (rank {x.rank}) and indices (rank {ind.rank}) must have the same "
                       "rank >= 1")
        a = norm_axis(node, int(node.attr("axis", 0)), x.rank)
        for k, (dx, di) in enumerate(zip(x.shape, ind.shape)):
            if k != a and isinstance(dx, int) and isinstance(di, int) and di > dx:
                raise fail(node, f"indices dim {k} = {di} exceeds data dim {dx}")
        return a

    def infer(self, node):
        self._axis(node)
        return [(node.inputs[0].etype, tuple(node.inputs[1].shape))]

    def params(self, node):
        x, ind = node.inputs[0], node.inputs[1]
        a = self._axis(node)
        # indices dims that exceed a symbolic data dim would read out of bounds: checked in C
        checks = [(di, dx) for k, (dx, di) in enumerate(zip(x.shape, ind.shape))
                  if k != a and (isinstance(dx, Expr) or isinstance(di, Expr)) and not (dx == di)]
        return {"kind": "elements", "dims": list(ind.shape), "xstr": contiguous_strides(x.shape),
                "istr": contiguous_strides(ind.shape), "axis": a, "dim": x.shape[a], "le_checks": checks,
                "work": product(ind.shape)}


@register
class GatherND(OpSpec):
    op_type = "GatherND"
    since = 11
    template = "gather.c.j2"

    def _spec(self, node):
        x, ind = node.inputs[0], index_input(node, 1)
        b = int(node.attr("batch_dims", 0)) if node.opset >= 12 else 0
        if ind.rank < 1 or x.rank < 1:
            raise fail(node, "data and indices must have rank >= 1")
        if not 0 <= b < min(x.rank, ind.rank):
            raise fail(node, f"batch_dims={b} must be in [0, min(data rank, indices rank))")
        k = ind.shape[-1]
        if not isinstance(k, int):
            raise fail(node, "the last dim of indices must be static")
        if k < 1 or b + k > x.rank:
            raise fail(node, f"indices tuples have {k} components, data has {x.rank - b} dims after the "
                       "batch dims")
        for t in range(b):
            dx, di = x.shape[t], ind.shape[t]
            if isinstance(dx, int) and isinstance(di, int) and dx != di:
                raise fail(node, f"batch dim {t}: data has {dx}, indices {di}")
        return b, k

    def infer(self, node):
        x, ind = node.inputs[0], node.inputs[1]
        b, k = self._spec(node)
        return [(x.etype, tuple(ind.shape[:-1]) + tuple(x.shape[b + k:]))]

    def params(self, node):
        x, ind = node.inputs[0], node.inputs[1]
        b, k = self._spec(node)
        xstr = contiguous_strides(x.shape)
        checks = [(ind.shape[t], x.shape[t]) for t in range(b)
                  if isinstance(x.shape[t], Expr) or isinstance(ind.shape[t], Expr)]
        return {"kind": "nd", "batch": product(ind.shape[:b]), "n": product(ind.shape[b:-1]), "k": k,
                "kdims": list(x.shape[b:b + k]), "kstr": xstr[b:b + k], "xbatch": product(x.shape[b:]),
                "inner": product(x.shape[b + k:]), "eq_checks": checks, "work": product(node.outputs[0].shape)}
