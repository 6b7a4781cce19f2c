"""ConvTranspose (1-D to 3-D; group, pads, output_padding, output_shape, auto_pad, dilations,
strides) as GEMM + col2im.

Per image and group: col (Mg*K x in-pixels) = W_g^T X_g with onnxc_gemm.h, then every column
entry is added to the output pixel it lands on (out = in * stride - pad_begin + k * dilation),
one output channel per thread (no write conflicts). Y starts as the bias (or zeros).
Padding: given pads, or, when output_shape is given or auto_pad is SAME_*, derived from
total = stride * (in - 1) + output_padding + (kernel - 1) * dilation + 1 - out, split as the
ONNX spec says (SAME_UPPER puts the larger half at the end). Channels, kernel and spatial
dims must be static; the batch may be symbolic.
"""
from __future__ import annotations

from .. import dtypes
from ..errors import NotImplemented as OrtNotImplemented
from ..symbolic import align_up, dim_repr, product
from .common import attr_enum, attr_ints, fail
from .gemm import check_type, gemm_kernel, sgemm_work_bytes
from .registry import OpSpec, register

D = dtypes.BY_NAME
FLOATS = (D["float"], D["double"])
AUTO_PAD = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")
LIMIT = 2 ** 31 - 1


def _fmt(shape) -> str:
    return "(" + ", ".join(dim_repr(d) for d in shape) + ")"


def _vals(node, name, vals, n, lo, hi=LIMIT):
    if len(vals) != n:
        raise fail(node, f"attribute {name} has {len(vals)} values, expected {n}")
    if any(not lo <= v <= hi for v in vals):
        raise fail(node, f"attribute {name}={vals}: values must be in [{lo}, {hi}]")
    return vals


def geometry(node) -> dict:
    x, w = node.inputs[0], node.inputs[1]
    if x.rank < 3:
        raise fail(node, f"input X must be N x C x spatial..., got shape {_fmt(x.shape)}")
    ns = x.rank - 2
    if ns > 3:
        raise OrtNotImplemented(f"{node.describe()}: {ns}-D ConvTranspose is not supported (1-D to 3-D)")
    if w.rank != x.rank:
        raise fail(node, f"input W has shape {_fmt(w.shape)}, expected rank {x.rank}")
    for dims, what in ((w.shape, "the shape of W"), (x.shape[1:], "the channel and spatial dims of X")):
        if not all(isinstance(d, int) for d in dims):
            raise OrtNotImplemented(f"{node.describe()}: {what} must be static, got {_fmt(dims)}")
    C, ins = x.shape[1], list(x.shape[2:])
    G = int(node.attr("group", 1))
    Cw, Mg, ks = w.shape[0], w.shape[1], list(w.shape[2:])
    if G < 1 or Cw != C or C % G:
        raise fail(node, f"X {_fmt(x.shape)} and W {_fmt(w.shape)} do not fit group={G} "
                   "(need W.shape[0] = C, divisible by group)")
    kattr = attr_ints(node, "kernel_shape")
    if kattr is not None and list(kattr) != ks:
        raise fail(node, f"attribute kernel_shape={kattr} does not match W's spatial dims {ks}")
    _vals(node, "kernel (W spatial dims)", ks, ns, 1)
    strides = _vals(node, "strides", attr_ints(node, "strides") or [1] * ns, ns, 1)
    dil = _vals(node, "dilations", attr_ints(node, "dilations") or [1] * ns, ns, 1)
    opad = _vals(node, "output_padding", attr_ints(node, "output_padding") or [0] * ns, ns, 0)
    pads = _vals(node, "pads", attr_ints(node, "pads") or [0] * (2 * ns), 2 * ns, 0)
    auto_pad = attr_enum(node, "auto_pad", AUTO_PAD)
    oshape = attr_ints(node, "output_shape")
    if oshape is not None:
        if len(oshape) == ns + 2:
            oshape = oshape[2:]
        _vals(node, "output_shape", oshape, ns, 0)
    outs, pb = [], []
    for k in range(ns):
        full = strides[k] * (ins[k] - 1) + opad[k] + (ks[k] - 1) * dil[k] + 1
        if oshape is not None or auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            out = oshape[k] if oshape is not None else ins[k] * strides[k]
            total = full - out
            begin = total // 2 if auto_pad == "SAME_UPPER" else total - total // 2
        elif auto_pad == "VALID":
            begin, out = 0, full
        else:
            begin, out = pads[k], full - pads[k] - pads[k + ns]
        if out < 0:
            raise fail(node, f"spatial dim {k}: the output size would be {out}")
        outs.append(out)
        pb.append(begin)
    lead = 3 - ns
    return {"ns": ns, "C": C, "M": Mg * G, "G": G, "Cg": C // G, "Mg": Mg,
            "I": [1] * lead + ins, "O": [1] * lead + outs, "KS": [1] * lead + ks,
            "S": [1] * lead + strides, "DL": [1] * lead + dil, "P": [0] * lead + pb}


@register
class ConvTranspose(OpSpec):
    op_type = "ConvTranspose"
    template = "conv_transpose.c.j2"
    headers = ("onnxc_gemm.h",)

    def infer(self, node):
        x, w, b = node.inputs[0], node.inputs[1], node.input(2)
        check_type(node, x.etype, FLOATS)
        for v, name in ((w, "W"), (b, "B")):
            if v is not None and v.etype != x.etype:
                raise fail(node, f"input {name} has element type {v.etype.name}, X has {x.etype.name}")
        g = geometry(node)
        if b is not None and tuple(b.shape) != (g["M"],):
            raise fail(node, f"input B has shape {_fmt(b.shape)}, expected ({g['M']},)")
        return [(x.etype, (x.shape[0], g["M"]) + tuple(g["O"][3 - g["ns"]:]))]

    def _sizes(self, node, g):
        es = node.inputs[0].etype.itemsize
        R, isp = g["Mg"] * product(g["KS"]), product(g["I"])
        col = align_up(R * isp * es, 64)
        work = sgemm_work_bytes(R, isp, g["Cg"]) if gemm_kernel(node.inputs[0].etype) == "s" else 0
        return col, work

    def params(self, node):
        g = geometry(node)
        col, _ = self._sizes(node, g)
        return {**g, "N": node.inputs[0].shape[0], "KSP": product(g["KS"]), "ISP": product(g["I"]),
                "OSP": product(g["O"]), "R": g["Mg"] * product(g["KS"]), "col_bytes": col,
                "gemm": gemm_kernel(node.inputs[0].etype), "has_bias": node.input(2) is not None}

    def scratch(self, node):
        col, work = self._sizes(node, geometry(node))
        return col + work
