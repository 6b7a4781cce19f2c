"""RNN, GRU and LSTM (every direction, layout 0/1, sequence_lens, initial states, peepholes,
input_forget, clip, activation lists with alpha/beta, all optional outputs).

Per direction: one GEMM gives X W^T for every time step (rows in X's storage order); each step
then multiplies the hidden state by R^T (GRU without linear_before_reset: the z/r gates first,
then (r * H) by R_h^T) and applies the gates elementwise. Batch entries whose sequence has
ended keep their state; Y is zero past each sequence's length (the ONNX spec, onnxruntime).
A reverse direction walks each sequence from its own last step. onnx.reference ignores
sequence_lens, clip and the activation lists; onnxc follows the spec there.
State and gates live in the node scratch in the compute type (float or double).
"""
from __future__ import annotations

import numpy as np

from .. import dtypes
from ..errors import NotImplemented as OrtNotImplemented
from ..symbolic import align_up, dim_repr, dmax
from .common import attr_enum, fail
from .elementwise import c_math
from .gemm import c_float, sgemm_work_bytes
from .registry import OpSpec, register
from ..passes.prepack_rnn import U, rnn_strides

D = dtypes.BY_NAME
TEAM_MAX = 64      # ONNXC_RNN_TEAM_MAX: the fused steps' team, one 64-byte flag per thread
TYPES = (D["float"], D["double"])
DIRECTIONS = ("forward", "reverse", "bidirectional")

# name: (C expression over @, uses alpha, uses beta, default alpha, default beta)
ACTIVATIONS = {
    "Relu": ("(@ > 0 ? @ : 0)", False, False, 0, 0),
    "Tanh": ("tanh(@)", False, False, 0, 0),
    "Sigmoid": ("(@ >= 0 ? 1 / (1 + exp(-@)) : exp(@) / (1 + exp(@)))", False, False, 0, 0),
    "Affine": ("(ALPHA * @ + BETA)", True, True, 1.0, 0.0),
    "LeakyRelu": ("(@ < 0 ? ALPHA * @ : @)", True, False, 0.01, 0),
    "ThresholdedRelu": ("(@ > ALPHA ? @ : 0)", True, False, 1.0, 0),
    "ScaledTanh": ("(ALPHA * tanh(BETA * @))", True, True, 1.0, 1.0),
    "HardSigmoid": ("fmax(0, fmin(1, ALPHA * @ + BETA))", True, True, 0.2, 0.5),
    "Elu": ("(@ < 0 ? ALPHA * expm1(@) : @)", True, False, 1.0, 0),
    "Softsign": ("(@ / (1 + fabs(@)))", False, False, 0, 0),
    "Softplus": ("(@ > 0 ? @ + log1p(exp(-@)) : log1p(exp(@)))", False, False, 0, 0),
}
_CANON = {k.lower(): k for k in ACTIVATIONS}


def _fmt(shape) -> str:
    return "(" + ", ".join(dim_repr(d) for d in shape) + ")"


class _Recurrent(OpSpec):
    template = "rnn.c.j2"
    cell = "rnn"
    gates = 1
    default_acts = ("Tanh",)
    headers = ("onnxc_gemm.h", "onnxc_rnn.h", "onnxc_vmath.h")

    def geometry(self, node) -> dict:
        x, w, r = node.inputs[0], node.inputs[1], node.inputs[2]
        if x.etype not in TYPES:
            raise OrtNotImplemented(f"{node.describe()}: element type {x.etype.name} is not supported "
                                    f"(supported: {', '.join(t.name for t in TYPES)})")
        for v, n in ((w, "W"), (r, "R"), (node.input(3), "B"), (node.input(5), "initial_h"),
                     (node.input(6) if self.cell == "lstm" else None, "initial_c"),
                     (node.input(7) if self.cell == "lstm" else None, "P")):
            if v is not None and v.etype != x.etype:
                raise fail(node, f"input {n} has element type {v.etype.name}, X has {x.etype.name}")
        if x.rank != 3 or w.rank != 3 or r.rank != 3:
            raise fail(node, f"X, W and R must be 3-D, got {_fmt(x.shape)}, {_fmt(w.shape)}, {_fmt(r.shape)}")
        direction = attr_enum(node, "direction", DIRECTIONS)
        nd = 2 if direction == "bidirectional" else 1
        layout = int(node.attr("layout", 0) or 0)
        if layout not in (0, 1):
            raise fail(node, f"attribute layout={layout} must be 0 or 1")
        T, B = (x.shape[0], x.shape[1]) if layout == 0 else (x.shape[1], x.shape[0])
        Isz = x.shape[2]
        for d, what in ((w.shape[0], "W"), (w.shape[1], "W"), (w.shape[2], "W"), (r.shape[1], "R"),
                        (r.shape[2], "R"), (Isz, "X's input size")):
            if not isinstance(d, int):
                raise OrtNotImplemented(f"{node.describe()}: {what} must have static dims except "
                                        "sequence length and batch")
        G = self.gates
        Hs = node.attr("hidden_size")
        Hs = int(Hs) if Hs is not None else r.shape[2]
        want = {"W": (nd, G * Hs, Isz), "R": (nd, G * Hs, Hs), "B": (nd, 2 * G * Hs),
                "initial_h": (nd, B, Hs) if layout == 0 else (B, nd, Hs), "sequence_lens": (B,)}
        if self.cell == "lstm":
            want["initial_c"] = want["initial_h"]
            want["P"] = (nd, 3 * Hs)
        names = ["X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"]
        for i, n in enumerate(names):
            v = node.input(i)
            if v is None or n not in want:
                continue
            if len(v.shape) != len(want[n]) or any(
                    isinstance(a, int) and isinstance(b, int) and a != b for a, b in zip(v.shape, want[n])):
                raise fail(node, f"input {n} has shape {_fmt(v.shape)}, expected {_fmt(want[n])} "
                           f"(hidden_size={Hs}, direction={direction}, layout={layout})")
        sl = node.input(4)
        if sl is not None and sl.etype != D["int32"]:
            raise fail(node, f"input sequence_lens must be int32, got {sl.etype.name}")
        if Hs < 1:
            raise fail(node, f"hidden_size={Hs} must be >= 1")
        return {"T": T, "B": B, "I": Isz, "H": Hs, "G": G, "nd": nd, "direction": direction,
                "layout": layout}

    def infer(self, node):
        g = self.geometry(node)
        x = node.inputs[0]
        T, B, Hs, nd = g["T"], g["B"], g["H"], g["nd"]
        y = (T, nd, B, Hs) if g["layout"] == 0 else (B, T, nd, Hs)
        yh = (nd, B, Hs) if g["layout"] == 0 else (B, nd, Hs)
        outs = [(x.etype, y), (x.etype, yh)]
        if self.cell == "lstm":
            outs.append((x.etype, yh))
        if len(node.outputs) > len(outs):
            raise fail(node, f"{self.op_type} has at most {len(outs)} outputs")
        self.activations(node, g)
        return outs[:len(node.outputs)]

    def activations(self, node, g) -> list[list[str]]:
        """C expressions over '@' per direction and function (f, g, h)."""
        n = len(self.default_acts)
        names = node.attr("activations")
        names = list(names) if names else list(self.default_acts) * g["nd"]
        if g["nd"] == 1 and len(names) == 2 * n:
            names = names[:n]   # RNN's schema default lists both directions' (onnxruntime: the first)
        if len(names) != n * g["nd"]:
            raise fail(node, f"attribute activations has {len(names)} entries, expected {n * g['nd']} "
                       f"({n} per direction)")
        alphas = list(node.attr("activation_alpha") or [])
        betas = list(node.attr("activation_beta") or [])
        ct = dtypes.BY_NAME[node.inputs[0].etype.cc]
        out = []
        for k, name in enumerate(names):
            canon = _CANON.get(str(name).lower())
            if canon is None:
                raise fail(node, f"activation {name!r} is not one of {', '.join(ACTIVATIONS)}")
            expr, ua, ub, da, db = ACTIVATIONS[canon]
            a = alphas.pop(0) if ua and alphas else da
            b = betas.pop(0) if ub and betas else db
            expr = expr.replace("ALPHA", c_float(a, ct.c)).replace("BETA", c_float(b, ct.c))
            if ct.c == "float" and canon in ("Sigmoid", "Tanh"):
                # sigmoid: onnxc_rnn.h's exp-free form (1.6e-7 absolute, as onnxruntime's MLAS
                # gates; 7% of a batch-1 LSTM). Tanh: the same rational form in an LSTM (its
                # gates' chain paces the step: 8% of a batch-1 128-unit LSTM; 50 random LSTMs
                # stayed under half of rtol 1e-4 against float64, like onnxc_vtanhf); RNN and GRU
                # keep onnxc_vtanhf (1.5 ulp): a chaotic RNN amplifies the error (the rational
                # tanh failed 1 in 30 random 70-unit RNNs at rtol 1e-4)
                expr = "onnxc_rnn_sigmoidf(@)" if canon == "Sigmoid" else (
                    "onnxc_rnn_tanhf(@)" if self.cell == "lstm" else "onnxc_vtanhf(@)")
            out.append(c_math(expr, ct.c))
        return [out[d * n:(d + 1) * n] for d in range(g["nd"])]

    def _layout(self, node, g):
        et = node.inputs[0].etype
        es = et.itemsize
        T, B, Hs, G, Isz = g["T"], g["B"], g["H"], g["G"], g["I"]
        if node.attrs.get("_prepacked_rnn"):
            # fused steps: X W^T of both directions (interleaved columns), h double-buffered,
            # summed biases, the team's step flags
            N = G * (-(-Hs // U) * U)
            parts = [("xw", g["nd"] * T * B * N * es), ("h", 2 * B * Hs * es), ("c", B * Hs * es),
                     ("bsum", g["nd"] * N * es), ("work", sgemm_work_bytes(T * B, N, Isz)),
                     ("sync", TEAM_MAX * 64)]
        else:
            parts = [("xw", T * B * G * Hs * es), ("hr", B * G * Hs * es), ("h", B * Hs * es),
                     ("c", B * Hs * es), ("rh", B * Hs * es)]
            if et.name == "float":
                parts.append(("work", dmax(sgemm_work_bytes(T * B, G * Hs, Isz),
                                           sgemm_work_bytes(B, G * Hs, Hs))))
        off, offs = 0, {}
        for name, size in parts:
            offs[name] = off
            off = off + align_up(size, 64)
        return offs, off

    def params(self, node):
        g = self.geometry(node)
        offs, _ = self._layout(node, g)
        x = node.inputs[0]
        clip = node.attr("clip")
        ct = x.etype.cc
        outs = list(node.outputs) + [None] * 3
        fused = node.attrs.get("_prepacked_rnn") or None
        Hp = -(-g["H"] // U) * U
        copies = fused["copies"] if fused else 1     # as passes/prepack_rnn.py packed R
        strides = rnn_strides(g["G"], g["H"], g["I"], fused.get("nr") if fused else None, copies)
        return {**g, "cell": self.cell, "acts": self.activations(node, g), "offs": offs,
                "kind": "s" if x.etype.name == "float" else "d",
                "clip": c_float(float(clip), ct) if clip is not None else None,
                "dirs": [(0, g["direction"] == "reverse")] + ([(1, True)] if g["nd"] == 2 else []),
                "has_b": node.input(3) is not None, "has_seq": node.input(4) is not None,
                "has_h0": node.input(5) is not None,
                "has_c0": self.cell == "lstm" and node.input(6) is not None,
                "has_p": self.cell == "lstm" and node.input(7) is not None,
                "y": outs[0] is not None, "yh": outs[1] is not None,
                "yc": self.cell == "lstm" and outs[2] is not None,
                "input_forget": int(node.attr("input_forget", 0) or 0) if self.cell == "lstm" else 0,
                "lbr": int(node.attr("linear_before_reset", 0) or 0) if self.cell == "gru" else 0,
                # constant W, R laid out by passes/prepack_rnn.py (inputs 8, 9): fused steps
                "fused": fused, "wpanels": fused if fused and "nr" in fused else None,
                "U": U, "Hp": Hp, "nblk": Hp // U,
                "ws_stride": strides[0], "rs_stride": strides[1], "rs_copy": strides[2],
                "r_copies": copies,
                # initial_h absent or constant zeros (torch's export): H R^T of the first step
                # is zero, skipped (unless R holds inf or NaN: 0 * inf is NaN)
                "skip_r0": bool(fused) and self._zero(node.input(5)) and self._finite(node.inputs[2]),
                # constant B: Wb + Rb summed at compile time (input 10)
                "bsum_const": bool(fused) and node.input(10) is not None}

    @staticmethod
    def _finite(v) -> bool:
        return v.const is not None and bool(np.isfinite(np.asarray(v.const)).all())

    @staticmethod
    def _zero(v) -> bool:
        return v is None or (v.const is not None and not np.asarray(v.const).any())

    def scratch(self, node):
        return self._layout(node, self.geometry(node))[1]


@register
class RNN(_Recurrent):
    op_type = "RNN"
    cell = "rnn"
    gates = 1
    default_acts = ("Tanh",)


@register
class GRU(_Recurrent):
    op_type = "GRU"
    cell = "gru"
    gates = 3
    default_acts = ("Sigmoid", "Tanh")


@register
class LSTM(_Recurrent):
    op_type = "LSTM"
    cell = "lstm"
    gates = 4
    default_acts = ("Sigmoid", "Tanh", "Tanh")
