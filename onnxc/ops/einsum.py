"""Einsum: the equation is parsed and checked here; the kernel is one loop nest.

Every label gets a size and, per input, a stride (the sum of the strides of the axes carrying
it, so a repeated label walks a diagonal); '...' expands to one label per broadcast dim (stride
0 where an input's dim is 1). Output elements run in parallel; the summed labels are nested
loops inside, accumulated in the compute type (float for float16/bfloat16). Implicit mode
(no '->'): the output is the ellipsis dims then the labels seen once, in alphabetical order.
Two float/double operands whose labels split into batch, M, N and K groups that each merge
into one strided dim (a batched matmul in any transposition) run as GEMMs instead.
"""
from __future__ import annotations

import string

from .. import dtypes
from ..errors import NotImplemented as OrtNotImplemented
from ..symbolic import Dim, dim_repr, product
from .common import contiguous_strides, fail
from .gemm import sgemm_work_bytes
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
    headers = ("onnxc_gemm.h",)

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
        return {"gemm": gemm_plan(node, p), "outer": outer[::-1], "summed": summed, "numel": product(out_shape),
                "work": product(out_shape) * product([d for d, _ in summed]),
                "n_in": len(node.inputs), "acc": "uint64_t" if not et.is_float else et.cc}

    def scratch(self, node):
        g = gemm_plan(node, parse(node))
        if g is None or g["kind"] != "s":
            return 0
        return sgemm_work_bytes(g["M"], g["N"], g["K"])


def _merge(labels, st, sizes):
    """(size, inner stride, outer stride) of labels merged into one dim, or None."""
    if not labels:
        return 1, 1, 1
    for a, b in zip(labels, labels[1:]):
        if st.get(a, 0) != st.get(b, 0) * sizes[b]:
            return None
    n = product([sizes[x] for x in labels])
    return n, st.get(labels[-1], 0), None


def _operand(inner, outer):
    """(trans, ld) for a row-major GEMM operand whose 'columns' are `inner`, 'rows' `outer`;
    each is (size, stride); None when neither orientation fits."""
    (ni, si), (no, so) = inner, outer
    if ni == 1 or si == 1:
        return 0, (so if no > 1 else max(ni, 1))
    if no == 1 or so == 1:
        return 1, (si if ni > 1 else max(no, 1))
    return None


def gemm_plan(node, p):
    """Batched GEMM parameters when the contraction is a matmul, else None."""
    xs = node.inputs
    if len(xs) != 2 or xs[0].etype not in (D["float"], D["double"]):
        return None
    sizes, (sa, sb), out = p["sizes"], p["strides"], p["out"]
    if not all(isinstance(d, int) for d in sizes.values()):
        return None
    live = [x for x in sizes if sizes[x] != 1]
    sy = dict(zip(out, contiguous_strides([sizes[x] for x in out])))
    inA = {x for x in live if sa.get(x, 0)}
    inB = {x for x in live if sb.get(x, 0)}
    batch = [x for x in out if x in live and x in inA and x in inB]
    Ms = [x for x in out if x in inA and x not in inB]
    Ns = [x for x in out if x in inB and x not in inA]
    Ks = sorted((x for x in live if x in inA and x in inB and x not in out), key=lambda x: -sa[x])
    if any(x not in out and not (x in inA and x in inB) for x in live):
        return None     # a label summed out of one operand only
    if any(x in out and x not in inA and x not in inB for x in live):
        return None
    for swap in (False, True):
        A, B, sA, sB, M, N = (xs[0], xs[1], sa, sb, Ms, Ns) if not swap else (xs[1], xs[0], sb, sa, Ns, Ms)
        gm, gn = _merge(M, sy, sizes), _merge(N, sy, sizes)
        am, ak, bk, bn = _merge(M, sA, sizes), _merge(Ks, sA, sizes), _merge(Ks, sB, sizes), _merge(N, sB, sizes)
        if None in (gm, gn, am, ak, bk, bn):
            continue
        if gn[1] != 1 and gn[0] != 1:
            continue
        ldc = gm[1] if gm[0] > 1 else max(gn[0], 1)
        opa = _operand((ak[0], ak[1]), (am[0], am[1]))
        opb = _operand((bn[0], bn[1]), (bk[0], bk[1]))
        if opa is None or opb is None:
            continue
        return {"M": gm[0], "N": gn[0], "K": ak[0], "ta": opa[0], "lda": opa[1], "tb": opb[0], "ldb": opb[1],
                "ldc": ldc, "a": 1 if swap else 0, "b": 0 if swap else 1,
                "batch": [(sizes[x], sA.get(x, 0), sB.get(x, 0), sy[x]) for x in batch][::-1],
                "nbatch": product([sizes[x] for x in batch]),
                "kind": "s" if xs[0].etype.name == "float" else "d"}
    return None
