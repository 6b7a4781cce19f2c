"""Recent ai.onnx operators: SwiGLU (28) and TensorScatter (24).

SwiGLU: Y = A * sigmoid(alpha * A) * B, A and B of one shape (no broadcasting), in double.
TensorScatter: a KV-cache write; the output is past_cache with, for every index prefix before
`axis` (batch first), update's sequence rows written at write_indices[batch] + s (modulo
max_sequence_length in circular mode). A linear write outside the cache fails the run with
ONNXC_ERR_INDEX instead of touching other memory.
"""
from __future__ import annotations

from ..symbolic import product
from .common import attr_enum, fail, norm_axis
from .registry import OpSpec, register

FLOATS = ("float", "double", "float16", "bfloat16")


def _differ(a, b) -> bool:
    return isinstance(a, int) and isinstance(b, int) and a != b


@register
class SwiGLU(OpSpec):
    op_type = "SwiGLU"
    since = 28
    template = "swiglu.c.j2"

    def infer(self, node):
        a, b = node.inputs[0], node.input(1)
        if b is None:
            raise fail(node, "input 1 (B) is missing")
        if a.etype.name not in FLOATS or b.etype != a.etype:
            raise fail(node, f"inputs A ({a.etype.name}) and B ({b.etype.name}) must be one float type")
        if len(a.shape) != len(b.shape) or any(_differ(x, y) for x, y in zip(a.shape, b.shape)):
            raise fail(node, f"inputs A {tuple(a.shape)} and B {tuple(b.shape)} must have identical shapes "
                             "(SwiGLU does not broadcast)")
        return [(a.etype, tuple(a.shape))]

    def params(self, node):
        a, b = node.inputs[0], node.inputs[1]
        checks = [(x, y) for x, y in zip(a.shape, b.shape) if not (isinstance(x, int) and isinstance(y, int))]
        return {"alpha": repr(float(node.attr("alpha", 1.0))), "checks": checks}

    def inplace(self, node):
        return [(0, 0), (0, 1)]


@register
class TensorScatter(OpSpec):
    op_type = "TensorScatter"
    since = 24
    template = "tensor_scatter.c.j2"

    def infer(self, node):
        past, upd = node.inputs[0], node.input(1)
        if upd is None:
            raise fail(node, "input 1 (update) is missing")
        if upd.etype != past.etype:
            raise fail(node, f"update ({upd.etype.name}) must have past_cache's type ({past.etype.name})")
        if len(past.shape) != len(upd.shape) or len(past.shape) < 2:
            raise fail(node, f"past_cache {tuple(past.shape)} and update {tuple(upd.shape)} must have one "
                             "rank >= 2")
        axis = norm_axis(node, int(node.attr("axis", -2)), len(past.shape))
        if axis == 0:
            raise fail(node, "attribute axis must not be the batch axis 0")
        for i, (p, u) in enumerate(zip(past.shape, upd.shape)):
            if (_differ(p, u) and i != axis) or (i == axis and isinstance(p, int) and isinstance(u, int) and u > p):
                raise fail(node, f"update {tuple(upd.shape)} does not fit past_cache {tuple(past.shape)} "
                                 f"in dimension {i} (axis {axis})")
        w = node.input(2)
        if w is not None and (w.etype.name != "int64" or len(w.shape) != 1 or _differ(w.shape[0], past.shape[0])):
            raise fail(node, f"input 2 (write_indices) must be int64 of shape [batch={past.shape[0]}]")
        attr_enum(node, "mode", ("linear", "circular"))
        return [(past.etype, tuple(past.shape))]

    def params(self, node):
        past, upd = node.inputs[0], node.inputs[1]
        axis = norm_axis(node, int(node.attr("axis", -2)), len(past.shape))
        checks = [(p, u) for i, (p, u) in enumerate(zip(past.shape, upd.shape))
                  if i != axis and not (isinstance(p, int) and isinstance(u, int))]
        return {"circular": node.attr("mode") == "circular", "checks": checks,
                "outer": product(past.shape[:axis]), "per_batch": product(past.shape[1:axis]),
                "max_seq": past.shape[axis], "seq": upd.shape[axis], "inner": product(past.shape[axis + 1:])}

    def inplace(self, node):
        return [(0, 0)]
