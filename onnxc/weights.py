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
    """Initializers are stored once each. A node may mark inputs it never reads at run time
    (attribute "_unread", e.g. weights replaced by their compile-time packed copy): those are
    left out of the blob when nothing else reads them, and point at offset 0 (never read)."""
    used, unread = {}, {}
    for n in graph.nodes:
        skip = n.attrs.get("_unread", ())
        for i, v in enumerate(n.inputs):
            if v is not None and v.const is not None:
                (unread if i in skip else used)[v.id] = v
    used.update({v.id: v for v in graph.outputs + graph.overridable if v.const is not None})
    offsets, parts, pos = {vid: 0 for vid in unread if vid not in used}, [], 0
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
