"""MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool.

Windowed pools are laid out as 3-D pools: 1-D and 2-D inputs get leading spatial dims of
size 1 (kernel 1, stride 1, no pad), so one template serves every rank. Output sizes and
auto_pad paddings are Dim expressions, so spatial dims may be symbolic.

Semantics (those of onnxruntime and PyTorch, which onnx.reference follows except in corner
cases it gets wrong): ceil_mode drops a last window that would start in the end padding;
MaxPool takes the first element of a window and then any greater one (a leading NaN sticks,
later NaNs are skipped), and a window with no input element gives -inf (type minimum for
integers) and index -1; AveragePool propagates NaN and divides by the taps inside the input
(count_include_pad=0; a window with none gives NaN) or inside the padded input
(count_include_pad=1).
Global pools are reductions over the spatial dims and reuse reduce.c.j2.
"""
from __future__ import annotations

from .. import dtypes
from ..errors import NotImplemented as OrtNotImplemented
from ..symbolic import Dim, ceildiv, dim_repr, dmax, dmin, floordiv, product
from .common import attr_enum, attr_ints, fail
from .reduce import accumulator, limits, reduce_params
from .registry import OpSpec, register

D = dtypes.BY_NAME
FLOATS = (D["float"], D["double"])
AUTO_PAD = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")
BLOCK = 128           # outputs along the last dim accumulated together
MAX_UNROLL = 16       # interior taps of the last dim written out one by one up to this kernel size
FOLD_MAX_TAPS = 49    # MaxPool's unrolled fold (pool.c.j2): taps written out, and
FOLD_MAX_ROW = 4096   # the longest last dim (its row of the lowest value is on the stack)
FOLD_SEP_MAX = 16384  # the two-pass fold's rows of h on each thread's stack (elements)
LIMIT = 2 ** 31 - 1   # bound on kernel/stride/dilation/pad values, so no C arithmetic overflows


def _positive(node, name: str, vals: list[int], n: int, minimum: int = 1) -> list[int]:
    if len(vals) != n:
        raise fail(node, f"attribute {name} has {len(vals)} values, expected {n} (one per spatial dim)")
    for v in vals:
        if not minimum <= v <= LIMIT:
            raise fail(node, f"attribute {name}={vals}: every value must be in [{minimum}, {LIMIT}]")
    return vals


class _Pool(OpSpec):
    template = "pool.c.j2"
    kind = "max"

    def types(self, node):
        return FLOATS

    def geometry(self, node) -> dict:
        """Per spatial dim: in, out, kernel, stride, dilation, pad begin/end (ints or Dims)."""
        x = node.inputs[0]
        if x.etype not in self.types(node):
            raise OrtNotImplemented(f"{node.describe()}: element type {x.etype.name} is not supported "
                                    f"(supported: {', '.join(t.name for t in self.types(node))})")
        ns = x.rank - 2
        if ns < 1:
            raise fail(node, f"input must be N x C x spatial..., got rank {x.rank}")
        if ns > 3:
            raise OrtNotImplemented(f"{node.describe()}: {ns}-D pooling is not supported (1-D to 3-D)")
        ks = attr_ints(node, "kernel_shape")
        if ks is None:
            raise fail(node, "required attribute kernel_shape is missing")
        ks = _positive(node, "kernel_shape", ks, ns)
        strides = _positive(node, "strides", attr_ints(node, "strides") or [1] * ns, ns)
        dil = _positive(node, "dilations", attr_ints(node, "dilations") or [1] * ns, ns)
        pads = attr_ints(node, "pads") or [0] * (2 * ns)
        if len(pads) != 2 * ns:
            raise fail(node, f"attribute pads has {len(pads)} values, expected {2 * ns}")
        _positive(node, "pads", pads, 2 * ns, 0)
        auto_pad = attr_enum(node, "auto_pad", AUTO_PAD)
        ceil = int(node.attr("ceil_mode", 0) or 0)
        if ceil not in (0, 1):
            raise fail(node, f"attribute ceil_mode={ceil} must be 0 or 1")
        dims = []
        for k in range(ns):
            n_in: Dim = x.shape[2 + k]
            ke = (ks[k] - 1) * dil[k] + 1
            s = strides[k]
            if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
                out = ceildiv(n_in, s)
                total = dmax(0, (out - 1) * s + ke - n_in)
                pb = floordiv(total, 2) if auto_pad == "SAME_UPPER" else ceildiv(total, 2)
                pe = total - pb
            else:
                pb, pe = (pads[k], pads[ns + k]) if auto_pad == "NOTSET" else (0, 0)
                span = n_in + pb + pe - ke
                if ceil:
                    # the last window must start inside the input or the begin padding
                    out = dmin(ceildiv(span, s) + 1, floordiv(n_in + pb - 1, s) + 1)
                else:
                    out = floordiv(span, s) + 1
            if isinstance(out, int) and out < 1:
                raise fail(node, f"spatial dim {k}: input size {dim_repr(n_in)} is too small for kernel "
                           f"extent {ke} with pads ({pb}, {pe}): output size would be {out}")
            dims.append({"in": n_in, "out": out, "k": ks[k], "s": s, "d": dil[k], "pb": pb, "pe": pe})
        return {"dims": dims, "ns": ns}

    def infer(self, node):
        x = node.inputs[0]
        g = self.geometry(node)
        shape = (x.shape[0], x.shape[1], *[d["out"] for d in g["dims"]])
        outs = [(x.etype, shape)]
        if self._indices(node):
            if self.kind != "max" or node.opset < 8:
                raise fail(node, "only MaxPool from opset 8 has a second output (Indices)")
            outs.append((dtypes.INT64, shape))
        return outs

    def params(self, node):
        x = node.inputs[0]
        g = self.geometry(node)
        unit = {"in": 1, "out": 1, "k": 1, "s": 1, "d": 1, "pb": 0, "pe": 0}
        dims = [dict(unit) for _ in range(3 - g["ns"])] + g["dims"]
        lo, _ = limits(x.etype)
        return {
            "kind": self.kind,
            "dims": dims,
            "nc": x.shape[0] * x.shape[1],
            "include_pad": int(node.attr("count_include_pad", 0) or 0) == 1,
            "indices": self._indices(node),
            "col_major": int(node.attr("storage_order", 0) or 0) == 1,
            "lowest": lo,
            "taps": product(d["k"] for d in dims),
            "block": BLOCK,
            "max_unroll": MAX_UNROLL,
            "acc_t": x.etype.c,
            "fold": self._fold(node, dims),
            "sep": self._sep(node, dims),
            "nan": x.etype.is_float,
            "interior": not self._padded(dims) and not self._indices(node),
        }

    @staticmethod
    def _indices(node) -> bool:
        """MaxPool's second output (Indices) is asked for."""
        return len(node.outputs) > 1 and node.outputs[1] is not None

    @staticmethod
    def _padded(dims) -> bool:
        """Some window reaches outside the input (or the sizes are symbolic)."""
        return not all(isinstance(d["in"], int) and isinstance(d["out"], int) and d["pb"] == 0
                       and (d["out"] - 1) * d["s"] + (d["k"] - 1) * d["d"] < d["in"] for d in dims)

    def _fold(self, node, dims):
        """MaxPool's unrolled fold (pool.c.j2) for padded windows where it fits: no indices,
        at most FOLD_MAX_TAPS taps, a static last dim of at most FOLD_MAX_ROW elements (a row of
        the lowest value on each thread's stack). Its size, or None. Windows inside the input
        keep the interior path (2x2 stride 2: 11.7 us there, 15.6 folded)."""
        if self.kind != "max" or self._indices(node) or not self._padded(dims):
            return None
        row = dims[2]["in"]
        if not isinstance(row, int) or row > FOLD_MAX_ROW or product(d["k"] for d in dims) > FOLD_MAX_TAPS:
            return None
        return {"row": max(row, 1)}

    def _sep(self, node, dims):
        """The pool in two passes (rows, then columns; pool.c.j2) for padded windows of at most
        FOLD_MAX_TAPS taps where its buffer of reduced rows (kernel depth x input height x output
        width) fits FOLD_SEP_MAX elements: MaxPool where the fold applies, AveragePool. Sizes or
        None."""
        if not (self._fold(node, dims) if self.kind == "max" else self._padded(dims)) or \
                product(d["k"] for d in dims) > FOLD_MAX_TAPS:
            return None
        i1, o2 = dims[1]["in"], dims[2]["out"]
        if not isinstance(i1, int) or not isinstance(o2, int) or dims[0]["k"] * i1 * o2 > FOLD_SEP_MAX:
            return None
        return {"i1": i1, "o2": max(o2, 1)}


@register
class MaxPool(_Pool):
    op_type = "MaxPool"
    kind = "max"

    def types(self, node):
        return FLOATS + ((D["int8"], D["uint8"]) if node.opset >= 12 else ())

    def geometry(self, node):
        so = int(node.attr("storage_order", 0) or 0)
        if so not in (0, 1):
            raise fail(node, f"attribute storage_order={so} must be 0 or 1")
        return super().geometry(node)


@register
class AveragePool(_Pool):
    op_type = "AveragePool"
    kind = "avg"

    def geometry(self, node):
        cip = int(node.attr("count_include_pad", 0) or 0)
        if cip not in (0, 1):
            raise fail(node, f"attribute count_include_pad={cip} must be 0 or 1")
        return super().geometry(node)


class _GlobalPool(OpSpec):
    template = "reduce.c.j2"
    fn = "Mean"

    def infer(self, node):
        x = node.inputs[0]
        if x.etype not in FLOATS:
            raise OrtNotImplemented(f"{node.describe()}: element type {x.etype.name} is not supported "
                                    "(float, double)")
        if x.rank < 2:
            raise fail(node, f"input must be N x C x spatial..., got rank {x.rank}")
        return [(x.etype, (x.shape[0], x.shape[1], *[1] * (x.rank - 2)))]

    def params(self, node):
        x = node.inputs[0]
        return {**reduce_params(list(x.shape), list(range(2, x.rank))), **accumulator(self.fn, x.etype),
                "pre": None}


@register
class GlobalAveragePool(_GlobalPool):
    op_type = "GlobalAveragePool"
    fn = "Mean"


@register
class GlobalMaxPool(_GlobalPool):
    op_type = "GlobalMaxPool"
    fn = "Max"
