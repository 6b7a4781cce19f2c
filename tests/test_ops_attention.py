"""Attention (23-25) and RotaryEmbedding (23) against onnx.reference on random inputs."""
import numpy as np
import pytest

from util import check, make_node_model

rng = np.random.default_rng(11)
f32 = lambda *s: rng.standard_normal(s).astype(np.float32)


def attn(inputs, attrs, opset=23, n_out=1, inits=None):
    return make_node_model("Attention", inputs, attrs, opset=opset, n_outputs=n_out, initializers=inits)


@pytest.mark.parametrize("causal", [0, 1])
@pytest.mark.parametrize("hq,hkv", [(4, 4), (4, 2)])
def test_4d_gqa_causal(causal, hq, hkv):
    q, k, v = f32(2, hq, 5, 8), f32(2, hkv, 7, 8), f32(2, hkv, 7, 6)
    check(attn({"q": q, "k": k, "v": v}, {"is_causal": causal}), {"q": q, "k": k, "v": v}, 1e-5, 1e-5)


@pytest.mark.parametrize("mask_shape,dtype", [((5, 7), np.float32), ((1, 4, 5, 7), np.bool_),
                                              ((4, 5, 4), np.float32), ((2, 1, 1, 7), np.bool_)])
def test_3d_masks(mask_shape, dtype):
    q, k, v = f32(2, 5, 32), f32(2, 7, 16), f32(2, 7, 12)
    m = rng.random(mask_shape) > 0.3 if dtype == np.bool_ else f32(*mask_shape)
    feeds = {"q": q, "k": k, "v": v, "m": m}
    check(attn(feeds, {"q_num_heads": 4, "kv_num_heads": 2, "scale": 0.3}), feeds, 1e-5, 1e-5)


@pytest.mark.parametrize("mode", [0, 1, 2, 3])
def test_past_present_qk_modes_softcap(mode):
    q, k, v = f32(1, 2, 3, 4), f32(1, 2, 3, 4), f32(1, 2, 3, 4)
    m, pk, pv = f32(3, 5), f32(1, 2, 2, 4), f32(1, 2, 2, 4)
    feeds = {"q": q, "k": k, "v": v, "m": m, "pk": pk, "pv": pv}
    check(attn(feeds, {"qk_matmul_output_mode": mode, "softcap": 2.0, "is_causal": 1}, n_out=4), feeds,
          1e-5, 1e-5)


def test_fully_masked_rows_and_softmax_precision():
    q, k, v = f32(1, 1, 3, 4), f32(1, 1, 4, 4), f32(1, 1, 4, 4)
    m = np.ones((3, 4), bool)
    m[1] = False
    feeds = {"q": q, "k": k, "v": v, "m": m}
    check(attn(feeds, {"softmax_precision": 11}, n_out=1), feeds, 1e-5, 1e-6)


def test_nonpad_kv_seqlen_opset24_and_window_25():
    q, k, v = f32(2, 2, 4, 4), f32(2, 2, 6, 4), f32(2, 2, 6, 4)
    feeds = {"q": q, "k": k, "v": v}
    for opset, attrs in [(24, {"is_causal": 1}), (25, {"left_window_size": 1, "right_window_size": 0})]:
        model = make_node_model("Attention", feeds, attrs, opset=opset,
                                initializers={"nonpad": np.array([5, 6], np.int64)})
        node = model.graph.node[0]
        del node.input[:]
        node.input.extend(["q", "k", "v", "", "", "", "nonpad"])
        check(model, feeds, 1e-5, 1e-5)


@pytest.mark.parametrize("dtype", [np.float16, np.float64])
def test_dtypes(dtype):
    q, k, v = (f32(1, 2, 3, 8).astype(dtype) for _ in range(3))
    check(attn({"q": q, "k": k, "v": v}, {"is_causal": 1}), {"q": q, "k": k, "v": v}, 2e-3, 2e-3)


@pytest.mark.parametrize("interleaved", [0, 1])
@pytest.mark.parametrize("rank,rot", [(4, 0), (3, 4)])
def test_rotary(interleaved, rank, rot):
    x = f32(2, 3, 5, 8) if rank == 4 else f32(2, 5, 24)
    half = (rot or 8) // 2
    pos = rng.integers(0, 10, (2, 5)).astype(np.int64)
    cos, sin = f32(10, half), f32(10, half)
    attrs = {"interleaved": interleaved, "rotary_embedding_dim": rot}
    if rank == 3:
        attrs["num_heads"] = 3
    feeds = {"x": x, "cos": cos, "sin": sin, "pos": pos}
    check(make_node_model("RotaryEmbedding", feeds, attrs, opset=23), feeds, 1e-5, 1e-6)
    feeds = {"x": x, "cos": f32(2, 5, half), "sin": f32(2, 5, half)}
    check(make_node_model("RotaryEmbedding", feeds, attrs, opset=23), feeds, 1e-5, 1e-6)
