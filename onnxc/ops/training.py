"""ai.onnx.preview.training optimizers: Momentum, Adagrad, Adam (opset 1).

Inputs are R (learning rate, float scalar), T (iteration count, int64 scalar), then n tensors
of each kind in blocks: X1..Xn, G1..Gn and the state (V for Momentum, H for Adagrad, V then H
for Adam); outputs are the new values in the same block order (X, then the states). The
step-dependent scalars (Momentum's beta at T = 0, Adagrad's decayed rate, Adam's bias
correction) are computed once from R and T at run time; every element is computed in double,
as the spec's formulas (and onnx.reference) are written.
"""
from __future__ import annotations

from .common import attr_enum, fail
from .registry import OpSpec, register

FLOATS = ("float", "double")
DOMAIN = "ai.onnx.preview.training"


class _Optimizer(OpSpec):
    domain = DOMAIN
    template = "training.c.j2"
    blocks = 3           # X, G and the states, in blocks of n inputs

    def _n(self, node):
        k = len(node.inputs) - 2
        if k <= 0 or k % self.blocks:
            raise fail(node, f"takes R, T and {self.blocks} blocks of n tensors; got {len(node.inputs)} inputs")
        n = k // self.blocks
        if len(node.outputs) != (self.blocks - 1) * n:
            raise fail(node, f"has {len(node.outputs)} outputs, expected {(self.blocks - 1) * n}")
        return n

    def infer(self, node):
        n = self._n(node)
        r, t = node.inputs[0], node.inputs[1]
        if r is None or r.etype.name not in FLOATS or len(r.shape) not in (0, 1) or r.shape not in ((), (1,)):
            raise fail(node, "input 0 (R, learning rate) must be a float or double scalar")
        if t is None or t.etype.name != "int64" or r.shape not in ((), (1,)) or t.shape not in ((), (1,)):
            raise fail(node, "input 1 (T, iteration count) must be an int64 scalar")
        outs = []
        for i in range(n):
            group = [node.inputs[2 + b * n + i] for b in range(self.blocks)]
            if any(v is None for v in group):
                raise fail(node, f"tensor group {i}: every input must be given")
            x = group[0]
            for b, v in enumerate(group):
                if v.etype.name not in FLOATS:
                    raise fail(node, f"input {2 + b * n + i} ({v.describe()}) must be float or double")
                if tuple(v.shape) != tuple(x.shape):
                    raise fail(node, f"input {2 + b * n + i} ({v.describe()}) has shape {tuple(v.shape)}, "
                                     f"expected X{i + 1}'s {tuple(x.shape)}")
        for b in [0] + list(range(2, self.blocks)):
            for i in range(n):
                v = node.inputs[2 + b * n + i]
                outs.append((v.etype, tuple(v.shape)))
        return outs

    def params(self, node):
        n = self._n(node)
        groups = [{"x": 2 + i, "g": 2 + n + i, "s1": 2 + 2 * n + i,
                   "s2": 2 + 3 * n + i if self.blocks == 4 else None,
                   "ox": i, "o1": n + i, "o2": 2 * n + i if self.blocks == 4 else None} for i in range(n)]
        return {"kind": self.kind, "groups": groups, **self.coefficients(node)}

    @staticmethod
    def _f(node, name, default):
        return repr(float(node.attr(name, default)))


@register
class Momentum(_Optimizer):
    op_type = "Momentum"
    kind = "momentum"

    def coefficients(self, node):
        for name in ("alpha", "beta", "norm_coefficient"):
            if node.attr(name) is None:
                raise fail(node, f"required attribute {name} is missing")
        return {"nesterov": attr_enum(node, "mode", ("standard", "nesterov")) == "nesterov",
                "alpha": self._f(node, "alpha", 0), "beta": self._f(node, "beta", 0),
                "norm": self._f(node, "norm_coefficient", 0)}


@register
class Adagrad(_Optimizer):
    op_type = "Adagrad"
    kind = "adagrad"

    def coefficients(self, node):
        return {"decay": self._f(node, "decay_factor", 0.0), "epsilon": self._f(node, "epsilon", 1e-6),
                "norm": self._f(node, "norm_coefficient", 0.0)}


@register
class Adam(_Optimizer):
    op_type = "Adam"
    kind = "adam"
    blocks = 4

    def coefficients(self, node):
        return {"alpha": self._f(node, "alpha", 0.9), "beta": self._f(node, "beta", 0.999),
                "epsilon": self._f(node, "epsilon", 1e-6), "norm": self._f(node, "norm_coefficient", 0.0),
                "norm_post": self._f(node, "norm_coefficient_post", 0.0)}
