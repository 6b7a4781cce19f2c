"""Reductions: ReduceSum/Mean/Max/Min/Prod/L1/L2/SumSquare/LogSum/LogSumExp.

The input's dims are split into kept (K) and reduced (R) runs; static 1-dims are dropped and
neighbours of one class merged. If the innermost run is reduced, each output element reduces
a contiguous stretch ("inner" mode); if it is kept, a block of up to LANES neighbouring outputs
is accumulated together so the innermost loop is contiguous and vectorises ("lanes" mode).

Each op is an accumulator: C type, initial value, update statement ($ACC, v), final expression
($ACC, $COUNT; or of a double ``r`` = rfin). Float sums accumulate in double. Integer sums and
products wrap like numpy's (modular, done in uint64). ReduceLogSumExp first finds the maximum of the finite values
($M), as onnx.reference does. With noop_with_empty_axes and no axes the output is the input
(the ONNX spec; onnxruntime does the same).

Axes the caller passes as a graph input ("dyn" mode): onnxc_resolve validates them (range,
duplicates) and sets the output dims and one reduced-flag parameter per input dim; the kernel
splits the dims into kept and reduced lists at run time and walks the reduced elements of each
output with an odometer (the innermost reduced dim as a strided inner loop).
"""
from __future__ import annotations

from .. import dtypes, dynamic
from ..errors import NotImplemented as OrtNotImplemented
from ..symbolic import Dim, align_up, product
from .cast import convert
from ..ir import Value
from .common import attr_ints, contiguous_strides, data_input, fail, norm_axis
from .registry import OpSpec, register

LANES = 128    # outputs accumulated together when the innermost dim is kept
UNROLL = 32    # partial accumulators along a contiguous reduced run (breaks the dependency chain)
CHUNKS = 64    # a whole-tensor reduction is split into this many parts (fixed: same result for any nt)
D = dtypes.BY_NAME
FLOATS = (D["float"], D["double"])
LOWP = (D["float16"], D["bfloat16"])   # reduced in float: float copies of x and y in the scratch
INTS = tuple(D[n] for n in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"))


def limits(et: dtypes.ElemType) -> tuple[str, str]:
    if et.is_float:
        return "-INFINITY", "INFINITY"
    if et == dtypes.BOOL:
        return "0", "1"
    bits = et.itemsize * 8
    if et.is_signed:
        return f"INT{bits}_MIN", f"INT{bits}_MAX"
    return "0", f"UINT{bits}_MAX"


def accumulator(op: str, et: dtypes.ElemType) -> dict:
    """C snippets for one reduction: A (acc type), init, upd (the new $ACC after reading v),
    comb (two partial accumulators $ACC and $B joined), fin (the output) or rfin (a double r
    that fin converts)."""
    T = et.c
    lo, hi = limits(et)
    f = "f" if T == "float" else ""
    if op in ("Max", "Min"):
        cmp = ">" if op == "Max" else "<"
        nan = " || v != v" if et.is_float else ""      # NaN wins, as in numpy
        bnan = " || $B != $B" if et.is_float else ""
        return {"A": T, "init": lo if op == "Max" else hi, "upd": f"(v {cmp} $ACC{nan}) ? v : $ACC",
                "comb": f"($B {cmp} $ACC{bnan}) ? $B : $ACC", "rfin": None, "fin": "$ACC"}
    add, mul = "$ACC + $B", "$ACC * $B"
    if et.is_float:
        acc = {
            "Sum": ("0", "$ACC + v", add, "$ACC"),
            "Mean": ("0", "$ACC + v", add, "$ACC / (double)($COUNT)"),
            "Prod": ("1", "$ACC * v", mul, "$ACC"),
            "L1": ("0", "$ACC + fabs((double)v)", add, "$ACC"),
            "L2": ("0", "$ACC + (double)v * v", add, "sqrt($ACC)"),
            "SumSquare": ("0", "$ACC + (double)v * v", add, "$ACC"),
            "LogSum": ("0", "$ACC + v", add, "log($ACC)"),
            "LogSumExp": ("0", f"$ACC + exp{f}(v - $M)", add, f"({T})log($ACC) + $M"),
        }[op]
        return {"A": "double", "init": acc[0], "upd": acc[1], "comb": acc[2], "rfin": None,
                "fin": f"({T})({acc[3]})"}
    if op == "LogSumExp":
        raise OrtNotImplemented(f"ReduceLogSumExp on {et.name} is not supported (float, double)")
    # integers: uint64 arithmetic is modular, so these wrap exactly like numpy's in-type sums
    sq = f"(uint64_t)({T})((uint64_t)v * (uint64_t)v)"        # the square, wrapped in T
    if op == "L2" and et.is_signed:
        sq = f"(uint64_t)(int64_t)({T})((uint64_t)v * (uint64_t)v)"
    absv = "(v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v)" if et.is_signed else "(uint64_t)v"
    acc = {
        "Sum": ("$ACC + (uint64_t)v", f"({T})$ACC"),
        "Mean": ("$ACC + (uint64_t)v", None),
        "Prod": ("$ACC * (uint64_t)v", f"({T})$ACC"),
        "L1": (f"$ACC + {absv}", f"({T})$ACC"),
        "SumSquare": (f"$ACC + {sq}", f"({T})$ACC"),
        "L2": (f"$ACC + {sq}", None),
        "LogSum": ("$ACC + (uint64_t)v", None),
    }[op]
    init, comb = ("1", mul) if op == "Prod" else ("0", add)
    if acc[1] is not None:
        return {"A": "uint64_t", "init": init, "upd": acc[0], "comb": comb, "rfin": None, "fin": acc[1]}
    # through double, then a conversion defined for every value
    total = f"(double)({T})$ACC" if op in ("Mean", "LogSum") else (
        "(double)(int64_t)$ACC" if et.is_signed else "(double)$ACC")
    expr = {"Mean": f"(($COUNT) > 0 ? {total} / (double)($COUNT) : 0.0)", "L2": f"sqrt({total})",
            "LogSum": f"log({total})"}[op]
    return {"A": "uint64_t", "init": init, "upd": acc[0], "comb": comb, "rfin": expr,
            "fin": convert("r", D["double"], et)}


def finite_max(et: dtypes.ElemType) -> dict:
    """ReduceLogSumExp's first pass: the maximum of the finite values (NaN wins), as onnx.reference."""
    return {"A": et.c, "init": "-INFINITY", "upd": "(v != v || (v > $ACC && v != INFINITY)) ? v : $ACC",
            "comb": "($B != $B || $B > $ACC) ? $B : $ACC"}


class Reduce(OpSpec):
    template = "reduce.c.j2"
    fn = "Sum"
    axes_input_since = 18

    def types(self, node):
        t = FLOATS + LOWP + INTS
        if self.fn in ("Max", "Min") and node.opset >= 20:
            t = t + (dtypes.BOOL,)
        return t

    def axes(self, node) -> list[int] | Value | None:
        """Normalised axes to reduce; None means 'no reduction' (noop_with_empty_axes); the
        axes Value when the caller passes them (resolved before the run)."""
        x = node.inputs[0]
        if node.opset >= self.axes_input_since:
            arr = data_input(node, 1, "axes")
            if isinstance(arr, Value):
                if arr.etype.name != "int64":
                    raise fail(node, f"input 1 (axes) must be int64, got {arr.etype.name}")
                if arr.rank > 1:
                    raise fail(node, f"input 1 (axes) must be 1-D, got rank {arr.rank}")
                if product(arr.shape) > 0:
                    return arr
                arr = None     # a static empty list: same as no axes
            axes = None if arr is None else [int(a) for a in arr.reshape(-1).tolist()]
            noop = int(node.attr("noop_with_empty_axes", 0)) == 1
        else:
            axes, noop = attr_ints(node, "axes"), False
        if not axes:
            return None if noop else list(range(x.rank))
        norm = [norm_axis(node, a, x.rank, f"axes value {a}") for a in axes]
        if len(set(norm)) != len(norm):
            raise fail(node, f"axes {axes} name a dimension more than once")
        return sorted(norm)

    def infer(self, node):
        x = node.inputs[0]
        if x.etype not in self.types(node):
            raise OrtNotImplemented(f"{node.describe()}: element type {x.etype.name} is not supported "
                                    f"(supported: {', '.join(t.name for t in self.types(node))})")
        axes = self.axes(node)
        if axes is None:
            return [(x.etype, x.shape)]
        keep = int(node.attr("keepdims", 1)) == 1
        if isinstance(axes, Value):
            return [(x.etype, self._resolve_axes(node, axes, keep))]
        out = [1 if k in axes else d for k, d in enumerate(x.shape) if keep or k not in axes]
        return [(x.etype, tuple(out))]

    def _resolve_axes(self, node, axes: Value, keep: bool) -> tuple:
        """Output dims and per-dim reduced flags from axes read before the run (once per node)."""
        x = node.inputs[0]
        r, n = x.rank, product(axes.shape)
        if n > r:
            raise fail(node, f"input 1 (axes) has {n} values but the input has rank {r}: some "
                       "dimension would be named more than once")
        # kept dims of static size 1 stay 1 whatever the axes; the others are run-time dims
        syms = [k for k in range(r) if not (isinstance(x.shape[k], int) and x.shape[k] == 1)] \
            if keep else list(range(r - n))
        vals = dynamic.resolved(node, len(syms), "reduce_axes.c.j2", [axes],
                                {"rank": r, "n": n, "keep": keep, "shape": list(x.shape), "syms": syms},
                                values=r)
        out = [1] * r if keep else [0] * (r - n)
        for k, d in zip(syms, vals):
            out[k] = d
        node.reduce_dyn = {"flags": vals[len(syms):]}
        return tuple(out)

    def params(self, node):
        x = node.inputs[0]
        axes = self.axes(node)
        if axes is None:
            return {"mode": "copy"}
        lowp = x.etype in LOWP
        et = D["float"] if lowp else x.etype
        pre = finite_max(et) if self.fn == "LogSumExp" else None
        if isinstance(axes, Value):
            return {"mode": "dyn", "flags": node.reduce_dyn["flags"], "work": product(x.shape),
                    **accumulator(self.fn, et), "pre": pre, "lowp": lowp,
                    "ybuf": align_up(product(x.shape) * 4, 64)}
        return {**reduce_params(list(x.shape), axes), **accumulator(self.fn, et), "pre": pre,
                "lowp": lowp, "ybuf": align_up(product(x.shape) * 4, 64)}

    def scratch(self, node):
        x, y = node.inputs[0], node.outputs[0]
        if x.etype not in LOWP or self.axes(node) is None:
            return 0
        return align_up(product(x.shape) * 4, 64) + product(y.shape) * 4


def reduce_params(shape: list[Dim], axes: list[int]) -> dict:
    """Loop structure for reducing ``axes`` of a contiguous tensor into a contiguous output."""
    runs: list[list] = []          # [size, reduced?]
    for k, d in enumerate(shape):
        if isinstance(d, int) and d == 1:
            continue
        red = k in axes
        if runs and runs[-1][1] == red:
            runs[-1][0] = runs[-1][0] * d
        else:
            runs.append([d, red])
    sizes = [r[0] for r in runs]
    istr = contiguous_strides(sizes)
    kept = [i for i, r in enumerate(runs) if not r[1]]
    ostr = dict(zip(kept, contiguous_strides([sizes[i] for i in kept])))
    count = product(shape[a] for a in axes)
    rdims = [{"n": sizes[i], "s": istr[i]} for i, r in enumerate(runs) if r[1]]
    lanes = bool(runs) and not runs[-1][1]
    kouter = kept[:-1] if lanes else kept
    return {
        "mode": "lanes" if lanes else "inner",
        "kdims": [{"n": sizes[i], "s": istr[i], "o": ostr[i]} for i in kouter],
        "rdims": rdims,
        "lane_n": sizes[-1] if lanes else 1,
        "count": count,
        "work": product(shape),
        "lanes": LANES, "chunks": CHUNKS,
        # short runs (e.g. a 7x7 global pool) would spend more on folding partials than they save
        "unroll": 8 if rdims and isinstance(rdims[-1]["n"], int) and rdims[-1]["n"] < 4 * UNROLL else UNROLL,
    }


def _make(fn: str, since: int):
    cls = type(f"Reduce{fn}", (Reduce,), {"op_type": f"Reduce{fn}", "fn": fn, "axes_input_since": since})
    return register(cls)


for _fn in ("Mean", "Max", "Min", "Prod", "L1", "L2", "SumSquare", "LogSum", "LogSumExp"):
    _make(_fn, 18)
_make("Sum", 13)
