"""NonMaxSuppression (opset 10, 11): the number of selected boxes is a run-time dim the kernel
assigns (onnxc.dynamic.assigned), planned at num_batches * num_classes * the most boxes a class
can keep (num_boxes, or max_output_boxes_per_class when that is known at compile time).

The scalar inputs are read by the kernel at run time (they may be graph inputs); an absent or
empty one takes onnx's default (max_output_boxes_per_class 0: nothing selected; iou_threshold 0;
no score filter). Order, ties and comparisons follow onnx.reference: score filter s > threshold,
highest score first, equal scores by lower box index, suppression when IoU > iou_threshold,
all in float32. NaN scores (with no score_threshold to drop them) rank after every number.
"""
from __future__ import annotations

from .. import dtypes, dynamic
from ..known_values import known
from ..symbolic import dmin, product
from .common import fail, schema_types
from .registry import OpSpec, register


@register
class NonMaxSuppression(OpSpec):
    op_type = "NonMaxSuppression"
    since = 10
    template = "nms.c.j2"

    def _dims(self, node):
        schema_types(node)
        boxes, scores = node.inputs[0], node.inputs[1]
        if boxes.rank != 3 or scores.rank != 3:
            raise fail(node, f"boxes (rank {boxes.rank}) and scores (rank {scores.rank}) must have rank 3")
        b, n, four = boxes.shape
        sb, c, sn = scores.shape
        if isinstance(four, int) and four != 4:
            raise fail(node, f"boxes' last dim is {four}, expected 4")
        for what, d1, d2 in (("num_batches", b, sb), ("num_boxes", n, sn)):
            if isinstance(d1, int) and isinstance(d2, int) and d1 != d2:
                raise fail(node, f"boxes and scores disagree on {what}: {d1} vs {d2}")
        cpb = int(node.attr("center_point_box", 0))
        if cpb not in (0, 1):
            raise fail(node, f"attribute center_point_box={cpb} must be 0 or 1")
        return b, c, n, cpb

    def _per_class(self, node, n):
        """The most boxes one class can keep, as far as the compile time knows."""
        m = node.input(2)
        if m is None:
            return 0
        value = known(m)
        if value is None:
            return n
        if value.size == 0:
            return 0
        return dmin(n, max(0, int(value.reshape(-1)[0])))

    def infer(self, node):
        b, c, n, _ = self._dims(node)
        per = self._per_class(node, n)
        count = dynamic.assigned(node, b * c * per)
        node.nms_count = count
        return [(dtypes.INT64, (count, 3))]

    def params(self, node):
        b, c, n, cpb = self._dims(node)
        boxes, scores = node.inputs[0], node.inputs[1]
        opt = {}
        for i, name in ((2, "max_out"), (3, "iou"), (4, "score")):
            v = node.input(i)
            opt[name] = None if v is None else product(v.shape)
        return {"count": node.nms_count, "b": b, "c": c, "n": n, "cpb": cpb,
                "per": self._per_class(node, n), "opt": opt,
                "check": [(x, y) for x, y in ((boxes.shape[2], 4), (scores.shape[0], b), (scores.shape[2], n))
                          if not (isinstance(x, int) and isinstance(y, int))]}  # symbolic: checked at run time

    def scratch(self, node):
        b, c, n, _ = self._dims(node)
        return 8 * b * c * (n + 2)   # per class: candidates (heap, then selected), counts
