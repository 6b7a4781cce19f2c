"""Slice, Split and Pad. Bounds are resolved in Python (clamping as onnx specifies) and each
op becomes strided copies (strided.c.j2); Pad's reflect/edge/wrap modes map every output
coordinate back into the input (pad.c.j2). Starts/ends/axes/steps, split sizes and pads/axes the
caller passes are clamped and checked before the run instead (templates/c/resolve/slice.c.j2,
split.c.j2, pad.c.j2): counts and sizes become run-time dims, firsts and steps parameters.

Static dims are resolved exactly. A symbolic dim may be sliced with non-negative starts and
ends (its extent becomes min/max expressions evaluated at run time); anything else on a
symbolic dim is reported as not implemented rather than guessed.
"""
from __future__ import annotations

from .. import dynamic
from ..errors import NotImplemented as OrtNotImplemented
from ..ir import Value
from ..symbolic import Dim, Expr, dmax, dmin, product
from ..known_values import known
from .common import attr_enum, attr_ints, const_input, contiguous_strides, data_input, fail, norm_axis
from .registry import OpSpec, register
from .tile_expand import c_literal, check_size, movement_params, strided_copy

INT64_MAX = (1 << 63) - 1


def _ints_input(node, i: int, what: str) -> list[int] | None:
    if node.input(i) is None:
        return None
    arr = const_input(node, i, what)
    if arr.ndim != 1:
        raise fail(node, f"input {i} ({what}) must be 1-D, got {arr.ndim}-D")
    return [int(v) for v in arr.tolist()]


def int_source(node, i: int, what: str, allow_scalar: bool = False):
    """Input i as a list of ints when known at compile time, the Value when the caller passes it
    (read by onnxc_resolve before the run), None when absent."""
    if node.input(i) is None:
        return None
    arr = data_input(node, i, what)
    if isinstance(arr, Value):
        if arr.etype.name not in ("int32", "int64"):
            raise fail(node, f"input {i} ({what}) must be int32 or int64, got {arr.etype.name}")
        if arr.rank != 1 and not (allow_scalar and arr.rank == 0):
            raise fail(node, f"input {i} ({what}) must be 1-D, got rank {arr.rank}")
        return arr
    if arr.ndim != 1 and not (allow_scalar and arr.ndim == 0):
        raise fail(node, f"input {i} ({what}) must be 1-D, got {arr.ndim}-D")
    return [int(v) for v in arr.reshape(-1).tolist()]


def src_len(src) -> int:
    return len(src) if isinstance(src, list) else (src.shape[0] if src.rank else 1)


def c_int(v: int) -> str:
    return "INT64_MIN" if v == -(1 << 63) else f"INT64_C({v})"


def resolve_sources(sources: dict) -> tuple[list[Value], dict]:
    """For a resolve template: the Values to read (ins) and, per name, {"i": index into ins} or
    {"vals": [C literals]} (see the ``arr`` macro of templates/c/resolve/*.c.j2)."""
    ins: list[Value] = []
    out = {}
    for name, src in sources.items():
        if src is None:
            out[name] = None
        elif isinstance(src, Value):
            out[name] = {"i": len(ins), "vals": None}
            ins.append(src)
        else:
            out[name] = {"i": None, "vals": [c_int(v) for v in src]}
    return ins, out


def check_before_run(node, shape) -> None:
    """onnxc_resolve reads these dims: none may be one that a node assigns while running."""
    names = set()
    for d in shape:
        if isinstance(d, Expr):
            names |= d.symbols()
    if not names:
        return
    seen, todo = set(), [v for v in node.inputs if v is not None]
    while todo:
        v = todo.pop()
        if v.producer is None or id(v.producer) in seen:
            continue
        seen.add(id(v.producer))
        if any(d.kind == "run" and d.name in names for d in v.producer.dyn):
            raise OrtNotImplemented(f"{node.describe()}: a shape input read before the run applies to "
                                    "dims known only while the model runs")
        todo.extend(x for x in v.producer.inputs if x is not None)


def _axes_list(node, axes, rank, n, what="axes") -> list[int]:
    if axes is None:
        return list(range(n))
    if len(axes) != n:
        raise fail(node, f"{what} has {len(axes)} values, expected {n}")
    norm = [norm_axis(node, a, rank, f"{what} value {a}") for a in axes]
    if len(set(norm)) != len(norm):
        raise fail(node, f"{what} {axes} name a dimension more than once")
    return norm


# ---- Slice ---------------------------------------------------------------------------------
def slice_axis(node, d: Dim, start: int, end: int, step: int, axis: int) -> tuple[Dim, Dim]:
    """(first index, count) of a slice of a dim of size d, clamped as onnx specifies."""
    if step == 0:
        raise fail(node, f"steps value for axis {axis} is 0")
    if isinstance(d, int):
        if start < 0:
            start += d
        if end < 0:
            end += d
        if step > 0:
            start, end = min(max(start, 0), d), min(max(end, 0), d)
            count = max(0, -(-(end - start) // step))
        else:
            start, end = min(max(start, 0), d - 1), min(max(end, -1), d - 1)
            count = max(0, -(-(start - end) // -step))
        return start, count
    if start >= 0 and end >= 0 and step > 0:
        if start == 0 and end >= INT64_MAX // 2:
            return 0, d if step == 1 else _ceil_div(d, step)
        hi = d if end >= INT64_MAX // 2 else dmin(d, end)
        s = dmin(d, start) if start else 0
        return s, _ceil_div(dmax(hi - s, 0), step)
    raise OrtNotImplemented(f"{node.describe()}: slicing symbolic dim {axis} with start={start}, "
                            f"end={end}, step={step} is not supported yet")


def _ceil_div(a: Dim, b: int) -> Dim:
    from ..symbolic import floordiv
    return a if b == 1 else floordiv(a + (b - 1), b)


@register
class Slice(OpSpec):
    op_type = "Slice"
    template = "strided.c.j2"

    def _spec(self, node):
        x = node.inputs[0]
        if node.opset < 10:
            starts, ends = attr_ints(node, "starts"), attr_ints(node, "ends")
            if starts is None or ends is None:
                raise fail(node, "attributes starts and ends are required")
            axes, steps = attr_ints(node, "axes"), None
        else:
            if getattr(node, "dyn_params", None) is not None:
                return node.dyn_params
            starts, ends = int_source(node, 1, "starts"), int_source(node, 2, "ends")
            if starts is None or ends is None:
                raise fail(node, "inputs 1 (starts) and 2 (ends) are required")
            axes, steps = int_source(node, 3, "axes"), int_source(node, 4, "steps")
            if any(isinstance(v, Value) for v in (starts, ends, axes, steps)):
                node.dyn_params = self._from_data(node, starts, ends, axes, steps)
                return node.dyn_params
        if len(starts) != len(ends):
            raise fail(node, f"starts has {len(starts)} values but ends has {len(ends)}")
        axes = _axes_list(node, axes, x.rank, len(starts))
        steps = steps if steps is not None else [1] * len(starts)
        if len(steps) != len(starts):
            raise fail(node, f"steps has {len(steps)} values, expected {len(starts)}")
        first: list[Dim] = [0] * x.rank
        count: list[Dim] = list(x.shape)
        step = [1] * x.rank
        for a, s, e, t in zip(axes, starts, ends, steps):
            first[a], count[a] = slice_axis(node, x.shape[a], s, e, t, a)
            step[a] = t
        return first, count, step

    def _from_data(self, node, starts, ends, axes, steps):
        """Some of starts/ends/axes/steps come from the caller: onnxc_resolve clamps them (as onnx
        specifies) into a count (a dim), a first index and a step (parameters) per sliced axis."""
        x = node.inputs[0]
        n = src_len(starts)
        for what, v in (("ends", ends), ("axes", axes), ("steps", steps)):
            if v is not None and src_len(v) != n:
                raise fail(node, f"{what} has {src_len(v)} values, expected {n} (as starts)")
        if isinstance(axes, Value):
            dyn = list(range(x.rank))          # any axis may be sliced
        else:
            dyn = _axes_list(node, axes, x.rank, n)
        if isinstance(steps, list) and 0 in steps:
            raise fail(node, f"steps {steps} has a 0")
        check_before_run(node, [x.shape[a] for a in dyn])
        ins, src = resolve_sources({"starts": starts, "ends": ends, "axes": axes, "steps": steps})
        m = len(dyn)
        syms = dynamic.resolved(node, m, "slice.c.j2", ins,
                                {**src, "n": n, "rank": x.rank, "dims": list(x.shape), "dyn": dyn},
                                values=2 * m)
        first: list[Dim] = [0] * x.rank
        count: list[Dim] = list(x.shape)
        step: list[Dim] = [1] * x.rank
        for j, a in enumerate(dyn):
            count[a], first[a], step[a] = syms[j], syms[m + j], syms[2 * m + j]
        return first, count, step

    def infer(self, node):
        _, count, _ = self._spec(node)
        return [(node.inputs[0].etype, tuple(count))]

    def window(self, node):
        """A run of whole rows (ShuffleNet's batch-1 channel halves): every dim before the first
        sliced one is 1, every one after it whole, step 1, sizes known. Its byte offset."""
        x = node.inputs[0]
        if x.etype.name == "string" or node.outputs[0] is None:
            return None
        first, count, step = self._spec(node)
        if not all(isinstance(d, int) for d in (*x.shape, *first, *count, *step)) or 0 in count:
            return None
        cut = [a for a in range(x.rank) if count[a] != x.shape[a] or step[a] != 1]
        if len(cut) != 1 or step[cut[0]] != 1 or any(x.shape[a] != 1 for a in range(cut[0])):
            return None
        k = cut[0]
        return first[k] * product(x.shape[k + 1:]) * x.etype.itemsize

    def params(self, node):
        x, y = node.inputs[0], node.outputs[0]
        first, count, step = self._spec(node)
        xstr = contiguous_strides(x.shape)
        base = sum((f * s for f, s in zip(first, xstr)), 0)
        xs = [s * t for s, t in zip(xstr, step)]
        return movement_params([strided_copy(count, xs, contiguous_strides(y.shape), xbase=base)])


# ---- Split ---------------------------------------------------------------------------------
@register
class Split(OpSpec):
    op_type = "Split"
    template = "strided.c.j2"

    def _sizes(self, node) -> tuple[int, list[Dim]]:
        x = node.inputs[0]
        axis = norm_axis(node, int(node.attr("axis", 0)), x.rank)
        n = len(node.outputs)
        d = x.shape[axis]
        split = None
        if node.opset < 13:
            split = attr_ints(node, "split")
            if split is None and node.opset < 2 and node.input(1) is not None:
                split = _ints_input(node, 1, "split")
        elif node.input(1) is not None:
            if getattr(node, "dyn_params", None) is not None:
                return node.dyn_params
            split = int_source(node, 1, "split")
        num = node.attr("num_outputs") if node.opset >= 18 else None
        if isinstance(split, Value):
            if num is not None:
                raise fail(node, "split and num_outputs are both given")
            if src_len(split) != n:
                raise fail(node, f"split has {src_len(split)} values for {n} outputs")
            check_before_run(node, [d])
            sizes = dynamic.resolved(node, n, "split.c.j2", [split], {"n": n, "dim": d})
            node.dyn_params = (axis, sizes)
            return node.dyn_params
        if split is not None:
            if num is not None:
                raise fail(node, "split and num_outputs are both given")
            if len(split) != n:
                raise fail(node, f"split has {len(split)} values for {n} outputs")
            if any(s < 0 for s in split):
                raise fail(node, f"split {split} has a negative size")
            if isinstance(d, int) and sum(split) != d:
                raise fail(node, f"split {split} sums to {sum(split)}, but dim {axis} is {d}")
            if not isinstance(d, int):
                raise OrtNotImplemented(f"{node.describe()}: explicit split sizes on symbolic dim {axis}")
            return axis, list(split)
        if num is not None:
            num = int(num)
            if num != n or num < 1:
                raise fail(node, f"num_outputs={num} but the node has {n} outputs")
        if not isinstance(d, int):
            if n == 1:
                return axis, [d]
            raise OrtNotImplemented(f"{node.describe()}: splitting symbolic dim {axis} into {n} parts")
        if num is not None:   # opset 18: ceil-sized chunks, the last one smaller
            chunk = -(-d // n)
            sizes = [max(0, min(chunk, d - k * chunk)) for k in range(n)]
            return axis, sizes
        if d % n:
            raise fail(node, f"dim {axis} = {d} does not split evenly into {n} outputs")
        return axis, [d // n] * n

    def infer(self, node):
        x = node.inputs[0]
        axis, sizes = self._sizes(node)
        out = []
        for s in sizes:
            shape = list(x.shape)
            shape[axis] = s
            out.append((x.etype, tuple(shape)))
        return out

    def params(self, node):
        x = node.inputs[0]
        axis, sizes = self._sizes(node)
        xstr = contiguous_strides(x.shape)
        copies, off = [], 0
        for j, (s, y) in enumerate(zip(sizes, node.outputs)):
            if y is not None:
                shape = list(x.shape)
                shape[axis] = s
                copies.append(strided_copy(shape, xstr, contiguous_strides(shape), dst=j,
                                           xbase=off * xstr[axis]))
            off = off + s
        return movement_params(copies)


# ---- Pad -----------------------------------------------------------------------------------
@register
class Pad(OpSpec):
    op_type = "Pad"
    template = "pad.c.j2"

    def _spec(self, node):
        x = node.inputs[0]
        if node.opset < 11:
            pads = attr_ints(node, "paddings" if node.opset < 2 else "pads")
            if pads is None:
                raise fail(node, "required attribute pads is missing")
            axes = None
        else:
            if getattr(node, "dyn_params", None) is not None:
                return node.dyn_params
            pads = int_source(node, 1, "pads")
            if pads is None:
                raise fail(node, "input 1 (pads) is missing")
            axes = int_source(node, 3, "axes") if node.opset >= 18 else None
        modes = ("constant", "reflect", "edge") + (("wrap",) if node.opset >= 19 else ())
        mode = attr_enum(node, "mode", modes)
        if isinstance(pads, Value) or isinstance(axes, Value):
            node.dyn_params = self._from_data(node, mode, pads, axes)
            return node.dyn_params
        n = len(axes) if axes is not None else x.rank
        if len(pads) != 2 * n:
            raise fail(node, f"pads has {len(pads)} values, expected {2 * n}")
        axes = _axes_list(node, axes, x.rank, n)
        begin, end = [0] * x.rank, [0] * x.rank
        for i, a in enumerate(axes):
            begin[a], end[a] = pads[i], pads[n + i]
        out: list[Dim] = []
        for k, d in enumerate(x.shape):
            b, e = begin[k], end[k]
            if isinstance(d, int):
                if d + b + e < 0:
                    raise fail(node, f"pads {b}, {e} on dim {k} of size {d} leave a negative size")
                if mode != "constant" and d == 0 and (b > 0 or e > 0):
                    raise fail(node, f"mode {mode!r} cannot pad dim {k}: it is empty")
            elif b < 0 or e < 0:
                raise OrtNotImplemented(f"{node.describe()}: negative pads on symbolic dim {k}")
            out.append(d + b + e)
        check_size(node, out)
        return mode, begin, end, out

    def _from_data(self, node, mode, pads, axes):
        """pads and/or axes from the caller: per padded axis onnxc_resolve gives the output dim
        and the parameters begin, lo (input elements cut at the start), ybeg (max(0, begin)) and
        the interior count (what survives negative pads)."""
        x = node.inputs[0]
        n = src_len(axes) if axes is not None else x.rank
        if src_len(pads) != 2 * n:
            raise fail(node, f"pads has {src_len(pads)} values, expected {2 * n}")
        dyn = list(range(x.rank)) if isinstance(axes, Value) else _axes_list(node, axes, x.rank, n)
        check_before_run(node, [x.shape[a] for a in dyn])
        ins, src = resolve_sources({"pads": pads, "axes": axes})
        m = len(dyn)
        syms = dynamic.resolved(node, m, "pad.c.j2", ins,
                                {**src, "n": n, "rank": x.rank, "dims": list(x.shape), "dyn": dyn,
                                 "mode": mode}, values=4 * m)
        out = list(x.shape)
        begin: list[Dim] = [0] * x.rank
        extra = {"lo": [0] * x.rank, "ybeg": [0] * x.rank, "inner": list(x.shape)}
        for j, a in enumerate(dyn):
            out[a], begin[a] = syms[j], syms[m + 4 * j]
            extra["lo"][a], extra["ybeg"][a], extra["inner"][a] = syms[m + 4 * j + 1:m + 4 * j + 4]
        return mode, begin, extra, out

    def infer(self, node):
        mode, _, _, out = self._spec(node)
        return [(node.inputs[0].etype, tuple(out))]

    def _value(self, node):
        """(C literal, runtime input index): the pad value is an attribute or a scalar input."""
        x = node.inputs[0]
        if node.opset < 11:
            return c_literal(float(node.attr("value", 0.0)), x.etype), None
        v = node.input(2)
        if v is None:
            return c_literal(0, x.etype), None
        if v.etype != x.etype:
            raise fail(node, f"input 2 (constant_value) is {v.etype.name}, data is {x.etype.name}")
        if known(v) is not None:
            arr = known(v).reshape(-1)
            if arr.size != 1:
                raise fail(node, f"input 2 (constant_value) has {arr.size} elements, expected 1")
            return c_literal(arr[0], x.etype), None
        if product(v.shape) != 1:   # read at run time: exactly one element (no symbolic count)
            raise fail(node, "input 2 (constant_value) must hold one value")
        return None, 2

    def params(self, node):
        x, y = node.inputs[0], node.outputs[0]
        mode, begin, end, out = self._spec(node)
        xstr, ystr = contiguous_strides(x.shape), contiguous_strides(out)
        if mode != "constant":
            return {"mode": mode, "dims": list(x.shape), "out": out, "begin": begin, "xstr": xstr,
                    "ystr": ystr, "work": product(out)}
        lit, src = self._value(node)
        fill = {"out": 0, "zero": lit is not None and _is_zero_bits(lit), "value": lit, "src": src}
        if isinstance(end, dict):   # run-time pads: the interior was resolved before the run
            xbase = sum((lo * st for lo, st in zip(end["lo"], xstr)), 0)
            ybase = sum((b * st for b, st in zip(end["ybeg"], ystr)), 0)
            copies = [strided_copy(end["inner"], xstr, ystr, xbase=xbase, ybase=ybase)]
            return {"mode": "constant", **movement_params(copies, fill)}
        # interior: the input range that survives negative pads, placed after positive ones
        dims, xbase, ybase = [], 0, 0
        empty = False
        for k, d in enumerate(x.shape):
            b, e = begin[k], end[k]
            lo, hi = max(0, -b), max(0, -e)
            n = d - lo - hi
            if isinstance(n, int) and n <= 0:
                empty = True
            dims.append(n)
            xbase = xbase + lo * xstr[k]
            ybase = ybase + max(0, b) * ystr[k]
        copies = [] if empty else [strided_copy(dims, xstr, ystr, xbase=xbase, ybase=ybase)]
        return {"mode": "constant", **movement_params(copies, fill)}


def _is_zero_bits(lit: str) -> bool:
    return lit in ("0", "(uint16_t)0u") or lit.endswith(")0.0") or lit.endswith("INT64_C(0)") \
        or lit == "UINT64_C(0)"
