"""Signal processing: DFT (opsets 17 and 20), STFT, HannWindow, HammingWindow, BlackmanWindow,
MelWeightMatrix.

DFT and STFT gather each line along the transformed axis into a double buffer and run
runtime_c/onnxc_fft.h (radix-2, direct for small lengths, Bluestein otherwise), so every length
works and the arithmetic is double whatever the storage type. Complex tensors are real tensors
with a trailing dimension of 2 (real, imaginary); a trailing 1 means real. dft_length must be known
at compile time; window sizes and MelWeightMatrix's sizes may be graph inputs. DFT-20's axis and STFT's frame_step/frame_length may be
graph inputs: onnxc_resolve then reads them before the run and sets the output dims that follow
(templates/c/resolve/dft_axis.c.j2, stft.c.j2) and run-time parameters the kernel reads; the
FFT workspace is planned for the longest transform any value allows.
"""
from __future__ import annotations

from .. import dtypes, dynamic
from ..errors import NotImplemented as OrtNotImplemented
from ..known_values import known
from ..symbolic import product
from ..ir import Value
from .common import const_input, data_input, fail, norm_axis, schema_types
from .registry import OpSpec, register

D = dtypes.BY_NAME
MAX_LEN = 1 << 26             # longest transform: the workspace is ~ 6 x length doubles per slot
MAX_SCRATCH = 1 << 31         # bytes of FFT workspace a node may ask for
SLOTS = 8                     # at most this many threads, each with its own workspace slot
_INTS = ("int32", "int64")
_FLOATS = ("float", "double", "float16", "bfloat16")
DIRECT_MAX = 64               # = ONNXC_FFT_DIRECT_MAX


def fft_work(n: int) -> int:
    """Doubles of workspace onnxc_fft needs (mirrors onnxc_fft_work in onnxc_fft.h)."""
    if n <= 1 or n & (n - 1) == 0:
        return 0
    if n <= DIRECT_MAX:
        return 4 * n
    return _bluestein_work(n)


def _bluestein_work(n: int) -> int:
    m = 1
    while m < 2 * n - 1:
        m <<= 1
    return 4 * m + 2 * n


def _scalar(node, i, what, lo=None) -> int | None:
    """A compile-time integer scalar input (None when the input is omitted)."""
    a = const_input(node, i, what)
    if a is None:
        return None
    if a.size != 1:
        raise fail(node, f"input {i} ({what}) must be a scalar, got shape {a.shape}")
    v = int(a.reshape(()))
    if lo is not None and v < lo:
        raise fail(node, f"input {i} ({what})={v} must be >= {lo}")
    return v


def work_upto(n: int) -> int:
    """An upper bound of fft_work(m) for every m <= n (Bluestein's m < 4n)."""
    return 4 * n if n <= DIRECT_MAX else _bluestein_work(n)


def _slots(node, n: int, lines, work: int | None = None) -> tuple[int, int]:
    """(slots, doubles per slot): a slot is re[n], im[n], then the FFT workspace (``work``
    doubles when the length is only known at run time, n then being its largest value)."""
    if n > MAX_LEN:
        raise fail(node, f"transform length {n} is larger than onnxc supports ({MAX_LEN})")
    slot = 2 * n + (fft_work(n) if work is None else work)
    slots = SLOTS if not isinstance(lines, int) else max(1, min(SLOTS, lines))
    slots = max(1, min(slots, MAX_SCRATCH // (8 * slot)))
    return slots, slot


class _DFT(OpSpec):
    op_type = "DFT"
    template = "dft.c.j2"
    headers = ("onnxc_fft.h",)

    def _axis(self, node):
        """(axis, runtime): the axis when known, else (None, True)."""
        raise NotImplementedError

    def _spec(self, node):
        schema_types(node)
        x = node.inputs[0]
        r = x.rank
        if r < 2 or x.shape[-1] not in (1, 2):
            raise fail(node, "input 0 must be [..., signal dims, 1 or 2] (real or complex)")
        inverse = int(node.attr("inverse", 0)) != 0
        onesided = int(node.attr("onesided", 0)) != 0
        mode = "irfft" if inverse and onesided else ("inv" if inverse else "fwd")
        n = _scalar(node, 1, "dft_length", lo=1)
        axis = self._axis(node)
        s = {"mode": mode, "onesided": onesided, "cin": x.shape[-1], "rank": r,
             "dims": list(x.shape[:-1])}
        if axis is None:      # run-time axis
            if not all(isinstance(d, int) for d in x.shape):
                raise OrtNotImplemented(f"{node.describe()}: a run-time axis needs a static input shape")
            lens = [n if n is not None else (2 * (d - 1) if mode == "irfft" else d) for d in x.shape[:-1]]
            lens = [m for m in lens if m >= 1] or [1]
            s.update(runtime_axis=True, n=max(lens), work=max(fft_work(m) for m in lens),
                     lines=product(x.shape[:-1]), n_given=n)
            if not onesided and n is None:     # the output shape does not depend on the axis
                s.update(out=tuple(x.shape[:-1]) + (2,), axis_param=None)
                return s
            data_input(node, 2, "axis")         # the caller's data: onnxc_resolve can read it
            if not hasattr(node, "dft_dyn"):   # resolved once per node
                vals = dynamic.resolved(node, r - 1, "dft_axis.c.j2", [node.input(2)],
                                        {"rank": r, "dims": list(x.shape[:-1]), "n": n, "mode": mode,
                                         "onesided": onesided}, values=1)
                node.dft_dyn = vals
            vals = node.dft_dyn
            s.update(out=tuple(vals[:-1]) + (1 if mode == "irfft" else 2,), axis_param=vals[-1])
            return s
        if not axis < r - 1:
            raise fail(node, f"axis {axis} is the trailing real/imaginary dimension; it must be < {r - 1}")
        nin = x.shape[axis]
        if n is None:
            n = 2 * (nin - 1) if mode == "irfft" else nin
        if not isinstance(n, int):
            raise OrtNotImplemented(f"{node.describe()}: the transform length must be known at "
                                    "compile time (symbolic signal dimension)")
        if n < 1:
            raise fail(node, f"transform length {n} must be >= 1")
        kout = n // 2 + 1 if mode == "fwd" and onesided else n
        out = list(x.shape)
        out[axis] = kout
        out[-1] = 1 if mode == "irfft" else 2
        s.update(runtime_axis=False, axis=axis, out=tuple(out), n=n, nin=nin, kout=kout,
                 outer=product(x.shape[:axis]), inner=product(x.shape[axis + 1:-1]))
        s["lines"] = s["outer"] * s["inner"]
        return s

    def infer(self, node):
        s = self._spec(node)
        _slots(node, s["n"], s["lines"], s.get("work"))
        return [(node.inputs[0].etype, s["out"])]

    def params(self, node):
        s = self._spec(node)
        s["slots"], s["slot"] = _slots(node, s["n"], s["lines"], s.get("work"))
        s["cout"] = s["out"][-1]
        s["axis_input"] = 2
        return s

    def scratch(self, node):
        s = self._spec(node)
        slots, slot = _slots(node, s["n"], s["lines"], s.get("work"))
        return slots * slot * 8


@register
class DFT17(_DFT):
    since = 17
    until = 19

    def _axis(self, node):
        return norm_axis(node, int(node.attr("axis", 1)), node.inputs[0].rank)


@register
class DFT20(_DFT):
    since = 20

    def _axis(self, node):
        a = node.input(2)
        if a is None:
            return norm_axis(node, -2, node.inputs[0].rank)
        v = known(a)
        if v is None:
            return None
        if v.size != 1:
            raise fail(node, f"input 2 (axis) must be a scalar, got shape {v.shape}")
        return norm_axis(node, int(v.reshape(())), node.inputs[0].rank)


@register
class STFT(OpSpec):
    """[batch, length, 1|2] -> [batch, frames, bins, 2]: frame f is signal[f*step : f*step + L]
    times the window (ones when absent), transformed with a length-L DFT."""
    op_type = "STFT"
    since = 17
    template = "stft.c.j2"
    headers = ("onnxc_fft.h",)

    def _spec(self, node):
        schema_types(node)
        x, w = node.inputs[0], node.input(2)
        if x.rank != 3 or x.shape[-1] not in (1, 2):
            raise fail(node, "input 0 (signal) must be [batch, length, 1 or 2]")
        step = _int_or_value(node, 1, "frame_step", lo=1)
        fl = _int_or_value(node, 3, "frame_length", lo=1)
        if w is not None:
            if w.rank != 1:
                raise fail(node, "input 2 (window) must be 1-D")
            if fl is None:
                fl = w.shape[0]
            elif isinstance(fl, int) and w.shape[0] != fl:
                raise fail(node, f"input 2 (window) has {w.shape[0]} values but frame_length is {fl}")
        length = x.shape[1]
        if fl is None:
            fl = length
        if not isinstance(length, int) or not isinstance(fl, (int, Value)) \
                or (w is not None and not isinstance(w.shape[0], int)):
            raise OrtNotImplemented(f"{node.describe()}: signal and frame lengths must be known at "
                                    "compile time")
        if isinstance(fl, int) and fl > length:
            raise fail(node, f"frame_length {fl} is longer than the signal ({length})")
        onesided = int(node.attr("onesided", 1)) != 0
        s = {"cin": x.shape[-1], "window": w is not None, "batch": x.shape[0], "length": length,
             "nmax": fl if isinstance(fl, int) else length, "work": None}
        if isinstance(step, Value) or isinstance(fl, Value):
            if not hasattr(node, "stft_dyn"):    # resolved once per node
                ins = [v for v in (step, fl) if isinstance(v, Value)]
                dims = 1 + isinstance(fl, Value)
                node.stft_dyn = dynamic.resolved(
                    node, dims, "stft.c.j2", ins,
                    {"length": length, "step": step if isinstance(step, int) else None,
                     "fl": fl if isinstance(fl, int) else None,
                     "wlen": None if w is None else w.shape[0], "onesided": onesided,
                     "step_in": 0 if isinstance(step, Value) else None,
                     "fl_in": len(ins) - 1 if isinstance(fl, Value) else None},
                    values=len(ins))
            vals = list(node.stft_dyn)
            frames = vals.pop(0)
            bins = vals.pop(0) if isinstance(fl, Value) else (fl // 2 + 1 if onesided else fl)
            if isinstance(step, Value):
                step = vals.pop(0)
            if isinstance(fl, Value):
                fl = vals.pop(0)
                s["work"] = work_upto(length)
        else:
            frames = 1 + (length - fl) // step
            bins = fl // 2 + 1 if onesided else fl
        s.update({"step": step, "n": fl, "frames": frames, "bins": bins,
                  "lines": x.shape[0] * frames if isinstance(frames, int) else x.shape[0] * length})
        return s

    def infer(self, node):
        s = self._spec(node)
        _slots(node, s["nmax"], s["lines"], s["work"])
        return [(node.inputs[0].etype, (s["batch"], s["frames"], s["bins"], 2))]

    def params(self, node):
        s = self._spec(node)
        s["slots"], s["slot"] = _slots(node, s["nmax"], s["lines"], s["work"])
        return s

    def scratch(self, node):
        s = self._spec(node)
        slots, slot = _slots(node, s["nmax"], s["lines"], s["work"])
        return slots * slot * 8


def _int_or_value(node, i, what, lo):
    """A scalar integer input known at compile time, or the Value the caller passes."""
    a = data_input(node, i, what)
    if isinstance(a, Value):
        if a.etype.name not in _INTS or any(d != 1 for d in a.shape):
            raise fail(node, f"input {i} ({what}) must be an int32/int64 scalar")
        return a
    return _scalar(node, i, what, lo=lo)


class _Window(OpSpec):
    since = 17
    template = "window.c.j2"   # N = size (periodic) or size - 1

    def _size(self, node):
        """An int at compile time, else a run-time dim checked by templates/c/resolve/window.c.j2."""
        dyn = getattr(node, "dyn_params", None)
        if dyn is not None:
            return dyn["size"]
        v = data_input(node, 0, "size")
        if not isinstance(v, Value):
            return _scalar(node, 0, "size", lo=0)
        if product(v.shape) != 1:
            raise fail(node, f"input 0 (size) must be a scalar, got shape {v.shape}")
        d, = dynamic.resolved(node, 1, "window.c.j2", [v])
        node.dyn_params = {"size": d}
        return d

    def _spec(self, node):
        size = self._size(node)
        if isinstance(size, int) and size > 1 << 31:
            raise fail(node, f"input 0 (size)={size} is too large")
        et = dtypes.from_onnx(int(node.attr("output_datatype", 1)), node.describe())
        if et.name not in ("float", "double", "float16", "bfloat16", "int8", "int16", "int32",
                           "int64", "uint8", "uint16", "uint32", "uint64"):
            raise fail(node, f"output_datatype {et.name} is not a numeric type")
        return size, et

    def infer(self, node):
        size, et = self._spec(node)
        return [(et, (size,))]

    def params(self, node):
        size, et = self._spec(node)
        periodic = int(node.attr("periodic", 1)) != 0
        return {"size": size, "N": size if periodic else size - 1, "kind": self.op_type[:-6].lower(),
                "int_out": not et.is_float}


@register
class HannWindow(_Window):
    op_type = "HannWindow"


@register
class HammingWindow(_Window):
    op_type = "HammingWindow"


@register
class BlackmanWindow(_Window):
    op_type = "BlackmanWindow"


@register
class MelWeightMatrix(OpSpec):
    """[dft_length // 2 + 1, num_mel_bins] triangular filters, as onnx.reference computes them:
    the edge frequencies and the mel points are read at run time."""
    op_type = "MelWeightMatrix"
    since = 17
    template = "melweight.c.j2"

    def _spec(self, node):
        for i, ok in ((0, _INTS), (1, _INTS), (2, _INTS), (3, _FLOATS), (4, _FLOATS)):
            if node.inputs[i].etype.name not in ok:
                raise fail(node, f"input {i} has element type {node.inputs[i].etype.name}")
        if node.inputs[3].etype != node.inputs[4].etype:
            raise fail(node, "inputs 3 and 4 (edge frequencies) must have the same element type")
        bins, n = self._sizes(node)
        if isinstance(bins, int) and isinstance(n, int) and (
                bins > 1 << 20 or n > 1 << 28 or (n // 2 + 1) * bins > 1 << 30):
            raise fail(node, f"num_mel_bins={bins} x dft_length={n} is too large")
        et = dtypes.from_onnx(int(node.attr("output_datatype", 1)), node.describe())
        if et.name not in ("float", "double", "float16", "bfloat16", "int8", "int16", "int32",
                           "int64", "uint8", "uint16", "uint32", "uint64"):
            raise fail(node, f"output_datatype {et.name} is not a numeric type")
        return bins, n, et

    def _sizes(self, node):
        """num_mel_bins and dft_length: compile-time ints, or run-time dims when the caller
        passes them (both checked by templates/c/resolve/melweightmatrix.c.j2)."""
        from .. import dynamic
        from ..ir import Value
        from .common import data_input
        dyn = getattr(node, "dyn_params", None)
        if dyn is not None:
            return dyn["bins"], dyn["n"]
        src = [data_input(node, i, w) for i, w in ((0, "num_mel_bins"), (1, "dft_length"))]
        if not any(isinstance(v, Value) for v in src):
            return _scalar(node, 0, "num_mel_bins", lo=1), _scalar(node, 1, "dft_length", lo=1)
        ins, lit = [], []
        for i, v in enumerate(src):
            if isinstance(v, Value):
                if product(v.shape) != 1:
                    raise fail(node, f"input {i} must be a scalar, got shape {v.shape}")
                ins.append(v)
                lit.append(None)
            else:
                lit.append(_scalar(node, i, ("num_mel_bins", "dft_length")[i], lo=1))
        dims = iter(dynamic.resolved(node, len(ins), "melweightmatrix.c.j2", ins, {"lit": lit}))
        bins, n = (next(dims) if x is None else x for x in lit)
        node.dyn_params = {"bins": bins, "n": n}
        return bins, n

    def infer(self, node):
        from ..symbolic import floordiv
        bins, n, et = self._spec(node)
        return [(et, (floordiv(n, 2) + 1, bins))]

    def params(self, node):
        from ..symbolic import floordiv
        bins, n, _ = self._spec(node)
        spec = floordiv(n, 2) + 1
        return {"bins": bins, "n": n, "spec": spec, "total": spec * bins}
