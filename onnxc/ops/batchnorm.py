"""BatchNormalization, inference only: Y = (X - mean) * (scale / sqrt(var + epsilon)) + B.

Statistics are per channel (dim 1 of X). Opsets 1-8 may ask for spatial=0: statistics per
(channel, spatial position), i.e. of shape X.shape[1:] (a per-channel shape (C,) is accepted
too). Training (is_test=0 before opset 7, training_mode=1 from opset 14, or any of the
statistics outputs) is not supported.
"""
from __future__ import annotations

from .. import dtypes
from ..errors import NotImplemented as OrtNotImplemented
from ..symbolic import dim_repr, product
from .common import fail
from .gemm import c_float, check_type
from .registry import OpSpec, register

D = dtypes.BY_NAME
FLOATS = (D["float"], D["double"])


def _fmt(shape) -> str:
    return "(" + ", ".join(dim_repr(d) for d in shape) + ")"


@register
class BatchNormalization(OpSpec):
    op_type = "BatchNormalization"
    template = "batchnorm.c.j2"

    def _training(self, node) -> str | None:
        if node.opset < 7 and not int(node.attr("is_test", 0)):
            return "is_test=0 (training mode)"
        if node.opset >= 14 and int(node.attr("training_mode", 0)):
            return "training_mode=1"
        if any(v is not None for v in node.outputs[1:]):
            return "the running/saved statistics outputs (training mode)"
        return None

    def per_element(self, node) -> bool:
        """Statistics indexed by (channel, spatial position) rather than by channel."""
        x = node.inputs[0]
        if node.opset >= 9 or int(node.attr("spatial", 1)):
            return False
        return tuple(node.inputs[1].shape) != (x.shape[1],)

    def infer(self, node):
        x = node.inputs[0]
        why = self._training(node)
        if why is not None:
            raise OrtNotImplemented(f"{node.describe()}: {why} is not supported; onnxc runs "
                                    "BatchNormalization in inference mode only")
        check_type(node, x.etype, FLOATS)
        if x.rank < 2:
            raise fail(node, f"input X must have rank >= 2 (N x C x ...), got shape {_fmt(x.shape)}")
        names = ("scale", "B", "mean", "var")
        if len(node.inputs) != 5 or any(v is None for v in node.inputs):
            raise fail(node, "BatchNormalization needs its 5 inputs X, scale, B, mean, var")
        want = tuple(x.shape[1:]) if self.per_element(node) else (x.shape[1],)
        for v, name in zip(node.inputs[1:], names):
            check_type(node, v.etype, FLOATS)
            if tuple(v.shape) != want:
                raise fail(node, f"input {name} has shape {_fmt(v.shape)}, expected {_fmt(want)}")
        return [(x.etype, x.shape)]

    def params(self, node):
        x = node.inputs[0]
        inner = product(x.shape[2:])
        per_elem = self.per_element(node)
        # arithmetic in X's type, as onnx.reference does (its statistics may have other types)
        return {"N": x.shape[0], "C": x.shape[1], "S": inner, "per_elem": per_elem,
                "eps": c_float(float(node.attr("epsilon", 1e-5)), x.etype.c),
                "sqrt": "sqrtf" if x.etype.c == "float" else "sqrt"}

    def inplace(self, node):
        return [(0, 0)]
