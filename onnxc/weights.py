"""Constant data layout: every initializer a node or output reads, 64-byte aligned, in one blob."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .ir import Graph

ALIGN = 64


@dataclass
class WeightBlob:
    offsets: dict[int, int]     # value id -> byte offset
    data: bytes


def layout(graph: Graph) -> WeightBlob:
    used = {v.id: v for n in graph.nodes for v in n.inputs if v is not None and v.const is not None}
    used.update({v.id: v for v in graph.outputs + graph.overridable if v.const is not None})
    offsets, parts, pos = {}, [], 0
    for vid in sorted(used):
        arr = np.ascontiguousarray(used[vid].const)
        pad = -pos % ALIGN
        parts.append(b"\0" * pad)
        pos += pad
        offsets[vid] = pos
        raw = arr.tobytes()
        parts.append(raw)
        pos += len(raw)
    return WeightBlob(offsets, b"".join(parts))
