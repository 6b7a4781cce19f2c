"""NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (opsets 12, 13, 22).

Input (N, C, d1..dk), target (N, d1..dk) int32/int64, optional weight (C). The kernel sees
(N, C, D) with D = prod(d1..dk). Each element's loss is -w[t] * x[n, t, d] (SCE: of the
log-softmax over C, computed stably as x - max - log(sum exp(x - max))); targets equal to
ignore_index get weight 0 (a negative ignore_index too). 'mean' divides the weighted sum by the
sum of applied weights (the target count when there is no weight). A target outside [0, C) that
is not ignore_index makes the run fail with ONNXC_ERR_INDEX, checked before any output is written.
"""
from __future__ import annotations

from .. import dtypes
from ..symbolic import product
from .common import attr_enum, fail, schema_types
from .registry import OpSpec, register

REDUCTIONS = ("none", "sum", "mean")
LANES = 64    # SCE: consecutive d handled together when D > 1
UNROLL = 16   # SCE: partial max/sum accumulators along a contiguous row (D == 1)


class _Loss(OpSpec):
    softmax = False

    def _check(self, node):
        x, t, w = node.inputs[0], node.input(1), node.input(2)
        if t is None:
            raise fail(node, "input 1 (target) is missing")
        et = schema_types(node)[0]
        if x.rank < 2:
            raise fail(node, f"input 0 (scores) must have rank >= 2 (N, C, ...), got rank {x.rank}")
        if t.rank != x.rank - 1:
            raise fail(node, f"input 1 (target) must have rank {x.rank - 1}, got {t.rank}")
        for k, (dx, dt) in enumerate(zip((x.shape[0],) + tuple(x.shape[2:]), t.shape)):
            if isinstance(dx, int) and isinstance(dt, int) and dx != dt:
                raise fail(node, f"input 1 (target) dim {k} is {dt}, scores imply {dx}")
        if w is not None:
            if w.rank != 1:
                raise fail(node, f"input 2 (weight) must have rank 1, got {w.rank}")
            if isinstance(w.shape[0], int) and isinstance(x.shape[1], int) and w.shape[0] != x.shape[1]:
                raise fail(node, f"input 2 (weight) has {w.shape[0]} entries, C is {x.shape[1]}")
        red = attr_enum(node, "reduction", REDUCTIONS)
        return et, red

    def infer(self, node):
        et, red = self._check(node)
        x, t = node.inputs[0], node.inputs[1]
        out = [(et, () if red != "none" else tuple(t.shape))]
        if len(node.outputs) > 1:
            if not self.softmax:
                raise fail(node, "has more than one output")
            out.append((et, tuple(x.shape)))
        return out

    def params(self, node):
        et, red = self._check(node)
        x, t, w = node.inputs[0], node.inputs[1], node.input(2)
        ii = node.attr("ignore_index")
        # an ignore_index outside int64 can never match a target: same as none
        ii = int(ii) if ii is not None and -2**63 <= int(ii) < 2**63 else None
        # symbolic dims shared by target and scores must agree at run time
        checks = [(dt, dx) for dx, dt in zip((x.shape[0],) + tuple(x.shape[2:]), t.shape) if not (dx == dt)]
        if w is not None and not (w.shape[0] == x.shape[1]):
            checks.append((w.shape[0], x.shape[1]))
        f = "f" if et.cc == "float" else ""
        ignore_c = None if ii is None else ("(-INT64_MAX - 1)" if ii == -2**63 else f"INT64_C({ii})")
        return {"n": x.shape[0], "ignore_c": ignore_c, "softmax": self.softmax, "c": x.shape[1], "d": product(x.shape[2:]), "reduction": red,
                "ignore": ii, "has_weight": w is not None, "checks": checks,
                "log_prob": len(node.outputs) > 1 and node.outputs[1] is not None,
                "exp": "exp" + f, "lanes": LANES, "unroll": UNROLL, "log": "log" + f, "work": product(x.shape)}


@register
class NegativeLogLikelihoodLoss(_Loss):
    op_type = "NegativeLogLikelihoodLoss"
    since = 12
    template = "loss_nll.c.j2"


@register
class SoftmaxCrossEntropyLoss(_Loss):
    op_type = "SoftmaxCrossEntropyLoss"
    since = 12
    template = "loss_sce.c.j2"   # includes loss_nll.c.j2: one kernel, p.softmax picks the input
    softmax = True
