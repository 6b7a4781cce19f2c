"""Data-movement ops that only relabel a tensor's shape: Reshape, Flatten, Squeeze, Unsqueeze,
Identity. They are views: the planner aliases output 0 to input 0; when it cannot (e.g. a graph
input returned as a graph output) the template copies the bytes.

Shapes are computed in Python with symbolic dims; where validity depends on run-time dims
(a symbolic dim squeezed, or a -1 that must divide exactly), the template checks the element
counts and the run fails cleanly instead of reading out of bounds.
"""
from __future__ import annotations

from typing import Sequence

from .. import dynamic
from ..ir import Value
from ..symbolic import Dim, Expr, dim_repr, dmax, exact_div, floordiv, product
from .common import attr_ints, const_input, data_input, fail, norm_axis
from .registry import OpSpec, register


def _shape_str(shape: Sequence[Dim]) -> str:
    return "(" + ", ".join(dim_repr(d) for d in shape) + ")"


def _cancel(num: list[Dim], den: list[Dim]) -> tuple[list[Dim], list[Dim]]:
    """Drop dims common to both lists (as a multiset), so that a symbolic batch divides out."""
    num, rest = list(num), []
    for d in den:
        for i, n in enumerate(num):
            if n == d and type(n) is type(d):
                del num[i]
                break
        else:
            rest.append(d)
    return num, rest


def _quotient(node, num: list[Dim], den: list[Dim]) -> Dim:
    """numel(num) / numel(den) for Reshape's -1, kept symbolic when it must be."""
    num, den = _cancel(num, den)
    n, d = product(num), product(den)
    if isinstance(n, int) and isinstance(d, int):
        if d == 0:
            raise fail(node, "shape has -1 together with a zero dimension: the -1 is ambiguous")
        if n % d:
            raise fail(node, f"cannot infer -1: {n} elements do not divide by {d}")
        return n // d
    if isinstance(d, int):
        if d == 0:
            raise fail(node, "shape has -1 together with a zero dimension: the -1 is ambiguous")
        return floordiv(n, d)
    q = exact_div(n, d)     # 24*N / (6*N) = 4: exact whenever d is not zero
    if q is not None:
        return q
    return floordiv(n, dmax(d, 1))   # never a division by zero at run time


class _View(OpSpec):
    template = "shape_ops.c.j2"
    view = True

    def params(self, node):
        x, y = node.inputs[0], node.outputs[0]
        # a run-time check is needed only when the element counts are not provably equal
        nx, ny = product(x.shape), product(y.shape)
        return {"check": not (nx == ny and type(nx) is type(ny)), "numel_in": nx, "numel_out": ny}

    def _same(self, node, shape):
        x = node.inputs[0]
        nx, ny = product(x.shape), product(shape)
        if isinstance(nx, int) and isinstance(ny, int) and nx != ny:
            raise fail(node, f"cannot view input of shape {_shape_str(x.shape)} ({nx} elements) as "
                       f"{_shape_str(shape)} ({ny} elements)")
        return [(x.etype, tuple(shape))]


@register
class Identity(_View):
    op_type = "Identity"

    def infer(self, node):
        return [(node.inputs[0].etype, node.inputs[0].shape)]


@register
class Reshape(_View):
    op_type = "Reshape"

    def infer(self, node):
        x = node.inputs[0]
        if node.opset < 5:
            target = attr_ints(node, "shape")
            if target is None:
                raise fail(node, "required attribute shape is missing")
        else:
            if node.input(1) is None:
                raise fail(node, "input 1 (shape) is missing")
            arr = data_input(node, 1, "shape", dims=True)
            if isinstance(arr, Value):
                return self._from_data(node, arr)
            if arr.ndim != 1:
                raise fail(node, f"input 1 (shape) must be 1-D, got {arr.ndim}-D")
            target = [v if isinstance(v, Expr) else int(v) for v in arr.tolist()]
        allowzero = node.opset >= 14 and int(node.attr("allowzero", 0)) == 1
        if sum(v == -1 for v in target) > 1:
            raise fail(node, f"shape {target} has more than one -1")
        if any(isinstance(v, int) and v < -1 for v in target):
            raise fail(node, f"shape {target} has a negative dimension other than -1")
        if allowzero and 0 in target and -1 in target:
            raise fail(node, f"shape {target} has both 0 and -1 with allowzero=1")
        out: list[Dim | None] = []
        for i, v in enumerate(target):
            if v == 0 and not allowzero:
                if i >= x.rank:
                    raise fail(node, f"shape[{i}] = 0 copies input dim {i}, but the input has rank "
                               f"{x.rank}")
                out.append(x.shape[i])
            elif v == -1:
                out.append(None)
            else:
                out.append(v)
        if None in out:
            k = out.index(None)
            out[k] = _quotient(node, list(x.shape), [d for d in out if d is not None])
        return self._same(node, out)


    def _from_data(self, node, shape_input):
        """Target shape the caller passes: dims resolved from its data before the run."""
        x = node.inputs[0]
        if shape_input.rank != 1 or shape_input.etype.name != "int64":
            raise fail(node, "input 1 (shape) must be a 1-D int64 tensor")
        n = shape_input.shape[0]
        allowzero = node.opset >= 14 and int(node.attr("allowzero", 0)) == 1
        dims = dynamic.resolved(node, n, "reshape.c.j2", [shape_input],
                                {"n": n, "allowzero": allowzero, "in_rank": x.rank,
                                 "in_shape": list(x.shape), "numel": product(x.shape)})
        return [(x.etype, tuple(dims))]


@register
class Flatten(_View):
    op_type = "Flatten"

    def infer(self, node):
        x = node.inputs[0]
        axis = int(node.attr("axis", 1))
        if not -x.rank <= axis <= x.rank:
            raise fail(node, f"axis={axis} is out of range [{-x.rank}, {x.rank}]")
        axis = axis + x.rank if axis < 0 else axis
        return self._same(node, [product(x.shape[:axis]), product(x.shape[axis:])])


def _axes(node, rank: int, what_rank: str) -> list[int] | Value | None:
    """Squeeze/Unsqueeze axes: attribute before opset 13, an input from 13 (a Value when the
    caller passes it: the output dims are then resolved before the run)."""
    if node.opset < 13:
        axes = attr_ints(node, "axes")
    else:
        arr = data_input(node, 1, "axes") if node.input(1) is not None else None
        if isinstance(arr, Value):
            return arr
        axes = None if arr is None else [int(v) for v in arr.reshape(-1).tolist()]
    if axes is None:
        return None
    norm = [norm_axis(node, a, rank, f"axes value {a} ({what_rank})") for a in axes]
    if len(set(norm)) != len(norm):
        raise fail(node, f"axes {axes} name a dimension more than once")
    return sorted(norm)


def _dyn_axes(node, axes: Value, template: str, out_rank: int) -> list[Dim]:
    """Squeeze/Unsqueeze axes from the caller: every output dim is resolved before the run."""
    from .slice_pad import check_before_run
    x = node.inputs[0]
    if axes.etype.name != "int64" or axes.rank > 1:
        raise fail(node, "input 1 (axes) must be a 1-D int64 tensor")
    if out_rank < 0:
        raise fail(node, f"axes has {axes.shape[0]} values, more than the input rank {x.rank}")
    check_before_run(node, x.shape)
    return dynamic.resolved(node, out_rank, template, [axes],
                            {"n": product(axes.shape), "rank": x.rank, "dims": list(x.shape)})


@register
class Squeeze(_View):
    op_type = "Squeeze"

    def infer(self, node):
        x = node.inputs[0]
        axes = _axes(node, x.rank, "input rank")
        if isinstance(axes, Value):
            return self._same(node, _dyn_axes(node, axes, "squeeze.c.j2", x.rank - axes.shape[0]))
        if axes is None:
            # symbolic dims are kept: a rank that changes with the batch cannot be compiled
            axes = [k for k, d in enumerate(x.shape) if d == 1 and isinstance(d, int)]
        for a in axes:
            d = x.shape[a]
            if isinstance(d, int) and d != 1:
                raise fail(node, f"cannot squeeze axis {a}: its size is {d}, not 1")
        return self._same(node, [d for k, d in enumerate(x.shape) if k not in axes])


@register
class Unsqueeze(_View):
    op_type = "Unsqueeze"

    def infer(self, node):
        x = node.inputs[0]
        if node.opset >= 13 and node.input(1) is None:
            raise fail(node, "input 1 (axes) is missing")
        if node.opset < 13 and node.attr("axes") is None:
            raise fail(node, "required attribute axes is missing")
        if node.opset >= 13 and isinstance(data_input(node, 1, "axes"), Value):
            v = node.input(1)
            return self._same(node, _dyn_axes(node, v, "unsqueeze.c.j2", x.rank + product(v.shape)))
        out_rank = x.rank + len(attr_ints(node, "axes") if node.opset < 13 else
                                const_input(node, 1, "axes").reshape(-1))
        axes = _axes(node, out_rank, "output rank")
        out: list[Dim] = []
        it = iter(x.shape)
        for k in range(out_rank):
            out.append(1 if k in axes else next(it))
        return self._same(node, out)

