"""CausalConvWithState (opset 27): stateful causal depthwise 1-D convolution.

  padded  = concat(past_state or zeros (B, C, k-1), input (B, C, L)) along the length
  output  = act(depthwise_conv1d(padded, weight (C, 1, k)) + bias),   act: none | silu | swish
  present = padded[:, :, L:]                                          (the last k-1 positions)

float16/bfloat16 compute in float; with an activation the convolution is rounded to the
storage type first, as onnx.reference (and the op's function body) does. The kernel size k
must be static; batch, channels and length may be symbolic.
"""
from __future__ import annotations

from .. import dtypes
from ..symbolic import dim_repr
from .common import attr_enum, fail
from .gemm import LOWP, check_type
from .registry import OpSpec, register

D = dtypes.BY_NAME
TYPES = (D["float"],) + LOWP
ACTIVATIONS = ("none", "silu", "swish")   # swish: an alias of silu


def _fmt(shape) -> str:
    return "(" + ", ".join(dim_repr(d) for d in shape) + ")"


def _same(a, b) -> bool:
    """Dims that may be equal (symbolic dims are checked when they are ints only)."""
    return not (isinstance(a, int) and isinstance(b, int) and a != b)


@register
class CausalConvWithState(OpSpec):
    op_type = "CausalConvWithState"
    since = 27
    template = "causal_conv.c.j2"

    def geometry(self, node):
        x, w, b, past = node.inputs[0], node.inputs[1], node.input(2), node.input(3)
        if x.rank != 3:
            raise fail(node, f"input must be rank 3 (batch, channels, length), got shape {_fmt(x.shape)}")
        if w.rank != 3:
            raise fail(node, f"input weight must be rank 3 (channels, 1, k), got shape {_fmt(w.shape)}")
        B, C, L = x.shape
        k = w.shape[2]
        if not isinstance(k, int):
            raise fail(node, f"the kernel size (weight dim 2) must be static, got {dim_repr(k)}")
        if k < 1 or not _same(w.shape[0], C) or not _same(w.shape[1], 1):
            raise fail(node, f"input weight has shape {_fmt(w.shape)}, expected ({dim_repr(C)}, 1, k >= 1)")
        if b is not None and (b.rank != 1 or not _same(b.shape[0], C)):
            raise fail(node, f"input bias has shape {_fmt(b.shape)}, expected ({dim_repr(C)},)")
        if past is not None and (past.rank != 3 or not all(_same(p, q) for p, q in zip(past.shape, (B, C, k - 1)))):
            raise fail(node, f"input past_state has shape {_fmt(past.shape)}, expected "
                       f"{_fmt((B, C, k - 1))}")
        return B, C, L, k

    def infer(self, node):
        x = node.inputs[0]
        check_type(node, x.etype, TYPES)
        for i, name in ((1, "weight"), (2, "bias"), (3, "past_state")):
            v = node.input(i)
            if v is not None and v.etype != x.etype:
                raise fail(node, f"input {name} has element type {v.etype.name}, input has {x.etype.name}")
        attr_enum(node, "activation", ACTIVATIONS)
        B, C, L, k = self.geometry(node)
        return [(x.etype, (B, C, L)), (x.etype, (B, C, k - 1))]

    def params(self, node):
        B, C, L, k = self.geometry(node)
        x = node.inputs[0]
        silu = attr_enum(node, "activation", ACTIVATIONS) != "none"
        return {"B": B, "C": C, "L": L, "K": k, "silu": silu, "lowp": x.etype in LOWP,
                "has_bias": node.input(2) is not None, "has_past": node.input(3) is not None,
                "has_present": len(node.outputs) > 1 and node.outputs[1] is not None}
