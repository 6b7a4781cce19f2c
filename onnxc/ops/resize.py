"""Resize (opsets 10-19) and Upsample (7-9): separable interpolation with compile-time tables.

Scales/sizes/roi must be known at compile time, and so must the input shape; then every output
coordinate of every resized axis maps to a fixed set of (input index, weight) taps, computed
here exactly as onnx.reference does (coordinate transformation, nearest rounding, cubic and
antialiased coefficients, exclude_outside renormalisation, edge clamping, tf_crop_and_resize
extrapolation). The kernel applies one axis after the other in float64 (as the reference does)
and rounds/saturates once at the end.

Scales, sizes or roi fed as graph inputs ("dynamic" plan): onnxc_resolve computes the output
sizes (sizes, keep_aspect_ratio_policy, scales), the antialias filter widths and, as run-time
parameters, each axis's scale and roi (doubles carried in int64 bits) before the run
(templates/c/resolve/resize.c.j2); the kernel builds each axis's taps with the same formulas in
C, then runs the passes it needs (an identity axis is skipped) through two double buffers.
"""
from __future__ import annotations

import math

import numpy as np

from .. import dtypes, dynamic
from ..errors import NotImplemented as OrtNotImplemented
from ..ir import Value
from ..symbolic import dmax, product
from .common import attr_enum, data_input, fail, norm_axis
from .registry import OpSpec, register

D = dtypes.BY_NAME
MAX_TAPS = 1 << 22      # bound on a table's entries (antialias at tiny scales widens the filter)
SUPPORTED = ("float", "double", "float16", "bfloat16", "int8", "uint8", "int16", "uint16", "int32",
             "uint32", "int64", "uint64")
CTM = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric",
       "tf_crop_and_resize")
NEAREST = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


def _nearest(mode):
    def f(ratio, scale):
        if float(ratio).is_integer():
            return np.array([0.0, 1.0])
        return np.array({"round_prefer_floor": [ratio <= 0.5, ratio > 0.5],
                         "round_prefer_ceil": [ratio < 0.5, ratio >= 0.5],
                         "floor": [1, 0], "ceil": [0, 1]}[mode], dtype=np.float64)
    return f


def _cubic(A):
    def f(r, scale):
        return np.array([((A * (r + 1) - 5 * A) * (r + 1) + 8 * A) * (r + 1) - 4 * A,
                         ((A + 2) * r - (A + 3)) * r * r + 1,
                         ((A + 2) * (1 - r) - (A + 3)) * (1 - r) * (1 - r) + 1,
                         ((A * ((1 - r) + 1) - 5 * A) * ((1 - r) + 1) + 8 * A) * ((1 - r) + 1) - 4 * A])
    return f


def _cubic_aa(A):
    def coeff(x):
        x = abs(x)
        if x <= 1:
            return (A + 2) * x ** 3 - (A + 3) * x * x + 1
        if x < 2:
            return A * x ** 3 - 5 * A * x * x + 8 * A * x - 4 * A
        return 0.0

    def f(r, scale):
        scale = min(scale, 1.0)
        i0 = int(np.floor(-2 / scale) + 1)
        c = [coeff(scale * (i - r)) for i in range(i0, 2 - i0)]
        return np.array(c) / sum(c)
    return f


def _linear(r, scale):
    return np.array([1 - r, r])


def _linear_aa(r, scale):
    scale = min(scale, 1.0)
    start = int(np.floor(-1 / scale) + 1)
    args = (np.arange(start, 2 - start) - r) * scale
    c = np.clip(1 - np.abs(args), 0, 1)
    return c / c.sum()


def axis_table(node, ctm, coeffs, scale, n_in, n_out, roi, exclude_outside):
    """(indices [n_out, taps], weights [n_out, taps], extrapolated [n_out]) for one axis."""
    out_w = scale * n_in
    y = np.arange(n_out, dtype=np.float64)
    ext = np.zeros(n_out, bool)
    with np.errstate(all="ignore"):
        if ctm == "align_corners":
            x = np.zeros(n_out) if out_w == 1 else y * (n_in - 1) / (out_w - 1)
        elif ctm == "asymmetric":
            x = y / scale
        elif ctm == "tf_crop_and_resize":
            x = (np.full(n_out, (roi[1] - roi[0]) * (n_in - 1) / 2) if out_w == 1
                 else y * (roi[1] - roi[0]) * (n_in - 1) / (out_w - 1))
            x = x + roi[0] * (n_in - 1)
            ext = (x < 0) | (x > n_in - 1)
        elif ctm == "pytorch_half_pixel":
            x = np.full(n_out, -0.5) if out_w == 1 else (y + 0.5) / scale - 0.5
        elif ctm == "half_pixel":
            x = (y + 0.5) / scale - 0.5
        else:   # half_pixel_symmetric
            x = n_in / 2 * (1 - n_out / out_w) + (y + 0.5) / scale - 0.5
    if not np.all(np.isfinite(x)):
        raise fail(node, f"scale {scale} gives non-finite source coordinates")
    xi = np.floor(x).astype(np.int64)
    ratios = np.where(x == xi, 1.0, x - xi)
    n = len(coeffs(float(ratios[0]), scale))
    if n * n_out > MAX_TAPS:
        raise OrtNotImplemented(f"{node.describe()}: the interpolation table ({n_out} x {n} taps) is too large")
    w = np.stack([coeffs(float(r), scale) for r in ratios]).astype(np.float64)
    pad = int(np.ceil(n / 2))
    xp = x + pad
    pp = np.floor(xp).astype(np.int64)
    frac = xp - pp
    if n % 2 == 0:
        off = np.where(frac == 0, -(n // 2), -(n // 2) + 1)
    else:
        off = np.where(frac <= 0.5, -((n - 1) // 2), -((n - 1) // 2) + 1)
    idx = (pp + off)[:, None] + np.arange(n)[None, :] - pad
    if exclude_outside:
        w = np.where((idx < 0) | (idx >= n_in), 0.0, w)
        s = w.sum(axis=-1, keepdims=True)
        w = w / np.where(s == 0, 1.0, s)
    return np.clip(idx, 0, n_in - 1), w, ext


class _ResizeBase(OpSpec):
    template = "resize.c.j2"

    def settings(self, node) -> dict:
        raise NotImplementedError

    def plan(self, node) -> dict:
        x = node.inputs[0]
        shape = list(x.shape)
        if x.etype.name not in SUPPORTED:
            raise OrtNotImplemented(f"{node.describe()}: element type {x.etype.name} is not supported")
        s = self.settings(node)
        if any(isinstance(s[k], Value) for k in ("scales", "sizes", "roi")):
            return self.plan_dynamic(node, s)
        if not all(isinstance(d, int) for d in shape):
            raise OrtNotImplemented(f"{node.describe()}: a symbolic input shape is not supported yet")
        r = len(shape)
        scales, sizes, roi, axes = s["scales"], s["sizes"], s["roi"], s["axes"]
        if axes is None:
            axes = list(range(r))
        if len(set(axes)) != len(axes):
            raise fail(node, f"attribute axes={axes} has duplicates")
        k = len(axes)
        if roi is not None and roi.size == 0:
            roi = None
        if roi is not None and roi.size != 2 * k:
            raise fail(node, f"roi has {roi.size} values, expected {2 * k}")
        full_roi = None
        if roi is not None:
            full_roi = [0.0] * r + [1.0] * r
            for i, a in enumerate(axes):
                full_roi[a], full_roi[r + a] = float(roi[i]), float(roi[k + i])
        if sizes is not None:
            if sizes.size != k:
                raise fail(node, f"sizes has {sizes.size} values, expected {k}")
            if np.any(sizes < 0):
                raise fail(node, f"sizes {sizes.tolist()} must be non-negative")
            fs = [float(sizes[i]) / shape[a] if shape[a] else 1.0 for i, a in enumerate(axes)]
            out = [int(v) for v in sizes]
            pol = s["policy"]
            if pol != "stretch":
                sc = min(fs) if pol == "not_larger" else max(fs)
                fs = [sc] * k
                out = [int(sc * shape[a] + 0.5) for a in axes]
        else:
            if scales is None or scales.size != k:
                raise fail(node, f"scales must have {k} values (one per resized axis)")
            fs = [float(v) for v in scales]
            if any(not v > 0 or not math.isfinite(v) for v in fs):
                raise fail(node, f"scales {fs} must be positive and finite")
            out = [int(np.float64(v) * shape[a]) for v, a in zip(fs, axes)]
        out_shape = list(shape)
        for i, a in enumerate(axes):
            out_shape[a] = out[i]
            if out[i] > 2 ** 31:
                raise fail(node, f"output size {out[i]} along axis {a} is too large")
        passes, cur = [], list(shape)
        for i, a in enumerate(axes):
            if shape[a] == 0 or out[i] == 0:
                continue
            aroi = None if full_roi is None else [full_roi[a], full_roi[r + a]]
            if (math.isclose(fs[i], 1.0) and out[i] == cur[a]
                    and (aroi is None or (math.isclose(aroi[0], 0.0) and math.isclose(aroi[1], 1.0)))):
                continue
            idx, w, ext = axis_table(node, s["ctm"], s["coeffs"], fs[i], shape[a], out[i], aroi,
                                     s["exclude"])
            nin = cur[a]
            cur[a] = out[i]
            passes.append({"outer": product(cur[:a]), "nin": nin, "nout": out[i],
                           "inner": product(cur[a + 1:]), "taps": idx.shape[1],
                           "idx": ", ".join(str(int(v)) for v in idx.ravel()),
                           "w": ", ".join(repr(float(v)) for v in w.ravel()),
                           "ext": ", ".join(str(int(v)) for v in ext) if ext.any() else None,
                           "numel": product(cur)})
        return {"dynamic": False, "out_shape": out_shape, "passes": passes, "ev": float(s["ev"])}

    def plan_dynamic(self, node, s) -> dict:
        """Output dims, filter widths, scales and roi resolved before the run (once per node)."""
        x = node.inputs[0]
        shape, r = list(x.shape), x.rank
        axes = list(range(r)) if s["axes"] is None else s["axes"]
        if len(set(axes)) != len(axes):
            raise fail(node, f"attribute axes={axes} has duplicates")
        k = len(axes)
        ins, where = [], {}
        for name, n, types in (("sizes", k, ("int64",)), ("scales", k, ("float", "double")),
                               ("roi", 2 * k, ("float", "double"))):
            a = s[name]
            if a is None:
                continue
            size = product(a.shape) if isinstance(a, Value) else a.size
            if size != n:
                raise fail(node, f"{name} has {size} values, expected {n}")
            if isinstance(a, Value):
                if a.etype.name not in types:
                    raise OrtNotImplemented(f"{node.describe()}: {name} of type {a.etype.name} is not "
                                            f"supported ({', '.join(types)})")
                where[name] = len(ins)
                ins.append(a)
            elif name == "sizes" and np.any(a < 0):
                raise fail(node, f"sizes {a.tolist()} must be non-negative")
            elif name == "scales" and any(not v > 0 or not math.isfinite(v) for v in a.tolist()):
                raise fail(node, f"scales {a.tolist()} must be positive and finite")
            elif name == "roi" and not all(math.isfinite(v) for v in a.tolist()):
                raise fail(node, f"roi {a.tolist()} must be finite")
        if s["sizes"] is None and s["scales"] is None:
            raise fail(node, f"scales must have {k} values (one per resized axis)")
        aa = s["antialias"] and s["mode"] in ("linear", "cubic")
        taps_static = {"nearest": 2, "linear": 2, "cubic": 4}[s["mode"]]
        use_roi = s["roi"] is not None
        if not hasattr(node, "resize_dyn"):
            def static(name, fmt):
                a = s[name]
                return None if a is None or isinstance(a, Value) else [fmt(v) for v in a.tolist()]
            node.resize_dyn = dynamic.resolved(
                node, k * (2 if aa else 1), "resize.c.j2", ins,
                {"k": k, "din": [shape[a] for a in axes], "where": where, "policy": s["policy"],
                 "sizes": static("sizes", int), "scales": static("scales", repr),
                 "roi": static("roi", repr), "use_roi": use_roi, "aa": aa, "mode": s["mode"],
                 "max_taps": MAX_TAPS},
                values=k * (3 if use_roi else 1))
        vals = list(node.resize_dyn)
        outd, vals = vals[:k], vals[k:]
        taps = vals[:k] if aa else [taps_static] * k
        vals = vals[k:] if aa else vals
        out_shape, big = list(shape), list(shape)
        for i, a in enumerate(axes):
            out_shape[a] = outd[i]
            big[a] = dmax(shape[a], outd[i])
        return {"dynamic": True, "out_shape": out_shape, "axes": axes, "outd": outd, "taps": taps,
                "scale": vals[:k], "r0": vals[k:2 * k] if use_roi else None,
                "r1": vals[2 * k:] if use_roi else None, "ctm": s["ctm"], "mode": s["mode"],
                "nm": s["nm"], "A": repr(float(s["A"])), "aa": aa, "exclude": s["exclude"],
                "ev": float(s["ev"]), "buf": product(big),
                "tab": sum((outd[i] * taps[i] for i in range(k)), 0), "nq": sum(outd, 0)}

    def infer(self, node):
        x = node.inputs[0]
        return [(x.etype, tuple(self.plan(node)["out_shape"]))]

    def params(self, node):
        x = node.inputs[0]
        pl = self.plan(node)
        buf = pl["buf"] if pl.get("dynamic") else max([p["numel"] for p in pl["passes"][:-1]] + [0])
        et = x.etype
        if et.name in ("float", "double", "float16", "bfloat16"):
            lo = hi = None
        else:
            info = np.iinfo(et.np)
            lo, hi = int(info.min), int(info.max)
        return {**pl, "buf": buf, "lo": lo, "hi": hi, "ev": repr(pl["ev"]) if math.isfinite(pl["ev"])
                else ("NAN" if pl["ev"] != pl["ev"] else ("INFINITY" if pl["ev"] > 0 else "-INFINITY"))}

    def scratch(self, node):
        pl = self.plan(node)
        if pl.get("dynamic"):    # two double buffers, then one axis's taps (indices, weights, flags)
            return 8 * (2 * pl["buf"] + 2 * pl["tab"]) + pl["nq"] + 64
        mids = [p["numel"] for p in pl["passes"][:-1]]
        return 8 * (max(mids[0::2] + [0]) + max(mids[1::2] + [0])) + 64


def _coeffs(node, mode, nearest_mode, antialias, A):
    if mode == "nearest":
        if antialias:
            raise fail(node, "antialias is not supported with mode 'nearest'")
        return _nearest(nearest_mode)
    if mode == "cubic":
        return _cubic_aa(A) if antialias else _cubic(A)
    return _linear_aa if antialias else _linear


@register
class Resize(_ResizeBase):
    op_type = "Resize"
    since = 10

    def settings(self, node):
        op = node.opset
        mode = attr_enum(node, "mode", ("nearest", "linear", "cubic") if op >= 11 else ("nearest", "linear"))
        x = node.inputs[0]
        if op < 11:
            scales = _data(node, 1, "scales", np.float64)
            return {"scales": scales, "sizes": None, "roi": None,
                    "axes": None, "policy": "stretch", "ctm": "asymmetric", "exclude": False, "ev": 0.0,
                    "coeffs": _coeffs(node, mode, "floor", False, -0.75),
                    "mode": mode, "nm": "floor", "A": -0.75, "antialias": False}
        ctm = attr_enum(node, "coordinate_transformation_mode",
                        CTM if op >= 19 else tuple(c for c in CTM if c != "half_pixel_symmetric")
                        + (("tf_half_pixel_for_nn",) if op == 11 else ()))
        nm = attr_enum(node, "nearest_mode", NEAREST)
        antialias = int(node.attr("antialias", 0) or 0) if op >= 18 else 0
        if antialias not in (0, 1):
            raise fail(node, f"attribute antialias={antialias} must be 0 or 1")
        axes = node.attr("axes") if op >= 18 else None
        if axes is not None:
            axes = [norm_axis(node, int(a), x.rank, "axes") for a in axes]
        policy = attr_enum(node, "keep_aspect_ratio_policy", ("stretch", "not_larger", "not_smaller")) \
            if op >= 18 else "stretch"
        roi = _data(node, 1, "roi", np.float64) if ctm == "tf_crop_and_resize" else None
        scales = _data(node, 2, "scales", np.float64)
        sizes = _data(node, 3, "sizes", np.int64) if len(node.inputs) > 3 else None
        if (scales is None) == (sizes is None):
            raise fail(node, "exactly one of scales and sizes must be given")
        if ctm == "tf_half_pixel_for_nn":
            raise OrtNotImplemented(f"{node.describe()}: coordinate_transformation_mode "
                                    "tf_half_pixel_for_nn is not supported")
        exclude = int(node.attr("exclude_outside", 0) or 0)
        A = float(node.attr("cubic_coeff_a", -0.75))
        return {"scales": scales, "sizes": sizes, "roi": roi,
                "axes": axes, "policy": policy, "ctm": ctm, "exclude": bool(exclude),
                "ev": float(node.attr("extrapolation_value", 0.0) or 0.0),
                "coeffs": _coeffs(node, mode, nm, antialias, A),
                "mode": mode, "nm": nm, "A": A, "antialias": bool(antialias)}


@register
class Upsample(_ResizeBase):
    op_type = "Upsample"
    since = 7
    until = 9

    def settings(self, node):
        mode = attr_enum(node, "mode", ("nearest", "linear", "bilinear"))
        mode = "linear" if mode == "bilinear" else mode
        if node.opset < 9:
            scales = node.attr("scales")
            scales = None if scales is None else np.asarray(scales, np.float64).ravel()
        else:
            scales = _data(node, 1, "scales", np.float64)
        if scales is None:
            raise fail(node, "scales are required")
        return {"scales": scales, "sizes": None, "roi": None, "axes": None,
                "policy": "stretch", "ctm": "asymmetric", "exclude": False, "ev": 0.0,
                "coeffs": _coeffs(node, mode, "floor", False, -0.75),
                "mode": mode, "nm": "floor", "A": -0.75, "antialias": False}


def _data(node, i, what, dt):
    """Input i as a flat numpy array, the Value the caller passes (read before the run), or
    None when omitted or empty."""
    if node.input(i) is None:
        return None
    a = data_input(node, i, what)
    if isinstance(a, Value):
        return a if product(a.shape) != 0 else None
    a = np.asarray(a, dt).ravel()
    return a if a.size else None
