"""FlexAttention (ai.onnx.preview, opset 1): attention over rank-4 Q/K/V with optional
score_mod / prob_mod subgraphs.

Semantics follow onnx.reference: Q and K are each scaled by sqrt(scale) (the square root taken in
float32, rounded to the input type), Q.K^T is computed in the input type and cast to the softmax
type (softmax_precision; else float32 for 16-bit inputs, the input type otherwise); softmax is the
plain max/exp/sum/divide (a row of -inf or NaN gives NaN, as numpy does); P.V is computed in the
softmax type with V cast to it, then cast back to the input type. GQA: query head h reads K/V head
h / (Hq / Hkv).

Each modifier receives the whole (B, Hq, L, S) tensor (the spec's shape), so its body is compiled
for that shape and called once; the scores and probabilities then live in two scratch buffers of
the softmax type. Without modifiers nothing is materialised: one pass per query row.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from .. import dtypes, subgraph
from ..errors import NotImplemented as OrtNotImplemented
from ..planner import ALIGN
from ..symbolic import align_up, dmax, product
from .common import fail
from .registry import OpSpec, register

D = dtypes.BY_NAME
FLOATS = (D["float"], D["double"], D["float16"], D["bfloat16"])
NP = {"float": np.float32, "double": np.float64, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}
PRECISION = {1: D["float"], 10: D["float16"], 16: D["bfloat16"], 11: D["double"]}
SLOTS = 64          # per-thread row buffers; more threads than this share the loop over fewer
MODS = ("score_mod", "prob_mod")


def _round(etype, work: str) -> str:
    """C macro text rounding a work-type value to ``etype`` (the value stays in the work type)."""
    n = etype.name
    if n in ("float16", "bfloat16"):
        return f"onnxc_ld_{n}(onnxc_st_{n}(%s))"
    if n == work:
        return "(%s)"
    return f"(({etype.c})(%s))"


def _has_graph(node, name: str) -> bool:
    return any(a.name == name for a in node.proto.attribute)


@register
class FlexAttention(OpSpec):
    op_type = "FlexAttention"
    domain = "ai.onnx.preview"
    since = 1
    template = "flex_attention.c.j2"
    headers = ("onnxc_gemm.h", "onnxc_vmath.h")

    def geometry(self, node) -> dict:
        if len(node.inputs) < 3 or any(x is None for x in node.inputs[:3]):
            raise fail(node, "inputs Q, K and V are required")
        q, k, v = node.inputs[:3]
        for name, t in (("Q", q), ("K", k), ("V", v)):
            if t.etype not in FLOATS:
                raise fail(node, f"input {name} has element type {t.etype.name}; FlexAttention takes "
                           "float16, bfloat16, float or double")
            if t.rank != 4:
                raise fail(node, f"input {name} must be rank 4, got shape {tuple(t.shape)}")
        if not q.etype == k.etype == v.etype:
            raise fail(node, f"Q, K, V must share one element type ({q.etype.name}, {k.etype.name}, "
                       f"{v.etype.name})")
        B, hq, L, E = q.shape
        _, hkv, S, ek = k.shape
        _, hv, sv, ev = v.shape
        if not all(isinstance(x, int) for x in (hq, hkv, hv, E, ek, ev)):
            raise OrtNotImplemented(f"{node.describe()}: symbolic head counts or head sizes are not "
                                    "supported (only batch and sequence lengths may be symbolic)")

        def differ(a, b):
            return a != b and isinstance(a, int) and isinstance(b, int)

        if differ(k.shape[0], B) or differ(v.shape[0], B):
            raise fail(node, f"Q, K, V batch sizes differ ({B}, {k.shape[0]}, {v.shape[0]})")
        if hkv != hv:
            raise fail(node, f"K has {hkv} heads but V has {hv}")
        if differ(S, sv):
            raise fail(node, f"K and V sequence lengths differ ({S} vs {sv})")
        if ek != E:
            raise fail(node, f"Q head size {E} differs from K head size {ek}")
        if hkv < 1 or hq % hkv:
            raise fail(node, f"q heads ({hq}) must be a multiple of kv heads ({hkv})")
        prec = node.attr("softmax_precision")
        if prec is None:
            cet = D["float"] if q.etype.itemsize < 4 else q.etype
        elif int(prec) in PRECISION:
            cet = PRECISION[int(prec)]
        else:
            raise fail(node, f"attribute softmax_precision={prec} must be 1 (float), 10 (float16), "
                       "16 (bfloat16) or 11 (double)")
        return {"B": B, "hq": hq, "hkv": hkv, "L": L, "S": S, "E": E, "DV": ev, "et": q.etype, "cet": cet}

    def infer(self, node):
        g = self.geometry(node)
        scores = (g["B"], g["hq"], g["L"], g["S"])
        for attr in MODS:
            if not _has_graph(node, attr):
                continue
            body = subgraph.compile_body(node, attr, [(g["cet"], scores)])
            outs = body.outputs
            if len(outs) != 1:
                raise fail(node, f"the {attr} body gives {len(outs)} outputs; it must give exactly one")
            o = outs[0]
            if o.etype is not g["cet"]:
                got = o.etype.name if o.etype is not None else "a non-tensor"
                raise fail(node, f"the {attr} body gives {got}; it must give {g['cet'].name} "
                           "(the softmax precision type it receives)")
            if o.shape is None or tuple(o.shape) != scores:
                raise fail(node, f"the {attr} body gives shape {o.shape}; it must keep the shape "
                           f"(B, Hq, L, S) = {scores}")
        return [(g["et"], (g["B"], g["hq"], g["L"], g["DV"]))]

    def _layout(self, node, g) -> dict:
        """Scratch pieces (byte offsets): per-thread slots, pre-scaled K, V in the softmax type, and with modifiers the two
        (B, Hq, L, S) buffers and the bodies' arena (the bodies run one after the other)."""
        w = 8 if "double" in (g["et"].name, g["cet"].name) else 4
        parts, size = {}, 0

        def add(key, nbytes):
            nonlocal size
            parts[key] = size
            size = size + align_up(nbytes, ALIGN)

        add("slots", SLOTS * align_up((g["E"] + g["S"] + g["DV"]) * w, ALIGN))
        add("ks", g["B"] * g["hkv"] * g["S"] * g["E"] * w)
        add("vs", g["B"] * g["hkv"] * g["S"] * g["DV"] * w)
        if node.bodies:
            n = g["B"] * g["hq"] * g["L"] * g["S"] * g["cet"].itemsize
            add("buf0", n)
            add("buf1", n)
            arena = 0
            for b in node.bodies.values():
                arena = dmax(arena, b.arena_bytes)
            add("arena", arena)
        parts["size"] = size
        parts["slot"] = align_up((g["E"] + g["S"] + g["DV"]) * w, ALIGN)
        return parts

    def params(self, node):
        g = self.geometry(node)
        et, cet = g["et"], g["cet"]
        work = "double" if "double" in (et.name, cet.name) else "float"
        scale = node.attr("scale")
        scale = 1.0 / np.sqrt(g["E"]) if scale is None else float(scale)
        with np.errstate(invalid="ignore"):
            ss = float(NP[et.name](np.sqrt(np.float32(scale))))
        if not np.isfinite(ss):
            ss_c = "NAN" if np.isnan(ss) else ("INFINITY" if ss > 0 else "-INFINITY")
        else:
            ss_c = repr(ss)
        lay = self._layout(node, g)
        mods = {a: subgraph.call_params(node.bodies[a]) for a in MODS if a in node.bodies}
        rows = g["B"] * g["hq"] * g["L"]
        return {**g, "et": et.name, "cet": cet.name, "cct": cet.c, "W": work, "ss": ss_c,
                "rT": _round(et, work), "rC": _round(cet, work),
                "exp": "exp" if work == "double" else "onnxc_vexpf",
                "reps": g["hq"] // g["hkv"], "rows": rows, "nk": g["B"] * g["hkv"] * g["S"] * g["E"],
                "nv": g["B"] * g["hkv"] * g["S"] * g["DV"],
                "work": rows * g["S"] * (g["E"] + g["DV"]), "slots": SLOTS, "lay": lay,
                "score_mod": mods.get("score_mod"), "prob_mod": mods.get("prob_mod")}

    def scratch(self, node):
        return self._layout(node, self.geometry(node))["size"]
