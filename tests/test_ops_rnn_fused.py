"""The fused steps of LSTM / RNN / GRU(linear_before_reset) with constant W and R
(passes/prepack_rnn.py, runtime_c/onnxc_rnn.h): one thread and a team of two (one OpenMP region,
threads owning blocks of 16 hidden units), hidden sizes that are not multiples of 16, several
batch entries (row groups of 4 plus a rest), every direction, layout 1, sequence_lens,
saturating and non-finite inputs, two copies of R, the skipped first product of a zero
initial_h; against onnx.reference or the spec transcription."""
import numpy as np
import pytest
from onnx import helper, numpy_helper

import onnxc
from test_ops_rnn import make, spec
from util import assert_close, poisoned, typed_outputs
from onnx.reference import ReferenceEvaluator


def constant_weights(m, ins, names=("W", "R", "B", "P")):
    """Move W, R (and B, P) from graph inputs to initializers; returns the remaining feeds."""
    consts = {k: ins[k] for k in names if k in ins}
    keep = [i for i in m.graph.input if i.name not in consts]
    del m.graph.input[:]
    m.graph.input.extend(keep)
    m.graph.initializer.extend(numpy_helper.from_array(v, k) for k, v in consts.items())
    return {k: v for k, v in ins.items() if k not in consts}, consts


def session(m, nt):
    so = onnxc.SessionOptions()
    so.intra_op_num_threads = nt
    return onnxc.InferenceSession(m.SerializeToString(), so)


def fused(m) -> bool:
    from onnxc import compiler
    c = compiler.compile_model(m, gemm_block=(8, 48))
    return all(bool(n.attrs.get("_prepacked_rnn")) for n in c.graph.nodes if n.op_type in ("RNN", "GRU", "LSTM"))


# T, batch, input size, hidden, direction, layout, sequence_lens. At 2 threads the team runs
# when batch * gates * hidden^2 >= ONNXC_RNN_PAR_MIN (16384): all but RNN in the last two.
CASES = [
    (9, 1, 19, 130, "forward", 0, None),
    (9, 5, 11, 40, "bidirectional", 1, [9, 3, 0, 9, 5]),
    (6, 3, 7, 47, "reverse", 0, [6, 1, 4]),
]


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("case", CASES, ids=["b1_h130", "b5_h40_bidir_seq", "b3_h47_rev_seq"])
@pytest.mark.parametrize("nt", [1, 2])
def test_fused_vs_spec(op, case, nt):
    T, Bn, I, H, direction, layout, seq = case
    extra = {"linear_before_reset": 1} if op == "GRU" else {}
    m, ins = make(op, T=T, Bn=Bn, I=I, H=H, direction=direction, layout=layout, seq=seq, h0=True,
                  c0=op == "LSTM", peep=op == "LSTM" and H != 40, with_b=H != 47, **extra)
    ins["R"] *= np.float32(2 / np.sqrt(H))    # spectral radius ~1: float32 stays close to the float64 spec
    want = [w.astype(np.float32) for w in spec(op, ins, H, direction=direction, layout=layout,
                                                lbr=1 if op == "GRU" else 0)]
    feeds, _ = constant_weights(m, ins)
    typed_outputs(m, want)
    assert fused(m)
    with poisoned():
        sess = session(m, nt)
        got = sess.run(None, feeds)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
    for _ in range(3):    # the team's steps give the same bits every run (no race on h)
        for g, again in zip(got, sess.run(None, feeds)):
            np.testing.assert_array_equal(g, again)
    if nt > 1:            # and the same bits as one thread (k summed in one order)
        for g, one in zip(got, session(m, 1).run(None, feeds)):
            np.testing.assert_array_equal(g, one)


@pytest.mark.parametrize("nt", [1, 2])
def test_fused_vs_reference(nt):
    m, ins = make("LSTM", T=7, Bn=2, I=9, H=70, direction="bidirectional", h0=True, c0=True, peep=True)
    ref = ReferenceEvaluator(m).run(None, ins)
    feeds, _ = constant_weights(m, ins)
    typed_outputs(m, ref)
    assert fused(m)
    assert_close(ref, session(m, nt).run(None, feeds), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("nt", [1, 2])
def test_fused_clip_input_forget_activations(nt):
    acts = ["HardSigmoid", "LeakyRelu", "Softsign", "Sigmoid", "ScaledTanh", "Tanh"]
    m, ins = make("LSTM", T=5, Bn=3, I=6, H=66, direction="bidirectional", clip=0.7, input_forget=1,
                  activations=acts, activation_alpha=[0.3, 0.05, 1.5], activation_beta=[0.4, 0.8], peep=True)
    args = [("HardSigmoid", 0.3, 0.4), ("LeakyRelu", 0.05, None), ("Softsign", None, None),
            ("Sigmoid", None, None), ("ScaledTanh", 1.5, 0.8), ("Tanh", None, None)]
    want = [w.astype(np.float32) for w in spec("LSTM", ins, 66, direction="bidirectional", acts=args, clip=0.7,
                                                input_forget=1)]
    feeds, _ = constant_weights(m, ins)
    typed_outputs(m, want)
    got = session(m, nt).run(None, feeds)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("nt", [1, 2])
def test_fused_symbolic_steps_and_batch(nt):
    """T and batch known only at run time (T = 1, T = 0 keeps the initial state; batch 6: a
    group of 4 and one of 2); only Y_h and Y_c asked for."""
    rng = np.random.default_rng(3)
    H, I = 48, 5
    w = (rng.standard_normal((1, 4 * H, I)) * 0.5).astype(np.float32)
    r = (rng.standard_normal((1, 4 * H, H)) * 0.3).astype(np.float32)
    node = helper.make_node("LSTM", ["X", "W", "R"], ["", "Y_h", "Y_c"], hidden_size=H)
    x = rng.standard_normal((4, 6, I)).astype(np.float32)
    m = helper.make_model(helper.make_graph(
        [node], "t", [helper.make_tensor_value_info("X", 1, ["T", "N", I])],
        [helper.make_tensor_value_info("Y_h", 1, [1, "N", H]), helper.make_tensor_value_info("Y_c", 1, [1, "N", H])],
        [numpy_helper.from_array(w, "W"), numpy_helper.from_array(r, "R")]),
        opset_imports=[helper.make_opsetid("", 14)], ir_version=8)
    sess = session(m, nt)
    for T, N in ((4, 6), (1, 1), (0, 2), (3, 5)):
        x = rng.standard_normal((T, N, I)).astype(np.float32)
        want = spec("LSTM", {"X": x, "W": w, "R": r}, H)[1:]
        for g, wv in zip(sess.run(None, {"X": x}), want):
            np.testing.assert_allclose(g, wv, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
def test_fused_saturation_and_nonfinite(op):
    """Huge, infinite and NaN inputs: the gate activations saturate to exactly 0 / +-1 and NaN
    propagates like onnx.reference (one batch entry holds the NaN, the others stay finite)."""
    extra = {"linear_before_reset": 1} if op == "GRU" else {}
    m, ins = make(op, T=4, Bn=3, I=3, H=20, **extra)
    x = ins["X"]
    x[0, 0, :] = [1e30, -1e30, 50.0]
    x[1, 1, :] = [np.inf, -np.inf, 0.5]
    x[2, 2, 0] = np.nan
    ins["W"][:, :, 1] = np.abs(ins["W"][:, :, 1])    # the -inf column drives every gate one way
    ins["W"][:, :, 0] = np.abs(ins["W"][:, :, 0])
    ins["W"][:, :, 1] *= 1e-3
    ref = ReferenceEvaluator(m).run(None, ins)
    feeds, _ = constant_weights(m, ins)
    typed_outputs(m, ref)
    assert fused(m)
    assert_close(ref, session(m, 1).run(None, feeds), rtol=1e-4, atol=1e-5)


def params_of(m):
    """The fused node's template parameters (which paths the emitted C takes)."""
    from onnxc import compiler
    from onnxc.ops import lookup
    c = compiler.compile_model(m, gemm_block=(8, 48))
    node = next(n for n in c.graph.nodes if n.op_type in ("RNN", "GRU", "LSTM"))
    return lookup(node).params(node)


# R of 224-320 KB per direction: one thread reads two copies in turn (passes/prepack_rnn.py
# rnn_copies); T = 1, 2 and odd (the copy of step s is s % 2), every cell, both directions
COPY_CASES = [("LSTM", 128, 7, "forward"), ("LSTM", 128, 1, "reverse"), ("LSTM", 130, 2, "bidirectional"),
              ("GRU", 144, 5, "bidirectional"), ("RNN", 256, 3, "forward")]


@pytest.mark.parametrize("case", COPY_CASES, ids=[f"{c[0]}_h{c[1]}_t{c[2]}_{c[3]}" for c in COPY_CASES])
def test_fused_r_copies(case, monkeypatch):
    from onnxc.passes import prepack_rnn
    monkeypatch.setattr(prepack_rnn, "l2_bytes", lambda: 1 << 20)   # as on Zen 5, whatever runs this
    op, H, T, direction = case
    extra = {"linear_before_reset": 1} if op == "GRU" else {}
    m, ins = make(op, T=T, Bn=1, I=10, H=H, direction=direction, h0=True, c0=op == "LSTM", **extra)
    ins["R"] *= np.float32(2 / np.sqrt(H))
    want = [w.astype(np.float32) for w in spec(op, ins, H, direction=direction, lbr=1 if op == "GRU" else 0)]
    feeds, _ = constant_weights(m, ins)
    typed_outputs(m, want)
    assert params_of(m)["r_copies"] == 2
    with poisoned():
        one = session(m, 1).run(None, feeds)
    for g, w in zip(one, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
    for g, two in zip(one, session(m, 2).run(None, feeds)):   # the team reads copy 0 only: same bits
        np.testing.assert_array_equal(g, two)


def test_r_copies_rule(monkeypatch):
    """Two copies only for R of 224-320 KB per direction that fit twice in 5/8 of L2."""
    from onnxc.passes import prepack_rnn
    monkeypatch.setattr(prepack_rnn, "l2_bytes", lambda: 1 << 20)
    assert [prepack_rnn.rnn_copies(G, H) for G, H in ((4, 128), (4, 130), (3, 144), (1, 256), (4, 64), (4, 160))] \
        == [2, 2, 2, 2, 1, 1]
    monkeypatch.setattr(prepack_rnn, "l2_bytes", lambda: 512 << 10)
    assert prepack_rnn.rnn_copies(4, 128) == 1
    monkeypatch.setattr(prepack_rnn, "l2_bytes", lambda: 0)
    assert prepack_rnn.rnn_copies(4, 128) == 1


def zero_initial_state(m, ins, names=("initial_h", "initial_c")):
    """initial_h / initial_c as constant zeros (torch's export): initializers, not inputs."""
    for n in names:
        if n in ins:
            ins[n] = np.zeros_like(ins[n])
    return constant_weights(m, ins, names=("W", "R", "B", "P") + names)


@pytest.mark.parametrize("nt", [1, 2])
@pytest.mark.parametrize("op", ["LSTM", "GRU"])
def test_fused_zero_initial_h_skips_first_product(op, nt):
    """initial_h constant zeros or absent: the first step's H R^T is skipped (same results)."""
    extra = {"linear_before_reset": 1} if op == "GRU" else {}
    m, ins = make(op, T=5, Bn=3, I=6, H=40, direction="bidirectional", h0=True, c0=op == "LSTM", **extra)
    ins["R"] *= np.float32(2 / np.sqrt(40))
    feeds, _ = zero_initial_state(m, ins)
    want = [w.astype(np.float32) for w in spec(op, ins, 40, direction="bidirectional", lbr=1 if op == "GRU" else 0)]
    typed_outputs(m, want)
    assert params_of(m)["skip_r0"]
    got = session(m, nt).run(None, feeds)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


def test_fused_zero_initial_h_nonfinite_r():
    """R holding inf: 0 * inf is NaN in the first step, so it is not skipped (NaN like the reference)."""
    m, ins = make("LSTM", T=3, Bn=2, I=4, H=20, h0=True, c0=True)
    ins["R"][0, 5, 3] = np.inf
    feeds, _ = zero_initial_state(m, ins)
    ref = ReferenceEvaluator(m).run(None, feeds)
    typed_outputs(m, ref)
    assert fused(m) and not params_of(m)["skip_r0"]
    got = session(m, 1).run(None, feeds)
    assert np.isnan(ref[0]).any()
    assert_close(ref, got, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("op", ["LSTM", "GRU"])
def test_fused_biases_summed_at_compile_time(op):
    """Constant B: Wb + Rb summed at compile time (input 10); B fed at run time: summed by the
    kernel. Same bits either way (H 37: a partial block of units; -0 among the biases)."""
    import copy
    extra = {"linear_before_reset": 1} if op == "GRU" else {}
    m, ins = make(op, T=4, Bn=2, I=5, H=37, direction="bidirectional", **extra)
    ins["B"][0, :3] = np.float32(-0.0)
    ins["B"][1, -3:] = np.float32(-0.0)
    m_run = copy.deepcopy(m)
    feeds_const, _ = constant_weights(m, ins)
    feeds_run, _ = constant_weights(m_run, ins, names=("W", "R"))
    ref = ReferenceEvaluator(m).run(None, feeds_const)
    typed_outputs(m, ref)
    typed_outputs(m_run, ref)
    assert params_of(m)["bsum_const"] and not params_of(m_run)["bsum_const"]
    assert fused(m) and fused(m_run)
    a = session(m, 1).run(None, feeds_const)
    b = session(m_run, 1).run(None, feeds_run)
    for x, y in zip(a, b):
        assert x.tobytes() == y.tobytes()
    assert_close(ref, a, rtol=1e-4, atol=1e-5)


GATE_SRC = r"""
#include "onnxc_rnn.h"
void g_tanh(const float *x, float *y, int64_t n) { for (int64_t i = 0; i < n; ++i) y[i] = onnxc_rnn_tanhf(x[i]); }
void g_sig(const float *x, float *y, int64_t n) { for (int64_t i = 0; i < n; ++i) y[i] = onnxc_rnn_sigmoidf(x[i]); }
"""


@pytest.mark.parametrize("portable", [False, True], ids=["native", "portable"])
def test_gate_functions(tmp_path, portable):
    """onnxc_rnn_tanhf / onnxc_rnn_sigmoidf: within 4e-7 relative / 2.5e-7 absolute of float64,
    inside [-1, 1] / [0, 1] everywhere (the fit overshoots near 8.3: clamped), exactly +-1 / 0, 1
    from saturation on, odd (tanh(-0) = -0), NaN kept."""
    import ctypes
    import subprocess
    from onnxc import build
    from onnxc.resources import runtime_dir
    (tmp_path / "g.c").write_text(GATE_SRC)
    tc = build.toolchain(portable=portable)
    subprocess.run([tc.cc, *tc.flags, "-shared", "-I", str(runtime_dir()), str(tmp_path / "g.c"), "-o",
                    str(tmp_path / "g.so")], check=True)
    lib = ctypes.CDLL(str(tmp_path / "g.so"))

    def run(name, x):
        x = np.ascontiguousarray(x, dtype=np.float32)
        y = np.empty_like(x)
        p = ctypes.POINTER(ctypes.c_float)
        getattr(lib, name)(x.ctypes.data_as(p), y.ctypes.data_as(p), ctypes.c_int64(x.size))
        return y

    x = np.concatenate([np.linspace(-40, 40, 2_000_001, dtype=np.float32),
                        np.linspace(8.2, 8.5, 300_001, dtype=np.float32)])
    t, s = run("g_tanh", x), run("g_sig", x)
    x64 = x.astype(np.float64)
    assert np.max(np.abs(t - np.tanh(x64)) / np.maximum(np.abs(np.tanh(x64)), 1e-30)) < 4e-7   # 3.5e-7 without FMA
    assert np.max(np.abs(s - 1 / (1 + np.exp(-x64)))) < 2.5e-7   # 2.1e-7 without FMA
    assert t.min() >= -1 and t.max() <= 1 and s.min() >= 0 and s.max() <= 1
    assert np.all(t[x >= 9] == 1) and np.all(t[x <= -9] == -1) and np.all(s[x >= 18] == 1)
    sp = np.array([np.inf, -np.inf, np.nan, -0.0, 0.0], np.float32)
    ts, ss = run("g_tanh", sp), run("g_sig", sp)
    assert ts[0] == 1 and ts[1] == -1 and np.isnan(ts[2]) and ts[3] == 0 and np.signbit(ts[3]) and not np.signbit(ts[4])
    assert ss[0] == 1 and ss[1] == 0 and np.isnan(ss[2]) and ss[3] == 0.5 and ss[4] == 0.5
    # the loops vectorise (packed divides) on every x86 target: with NaN-preserving clamps GCC
    # needs -fno-trapping-math to if-convert them below AVX-512 (scalar gates made a 128-unit
    # LSTM's steps 2x slower on AVX2)
    asm = subprocess.run([tc.cc, *tc.flags, "-S", "-o", "-", "-I", str(runtime_dir()), str(tmp_path / "g.c")],
                         check=True, capture_output=True, text=True).stdout
    if "x86_64" in subprocess.run([tc.cc, "-dumpmachine"], capture_output=True, text=True).stdout:
        assert "divps" in asm
