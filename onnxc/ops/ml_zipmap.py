"""ZipMap: a [N, C] float tensor whose rows the session hands out as dicts {label: probability}.

The output Value carries ``zipmap`` (key type and keys), which the library metadata records; the
session turns each row into a dict after the call, exactly as onnxruntime returns
seq(map(int64|string, tensor(float))). onnxruntime's maps are std::maps: keys ascending (strings
by UTF-8 bytes), so the keys are recorded sorted and C writes the columns in that order (a copy
when the labels are already sorted, else a column gather).
"""
from __future__ import annotations

from .. import dtypes
from ..errors import NotImplemented as OrtNotImplemented
from .common import fail
from ..symbolic import product
from .ml_common import ML, Labels, c_array
from .registry import OpSpec, register


@register
class ZipMap(OpSpec):
    op_type = "ZipMap"
    domain = ML
    template = "ml_zipmap.c.j2"

    def infer(self, node):
        x, y = node.inputs[0], node.outputs[0]
        if x.etype != dtypes.FLOAT:
            raise fail(node, f"input must be float, got {x.etype.name}")
        if x.rank not in (1, 2):
            raise fail(node, f"input must be 1-D or 2-D, got rank {x.rank}")
        labels = Labels(node, "classlabels_int64s", "classlabels_strings")
        c = x.shape[-1]
        if isinstance(c, int) and c != labels.n:
            raise fail(node, f"{labels.n} class labels for {c} columns")
        if y is not None:
            if y.consumers:
                raise OrtNotImplemented(f"{node.describe()}: a ZipMap output read by another node "
                                        "(maps inside the graph) is not supported")
            key = "string" if labels.is_str else "int64"
            keys = list(labels.strs) if labels.is_str else [int(k) for k in labels.ints]
            y.zipmap = {"key_type": key, "keys": [keys[j] for j in _order(labels)],
                        "type": f"seq(map({key},tensor(float)))"}
        shape = (1, x.shape[0]) if x.rank == 1 else x.shape
        return [(dtypes.FLOAT, shape)]

    def params(self, node):
        x = node.inputs[0]
        labels = Labels(node, "classlabels_int64s", "classlabels_strings")
        order = _order(labels)
        return {"rows": product(x.shape[:-1]) if x.rank == 2 else 1, "c": labels.n,
                "perm": None if order == sorted(order) else c_array(order, "int32_t")}


def _order(labels: Labels) -> list[int]:
    """Columns in ascending key order (stable: a repeated label's later column wins, as in the map)."""
    if labels.is_str:
        return sorted(range(labels.n), key=lambda j: labels.strs[j].encode("utf-8", "surrogatepass"))
    return sorted(range(labels.n), key=lambda j: int(labels.ints[j]))
