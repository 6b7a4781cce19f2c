"""DeformConv (opsets 19, 22): deformable 2-D convolution (with optional modulation mask).

Each kernel tap (kh, kw) of output pixel (i, j) samples input channel c at
  (i * stride_h - pad_top + kh * dil_h + offset_h, j * stride_w - pad_left + kw * dil_w + offset_w)
with bilinear interpolation, zero outside the image (onnx.reference: GridSample, align_corners=1,
zeros padding), times mask; offsets and mask come per offset group (C / offset_group input
channels each). Per image and group the samples fill a K x out-pixels matrix (K = C/group * kH
* kW) in the node scratch and one GEMM with the group's weights gives its output channels.
float16/bfloat16 compute in float (weights converted once per call, Y rounded once on store).
Only 2-D is implemented (as in onnx.reference); channels, spatial dims and kernel must be
static, the batch may be symbolic.
"""
from __future__ import annotations

from .. import dtypes
from ..errors import NotImplemented as OrtNotImplemented
from ..symbolic import dim_repr
from .common import attr_ints, fail
from .gemm import LOWP, check_type, gemm_kernel, lowp_buffers, sgemm_work_bytes
from .registry import OpSpec, register

D = dtypes.BY_NAME
TYPES = (D["float"], D["double"]) + LOWP


def _fmt(shape) -> str:
    return "(" + ", ".join(dim_repr(d) for d in shape) + ")"


def _align(n: int) -> int:
    return -(-n // 64) * 64


def _static(node, what: str, dims) -> list[int]:
    if not all(isinstance(d, int) for d in dims):
        raise OrtNotImplemented(f"{node.describe()}: {what} must be static for DeformConv, got "
                                f"{_fmt(dims)}; only the batch dimension may be symbolic")
    return list(dims)


@register
class DeformConv(OpSpec):
    op_type = "DeformConv"
    since = 19
    template = "deform_conv.c.j2"
    headers = ("onnxc_gemm.h",)

    def geometry(self, node) -> dict:
        x, w, off, b, mask = node.inputs[0], node.inputs[1], node.inputs[2], node.input(3), node.input(4)
        if x.rank != 4:
            if x.rank >= 3:
                raise OrtNotImplemented(f"{node.describe()}: {x.rank - 2}-D DeformConv is not supported "
                                        "(2-D only, as in onnx.reference)")
            raise fail(node, f"input X must be N x C x H x W, got shape {_fmt(x.shape)}")
        if w.rank != 4:
            raise fail(node, f"input W has shape {_fmt(w.shape)}, expected rank 4 like X {_fmt(x.shape)}")
        C, H, W = _static(node, "the channel and spatial dimensions of X", x.shape[1:])
        M, Cg, kH, kW = _static(node, "the shape of W", w.shape)
        group, og = int(node.attr("group", 1)), int(node.attr("offset_group", 1))
        if group < 1 or C != Cg * group or M % group != 0:
            raise fail(node, f"X {_fmt(x.shape)} and W {_fmt(w.shape)} do not fit group={group} "
                       f"(need C = W.shape[1] * group and W.shape[0] divisible by group)")
        if og < 1 or C % og != 0:
            raise fail(node, f"attribute offset_group={og} must be >= 1 and divide the {C} input channels")
        ks = attr_ints(node, "kernel_shape")
        if ks is not None and list(ks) != [kH, kW]:
            raise fail(node, f"attribute kernel_shape={ks} does not match W's spatial dims {[kH, kW]}")
        if kH < 1 or kW < 1:
            raise fail(node, f"W's spatial dims {[kH, kW]} must be >= 1")
        strides = attr_ints(node, "strides") or [1, 1]
        dil = attr_ints(node, "dilations") or [1, 1]
        pads = attr_ints(node, "pads") or [0, 0, 0, 0]
        for name, v, n, lo in (("strides", strides, 2, 1), ("dilations", dil, 2, 1), ("pads", pads, 4, 0)):
            if len(v) != n or any(e < lo for e in v):
                raise fail(node, f"attribute {name}={v}: expected {n} values >= {lo}")
        oH = (H + pads[0] + pads[2] - (kH - 1) * dil[0] - 1) // strides[0] + 1
        oW = (W + pads[1] + pads[3] - (kW - 1) * dil[1] - 1) // strides[1] + 1
        if oH < 1 or oW < 1:
            raise fail(node, f"input {H}x{W} with kernel {kH}x{kW}, dilations {dil}, strides {strides} and "
                       f"pads {pads} gives an output of {oH}x{oW}")
        N = x.shape[0]
        want = {"offset": (off, (N, og * kH * kW * 2, oH, oW)), "mask": (mask, (N, og * kH * kW, oH, oW)),
                "B": (b, (M,))}
        for name, (v, shape) in want.items():
            if v is None:
                continue
            if v.rank != len(shape) or any(isinstance(d, int) and isinstance(e, int) and d != e
                                           for d, e in zip(v.shape, shape)):
                raise fail(node, f"input {name} has shape {_fmt(v.shape)}, expected {_fmt(shape)}")
        return {"N": N, "C": C, "H": H, "W": W, "M": M, "G": group, "Cg": Cg, "Mg": M // group,
                "OG": og, "CpOG": C // og, "kH": kH, "kW": kW, "sH": strides[0], "sW": strides[1],
                "dH": dil[0], "dW": dil[1], "pT": pads[0], "pL": pads[1], "oH": oH, "oW": oW}

    def infer(self, node):
        x = node.inputs[0]
        check_type(node, x.etype, TYPES)
        for i, name in ((1, "W"), (2, "offset"), (3, "B"), (4, "mask")):
            v = node.input(i)
            if v is not None and v.etype != x.etype:
                raise fail(node, f"input {name} has element type {v.etype.name}, X has {x.etype.name}")
        g = self.geometry(node)
        return [(x.etype, (g["N"], g["M"], g["oH"], g["oW"]))]

    def params(self, node):
        g = self.geometry(node)
        x = node.inputs[0]
        lowp = x.etype in LOWP
        kind = gemm_kernel(x.etype)
        K, osp = g["Cg"] * g["kH"] * g["kW"], g["oH"] * g["oW"]
        csize = 4 if lowp else x.etype.itemsize
        col_bytes = _align(K * osp * csize)
        work = sgemm_work_bytes(g["Mg"], osp, K) if kind == "s" else 0
        # float16/bfloat16: the weights in float, and one image's output in float
        lp = lowp_buffers(x.etype, col_bytes + work, [g["M"] * K, g["M"] * osp])
        return {**g, **lp, "K": K, "OSP": osp, "kind": kind, "cc": x.etype.cc, "work_off": col_bytes,
                "has_bias": node.input(3) is not None, "has_mask": node.input(4) is not None}

    def scratch(self, node):
        return self.params(node)["end"]
