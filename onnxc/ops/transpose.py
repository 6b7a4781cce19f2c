"""Transpose. The permutation is simplified in Python first: size-1 dims are dropped and dims
that stay adjacent are merged, so NCHW->NHWC becomes a batched 2-D transpose. The template
then copies contiguous runs when the innermost dim is unmoved, and otherwise walks tiles of
the two innermost dims (input's and output's) so both sides stay in cache."""
from __future__ import annotations

from ..symbolic import Dim, product
from .common import attr_ints, contiguous_strides, fail
from .registry import OpSpec, register

TILE = 32


def simplify(shape: list[Dim], perm: list[int]) -> tuple[list[Dim], list[int]]:
    """Equivalent (shape, perm) with static 1-dims removed and adjacent runs merged."""
    keep = [k for k, d in enumerate(shape) if not (isinstance(d, int) and d == 1)]
    remap = {k: i for i, k in enumerate(keep)}
    shape = [shape[k] for k in keep]
    perm = [remap[p] for p in perm if p in remap]
    # merge runs i, i+1 that appear consecutively in perm
    groups: list[list[int]] = []
    for p in perm:
        if groups and groups[-1][-1] + 1 == p:
            groups[-1].append(p)
        else:
            groups.append([p])
    order = sorted(range(len(groups)), key=lambda g: groups[g][0])   # groups in input order
    new_shape = [product(shape[k] for k in groups[g]) for g in order]
    pos = {g: i for i, g in enumerate(order)}
    return new_shape, [pos[g] for g in range(len(groups))]


@register
class Transpose(OpSpec):
    op_type = "Transpose"
    template = "transpose.c.j2"

    def _perm(self, node) -> list[int]:
        x = node.inputs[0]
        perm = attr_ints(node, "perm")
        if perm is None or (len(perm) == 0 and x.rank > 0):
            return list(range(x.rank))[::-1]
        if sorted(perm) != list(range(x.rank)):
            raise fail(node, f"attribute perm={perm} is not a permutation of 0..{x.rank - 1}")
        return perm

    def infer(self, node):
        x = node.inputs[0]
        perm = self._perm(node)
        return [(x.etype, tuple(x.shape[p] for p in perm))]

    def params(self, node):
        x = node.inputs[0]
        shape, perm = simplify(list(x.shape), self._perm(node))
        n = len(perm)
        if n <= 1:   # nothing moves
            return {"mode": "copy"}
        in_strides = contiguous_strides(shape)
        dims = [shape[p] for p in perm]                    # output dims
        istr = [in_strides[p] for p in perm]               # input stride of each output dim
        ostr = contiguous_strides(dims)
        if perm[-1] == n - 1:                              # innermost run moves as a block
            return {"mode": "rows", "dims": dims, "istr": istr, "ostr": ostr, "outer": list(range(n - 1)),
                    "work": product(dims)}
        j = perm.index(n - 1)                              # output dim that is input-contiguous
        outer = [k for k in range(n) if k not in (j, n - 1)]
        return {"mode": "tiled", "dims": dims, "istr": istr, "ostr": ostr, "j": j, "last": n - 1,
                "outer": outer, "tile": TILE, "work": product(dims)}
