"""FusedAttention (passes/fuse_attention.py): an exported scaled dot-product attention as one
kernel (runtime_c/onnxc_attention.h).

Inputs: Qx, Kx, Vx, [mask]: the tensors the export's Transposes read (or the MatMuls' operands when
no Transpose was absorbed). Attributes: "perms" maps each of "q", "k", "v" to the Transpose perm
that turns its input into the MatMul operand (None: the input is the operand), "y" to the perm of
the absorbed output Transpose (None: the output is the second MatMul's); "mode" 0/1/2 (none,
multiply, divide by the constant "c"). The logical operands are Q (B, H, Sq, D), K^T (B, H, D, Skv),
V (B, H, Skv, Dv); the mask broadcasts to (B, H, Sq, Skv). Everything becomes strides.
"""
from __future__ import annotations

import numpy as np

from ..passes import PRIVATE_DOMAIN
from ..symbolic import dmax, dmin, product
from .gemm import sgemm_work_bytes
from .registry import OpSpec, register

SLOTS = 8            # threads with a workspace slot each (the attention of a layer has B x H blocks
                     # or more; a batched MatMul uses 8 too)
ROWS_MAX = 128       # query rows per block ...
SCORES_FLOATS = 65536  # ... fewer when a block's scores (rows x Skv floats) would pass 256 KB


def contiguous(shape) -> list:
    return [product(shape[a + 1:]) for a in range(len(shape))]


def logical(value, perm) -> tuple[list, list]:
    """(shape, strides) of Transpose(value, perm) read in place (perm None: value itself)."""
    st = contiguous(value.shape)
    if perm is None:
        return list(value.shape), st
    return [value.shape[p] for p in perm], [st[p] for p in perm]


def mask_strides(mask, target) -> list | None:
    """Strides reading `mask` broadcast to the 4-D `target` shape (0 along broadcast axes), or None
    when a dim is neither 1 nor the target's."""
    shape = list(mask.shape)
    if len(shape) > 4:
        return None
    st = contiguous(shape)
    out = [0] * (4 - len(shape))
    for a, d in enumerate(shape):
        t = target[a + 4 - len(shape)]
        if d == 1:
            out.append(0)
        elif d == t:
            out.append(st[a])
        else:
            return None
    return out


def geometry(node) -> dict:
    perms = node.attrs["perms"]
    (qsh, qs), (ksh, kts), (vsh, vs) = (logical(node.inputs[i], perms[n]) for i, n in enumerate("qkv"))
    B, H, Sq, D = qsh
    Skv, Dv = ksh[3], vsh[3]
    ks = [kts[0], kts[1], kts[3], kts[2]]              # K^T (b, h, d, j) read as K (b, h, j, d)
    o_shape = [B, H, Sq, Dv]
    yp = perms["y"]
    if yp is None:
        y_shape, ys = o_shape, contiguous(o_shape)
    else:
        y_shape = [o_shape[p] for p in yp]
        yst = contiguous(y_shape)
        ys = [yst[yp.index(c)] for c in range(4)]
    mask = node.input(3)
    return {"B": B, "H": H, "Sq": Sq, "Skv": Skv, "D": D, "Dv": Dv, "q": qs, "k": ks, "v": vs, "y": ys,
            "y_shape": tuple(y_shape), "m": mask_strides(mask, o_shape[:3] + [Skv]) if mask is not None else None}


def block_rows(Sq, Skv):
    """Query rows per block: ROWS_MAX, fewer for long key sequences (the scores stay in L2)."""
    rows = ROWS_MAX
    if isinstance(Skv, int) and Skv > 0:
        rows = max(8, min(ROWS_MAX, SCORES_FLOATS // Skv))
    return dmin(Sq, rows) if not isinstance(Sq, int) else max(1, min(Sq, rows))


def slot_bytes(R, Skv, D, Dv):
    """At least ONNXC_ATTN_SLOT_BYTES rounded up to 64 (runtime_c/onnxc_attention.h): each of the
    two roundings adds less than 64."""
    return 4 * R * Skv + dmax(sgemm_work_bytes(R, Skv, D), sgemm_work_bytes(R, Dv, Skv)) + 256


@register
class FusedAttention(OpSpec):
    op_type = "FusedAttention"
    domain = PRIVATE_DOMAIN
    template = "fused_attention.c.j2"
    headers = ("onnxc_attention.h",)

    def infer(self, node):
        return [(node.inputs[0].etype, geometry(node)["y_shape"])]

    def params(self, node):
        g = geometry(node)
        c = float(node.attrs["c"])
        return {**g, "rows": block_rows(g["Sq"], g["Skv"]), "slots": SLOTS, "mode": int(node.attrs["mode"]),
                "c": repr(float(np.float32(c))) + "f", "mask": g["m"] is not None}

    def scratch(self, node):
        g = geometry(node)
        return SLOTS * slot_bytes(block_rows(g["Sq"], g["Skv"]), g["Skv"], g["D"], g["Dv"]) + 64
