"""LinearAttention (opset 27): recurrent linear attention with linear/gated/delta/gated_delta rules.

Inputs are 3-D packed (B, T, H*D); the state is (B, H_kv, d_k, d_v). Each (batch, kv head) pair is
one independent task (the recurrence over T is sequential), run in parallel. Per token t:
  gated:  S *= exp(g_t)                       (g per head or per key dim)
  delta:  u = beta_t * (v_t - S^T k_t)        (else u = v_t)
  write:  S += k_t (x) u
  read:   o_t = scale * q_t^T S               for each query head of the kv head's group (GQA)
Everything is computed in float whatever the storage type, as onnx.reference does (the state is
rounded to float after each step); present_state takes past_state's type, or query's without it.
"""
from __future__ import annotations

import math

import numpy as np

from .. import dtypes
from ..symbolic import product
from .common import attr_enum, fail
from .registry import OpSpec, register

RULES = ("linear", "gated", "delta", "gated_delta")
TYPES = ("float", "float16", "bfloat16")   # the schema's T and S (no double)
NAMES = ("query", "key", "value", "past_state", "decay", "beta")


def _static(d) -> bool:
    return isinstance(d, int)


def _flit(v: float) -> str:
    """A float literal rounded to float32 (the reference multiplies float32 arrays by it)."""
    v = float(np.float32(v))
    if math.isnan(v):
        return "NAN"
    if math.isinf(v):
        return "INFINITY" if v > 0 else "(-INFINITY)"
    s = f"{np.float32(v)}f"
    return f"({s})" if s.startswith("-") else s


@register
class LinearAttention(OpSpec):
    op_type = "LinearAttention"
    since = 27
    template = "linear_attention.c.j2"

    def geometry(self, node) -> dict:
        ins = [node.input(i) for i in range(6)]
        q, k, v, past, decay, beta = ins
        for i in range(3):
            if ins[i] is None:
                raise fail(node, f"input {i} ({NAMES[i]}) is required")
        if len(node.inputs) > 6:
            raise fail(node, f"LinearAttention takes at most 6 inputs, got {len(node.inputs)}")
        for i, x in enumerate(ins):
            if x is not None and x.etype.name not in TYPES:
                raise fail(node, f"input {i} ({NAMES[i]}) has element type {x.etype.name}; "
                                 f"LinearAttention-27 accepts {', '.join(TYPES)}")
        for i in (1, 2, 4, 5):
            if ins[i] is not None and ins[i].etype != q.etype:
                raise fail(node, f"input {i} ({NAMES[i]}) is {ins[i].etype.name} but query is "
                                 f"{q.etype.name}; they share type T")
        rule = attr_enum(node, "update_rule", RULES)
        gating, delta = rule in ("gated", "gated_delta"), rule in ("delta", "gated_delta")
        if gating != (decay is not None):
            raise fail(node, f"update_rule={rule!r} {'requires' if gating else 'forbids'} input 4 (decay)")
        if delta != (beta is not None):
            raise fail(node, f"update_rule={rule!r} {'requires' if delta else 'forbids'} input 5 (beta)")
        heads = []
        for name in ("q_num_heads", "kv_num_heads"):
            h = node.attr(name)
            if h is None:
                raise fail(node, f"required attribute {name} is missing")
            heads.append(int(h))
        hq, hkv = heads
        if hq <= 0 or hkv <= 0 or hq % hkv:
            raise fail(node, f"q_num_heads ({hq}) must be a positive multiple of kv_num_heads ({hkv})")
        for i in (0, 1, 2, 4, 5):
            x = ins[i]
            if x is not None and x.rank != 3:
                raise fail(node, f"input {i} ({NAMES[i]}) must be 3-D packed (B, T, H*D), got shape "
                                 f"{tuple(x.shape)}")
        widths = [q.shape[2], k.shape[2], v.shape[2]]
        if not all(_static(w) for w in widths):
            raise fail(node, "the packed hidden sizes of query, key and value must be known at compile time")
        if widths[0] % hq:
            raise fail(node, f"query hidden size {widths[0]} is not divisible by q_num_heads ({hq})")
        if widths[2] % hkv:
            raise fail(node, f"value hidden size {widths[2]} is not divisible by kv_num_heads ({hkv})")
        dk, dv = widths[0] // hq, widths[2] // hkv
        if widths[1] != hkv * dk:
            raise fail(node, f"key hidden size {widths[1]} must be kv_num_heads * d_k = {hkv} * {dk}")
        B, T = q.shape[0], q.shape[1]
        checks = []          # (dim, dim) pairs equal unless the run's shapes are inconsistent

        def same(i, axis, want, what):
            d = ins[i].shape[axis]
            if _static(d) and _static(want):
                if d != want:
                    raise fail(node, f"input {i} ({NAMES[i]}) has {what} {d}, expected {want} "
                                     f"(shape {tuple(ins[i].shape)})")
            elif d != want:
                checks.append((d, want))
        for i in (1, 2, 4, 5):
            if ins[i] is not None:
                same(i, 0, B, "batch size")
                same(i, 1, T, "sequence length")
        decay_w = beta_w = 0
        if decay is not None:
            decay_w = decay.shape[2]
            if decay_w not in (hkv, hkv * dk):
                raise fail(node, f"input 4 (decay) last dim {decay_w} must be kv_num_heads ({hkv}) or "
                                 f"kv_num_heads*d_k ({hkv * dk})")
        if beta is not None:
            beta_w = beta.shape[2]
            if beta_w not in (hkv, 1):
                raise fail(node, f"input 5 (beta) last dim {beta_w} must be kv_num_heads ({hkv}) or 1")
        if past is not None:
            if past.rank != 4:
                raise fail(node, f"input 3 (past_state) must be 4-D (B, H_kv, d_k, d_v), got shape "
                                 f"{tuple(past.shape)}")
            same(3, 0, B, "batch size")
            for axis, want in ((1, hkv), (2, dk), (3, dv)):
                same(3, axis, want, ("kv heads", "d_k", "d_v")[axis - 1])
        scale = float(node.attr("scale", 0.0) or 0.0)
        if scale == 0.0:
            scale = 1.0 / math.sqrt(dk) if dk else math.inf
        return {"B": B, "T": T, "hq": hq, "hkv": hkv, "group": hq // hkv, "dk": dk, "dv": dv,
                "gating": gating, "delta": delta, "checks": checks, "scale": scale,
                "decay_per_key": decay_w == hkv * dk and decay_w != hkv, "decay_w": decay_w,
                "beta_per_head": beta_w == hkv and hkv != 1, "beta_w": beta_w}

    def infer(self, node):
        g = self.geometry(node)
        q, past = node.inputs[0], node.input(3)
        st = past.etype if past is not None else q.etype
        outs = [(q.etype, (g["B"], g["T"], g["hq"] * g["dv"])), (st, (g["B"], g["hkv"], g["dk"], g["dv"]))]
        return outs[:len(node.outputs)]

    def _layout(self, node, g) -> dict:
        """Per-task float workspace: [state unless present_state (float) holds it][u (d_v)][o (group*d_v)],
        each task's block a multiple of 16 floats (64 bytes: no false sharing)."""
        out = node.outputs[1] if len(node.outputs) > 1 else None
        in_scratch = out is None or out.etype != dtypes.BY_NAME["float"]
        s_len = g["dk"] * g["dv"] if in_scratch else 0
        stride = s_len + g["dv"] + g["group"] * g["dv"]
        stride = -(-stride // 16) * 16
        return {"state_in_scratch": in_scratch, "off_u": s_len, "off_o": s_len + g["dv"], "stride": stride}

    def params(self, node):
        g = self.geometry(node)
        g.update(self._layout(node, g))
        g["scale"] = _flit(g["scale"])
        g["work"] = product([g["B"], g["T"], g["hkv"], g["dk"], g["dv"], 2 + g["group"]])
        return g

    def scratch(self, node):
        g = self.geometry(node)
        return g["B"] * (g["hkv"] * self._layout(node, g)["stride"] * 4)
