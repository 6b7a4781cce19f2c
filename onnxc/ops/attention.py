"""Attention (opsets 23-25) and RotaryEmbedding (23).

Attention is computed one query row at a time: scores against every key (past cache first),
softcap, additive bias (attn_mask, causal, sliding window, nonpad_kv_seqlen), a stable softmax,
then the weighted sum of values. Semantics follow onnx.reference: Q and K are each scaled by
sqrt(scale) rounded to the input type; a row whose bias is -inf everywhere gives zeros; a bool
mask is 0 (True) / -inf (False); a mask shorter than the key sequence is padded with -inf;
causal masking is bottom-right aligned (offset = past length, or nonpad_kv_seqlen[b] - Sq).
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from .. import dtypes
from ..errors import NotImplemented as OrtNotImplemented
from ..symbolic import product
from .common import attr_enum, fail
from .registry import OpSpec, register

D = dtypes.BY_NAME
FLOATS = (D["float"], D["double"], D["float16"], D["bfloat16"])
NP = {"float": np.float32, "double": np.float64, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}
SLOTS = 64   # per-thread row buffers in the scratch; more threads than this share nothing


def _clit(v: float, ct: str) -> str:
    if np.isnan(v):
        return "NAN"
    if np.isinf(v):
        return "INFINITY" if v > 0 else "-INFINITY"
    return repr(float(v)) + ("f" if ct == "float" else "")


def _round(etype) -> str:
    """Jinja-free C macro text rounding a computed value to the storage type (as the reference's
    casts do), the value staying in the compute type."""
    n = etype.name
    if n in ("float16", "bfloat16"):
        return f"onnxc_ld_{n}(onnxc_st_{n}(%s))"
    return f"(({etype.c})(%s))"


@register
class Attention(OpSpec):
    op_type = "Attention"
    since = 23
    template = "attention.c.j2"
    headers = ("onnxc_gemm.h",)

    def geometry(self, node) -> dict:
        q, k, v = node.inputs[:3]
        if q is None or k is None or v is None:
            raise fail(node, "inputs Q, K and V are required")
        for t in (q, k, v):
            if t.etype not in FLOATS:
                raise OrtNotImplemented(f"{node.describe()}: element type {t.etype.name} is not supported")
        if not q.etype == k.etype == v.etype:
            raise OrtNotImplemented(f"{node.describe()}: Q, K, V of different element types")
        if not q.rank == k.rank == v.rank or q.rank not in (3, 4):
            raise fail(node, f"Q, K, V must all be 3-D or all 4-D (ranks {q.rank}, {k.rank}, {v.rank})")
        B, Sq, Skv = q.shape[0], q.shape[-2], k.shape[-2]
        if q.rank == 3:
            hq, hkv = node.attr("q_num_heads"), node.attr("kv_num_heads")
            if hq is None or hkv is None:
                raise fail(node, "3-D inputs need attributes q_num_heads and kv_num_heads")
            hq, hkv = int(hq), int(hkv)
            if hq < 1 or hkv < 1:
                raise fail(node, f"q_num_heads={hq} and kv_num_heads={hkv} must be positive")
            widths = (q.shape[2], k.shape[2], v.shape[2])
            if not all(isinstance(w, int) for w in widths):
                raise OrtNotImplemented(f"{node.describe()}: symbolic hidden sizes are not supported")
            if widths[0] % hq or widths[1] % hkv or widths[2] % hkv:
                raise fail(node, f"hidden sizes {widths} are not divisible by the head counts ({hq}, {hkv})")
            dq, dk, dv = widths[0] // hq, widths[1] // hkv, widths[2] // hkv
        else:
            hq, hkv = q.shape[1], k.shape[1]
            dq, dk, dv = q.shape[3], k.shape[3], v.shape[3]
            if not all(isinstance(x, int) for x in (hq, hkv, dq, dk, dv)):
                raise OrtNotImplemented(f"{node.describe()}: symbolic head counts/sizes are not supported")
            if v.shape[1] != hkv:
                raise fail(node, f"K has {hkv} heads but V has {v.shape[1]}")
        if dq != dk:
            raise fail(node, f"Q head size {dq} differs from K head size {dk}")
        if hq % hkv:
            raise fail(node, f"q heads ({hq}) must be a multiple of kv heads ({hkv})")
        if v.shape[-2] != Skv and isinstance(v.shape[-2], int) and isinstance(Skv, int):
            raise fail(node, f"K and V sequence lengths differ ({Skv} vs {v.shape[-2]})")
        pk, pv = node.input(4), node.input(5)
        if (pk is None) != (pv is None):
            raise fail(node, "past_key and past_value must be given together")
        P = 0
        if pk is not None:
            if pk.rank != 4 or pv.rank != 4 or pk.etype != q.etype or pv.etype != q.etype:
                raise fail(node, "past_key/past_value must be 4-D of Q's element type")
            P = pk.shape[2]
            if (pk.shape[1], pk.shape[3], pv.shape[1], pv.shape[3]) != (hkv, dk, hkv, dv):
                raise fail(node, "past_key/past_value shapes do not match the heads and head sizes")
        nonpad = node.input(6)
        if nonpad is not None:
            if pk is not None:
                raise fail(node, "nonpad_kv_seqlen cannot be combined with past_key/past_value")
            if nonpad.etype != dtypes.INT64 or nonpad.rank != 1:
                raise fail(node, "nonpad_kv_seqlen must be a 1-D int64 tensor")
        return {"B": B, "Sq": Sq, "Skv": Skv, "P": P, "T": P + Skv, "hq": hq, "hkv": hkv,
                "d": dq, "dv": dv}

    def infer(self, node):
        g = self.geometry(node)
        q = node.inputs[0]
        mode = int(node.attr("qk_matmul_output_mode", 0) or 0)
        if mode not in (0, 1, 2, 3):
            raise fail(node, f"attribute qk_matmul_output_mode={mode} must be 0, 1, 2 or 3")
        if q.rank == 3:
            y = (g["B"], g["Sq"], g["hq"] * g["dv"])
        else:
            y = (g["B"], g["hq"], g["Sq"], g["dv"])
        shapes = [y, (g["B"], g["hkv"], g["T"], g["d"]), (g["B"], g["hkv"], g["T"], g["dv"]),
                  (g["B"], g["hq"], g["Sq"], g["T"])]
        return [(q.etype, s) for s in shapes[:len(node.outputs)]]

    def _mask(self, node, g) -> dict | None:
        m = node.input(3)
        if m is None:
            return None
        if m.rank < 1 or m.rank > 4:
            raise fail(node, f"attn_mask must have rank 1 to 4, got {m.rank}")
        full = (g["B"], g["hq"], g["Sq"])
        shape = [1] * (4 - m.rank) + list(m.shape)
        strides, acc = [0, 0, 0], shape[3]
        for k in (2, 1, 0):
            if shape[k] == 1 and full[k] != 1:
                strides[k] = 0
            elif shape[k] != full[k] and isinstance(shape[k], int) and isinstance(full[k], int):
                raise fail(node, f"attn_mask shape {tuple(m.shape)} does not broadcast to "
                           f"(batch, heads, q, kv) = {full}")
            else:
                strides[k] = acc
            acc = acc * shape[k]
        return {"len": shape[3], "sb": strides[0], "sh": strides[1], "si": strides[2],
                "bool": m.etype == dtypes.BOOL, "etype": m.etype.name}

    def params(self, node):
        g = self.geometry(node)
        q = node.inputs[0]
        et = q.etype
        prec = node.attr("softmax_precision")
        acc = "double" if et.name == "double" or (prec is not None and int(prec) == 11) else "float"
        scale = node.attr("scale")
        scale = 1.0 / np.sqrt(g["d"]) if scale is None else float(scale)
        ss = float(NP[et.name](np.sqrt(np.float64(scale))))
        softcap = float(node.attr("softcap", 0.0) or 0.0)
        is_causal = int(node.attr("is_causal", 0) or 0)
        if is_causal not in (0, 1):
            raise fail(node, f"attribute is_causal={is_causal} must be 0 or 1")
        left = int(node.attr("left_window_size", -1) if node.opset >= 25 else -1)
        right = int(node.attr("right_window_size", -1) if node.opset >= 25 else -1)
        if left < -1 or right < -1:
            raise fail(node, "left_window_size/right_window_size must be -1 or non-negative")
        B, Sq, Skv, hq, hkv, d, dv = (g[x] for x in ("B", "Sq", "Skv", "hq", "hkv", "d", "dv"))

        def strides(rank3: bool, h, s, w):   # (b, h, i) strides of a Q/K/V/Y-like tensor
            if rank3:
                return {"b": s * h * w, "h": w, "i": h * w}
            return {"b": h * s * w, "h": s * w, "i": w}

        r3 = q.rank == 3
        outs = node.outputs
        has = lambda i: len(outs) > i and outs[i] is not None
        return {
            **g, "acc": acc, "ss": _clit(ss, "double"), "softcap": _clit(softcap, acc) if softcap > 0 else None,
            "causal": bool(is_causal), "left": left, "right": right,
            "reps": hq // hkv, "mode": int(node.attr("qk_matmul_output_mode", 0) or 0),
            "qs": strides(r3, hq, Sq, d), "ks": strides(r3, hkv, Skv, d), "vs": strides(r3, hkv, Skv, dv),
            "ys": strides(r3, hq, Sq, dv), "mask": self._mask(node, g),
            "past": node.input(4) is not None, "nonpad": node.input(6) is not None,
            "present_k": has(1), "present_v": has(2), "qk_out": has(3),
            "rnd": _round(et), "rnd_sm": _round(et) if prec is None or int(prec) == et.onnx else "(%s)",
            "slots": SLOTS, "slot_elems": d + g["T"] + dv,
            "rows": B * hq * Sq, "work": B * hq * Sq * g["T"] * (d + dv),
        }

    def scratch(self, node):
        g = self.geometry(node)
        return SLOTS * ((g["d"] + g["T"] + g["dv"]) * 8 + 64)


@register
class RotaryEmbedding(OpSpec):
    op_type = "RotaryEmbedding"
    since = 23
    template = "rotary_embedding.c.j2"

    def geometry(self, node):
        x, cos, sin = node.inputs[:3]
        pos = node.input(3)
        if x.etype not in FLOATS or cos.etype != x.etype or sin.etype != x.etype:
            raise OrtNotImplemented(f"{node.describe()}: element types {x.etype.name}/{cos.etype.name} "
                                    "are not supported (float types, all alike)")
        if x.rank not in (3, 4):
            raise fail(node, f"input must be 3-D or 4-D, got rank {x.rank}")
        nh = int(node.attr("num_heads", 0) or 0)
        if x.rank == 4:
            B, H, S, hd = x.shape       # (batch, heads, seq, head_size)
            layout = {"sb": H * S * hd, "sh": S * hd, "ss": hd}
        else:
            if nh <= 0:
                raise fail(node, "3-D input needs attribute num_heads")
            B, S, hidden = x.shape
            if not isinstance(hidden, int) or hidden % nh:
                raise fail(node, f"hidden size {hidden} is not divisible by num_heads={nh}")
            H, hd = nh, hidden // nh
            layout = {"sb": S * hidden, "sh": hd, "ss": hidden}
        if not isinstance(hd, int):
            raise OrtNotImplemented(f"{node.describe()}: symbolic head size is not supported")
        rd = int(node.attr("rotary_embedding_dim", 0) or 0)
        rd = hd if rd == 0 else rd
        if rd < 2 or rd > hd or rd % 2:
            raise fail(node, f"rotary_embedding_dim={rd} must be even and within the head size {hd}")
        inter = int(node.attr("interleaved", 0) or 0)
        if inter not in (0, 1):
            raise fail(node, f"attribute interleaved={inter} must be 0 or 1")
        half = rd // 2
        if pos is not None:
            if cos.rank != 2 or pos.etype != dtypes.INT64:
                raise fail(node, "with position_ids, cos/sin caches must be 2-D and position_ids int64")
            cs = {"cb": 0, "cs": half, "rows": cos.shape[0]}
        else:
            if cos.rank != 3:
                raise fail(node, "without position_ids, cos/sin caches must be 3-D (batch, seq, rot/2)")
            cs = {"cb": S * half, "cs": half, "rows": None}
        if cos.shape[-1] != half or sin.shape != cos.shape:
            raise fail(node, f"cos/sin caches must end in rotary_embedding_dim/2 = {half}")
        return {"B": B, "H": H, "S": S, "hd": hd, "half": half, "inter": bool(inter),
                "pos": pos is not None, **layout, **cs}

    def infer(self, node):
        self.geometry(node)
        x = node.inputs[0]
        return [(x.etype, x.shape)]

    def params(self, node):
        g = self.geometry(node)
        return {**g, "work": product(node.inputs[0].shape)}
