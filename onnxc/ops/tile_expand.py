"""Pure data movement as strided copies: Expand, Tile, DepthToSpace, SpaceToDepth.

Each op is described in Python as loops ``y[ybase + sum i_k*ys_k] = x[xbase + sum i_k*xs_k]``
(``strided_copy``); size-1 dims are dropped and contiguous runs merged, so most copies become
rows of memcpy. Slice, Split and Pad (slice_pad.py) reuse the same template. Elements are
moved in their storage type, so every element type (float16, bfloat16, bool...) is supported.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from .. import dtypes, dynamic
from ..ir import Value
from ..symbolic import Dim, Expr, dim_repr, floordiv, product
from .common import attr_enum, attr_int, broadcast, const_input, contiguous_strides, data_input, fail
from .registry import OpSpec, register

MAX_ELEMS = 1 << 40     # static output sizes beyond this are a clear error, not an allocation


def strided_copy(dims: Sequence[Dim], xs: Sequence[Dim], ys: Sequence[Dim], *, src: int = 0, dst: int = 0,
                 xbase: Dim = 0, ybase: Dim = 0) -> dict:
    """One copy entry for strided.c.j2, with static 1-dims dropped and adjacent dims merged
    where both sides are contiguous across them."""
    keep = [k for k, d in enumerate(dims) if not (isinstance(d, int) and d == 1)]
    md: list[Dim] = []
    mx: list[Dim] = []
    my: list[Dim] = []
    for k in keep:
        d, a, b = dims[k], xs[k], ys[k]
        if md and _same(mx[-1], a * d) and _same(my[-1], b * d):
            md[-1] = md[-1] * d
            mx[-1], my[-1] = a, b
        else:
            md.append(d)
            mx.append(a)
            my.append(b)
    rows = bool(md) and _same(mx[-1], 1) and _same(my[-1], 1)
    return {"src": src, "dst": dst, "dims": md, "xs": mx, "ys": my, "xbase": xbase, "ybase": ybase,
            "rows": rows, "work": product(dims)}


def _same(a: Dim, b: Dim) -> bool:
    return a == b and type(a) is type(b)


def c_literal(value, et: dtypes.ElemType) -> str:
    """A C constant of storage type et.c holding numpy value ``value`` converted to et."""
    v = np.asarray(value).astype(et.np).reshape(())
    if et.name in ("float16", "bfloat16"):
        return f"(uint16_t){int(v.view(np.uint16))}u"
    if et.name == "bool":
        return "1" if bool(v) else "0"
    if et.is_float:
        f = float(v)
        if math.isnan(f):
            return f"({et.c})NAN"
        if math.isinf(f):
            return f"({et.c})({'-' if f < 0 else ''}INFINITY)"
        return f"({et.c}){f!r}"
    i = int(v)
    if et.name == "uint64":
        return f"UINT64_C({i})"
    if i == -(1 << 63):
        return "INT64_MIN"
    return f"({et.c})INT64_C({i})"


def check_size(node, shape: Sequence[Dim], what: str = "output"):
    n = product(shape)
    if isinstance(n, int) and n > MAX_ELEMS:
        raise fail(node, f"{what} would have {n} elements; that is too large")


def movement_params(copies: list[dict], fill: dict | None = None, checks=()) -> dict:
    """checks: (a, b) dim pairs that must be equal at run time (else ONNXC_ERR_SHAPE)."""
    return {"copies": copies, "fill": fill, "checks": list(checks)}


class _Move(OpSpec):
    template = "strided.c.j2"


def _shape_input(node, i: int, what: str) -> list[int]:
    arr = const_input(node, i, what)
    if arr is None:
        raise fail(node, f"input {i} ({what}) is missing")
    if arr.ndim != 1:
        raise fail(node, f"input {i} ({what}) must be 1-D, got {arr.ndim}-D")
    return [int(v) for v in arr.tolist()]


def _shape_value(node, i: int, what: str, length: int | None = None) -> Value:
    """A 1-D int64 shape-like input the caller passes (its values resolved before the run)."""
    v = node.input(i)
    if v.rank != 1 or v.etype != dtypes.INT64:
        raise fail(node, f"input {i} ({what}) must be a 1-D int64 tensor")
    if length is not None and v.shape[0] != length:
        raise fail(node, f"input {i} ({what}) has {v.shape[0]} values, expected {length}")
    return v


@register
class Expand(_Move):
    op_type = "Expand"
    since = 8

    def infer(self, node):
        x = node.inputs[0]
        arr = data_input(node, 1, "shape", dims=True)
        if isinstance(arr, Value):
            return [(x.etype, self._from_data(node, _shape_value(node, 1, "shape")))]
        if arr.ndim != 1:
            raise fail(node, f"input 1 (shape) must be 1-D, got {arr.ndim}-D")
        # ints, or symbolic dims from shape arithmetic (known_values.known_dims)
        shape = [d if isinstance(d, Expr) else int(d) for d in arr.tolist()]
        if any(isinstance(d, int) and d < 0 for d in shape):
            raise fail(node, f"input 1 (shape) {shape} has a negative dimension")
        out = broadcast(node, [x.shape, shape])
        check_size(node, out)
        return [(x.etype, out)]

    def _from_data(self, node, v: Value) -> tuple:
        """Target shape from the caller's data: a target dim over an input dim of 1 (or none) is
        a new dim; over a static dim d it must be 1 or d (checked before the run); over a
        symbolic dim e the output dim is new and a run-time flag (e != 1) scales e's stride."""
        x = node.inputs[0]
        n = v.shape[0]
        r = max(n, x.rank)
        xshape = [None] * (r - x.rank) + list(x.shape)
        kinds = []
        for j in range(n):
            xd = xshape[r - n + j]
            kinds.append("new" if xd is None or xd == 1 else "fix" if isinstance(xd, int) else "sym")
        if not kinds:
            node.dyn_params = {"flags": {}}
            return tuple(x.shape)
        n_dims = sum(k != "fix" for k in kinds)
        n_flags = sum(k == "sym" for k in kinds)
        syms = dynamic.resolved(node, n_dims, "expand.c.j2", [v],
                                {"n": n, "kinds": kinds, "xdims": xshape[r - n:], "lead": xshape[:r - n],
                                 "new_idx": [j for j, k in enumerate(kinds) if k != "fix"],
                                 "sym_idx": [j for j, k in enumerate(kinds) if k == "sym"]},
                                values=max(n_flags, 1))
        dims, flags = iter(syms[:n_dims]), iter(syms[n_dims:])
        out = list(xshape[:r - n])
        sym_flags = {}
        for j, kind in enumerate(kinds):
            k = r - n + j
            if kind == "fix":
                out.append(xshape[k])
            else:
                out.append(next(dims))
                if kind == "sym":
                    sym_flags[k] = next(flags)
        node.dyn_params = {"flags": sym_flags}
        return tuple(out)

    def params(self, node):
        x, y = node.inputs[0], node.outputs[0]
        r = y.rank
        xshape = [1] * (r - x.rank) + list(x.shape)
        xstr = [0] * (r - x.rank) + contiguous_strides(x.shape)
        xs = [0 if (isinstance(xd, int) and xd == 1) else s for xd, s in zip(xshape, xstr)]
        dyn = getattr(node, "dyn_params", None)
        if dyn is not None:   # the target came from data: onnxc_resolve checked every dim
            xs = [s * dyn["flags"][k] if k in dyn["flags"] else s for k, s in enumerate(xs)]
            return movement_params([strided_copy(y.shape, xs, contiguous_strides(y.shape))])
        # a symbolic input dim broadcast to a static one must equal it at run time
        checks = [(xd, yd) for xd, yd in zip(xshape, y.shape) if isinstance(xd, Expr) and not _same(xd, yd)]
        return movement_params([strided_copy(y.shape, xs, contiguous_strides(y.shape))], checks=checks)


@register
class Tile(_Move):
    op_type = "Tile"
    since = 6

    def _repeats(self, node) -> list[Dim]:
        x = node.inputs[0]
        dyn = getattr(node, "dyn_params", None)
        if dyn is not None:
            return dyn["reps"]
        arr = data_input(node, 1, "repeats")
        if isinstance(arr, Value):
            v = _shape_value(node, 1, "repeats", x.rank)
            reps = dynamic.resolved(node, x.rank, "tile.c.j2", [v], {"xshape": list(x.shape)}) if x.rank else []
            node.dyn_params = {"reps": reps}
            return reps
        reps = _shape_input(node, 1, "repeats")
        if len(reps) != x.rank:
            raise fail(node, f"input 1 (repeats) has {len(reps)} values for an input of rank {x.rank}")
        if any(r < 0 for r in reps):
            raise fail(node, f"input 1 (repeats) {reps} has a negative value")
        return reps

    def infer(self, node):
        x = node.inputs[0]
        out = [d * r for d, r in zip(x.shape, self._repeats(node))]
        check_size(node, out)
        return [(x.etype, tuple(out))]

    def params(self, node):
        x, y = node.inputs[0], node.outputs[0]
        reps = self._repeats(node)
        xstr, ystr = contiguous_strides(x.shape), contiguous_strides(y.shape)
        dims, xs, ys = [], [], []
        for d, r, a, b in zip(x.shape, reps, xstr, ystr):
            dims += [r, d]          # repeat index outside, element index inside
            xs += [0, a]
            ys += [d * b, b]
        return movement_params([strided_copy(dims, xs, ys)])


def _blocksize(node) -> int:
    b = attr_int(node, "blocksize")
    if not 1 <= b <= 1 << 16:
        raise fail(node, f"attribute blocksize={b} is out of range [1, 65536]")
    return b


@register
class DepthToSpace(_Move):
    op_type = "DepthToSpace"

    def _check(self, node):
        x = node.inputs[0]
        if x.rank != 4:
            raise fail(node, f"input must be 4-D (N, C, H, W), got rank {x.rank}")
        b = _blocksize(node)
        c = x.shape[1]
        if not isinstance(c, int):
            raise fail(node, "the channel dim must be static")
        if c % (b * b):
            raise fail(node, f"channels {c} are not divisible by blocksize^2 = {b * b}")
        mode = attr_enum(node, "mode", ("DCR", "CRD")) if node.opset >= 11 else "DCR"
        return b, mode

    def infer(self, node):
        x = node.inputs[0]
        b, _ = self._check(node)
        n, c, h, w = x.shape
        return [(x.etype, (n, c // (b * b), h * b, w * b))]

    def params(self, node):
        x = node.inputs[0]
        b, mode = self._check(node)
        n, c, h, w = x.shape
        c2 = c // (b * b)
        hw = h * w
        # output viewed as (N, C', H, b1, W, b2)
        if mode == "DCR":   # input viewed as (N, b1, b2, C', H, W)
            xs = [c * hw, hw, w, b * c2 * hw, 1, c2 * hw]
        else:               # CRD: input viewed as (N, C', b1, b2, H, W)
            xs = [c * hw, b * b * hw, w, b * hw, 1, hw]
        dims = [n, c2, h, b, w, b]
        return movement_params([strided_copy(dims, xs, contiguous_strides(dims))])


@register
class SpaceToDepth(_Move):
    op_type = "SpaceToDepth"

    def _check(self, node):
        x = node.inputs[0]
        if x.rank != 4:
            raise fail(node, f"input must be 4-D (N, C, H, W), got rank {x.rank}")
        b = _blocksize(node)
        for k in (2, 3):
            d = x.shape[k]
            if not isinstance(d, int):
                raise fail(node, f"dim {k} must be static to split it into blocks")
            if d % b:
                raise fail(node, f"dim {k} = {d} is not divisible by blocksize {b}")
        return b

    def infer(self, node):
        x = node.inputs[0]
        b = self._check(node)
        n, c, h, w = x.shape
        return [(x.etype, (n, c * b * b, h // b, w // b))]

    def params(self, node):
        x = node.inputs[0]
        b = self._check(node)
        n, c, h, w = x.shape
        mode = attr_enum(node, "mode", ("DCR", "CRD")) if node.opset >= 28 else "DCR"
        # input viewed as (N, C, H', b1, W', b2)
        if mode == "DCR":   # output viewed as (N, b1, b2, C, H', W')
            dims = [n, b, b, c, h // b, w // b]
            xs = [c * h * w, w, 1, h * w, b * w, b]
        else:               # CRD: output viewed as (N, C, b1, b2, H', W')
            dims = [n, c, b, b, h // b, w // b]
            xs = [c * h * w, h * w, w, 1, b * w, b]
        return movement_params([strided_copy(dims, xs, contiguous_strides(dims))])
