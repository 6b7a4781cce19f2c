"""FusedAttention (passes/fuse_attention.py): an exported scaled dot-product attention as one
kernel (runtime_c/onnxc_attention.h).

Inputs: Qx, Kx, Vx, [mask]: the tensors the export's Transposes read (or the MatMuls' operands when
no Transpose was absorbed). Attributes: "perms" maps each of "q", "k", "v" to the perm that turns
its input into the MatMul operand (None: the input is the operand), "y" to the perm of the
absorbed output Transpose (None: the output is the second MatMul's); "mode" 0/1/2 (none, multiply,
divide the scores by the constant "c"); "cq", "ck": the constants Q and K^T were multiplied by
before the product (None: not); "fill": the constant NaN probabilities become (None: they stay).
The logical operands are Q (B, H, Sq, D), K^T (B, H, D, Skv), V (B, H, Skv, Dv); the mask broadcasts
to (B, H, Sq, Skv), checked while running where its dims are known only then. Everything becomes
strides.
"""
from __future__ import annotations

from ..passes import PRIVATE_DOMAIN
from ..symbolic import dmax, dmin, product
from .gemm import c_float, sgemm_work_bytes
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
    """How `mask` is read broadcast to the 4-D `target` shape, per axis {"dim", "stride", "static"}:
    a static stride (0 along an axis of 1), or, where the dim is known only while running, its
    contiguous stride taken when the dim is not 1 (checked then to be 1 or the target's). None when
    the mask cannot broadcast (more than 4 dims, or a dim that is neither 1 nor the target's)."""
    shape = list(mask.shape)
    if len(shape) > 4:
        return None
    st = contiguous(shape)
    out = [{"dim": 1, "stride": 0, "static": True, "target": t} for t in target[:4 - len(shape)]]
    for a, d in enumerate(shape):
        t = target[a + 4 - len(shape)]
        if d == 1 or d == t:
            out.append({"dim": d, "stride": 0 if d == 1 else st[a], "static": True, "target": t})
        elif isinstance(d, int) and isinstance(t, int):
            return None
        else:
            out.append({"dim": d, "stride": st[a], "static": False, "target": t})
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
            "y_shape": tuple(y_shape), "m": mask_strides(mask, o_shape[:3] + [Skv]) if mask is not None else None,
            "qscale": node.attrs.get("cq") is not None, "kscale": node.attrs.get("ck") is not None}


def block_rows(Sq, Skv):
    """Query rows per block: ROWS_MAX, fewer for long key sequences (the scores stay in L2)."""
    rows = ROWS_MAX
    if isinstance(Skv, int) and Skv > 0:
        rows = max(8, min(ROWS_MAX, SCORES_FLOATS // Skv))
    return dmin(Sq, rows) if not isinstance(Sq, int) else max(1, min(Sq, rows))


def slot_bytes(R, Skv, D, Dv, qscale, kscale):
    """At least ONNXC_ATTN_SLOT_BYTES rounded up to 64 (runtime_c/onnxc_attention.h): each of its
    roundings adds less than 64."""
    copies = (4 * R * D if qscale else 0) + (4 * Skv * D if kscale else 0)
    return 4 * R * Skv + copies + dmax(sgemm_work_bytes(R, Skv, D), sgemm_work_bytes(R, Dv, Skv)) + 384


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
        a = node.attrs
        return {**g, "rows": block_rows(g["Sq"], g["Skv"]), "slots": SLOTS, "mode": int(a["mode"]),
                "c": c_float(a["c"], "float"), "cq": c_float(a["cq"] if g["qscale"] else 1.0, "float"),
                "ck": c_float(a["ck"] if g["kscale"] else 1.0, "float"), "nan_fill": a.get("fill") is not None,
                "fill": c_float(a["fill"] if a.get("fill") is not None else 0.0, "float"), "mask": g["m"] is not None,
                "mask_checks": [e for e in g["m"] or [] if not e["static"]]}

    def scratch(self, node):
        g = geometry(node)
        R = block_rows(g["Sq"], g["Skv"])
        return SLOTS * slot_bytes(R, g["Skv"], g["D"], g["Dv"], g["qscale"], g["kscale"]) + 64
