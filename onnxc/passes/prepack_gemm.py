"""Compile-time packing of a constant right operand for the SGEMM (GraphOptimizationLevel ALL,
libraries built here only: the layout depends on the register block, as passes/prepack.py).

A float Gemm/FusedGemm with constant B, or MatMul/FusedMatMul with a constant 2-D B, gets op(B)
(K x N) as NR-wide column panels per depth block (onnxc__sgemm_prepack's layout) in the weight
blob; the kernel calls onnxc_sgemm_bpacked, so no call packs the weights (an MLP at batch 32
spent a third of its time repacking them) and threads never wait for each other.

Rows up to the build's `strip_rows` (prepack.gemv_max_rows) keep their faster paths (Gemm: the
strips of passes/prepack.py; MatMul: onnxc_sgemm's small-M kernels, which lose to the panels from
2 rows on AVX2: a 784-512-512 MatMul MLP at 2-8 rows 0.37-0.59x the time through the panels), so a
symbolic row count keeps the plain B beside the panels. The node gets `_panels` = {"index": input
index of the panels, "mr", "nr", "only": plain B unread, "min": the rows above which they are used}.
"""
from __future__ import annotations

import numpy as np

from ..ir import Graph
from .prepack import GEMV_MAX_M, _add_input, _const_float, folded_rows, pack


def _rows(node):
    """(op(A)'s row count as the kernel sees it, op(B) as a K x N constant) or None."""
    a, b = node.inputs[0], node.inputs[1]
    if not _const_float(b) or a.etype.name != "float":
        return None
    w = np.asarray(b.const, np.float32)
    if w.ndim != 2 or 0 in w.shape:
        return None
    if node.op_type in ("Gemm", "FusedGemm"):
        if len(node.inputs) > 5 or a.rank != 2:
            return None
        rows = a.shape[1] if int(node.attr("transA", 0)) else a.shape[0]
        return rows, (w.T if int(node.attr("transB", 0)) else w)
    strips = bool((node.attrs.get("_prepacked") or {}).get("gemv"))
    if len(node.inputs) > (5 if strips else 4) or a.rank < 2:
        return None
    return folded_rows(a), w


def prepack_gemm_panels(graph: Graph, block: tuple[int, int], strip_rows: int = GEMV_MAX_M) -> Graph:
    MR, NR = block
    next_id = max((v.id for v in graph.values), default=-1) + 1
    for node in graph.nodes:
        if node.op_type not in ("Gemm", "FusedGemm", "MatMul", "FusedMatMul") or node.attrs.get("_panels"):
            continue
        found = _rows(node)
        if found is None:
            continue
        rows, kn = found
        static = isinstance(rows, int)
        if static and rows <= strip_rows:
            continue
        gemv = (node.attrs.get("_prepacked") or {}).get("gemv")
        index = 5 if node.op_type in ("Gemm", "FusedGemm") or gemv else 4
        next_id = _add_input(graph, node, index, f"{node.inputs[1].name} (panels)",
                             pack(np.ascontiguousarray(kn.T), NR), next_id)
        # the plain B is still read by the small-row path of a symbolic row count, unless the
        # strips serve those rows
        only = static or bool(gemv)
        if only:
            node.attrs["_unread"] = tuple(sorted(set(node.attrs.get("_unread", ())) | {1}))
        node.attrs["_panels"] = {"index": index, "mr": MR, "nr": NR, "only": only, "min": strip_rows}
    return graph
