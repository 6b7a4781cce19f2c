"""LinearAttention (27) against onnx.reference on random inputs: every update rule, decay per head /
per key dim, beta per head / shared, GQA and MQA, past_state absent/present (also of another type),
float16/bfloat16, symbolic batch and sequence, NaN/inf, and the errors for bad attributes/shapes."""
import ml_dtypes
import numpy as np
import pytest
from onnx import helper

import onnxc
from util import NP2ONNX, check, make_model_from_nodes, run_both

rng = np.random.default_rng(27)
SLOTS = ("q", "k", "v", "past", "decay", "beta")


def f32(*s):
    return rng.standard_normal(s).astype(np.float32)


def model(feeds, attrs, n_out=2, input_shapes=None):
    """One LinearAttention node; inputs named after SLOTS, those not in feeds left out."""
    names = [n if n in feeds else "" for n in SLOTS]
    while names and not names[-1]:
        names.pop()
    outs = ["y", "state"][:n_out]      # n_out=1: present_state computed but not a graph output
    node = helper.make_node("LinearAttention", names, ["y", "state"], **attrs)
    return make_model_from_nodes([node], feeds, {}, outs, opset=27, input_shapes=input_shapes)


def typed(m, feeds):
    """Declare the outputs' types (for models never run through the reference)."""
    q, s = feeds["q"], feeds.get("past", feeds["q"])
    for vi, a in zip(m.graph.output, (q, s)):
        vi.CopyFrom(helper.make_tensor_value_info(vi.name, NP2ONNX[a.dtype], None))
    return m


def feeds_for(rule, B=2, T=3, hq=4, hkv=2, dk=4, dv=5, decay_per_key=True, beta_per_head=True,
              past=False, dtype=np.float32):
    f = {"q": f32(B, T, hq * dk), "k": f32(B, T, hkv * dk) * 0.5, "v": f32(B, T, hkv * dv)}
    if past:
        f["past"] = f32(B, hkv, dk, dv)
    if rule in ("gated", "gated_delta"):
        f["decay"] = -np.abs(f32(B, T, hkv * dk if decay_per_key else hkv))
    if rule in ("delta", "gated_delta"):
        f["beta"] = rng.random((B, T, hkv if beta_per_head else 1)).astype(np.float32)
    return {n: a.astype(dtype) for n, a in f.items()}


def attrs_for(rule, hq=4, hkv=2, **kw):
    return {"q_num_heads": hq, "kv_num_heads": hkv, "update_rule": rule, **kw}


@pytest.mark.parametrize("rule", ["linear", "gated", "delta", "gated_delta"])
@pytest.mark.parametrize("past", [False, True])
@pytest.mark.parametrize("hq,hkv", [(2, 2), (4, 2), (6, 1)])
def test_rules_heads_past(rule, past, hq, hkv):
    f = feeds_for(rule, hq=hq, hkv=hkv, past=past)
    check(model(f, attrs_for(rule, hq, hkv)), f, 1e-5, 1e-5)


@pytest.mark.parametrize("rule", ["gated", "gated_delta"])
@pytest.mark.parametrize("decay_per_key", [False, True])
@pytest.mark.parametrize("beta_per_head", [False, True])
def test_decay_and_beta_layouts(rule, decay_per_key, beta_per_head):
    f = feeds_for(rule, T=4, decay_per_key=decay_per_key, beta_per_head=beta_per_head, past=True)
    check(model(f, attrs_for(rule)), f, 1e-5, 1e-5)


def test_default_rule_scale_and_chunk_size():
    f = feeds_for("gated_delta", T=1, dk=8, dv=3)
    check(model(f, {"q_num_heads": 4, "kv_num_heads": 2}), f, 1e-5, 1e-5)     # gated_delta, 1/sqrt(d_k)
    check(model(f, {"q_num_heads": 4, "kv_num_heads": 2, "scale": -0.3, "chunk_size": 2}), f, 1e-5, 1e-5)


def test_t1_decode_chain_matches_prefill():
    """Two decode steps fed with the first's present_state equal one prefill of both tokens."""
    f = feeds_for("gated_delta", T=2, past=True)
    a = attrs_for("gated_delta")
    _, full = run_both(model(f, a), f)
    state = f["past"]
    for t in range(2):
        step = {n: (x[:, t:t + 1] if n != "past" else state) for n, x in f.items()}
        _, (y, state) = run_both(model(step, a), step)
        np.testing.assert_allclose(y[:, 0], full[0][:, t], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(state, full[1], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
@pytest.mark.parametrize("past", [False, True])
def test_low_precision(dtype, past):
    f = feeds_for("gated_delta", past=past, dtype=dtype)
    tol = 2e-2 if dtype == ml_dtypes.bfloat16 else 2e-3
    check(model(f, attrs_for("gated_delta")), f, tol, tol)


def test_float_state_with_float16_activations():
    """S may differ from T: present_state keeps past_state's type."""
    f = feeds_for("delta", past=True, dtype=np.float16)
    f["past"] = f["past"].astype(np.float32)
    got = check(model(f, attrs_for("delta")), f, 2e-3, 2e-3)
    assert got[0].dtype == np.float16 and got[1].dtype == np.float32


def test_present_state_not_a_graph_output():
    f = feeds_for("gated_delta", past=True)
    check(model(f, attrs_for("gated_delta"), n_out=1), f, 1e-5, 1e-5)


def test_large_parallel():
    """Big enough for the OpenMP path (work >= ONNXC_PAR_MIN)."""
    f = feeds_for("gated_delta", B=3, T=16, hq=8, hkv=4, dk=16, dv=16, past=True)
    check(model(f, attrs_for("gated_delta", 8, 4)), f, 1e-4, 1e-4)


def test_empty_sequence_and_batch():
    f = feeds_for("gated_delta", T=0, past=True)
    check(model(f, attrs_for("gated_delta")), f)
    f = feeds_for("linear", B=0)
    check(model(f, attrs_for("linear")), f)


def test_symbolic_batch_and_sequence():
    f = feeds_for("gated_delta", B=2, T=5, past=True)
    shapes = {n: ["B", "T", a.shape[2]] for n, a in f.items() if n != "past"}
    shapes["past"] = ["B", 2, 4, 5]
    m = model(f, attrs_for("gated_delta"), input_shapes=shapes)
    check(m, f, 1e-5, 1e-5)
    sess = onnxc.InferenceSession(m.SerializeToString())
    g = {n: (a[:1, :3] if n != "past" else a[:1]) for n, a in f.items()}
    ref = run_both(model(g, attrs_for("gated_delta")), g)[0]
    for r, x in zip(ref, sess.run(None, g)):
        np.testing.assert_allclose(x, r, rtol=1e-5, atol=1e-5)


def test_symbolic_mismatch_fails_at_run_time():
    f = feeds_for("linear", T=3)
    shapes = {"q": ["B", "T", 16], "k": ["B", "T2", 8], "v": ["B", "T", 10]}
    m = typed(model(f, attrs_for("linear"), input_shapes=shapes), f)
    sess = onnxc.InferenceSession(m.SerializeToString())
    bad = dict(f, k=f["k"][:, :2])
    with pytest.raises(Exception):
        sess.run(None, bad)


@pytest.mark.parametrize("slot,value", [("q", np.nan), ("k", np.nan), ("v", np.inf), ("decay", -np.inf),
                                        ("decay", np.nan), ("beta", np.nan), ("past", np.nan)])
def test_nan_inf_propagate(slot, value):
    f = feeds_for("gated_delta", T=3, past=True)
    idx = (1, 1, 1) if slot != "past" else (1, 0, 1, 2)
    f[slot][idx] = value
    check(model(f, attrs_for("gated_delta")), f, 1e-5, 1e-5)


def test_nan_scale():
    f = feeds_for("linear")
    check(model(f, attrs_for("linear", scale=float("nan"))), f)


def _error(f, attrs, match):
    with pytest.raises(Exception, match=match):
        onnxc.InferenceSession(typed(model(f, attrs), f).SerializeToString())


def test_bad_attributes():
    f = feeds_for("linear")
    _error(f, attrs_for("retention"), "update_rule")
    _error(f, attrs_for("linear", hq=3, hkv=2), "multiple of kv_num_heads")
    _error(f, attrs_for("linear", hq=4, hkv=0), "multiple of kv_num_heads|kv_num_heads")
    _error(f, {"kv_num_heads": 2, "update_rule": "linear"}, "q_num_heads")


def test_bad_inputs():
    lin, gd = attrs_for("linear"), attrs_for("gated_delta")
    f = feeds_for("gated_delta")
    _error(f, lin, "forbids input 4")
    _error({n: a for n, a in f.items() if n != "beta"}, gd, "requires input 5")
    _error({n: a for n, a in f.items() if n != "decay"}, gd, "requires input 4")
    _error(dict(f, decay=f32(2, 3, 3)), gd, "decay")
    _error(dict(f, beta=f32(2, 3, 3)), gd, "beta")
    _error(dict(f, past=f32(2, 2, 4, 4)), gd, "past_state")
    _error(dict(f, k=f32(2, 3, 10)), gd, "key hidden size")
    _error(dict(f, v=f32(2, 3, 9)), gd, "value hidden size")
    _error(dict(f, q=f32(2, 3, 15)), gd, "query hidden size")
    _error(dict(f, k=f32(2, 4, 8)), gd, "sequence length")
    _error(dict(f, q=f32(2, 4, 3, 4)), gd, "3-D|rank")
    _error({n: a.astype(np.float64) for n, a in f.items()}, gd, "double|type")
