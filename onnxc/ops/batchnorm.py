"""BatchNormalization: Y = (X - mean) * (scale / sqrt(var + epsilon)) + B.

Statistics are per channel (dim 1 of X). Opsets 1-8 may ask for spatial=0: statistics per
(channel, spatial position), i.e. of shape X.shape[1:] (a per-channel shape (C,) is accepted
too). Training mode is supported as opset 14+ defines it (training_mode=1): the batch's own
mean and (population) variance normalise X, and the optional outputs running_mean/running_var
are input_mean * momentum + batch_mean * (1 - momentum) (same for var). The older training
modes (is_test=0 before opset 7, the statistics outputs of opsets 7-13) are not supported.
float16/bfloat16 are loaded into float (onnxc_ld_<type>) and rounded once on store.
"""
from __future__ import annotations

from .. import dtypes
from ..errors import NotImplemented as OrtNotImplemented
from ..symbolic import dim_repr, product
from .common import fail
from .gemm import c_float, check_type
from .registry import OpSpec, register

D = dtypes.BY_NAME
FLOATS = (D["float"], D["double"], D["float16"], D["bfloat16"])


def _fmt(shape) -> str:
    return "(" + ", ".join(dim_repr(d) for d in shape) + ")"


def _output(node, i: int):
    return node.outputs[i] if i < len(node.outputs) else None


@register
class BatchNormalization(OpSpec):
    op_type = "BatchNormalization"
    template = "batchnorm.c.j2"

    def training(self, node) -> bool:
        return node.opset >= 14 and bool(int(node.attr("training_mode", 0)))

    def _unsupported(self, node) -> str | None:
        if node.opset < 7 and not int(node.attr("is_test", 0)):
            return "is_test=0 (training mode)"
        if not self.training(node) and any(v is not None for v in node.outputs[1:]):
            what = "training_mode=0" if node.opset >= 14 else f"opset {node.opset}"
            return f"the running/saved statistics outputs with {what} (training mode)"
        return None

    def per_element(self, node) -> bool:
        """Statistics indexed by (channel, spatial position) rather than by channel."""
        x = node.inputs[0]
        if node.opset >= 9 or int(node.attr("spatial", 1)):
            return False
        return tuple(node.inputs[1].shape) != (x.shape[1],)

    def infer(self, node):
        x = node.inputs[0]
        why = self._unsupported(node)
        if why is not None:
            raise OrtNotImplemented(f"{node.describe()}: {why} is not supported; onnxc runs "
                                    "BatchNormalization in inference mode, or in opset 14+ training_mode=1")
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
        if len(node.outputs) > 3:
            raise fail(node, f"{len(node.outputs)} outputs; opset {node.opset} defines Y, running_mean, running_var")
        # running_mean / running_var: the type and shape of the input mean / var (T2 in opset 15)
        return [(x.etype, x.shape)] + [(v.etype, v.shape) for v in node.inputs[3:3 + len(node.outputs) - 1]]

    def params(self, node):
        x = node.inputs[0]
        inner = product(x.shape[2:])
        per_elem = self.per_element(node)
        train = self.training(node)
        # inference: arithmetic in X's compute type, as onnx.reference does (its statistics may
        # have other types); training: the batch statistics in double (sums over N x spatial)
        ct = x.etype.cc
        momentum = float(node.attr("momentum", 0.9))
        return {"N": x.shape[0], "C": x.shape[1], "S": inner, "per_elem": per_elem, "ct": ct,
                "eps": c_float(float(node.attr("epsilon", 1e-5)), "double" if train else ct),
                "sqrt": "sqrtf" if ct == "float" else "sqrt", "training": train,
                "momentum": c_float(momentum, "double"), "one_minus": c_float(1.0 - momentum, "double"),
                "has_rmean": train and _output(node, 1) is not None, "has_rvar": train and _output(node, 2) is not None}

    def inplace(self, node):
        return [(0, 0)]
