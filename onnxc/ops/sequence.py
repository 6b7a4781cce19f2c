"""Sequences and optionals: SequenceEmpty/Construct/Insert/At/Erase/Length, SplitToSequence,
ConcatFromSequence, Optional, OptionalHasElement, OptionalGetElement.

A sequence or optional value is one ``onnxc_seq`` header (dtypes.ContainerType; shape ()); the
tensors are items on the run's heap, copied in when they join a sequence and copied out by
SequenceAt, so no later node can write over an item and items are shared between sequences.
A tensor taken out of a sequence has dims known only while running (heap dims, onnxc.dynamic).
"""
from __future__ import annotations

from .. import dtypes, dynamic
from ..dtypes import ContainerType
from ..symbolic import product
from .common import attr_int, fail, norm_axis
from .registry import OpSpec, register

MAXRANK = 8        # ONNXC_SEQ_MAXRANK


def _seq(node, i: int, what: str = "sequence") -> ContainerType:
    v = node.input(i)
    if v is None or not isinstance(v.etype, ContainerType) or v.etype.kind != "sequence":
        raise fail(node, f"input {i} ({what}) must be a sequence, got "
                         f"{'nothing' if v is None else v.etype.ort}")
    return v.etype


def _tensor(node, i: int, what: str):
    v = node.input(i)
    if v is None or isinstance(v.etype, ContainerType):
        raise fail(node, f"input {i} ({what}) must be a tensor")
    if v.rank > MAXRANK:
        raise fail(node, f"input {i} ({what}) has rank {v.rank}; sequence items have at most {MAXRANK}")
    return v


def _index(node, i: int, what: str):
    v = node.input(i)
    if v is None:
        return None
    if v.etype.name not in ("int32", "int64") or product(v.shape) != 1:
        raise fail(node, f"input {i} ({what}) must be one int32/int64 value")
    return v


def _taken_out(node, et: ContainerType):
    """Output dims of a tensor taken from a sequence: its kernel reads them from the item."""
    if et.elem_rank is None:
        raise fail(node, "the rank of the sequence's tensors is not known at compile time "
                         "(declare the element shape of the sequence input)")
    dims = [dynamic.assigned(node, None) for _ in range(et.elem_rank)]
    node.item_dims = dims
    return dims


class _SeqOp(OpSpec):
    template = "sequence.c.j2"
    headers = ("onnxc_seq.h",)
    heap = True

    def params(self, node):
        return {"op": self.op_type}


@register
class SequenceEmpty(_SeqOp):
    op_type = "SequenceEmpty"
    since = 11

    def infer(self, node):
        et = dtypes.from_onnx(attr_int(node, "dtype", 1), f" ({node.describe()}: attribute dtype)", strings=True)
        return [(dtypes.container("sequence", et), ())]


@register
class SequenceConstruct(_SeqOp):
    op_type = "SequenceConstruct"
    since = 11

    def infer(self, node):
        xs = [_tensor(node, i, "tensor") for i in range(len(node.inputs))]
        if not xs or any(x.etype != xs[0].etype for x in xs):
            raise fail(node, "needs one or more tensors of one element type")
        ranks = {x.rank for x in xs}
        return [(dtypes.container("sequence", xs[0].etype, ranks.pop() if len(ranks) == 1 else None), ())]

    def params(self, node):
        return {"op": "SequenceConstruct", "itemsize": node.inputs[0].etype.itemsize}


@register
class SequenceInsert(_SeqOp):
    op_type = "SequenceInsert"
    since = 11

    def infer(self, node):
        et = _seq(node, 0)
        x = _tensor(node, 1, "tensor")
        if x.etype != et.elem:
            raise fail(node, f"cannot insert a {x.etype.ort} into a {et.ort}")
        _index(node, 2, "position")
        # an empty start (SequenceEmpty) has no rank yet; SequenceAt checks the rank at run time
        rank = x.rank if et.elem_rank in (None, x.rank) else None
        return [(dtypes.container("sequence", et.elem, rank), ())]

    def params(self, node):
        return {"op": "SequenceInsert", "itemsize": node.inputs[1].etype.itemsize}


@register
class SequenceAt(_SeqOp):
    op_type = "SequenceAt"
    since = 11

    def infer(self, node):
        et = _seq(node, 0)
        _index(node, 1, "position")
        return [(et.elem, _taken_out(node, et))]

    def params(self, node):
        return {"op": "SequenceAt", "dims": node.item_dims, "itemsize": node.outputs[0].etype.itemsize}


@register
class SequenceErase(_SeqOp):
    op_type = "SequenceErase"
    since = 11

    def infer(self, node):
        et = _seq(node, 0)
        _index(node, 1, "position")
        return [(et, ())]


@register
class SequenceLength(_SeqOp):
    op_type = "SequenceLength"
    since = 11
    heap = False

    def infer(self, node):
        _seq(node, 0)
        return [(dtypes.INT64, ())]


@register
class SplitToSequence(_SeqOp):
    op_type = "SplitToSequence"
    since = 11

    def infer(self, node):
        x = _tensor(node, 0, "input")
        if x.rank == 0:
            raise fail(node, "input 0 must have rank >= 1")
        axis = norm_axis(node, attr_int(node, "axis", 0), x.rank)
        split = node.input(1)
        if split is not None and (split.etype.name not in ("int32", "int64") or len(split.shape) > 1):
            raise fail(node, "input 1 (split) must be an int32/int64 scalar or 1-D tensor")
        keep = attr_int(node, "keepdims", 1) != 0 or split is not None
        node.split_axis, node.split_keep = axis, keep
        return [(dtypes.container("sequence", x.etype, x.rank if keep else x.rank - 1), ())]

    def params(self, node):
        x, split = node.inputs[0], node.input(1)
        a = node.split_axis
        return {"op": "SplitToSequence", "axis": a, "outer": product(x.shape[:a]), "dim": x.shape[a],
                "inner": product(x.shape[a + 1:]), "itemsize": x.etype.itemsize,
                "split": None if split is None else ("scalar" if len(split.shape) == 0 else "list"),
                "keep": node.split_keep}


@register
class ConcatFromSequence(_SeqOp):
    op_type = "ConcatFromSequence"
    since = 11

    def infer(self, node):
        et = _seq(node, 0)
        new_axis = attr_int(node, "new_axis", 0) != 0
        if et.elem_rank is None:
            raise fail(node, "the rank of the sequence's tensors is not known at compile time")
        r = et.elem_rank + (1 if new_axis else 0)
        if r == 0 or r > MAXRANK:
            raise fail(node, f"output rank {r} is not supported")
        axis = attr_int(node, "axis")
        node.concat_axis = norm_axis(node, axis, r)
        node.new_axis = new_axis
        node.item_dims = [dynamic.assigned(node, None) for _ in range(r)]
        return [(et.elem, node.item_dims)]

    def params(self, node):
        return {"op": "ConcatFromSequence", "dims": node.item_dims, "axis": node.concat_axis,
                "new_axis": node.new_axis, "rank": node.inputs[0].etype.elem_rank,
                "itemsize": node.outputs[0].etype.itemsize}


@register
class Optional(_SeqOp):
    op_type = "Optional"
    since = 15

    def infer(self, node):
        x = node.input(0)
        if x is None:
            tp = node.attr("type")
            if tp is None:
                raise fail(node, "with no input, attribute type is required")
            return [(dtypes.container("optional", dtypes.from_type_proto(tp, f" ({node.describe()})")), ())]
        if isinstance(x.etype, ContainerType):
            if x.etype.kind != "sequence":
                raise fail(node, "an optional of an optional is not supported")
            return [(dtypes.container("optional", x.etype, x.etype.elem_rank), ())]
        return [(dtypes.container("optional", x.etype, x.rank), ())]

    def params(self, node):
        x = node.input(0)
        what = "none" if x is None else "sequence" if isinstance(x.etype, ContainerType) else "tensor"
        return {"op": "Optional", "what": what, "itemsize": 0 if x is None else x.etype.itemsize}


@register
class OptionalHasElement(_SeqOp):
    op_type = "OptionalHasElement"
    since = 15
    heap = False

    def infer(self, node):
        return [(dtypes.BOOL, ())]

    def params(self, node):
        x = node.input(0)
        what = "none" if x is None else "container" if isinstance(x.etype, ContainerType) else "tensor"
        return {"op": "OptionalHasElement", "what": what}


@register
class OptionalGetElement(_SeqOp):
    op_type = "OptionalGetElement"
    since = 15

    def infer(self, node):
        x = node.input(0)
        if x is None:
            raise fail(node, "input 0 is required")
        et = x.etype
        if not isinstance(et, ContainerType):
            node.get_what = "tensor"
            return [(et, x.shape)]
        if et.kind == "sequence":
            node.get_what = "header"
            return [(et, ())]
        if isinstance(et.elem, ContainerType):
            node.get_what = "header"
            return [(et.elem, ())]
        node.get_what = "item"
        return [(et.elem, _taken_out(node, et))]

    def params(self, node):
        x = node.inputs[0]
        return {"op": "OptionalGetElement", "what": node.get_what,
                "dims": getattr(node, "item_dims", []), "itemsize": node.outputs[0].etype.itemsize,
                "bytes": product(x.shape) * x.etype.itemsize}
