"""Einsum: the equation is parsed and checked here; the kernel is one loop nest.

Every label gets a size and, per input, a stride (the sum of the strides of the axes carrying
it, so a repeated label walks a diagonal); '...' expands to one label per broadcast dim (stride
0 where an input's dim is 1). Output elements run in parallel; the summed labels are nested
loops inside, accumulated in the compute type (float for float16/bfloat16). Implicit mode
(no '->'): the output is the ellipsis dims then the labels seen once, in alphabetical order.
"""
from __future__ import annotations

import string

from .. import dtypes
from ..errors import NotImplemented as OrtNotImplemented
from ..symbolic import Dim, dim_repr, product
from .common import contiguous_strides, fail
from .registry import OpSpec, register

D = dtypes.BY_NAME
TYPES = tuple(D[n] for n in ("float", "double", "float16", "bfloat16", "int32", "int64", "uint32",
                             "uint64", "int8", "int16", "uint8", "uint16"))
LETTERS = set(string.ascii_letters)


def _terms(node, eq: str):
    eq = eq.replace(" ", "")
    if "->" in eq:
        lhs, rhs = eq.split("->", 1)
        if "->" in rhs:
            raise fail(node, f"equation {eq!r} has more than one '->'")
    else:
        lhs, rhs = eq, None
    ins = lhs.split(",")
    for t in ins + ([rhs] if rhs is not None else []):
        body = t.replace("...", "", 1)
        if "." in body or any(c not in LETTERS for c in body):
            raise fail(node, f"equation {eq!r}: term {t!r} must be letters with at most one '...'")
    return ins, rhs


def parse(node) -> dict:
    """Labels, their sizes, per-input strides, output labels."""
    eq = node.attr("equation")
    if not isinstance(eq, str) or not eq:
        raise fail(node, "required attribute equation is missing")
    ins, rhs = _terms(node, eq)
    xs = [v for v in node.inputs]
    if len(ins) != len(xs) or any(v is None for v in xs):
        raise fail(node, f"equation {eq!r} has {len(ins)} operands but the node has {len(xs)} inputs")
    # ellipsis rank: the largest over inputs
    ell = 0
    for t, v in zip(ins, xs):
        n = len(t.replace("...", ""))
        if ("..." in t and v.rank < n) or ("..." not in t and v.rank != n):
            raise fail(node, f"equation {eq!r}: term {t!r} does not fit input of rank {v.rank}")
        if "..." in t:
            ell = max(ell, v.rank - n)
    ell_labels = [f"@{k}" for k in range(ell)]   # broadcast dims, leftmost first
    sizes: dict[str, Dim] = {}
    strides: list[dict[str, Dim]] = []
    counts: dict[str, int] = {}
    for t, v in zip(ins, xs):
        labels: list[str] = []
        for part_i, part in enumerate(t.split("...")):
            if part_i == 1:
                n_ell = v.rank - len(t.replace("...", ""))
                labels += ell_labels[ell - n_ell:]
            labels += list(part)
        st = contiguous_strides(v.shape)
        mine: dict[str, Dim] = {}
        for lab, d, s in zip(labels, v.shape, st):
            if lab.startswith("@") and d == 1:
                sizes.setdefault(lab, 1)
                mine.setdefault(lab, 0)
                continue
            if lab in sizes and sizes[lab] != 1 and sizes[lab] != d:
                if isinstance(sizes[lab], int) and isinstance(d, int):
                    raise fail(node, f"equation {eq!r}: label {lab.replace('@', '...')} has sizes "
                               f"{dim_repr(sizes[lab])} and {dim_repr(d)}")
            if lab not in sizes or sizes[lab] == 1:
                sizes[lab] = d
            mine[lab] = mine.get(lab, 0) + s
        for lab in set(labels):
            if not lab.startswith("@"):
                counts[lab] = counts.get(lab, 0) + labels.count(lab)
        strides.append(mine)
    if rhs is None:
        out = ell_labels + sorted(c for c in counts if counts[c] == 1)
    else:
        if "..." not in rhs and ell and any(sizes[lab] != 1 for lab in ell_labels):
            raise fail(node, f"equation {eq!r}: the output must keep '...' (broadcast dims)")
        parts = rhs.split("...")
        out = list(parts[0]) + (ell_labels + list(parts[1]) if len(parts) > 1 else [])
        for c in out:
            if c not in sizes:
                raise fail(node, f"equation {eq!r}: output label {c!r} is not in any input")
        if len(set(out)) != len(out):
            raise fail(node, f"equation {eq!r}: output label repeated")
    summed = [lab for lab in sizes if lab not in out]
    return {"sizes": sizes, "strides": strides, "out": out, "summed": summed}


@register
class Einsum(OpSpec):
    op_type = "Einsum"
    since = 12
    template = "einsum.c.j2"

    def infer(self, node):
        if not node.inputs:
            raise fail(node, "Einsum needs at least one input")
        et = node.inputs[0].etype
        if any(v is not None and v.etype != et for v in node.inputs):
            raise fail(node, "inputs have mismatched element types")
        if et not in TYPES:
            raise OrtNotImplemented(f"{node.describe()}: element type {et.name} is not supported")
        p = parse(node)
        shape = tuple(p["sizes"][lab] for lab in p["out"])
        return [(et, shape)]

    def params(self, node):
        et = node.inputs[0].etype
        p = parse(node)
        out_shape = [p["sizes"][lab] for lab in p["out"]]
        summed = [(p["sizes"][lab], [st.get(lab, 0) for st in p["strides"]]) for lab in p["summed"]]
        outer = [(p["sizes"][lab], [st.get(lab, 0) for st in p["strides"]]) for lab in p["out"]]
        return {"outer": outer[::-1], "summed": summed, "numel": product(out_shape),
                "work": product(out_shape) * product([d for d, _ in summed]),
                "n_in": len(node.inputs), "acc": "uint64_t" if not et.is_float else et.cc}
