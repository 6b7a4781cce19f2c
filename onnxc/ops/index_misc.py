"""Index-shaped ops: Trilu, OneHot, CumSum, ArgMax/ArgMin, TopK, Compress, ReverseSequence.

Every decision (axes, loop extents, comparison expressions, NaN rules) is made here; the
templates only lay out loops. Data inputs (Trilu's k, OneHot's values, ReverseSequence's
lengths) are read at run time; inputs that decide a shape (TopK's K, OneHot's depth, Compress's
condition) may be constants or come from the caller's data (resolved before the run by
onnxc_resolve, see onnxc.dynamic); CumSum's axis must be a constant.
"""
from __future__ import annotations

import math

import numpy as np

from .. import dtypes
from ..errors import NotImplemented as OrtNotImplemented
from ..symbolic import Expr, product
from ..known_values import known
from .common import attr_int, const_input, fail, norm_axis
from .gather import index_input
from .registry import OpSpec, register
from .tile_expand import check_size


def _scalar_const(node, i: int, what: str):
    a = const_input(node, i, what)
    if a is None:
        raise fail(node, f"input {i} ({what}) is missing")
    if a.size != 1:
        raise fail(node, f"input {i} ({what}) must hold one value, it has {a.size}")
    return a.reshape(())


def _split(shape, axis):
    return product(shape[:axis]), shape[axis], product(shape[axis + 1:])


@register
class Trilu(OpSpec):
    op_type = "Trilu"
    since = 14
    template = "trilu.c.j2"

    def infer(self, node):
        x = node.inputs[0]
        if x.rank < 2:
            raise fail(node, f"input must have rank >= 2, got {x.rank}")
        k = node.input(1)
        if k is not None and (k.etype != dtypes.INT64 or product(k.shape) != 1):
            raise fail(node, "input 1 (k) must be an int64 scalar")
        return [(x.etype, x.shape)]

    def params(self, node):
        x = node.inputs[0]
        return {"batch": product(x.shape[:-2]), "rows": x.shape[-2], "cols": x.shape[-1],
                "upper": int(node.attr("upper", 1)) != 0, "has_k": node.input(1) is not None}

    def inplace(self, node):
        return [(0, 0)]


@register
class OneHot(OpSpec):
    op_type = "OneHot"
    since = 9
    template = "onehot.c.j2"

    def _spec(self, node):
        ind, vals = node.inputs[0], node.input(2)
        if vals is None or product(vals.shape) != 2 and isinstance(product(vals.shape), int):
            raise fail(node, "input 2 (values) must hold [off_value, on_value]")
        axis = norm_axis(node, int(node.attr("axis", -1)), ind.rank + 1, "axis")
        n = self._depth(node)
        shape = list(ind.shape)
        shape.insert(axis, n)
        check_size(node, shape)
        return axis, n, shape

    def _depth(self, node):
        """numpy.arange(depth) semantics for a float depth (onnxruntime truncates); a depth the
        caller passes is a run-time dim (templates/c/resolve/onehot.c.j2)."""
        from .. import dynamic
        from ..ir import Value
        from .common import data_input
        dyn = getattr(node, "dyn_params", None)
        if dyn is not None:
            return dyn["depth"]
        d = data_input(node, 1, "depth")
        if isinstance(d, Value):
            if product(d.shape) != 1:
                raise fail(node, f"input 1 (depth) must hold one value, it has {product(d.shape)}")
            n, = dynamic.resolved(node, 1, "onehot.c.j2", [d], {"et": d.etype.name,
                                                                 "rest": list(node.inputs[0].shape)})
            node.dyn_params = {"depth": n}
            return n
        depth = float(_scalar_const(node, 1, "depth"))
        if not math.isfinite(depth):
            raise fail(node, f"input 1 (depth) is {depth}")
        n = max(int(math.ceil(depth)), 0)
        if n < 1:
            raise fail(node, f"input 1 (depth) must be >= 1, got {depth}")
        return n

    def infer(self, node):
        _, _, shape = self._spec(node)
        return [(node.inputs[2].etype, tuple(shape))]

    def params(self, node):
        ind = node.inputs[0]
        axis, n, _ = self._spec(node)
        # negative indices wrap by the depth value itself (a float depth too, as onnx.reference)
        wrap = None if getattr(node, "dyn_params", None) else repr(float(_scalar_const(node, 1, "depth")))
        return {"outer": product(ind.shape[:axis]), "depth": n, "inner": product(ind.shape[axis:]),
                "itype": "double" if ind.etype.is_float else "int64_t",
                "load": f"onnxc_ld_{ind.etype.name}", "wrap": wrap}


@register
class CumSum(OpSpec):
    op_type = "CumSum"
    since = 11
    template = "cumsum.c.j2"
    TYPES = ("float", "double", "int32", "int64", "uint32", "uint64", "float16", "bfloat16")

    def _axis(self, node):
        """The axis when it is a constant, else None: it is then read at run time (it does not
        change the output shape)."""
        x, a = node.inputs[0], node.input(1)
        if x.etype.name not in self.TYPES:
            raise OrtNotImplemented(f"{node.describe()}: CumSum of {x.etype.name} is not supported")
        if x.rank == 0:
            raise fail(node, "input 0 must have rank >= 1")
        if a is None or a.etype.name not in ("int32", "int64") or product(a.shape) != 1:
            raise fail(node, "input 1 (axis) must be an int32 or int64 scalar")
        value = known(a)
        if value is None:
            return None
        return norm_axis(node, int(value.reshape(())), x.rank)

    def infer(self, node):
        self._axis(node)
        return [(node.inputs[0].etype, node.inputs[0].shape)]

    def params(self, node):
        x = node.inputs[0]
        axis = self._axis(node)
        flags = {"exclusive": int(node.attr("exclusive", 0)) != 0, "reverse": int(node.attr("reverse", 0)) != 0}
        if axis is None:
            return {"runtime_axis": True, "dims": list(x.shape), **flags}
        outer, n, inner = _split(x.shape, axis)
        return {"runtime_axis": False, "outer": outer, "n": n, "inner": inner, **flags}

    def inplace(self, node):
        return [(0, 0)]


def _better(largest: bool, is_float: bool) -> str:
    """C expression: value a (index ia) ranks before value b (index ib). A total order: NaN
    counts as the largest value (numpy's sort order), ties go to the lower index."""
    cmp = ">" if largest else "<"
    plain = f"(a {cmp} b || (a == b && ia < ib))"
    if not is_float:
        return plain
    if largest:
        return f"(a != a ? (b == b || ia < ib) : (b != b ? 0 : {plain}))"
    return f"(a != a ? (b != b && ia < ib) : (b != b ? 1 : {plain}))"


class _Arg(OpSpec):
    template = "argminmax.c.j2"
    largest = True

    def _axis(self, node):
        x = node.inputs[0]
        if x.rank == 0:
            raise fail(node, "input must have rank >= 1")
        a = norm_axis(node, int(node.attr("axis", 0)), x.rank)
        if isinstance(x.shape[a], int) and x.shape[a] == 0:
            raise fail(node, f"cannot take {self.op_type} over axis {a}: it is empty")
        return a

    def infer(self, node):
        x = node.inputs[0]
        a = self._axis(node)
        shape = list(x.shape)
        if int(node.attr("keepdims", 1)):
            shape[a] = 1
        else:
            del shape[a]
        return [(dtypes.INT64, tuple(shape))]

    def params(self, node):
        x = node.inputs[0]
        outer, n, inner = _split(x.shape, self._axis(node))
        last = node.opset >= 12 and int(node.attr("select_last_index", 0)) != 0
        cmp = ">" if self.largest else "<"
        return {"outer": outer, "n": n, "inner": inner, "last": last, "float": x.etype.is_float,
                "cmp": cmp, "empty_check": isinstance(n, Expr)}


@register
class ArgMax(_Arg):
    op_type = "ArgMax"


@register
class ArgMin(_Arg):
    op_type = "ArgMin"
    largest = False


@register
class TopK(OpSpec):
    op_type = "TopK"
    template = "topk.c.j2"

    def _spec(self, node):
        x = node.inputs[0]
        if x.rank == 0:
            raise fail(node, "input must have rank >= 1")
        a = norm_axis(node, int(node.attr("axis", -1)), x.rank)
        if getattr(node, "dyn_params", None) is not None:
            return node.dyn_params
        if node.opset < 10:
            k = attr_int(node, "k")
        else:
            from .common import data_input
            from .slice_pad import check_before_run
            from .. import dynamic
            from ..ir import Value
            kv = data_input(node, 1, "K")
            if kv is None:
                raise fail(node, "input 1 (K) is missing")
            if isinstance(kv, Value):   # K from the caller: a dim resolved before the run
                if kv.etype != dtypes.INT64 or product(kv.shape) != 1:
                    raise fail(node, "input 1 (K) must be a 1-element int64 tensor")
                check_before_run(node, [x.shape[a]])
                k, = dynamic.resolved(node, 1, "topk.c.j2", [kv], {"dim": x.shape[a]})
                largest = node.opset < 11 or int(node.attr("largest", 1)) != 0
                node.dyn_params = (a, k, largest)
                return node.dyn_params
            if kv.size != 1:
                raise fail(node, f"input 1 (K) must hold one value, it has {kv.size}")
            k = int(kv.reshape(()))
        if k < 0:
            raise fail(node, f"K={k} is negative")
        d = x.shape[a]
        if isinstance(d, int) and k > d:
            raise fail(node, f"K={k} exceeds the axis {a} dim {d}")
        largest = node.opset < 11 or int(node.attr("largest", 1)) != 0
        return a, k, largest

    def infer(self, node):
        x = node.inputs[0]
        a, k, _ = self._spec(node)
        shape = list(x.shape)
        shape[a] = k
        return [(x.etype, tuple(shape)), (dtypes.INT64, tuple(shape))]

    def params(self, node):
        x = node.inputs[0]
        a, k, largest = self._spec(node)
        outer, n, inner = _split(x.shape, a)
        return {"outer": outer, "n": n, "inner": inner, "k": k, "better": _better(largest, x.etype.is_float),
                "check_n": isinstance(n, Expr) and isinstance(k, int), "run": not isinstance(k, int)}


@register
class Compress(OpSpec):
    op_type = "Compress"
    since = 9
    template = "compress.c.j2"

    def _spec(self, node):
        from .common import data_input
        from ..ir import Value
        x = node.inputs[0]
        if getattr(node, "dyn_params", None) is not None:
            return node.dyn_params
        cond = data_input(node, 1, "condition")
        if cond is None or (cond.rank if isinstance(cond, Value) else cond.ndim) != 1:
            raise fail(node, "input 1 (condition) must be a 1-D tensor")
        axis = node.attr("axis")
        if axis is None:
            dim = product(x.shape)
        else:
            axis = norm_axis(node, int(axis), x.rank)
            dim = x.shape[axis]
        if isinstance(cond, Value):
            node.dyn_params = self._from_data(node, cond, axis, dim)
            return node.dyn_params
        sel = [int(i) for i in np.flatnonzero(cond.astype(bool))]
        if not isinstance(dim, int):
            if sel:
                # indices beyond the run-time dim are checked in C
                pass
        elif sel and sel[-1] >= dim:
            raise fail(node, f"condition selects index {sel[-1]}, beyond the dim of size {dim}")
        return axis, sel, dim

    def _from_data(self, node, cond, axis, dim):
        """condition from the caller: the output length (its true count) is resolved before the
        run; the kernel walks the condition."""
        from .. import dynamic
        from .slice_pad import check_before_run
        if cond.etype != dtypes.BOOL:
            raise fail(node, f"input 1 (condition) must be bool, got {cond.etype.name}")
        check_before_run(node, [dim])
        m, = dynamic.resolved(node, 1, "compress.c.j2", [cond], {"dim": dim, "len": cond.shape[0]})
        return axis, m, dim

    def infer(self, node):
        x = node.inputs[0]
        axis, sel, _ = self._spec(node)
        m = sel if isinstance(sel, Expr) else len(sel)
        if axis is None:
            return [(x.etype, (m,))]
        shape = list(x.shape)
        shape[axis] = m
        return [(x.etype, tuple(shape))]

    def params(self, node):
        x = node.inputs[0]
        axis, sel, dim = self._spec(node)
        outer, inner = (1, 1) if axis is None else (product(x.shape[:axis]), product(x.shape[axis + 1:]))
        if isinstance(sel, Expr):
            return {"run": True, "m": sel, "len": node.inputs[1].shape[0], "outer": outer, "dim": dim,
                    "inner": inner}
        return {"sel": sel, "outer": outer, "dim": dim, "inner": inner,
                "check": not isinstance(dim, int) and bool(sel), "run": False}


@register
class ReverseSequence(OpSpec):
    op_type = "ReverseSequence"
    since = 10
    template = "reverse_sequence.c.j2"

    def _axes(self, node):
        x, lens = node.inputs[0], node.input(1)
        if x.rank < 2:
            raise fail(node, f"input must have rank >= 2, got {x.rank}")
        if lens is None or lens.etype != dtypes.INT64 or lens.rank != 1:
            raise fail(node, "input 1 (sequence_lens) must be a 1-D int64 tensor")
        t, b = int(node.attr("time_axis", 0)), int(node.attr("batch_axis", 1))
        if {t, b} != {0, 1}:
            raise fail(node, f"time_axis={t} and batch_axis={b} must be 0 and 1 in some order")
        d = x.shape[b]
        if isinstance(d, int) and isinstance(lens.shape[0], int) and lens.shape[0] != d:
            raise fail(node, f"sequence_lens has {lens.shape[0]} values for a batch of {d}")
        return t, b

    def infer(self, node):
        self._axes(node)
        return [(node.inputs[0].etype, node.inputs[0].shape)]

    def params(self, node):
        x, lens = node.inputs[0], node.inputs[1]
        t, b = self._axes(node)
        inner = product(x.shape[2:])
        # element (time i, batch j) starts at i*ts + j*bs
        ts = inner * (x.shape[1] if t == 0 else 1)
        bs = inner * (x.shape[1] if b == 0 else 1)
        return {"T": x.shape[t], "B": x.shape[b], "ts": ts, "bs": bs, "inner": inner,
                "check": not (lens.shape[0] == x.shape[b]), "nlens": lens.shape[0]}
