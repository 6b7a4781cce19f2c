"""Unique (opset 11, 28): its number of distinct elements (or slices) is a run-time dim the kernel
assigns (onnxc.dynamic.assigned), planned at its bound: every element (slice) distinct.

Semantics follow numpy.unique as onnx.reference uses it: a stable sort (first occurrence wins),
NaN sorts after every number; without an axis (or on a 1-D input) all NaNs are one value, with an
axis on rank >= 2 slices holding NaN are never equal (numpy compares slices with ==). -0.0 == 0.0.
Strings compare by UTF-8 bytes (= code points, as Python). Unsorted output orders the values by
first occurrence, also along an axis (onnx.reference takes those slices along axis 0 whatever the
axis, a bug this does not copy).
"""
from __future__ import annotations

from .. import dtypes, dynamic
from ..symbolic import product
from .common import fail, norm_axis, schema_types
from .registry import OpSpec, register


@register
class Unique(OpSpec):
    op_type = "Unique"
    since = 11
    template = "unique.c.j2"

    def _spec(self, node):
        x = node.inputs[0]
        schema_types(node)
        if x.etype.name in ("complex64", "complex128"):
            raise fail(node, f"input of element type {x.etype.name} is not supported")
        axis = node.attr("axis")
        if axis is None:
            return None, 1, product(x.shape), 1
        a = norm_axis(node, int(axis), x.rank)
        return a, product(x.shape[:a]), x.shape[a], product(x.shape[a + 1:])

    def infer(self, node):
        x = node.inputs[0]
        axis, _, d, _ = self._spec(node)
        sorted_ = int(node.attr("sorted", 1))
        if sorted_ not in (0, 1):
            raise fail(node, f"attribute sorted={sorted_} must be 0 or 1")
        u = dynamic.assigned(node, d)    # at most one distinct value per element (slice)
        node.unique_count = u
        if axis is None:
            y = (u,)
        else:
            y = tuple(x.shape[:axis]) + (u,) + tuple(x.shape[axis + 1:])
        return [(x.etype, y), (dtypes.INT64, (u,)), (dtypes.INT64, (d,)), (dtypes.INT64, (u,))]

    def params(self, node):
        x = node.inputs[0]
        axis, outer, d, inner = self._spec(node)
        et = x.etype
        if et is dtypes.STRING:
            kind = "string"
        elif et.is_float:
            kind = "float"
        else:
            kind = "int"
        # slices of a rank >= 2 input are compared with == (NaN never equal, as numpy)
        slices = axis is not None and x.rank >= 2
        return {"count": node.unique_count, "outer": outer, "n": d, "inner": inner, "kind": kind,
                "slices": slices, "sorted": int(node.attr("sorted", 1)) == 1, "carry": self._keys(node)}

    def _keys(self, node):
        """One element per slice: the sort moves copies of the values too (no gathers)."""
        _, outer, _, inner = self._spec(node)
        return outer == 1 and inner == 1

    def scratch(self, node):
        _, _, d, _ = self._spec(node)
        keys = 2 * node.inputs[0].etype.itemsize * d if self._keys(node) else 0
        return 5 * 8 * d + keys  # perm, merge buffer / group of each element, first, count, rank; keys
