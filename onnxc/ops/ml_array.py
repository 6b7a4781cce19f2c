"""ArrayFeatureExtractor: pick columns (last axis) of X by an int64 index tensor, as onnxruntime:
a 1-D X gives [1, k]; an index outside [0, last dim), or none, fails the run (InvalidArgument)."""
from __future__ import annotations

from .. import dtypes
from ..symbolic import product
from .common import fail
from .ml_common import ML
from .registry import OpSpec, register

TYPES = tuple(dtypes.BY_NAME[n] for n in ("float", "double", "int64", "int32")) + (dtypes.STRING,)


@register
class ArrayFeatureExtractor(OpSpec):
    op_type = "ArrayFeatureExtractor"
    domain = ML
    template = "ml_array_feature_extractor.c.j2"

    def infer(self, node):
        x, ind = node.inputs[0], node.inputs[1]
        if x.etype not in TYPES:
            raise fail(node, f"input X of element type {x.etype.name} is not supported")
        if ind.etype != dtypes.INT64:
            raise fail(node, f"input Y must be int64, got {ind.etype.name}")
        if x.rank == 0:
            raise fail(node, "input X must have rank >= 1")
        k = product(ind.shape)
        shape = (1, k) if x.rank == 1 else tuple(x.shape[:-1]) + (k,)
        return [(x.etype, shape)]

    def params(self, node):
        x, ind = node.inputs[0], node.inputs[1]
        return {"rows": product(x.shape[:-1]), "d": x.shape[-1], "k": product(ind.shape)}
