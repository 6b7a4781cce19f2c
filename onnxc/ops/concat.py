"""Concat: each input contributes a contiguous block of prod(shape[axis:]) elements to every
one of the prod(shape[:axis]) output rows; the template copies those blocks. With one output row
the planner may instead have each input's producer write its block in place (slices): then the
node copies nothing."""
from __future__ import annotations

from ..symbolic import Dim, Expr, dim_repr, product
from .common import fail, norm_axis, same_etype
from .registry import OpSpec, register


def _static_zero(d: Dim) -> bool:
    return isinstance(d, int) and d == 0


@register
class Concat(OpSpec):
    op_type = "Concat"
    template = "concat.c.j2"

    def _axis(self, node) -> int:
        ins = [v for v in node.inputs if v is not None]
        if not ins:
            raise fail(node, "Concat needs at least one input")
        rank = ins[0].rank
        if rank == 0:
            raise fail(node, "cannot concatenate scalars (rank 0 inputs)")
        axis = node.attr("axis")
        if axis is None:
            if node.opset >= 4:
                raise fail(node, "required attribute axis is missing")
            axis = 1   # opset 1 default
        return norm_axis(node, int(axis), rank)

    def infer(self, node):
        ins = [v for v in node.inputs if v is not None]
        et = same_etype(node, ins)
        axis = self._axis(node)
        rank = ins[0].rank
        out: list[Dim] = list(ins[0].shape)
        for i, v in enumerate(ins[1:], 1):
            if v.rank != rank:
                raise fail(node, f"input {i} has rank {v.rank}, input 0 has rank {rank}")
            for k in range(rank):
                if k == axis:
                    continue
                a, b = out[k], v.shape[k]
                if isinstance(a, int) and isinstance(b, int) and a != b:
                    raise fail(node, f"input {i} has dim {k} = {b}, input 0 has {a} (only the axis "
                               f"{axis} dim may differ)")
                if isinstance(a, Expr) and isinstance(b, int):
                    out[k] = b
        out[axis] = sum((v.shape[axis] for v in ins[1:]), ins[0].shape[axis])
        for k, d in enumerate(out):
            if isinstance(d, int) and d < 0:
                raise fail(node, f"output dim {k} would be {dim_repr(d)}")
        return [(et, tuple(out))]

    def slices(self, node):
        """One output row (all dims before the axis 1): each input is a contiguous run of the
        output. Only byte sizes known now, for numbers (strings are pointers the kernel copies)."""
        y = node.outputs[0]
        if y is None or y.etype.name == "string" or any(v is None for v in node.inputs):
            return ()
        if product(y.shape[:self._axis(node)]) != 1:
            return ()
        offsets, at = [], 0
        for v in node.inputs:
            n = product(v.shape)
            if not isinstance(n, int):
                return ()
            offsets.append(at)
            at += n * v.etype.itemsize
        return tuple(offsets)

    def params(self, node):
        y = node.outputs[0]
        axis = self._axis(node)
        outer = product(y.shape[:axis])
        parts, offset = [], 0
        for i, v in enumerate(node.inputs):
            if v is None:
                continue
            block = product([v.shape[axis], *y.shape[axis + 1:]])
            if not _static_zero(block):
                parts.append({"input": i, "block": block, "offset": offset})
            offset = offset + block
        return {"outer": outer, "row": offset, "parts": parts, "work": product(y.shape)}
