"""Dropout (opsets 1..22).

Inference (opsets 7 and 10; is_test=1 before 7; training_mode absent or false from 12) is the
identity plus an all-true mask. Training (is_test=0, or training_mode true at run time with
ratio > 0) keeps element i where u_i >= ratio and scales it by 1 / (1 - ratio); u_i comes from
the counter-based generator of onnxc/ops/random.py (splitmix64 of the seed-derived key and the
element index), so the draws repeat across runs and thread counts. With a ``seed`` attribute
the draws are numpy's instead: u_i is the i-th uniform double of MT19937 seeded as
``np.random.seed(seed)`` (runtime_c/onnxc_mt19937.h), so a seeded model reproduces data made
with numpy (onnx's reference data); that stream is sequential (one thread).
From opset 12 ratio and training_mode are tensors read at run time.
"""
from __future__ import annotations

from .. import dtypes
from .common import fail
from .random import _key
from .registry import OpSpec, register

FLOATS = ("float", "double", "float16", "bfloat16",
          "float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz")


def _numpy_seed(node):
    """The seed attribute as np.random.seed takes it (its low 32 bits), or None."""
    seed = node.attr("seed")
    return None if seed is None else int(seed) & 0xFFFFFFFF


class _Dropout(OpSpec):
    template = "dropout.c.j2"
    headers = ("onnxc_mt19937.h",)

    def inplace(self, node):
        return [(0, 0)]

    def _mask_type(self, node):
        # mask is bool from opset 10, the data type before
        return dtypes.BY_NAME["bool"] if node.opset >= 10 else node.inputs[0].etype

    def infer(self, node):
        x = node.inputs[0]
        if x.etype.name not in FLOATS:
            raise fail(node, f"input 0 (data) of element type {x.etype.name} must be a float type")
        outs = [(x.etype, tuple(x.shape))]
        if len(node.outputs) > 1:
            outs.append((self._mask_type(node), tuple(x.shape)))
        return outs


@register
class DropoutOld(_Dropout):
    """Opsets 1..11: ratio is an attribute; training only through is_test=0 (opsets 1 and 6)."""
    op_type = "Dropout"
    until = 11

    def params(self, node):
        ratio = float(node.attr("ratio", 0.5))
        training = node.opset < 7 and int(node.attr("is_test", 0) or 0) == 0
        if training and not 0.0 <= ratio < 1.0:
            raise fail(node, f"attribute ratio={ratio} must be in [0, 1)")
        return {"mode": "train" if training and ratio > 0 else "identity", "ratio": repr(ratio),
                "key": _key(node), "mt_seed": _numpy_seed(node)}


@register
class Dropout(_Dropout):
    """Opsets 12..22: ratio (default 0.5) and training_mode (default false) are optional inputs."""
    op_type = "Dropout"
    since = 12

    def params(self, node):
        r, t = node.input(1), node.input(2)
        if r is not None and (r.etype.name not in FLOATS or (r.shape is not None and len(r.shape) != 0)):
            raise fail(node, "input 1 (ratio) must be a float scalar")
        if t is not None and (t.etype.name != "bool" or (t.shape is not None and len(t.shape) != 0)):
            raise fail(node, "input 2 (training_mode) must be a bool scalar")
        return {"mode": "identity" if t is None else "runtime", "ratio": "0.5", "key": _key(node),
                "mt_seed": _numpy_seed(node)}
