"""Depthwise (stride phases, onnxc_dwconv.h) and pointwise (onnxc_pw_rows, weights packed at
compile time) Conv paths against onnx.reference: strides, pads, dilations, odd sizes, batch 1,
2 and symbolic, 1 and 2 threads, fused Relu/Clip/residual, NaN/inf."""
import numpy as np
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

import onnxc
from onnxc.ops import lookup
from util import NP2ONNX, check, make_model_from_nodes, poisoned, typed_outputs

rng = np.random.default_rng(5)
TOL = dict(rtol=1e-4, atol=1e-5)


def rand(shape):
    return rng.standard_normal(shape).astype(np.float32)


def params(model):
    from onnxc import compiler
    c = compiler.compile_model(model, gemm_block=(8, 48))
    return [lookup(n).params(n) for n in c.graph.nodes if n.op_type in ("Conv", "FusedConv")]


def conv_model(xs, ws, attrs, fuse="", batch=None, bias=True):
    """Conv [+ Add residual] [+ Relu | Clip(0, 6) | Tanh]; the residual is a second input z."""
    x, w = rand(xs), rand(ws)
    feeds, inits = {"x": x}, {"w": w}
    cin = ["x", "w"]
    if bias:
        inits["b"] = rand((ws[0],))
        cin.append("b")
    nodes = [helper.make_node("Conv", cin, ["c"], **attrs)]
    cur = "c"
    ys = ReferenceEvaluator(make_model_from_nodes(nodes, feeds, inits, ["c"])).run(None, feeds)[0].shape
    if "res" in fuse:
        feeds["z"] = rand(ys)
        nodes.append(helper.make_node("Add", [cur, "z"], ["s"]))
        cur = "s"
    if "relu" in fuse:
        nodes.append(helper.make_node("Relu", [cur], ["y"]))
        cur = "y"
    elif "clip" in fuse:
        inits["lo"], inits["hi"] = np.float32(0), np.float32(6)
        nodes.append(helper.make_node("Clip", [cur, "lo", "hi"], ["y"]))
        cur = "y"
    elif "tanh" in fuse:     # an activation that is no clamp: applied over the stored plane
        nodes.append(helper.make_node("Tanh", [cur], ["y"]))
        cur = "y"
    shapes = {k: [batch] + list(v.shape[1:]) for k, v in feeds.items()} if batch else None
    m = make_model_from_nodes(nodes, feeds, inits, [cur], input_shapes=shapes)
    if batch:
        for vi in m.graph.output:
            vi.CopyFrom(helper.make_tensor_value_info(vi.name, NP2ONNX[np.dtype(np.float32)], [None] * len(xs)))
    return m, feeds


def run_threads(m, feeds, nt):
    ref = ReferenceEvaluator(m).run(None, feeds)
    typed_outputs(m, ref)
    so = onnxc.SessionOptions()
    so.intra_op_num_threads = nt
    with poisoned():
        got = onnxc.InferenceSession(m.SerializeToString(), so).run(None, feeds)
    np.testing.assert_allclose(got[0], ref[0], equal_nan=True, **TOL)
    return got[0]


DW_CASES = [
    ((1, 8, 16, 16), {"pads": [1, 1, 1, 1]}, (3, 3)),
    ((2, 6, 17, 15), {"pads": [1, 1, 1, 1], "strides": [2, 2]}, (3, 3)),
    ((1, 5, 13, 12), {"pads": [0, 1, 2, 1], "strides": [2, 1]}, (3, 3)),
    ((1, 4, 7, 7), {"pads": [1, 1, 1, 1]}, (3, 3)),                           # mobilenet 7x7
    ((1, 3, 14, 14), {"pads": [1, 1, 1, 1], "strides": [2, 2]}, (3, 3)),
    ((1, 5, 12, 13), {"dilations": [2, 1], "pads": [4, 0, 3, 2]}, (5, 3)),
    ((2, 3, 11, 9), {"pads": [2, 2, 2, 2], "strides": [3, 2]}, (5, 5)),
    ((1, 4, 9, 10), {}, (3, 3)),                                              # no pads
    ((1, 3, 5, 6), {"pads": [3, 3, 3, 3]}, (2, 2)),                           # pads wider than the kernel
    ((1, 2, 3, 3), {"auto_pad": "SAME_UPPER", "strides": [2, 2]}, (3, 3)),
]


@pytest.mark.parametrize("xs,attrs,k", DW_CASES)
@pytest.mark.parametrize("fuse", ["", "clip", "res_relu"])
def test_depthwise(xs, attrs, k, fuse):
    m, feeds = conv_model(xs, (xs[1], 1) + k, {**attrs, "group": xs[1]}, fuse)
    assert [p["kind"] for p in params(m)] == ["depthwise"] and params(m)[0]["dw"]
    check(m, feeds, **TOL)


def test_depthwise_1d_no_bias():
    m, feeds = conv_model((2, 4, 29), (4, 1, 5), {"group": 4, "dilations": [2], "pads": [3, 3]}, bias=False)
    assert params(m)[0]["dw"]
    check(m, feeds, **TOL)


@pytest.mark.parametrize("nt", [1, 2])
@pytest.mark.parametrize("stride", [1, 2])
def test_depthwise_symbolic_batch_threads(nt, stride):
    m, _ = conv_model((2, 24, 30, 31), (24, 1, 3, 3), {"group": 24, "pads": [1, 1, 1, 1], "strides": [stride] * 2},
                      "res_clip" if stride == 1 else "clip", batch="N")
    for n in (1, 3):
        feeds = {"x": rand((n, 24, 30, 31))}
        if stride == 1:
            feeds["z"] = rand((n, 24, 30, 31))
        run_threads(m, feeds, nt)


def test_depthwise_nan_inf():
    m, feeds = conv_model((1, 3, 12, 12), (3, 1, 3, 3), {"group": 3, "pads": [1, 1, 1, 1]}, "relu")
    x = feeds["x"]
    x[0, 0, 0, 0], x[0, 1, 5, 6], x[0, 2, 11, 11] = np.nan, np.inf, -np.inf
    got = check(m, feeds, **TOL)[0]
    assert np.isnan(got[0, 0, :2, :2]).all() and not np.isnan(got[0, 0, 3:, 3:]).any()


PW_CASES = [
    ((1, 16, 24, 24), 40),      # 576 pixels: 12 whole tiles; 40 channels: a partial panel
    ((2, 24, 20, 20), 19),      # 400 pixels: a partial last tile
    ((1, 300, 24, 26), 12),     # K > ONNXC_SGEMM_KC: two depth blocks
    ((1, 8, 100, 100), 24),     # 10000 pixels: several chunks
]


@pytest.mark.parametrize("xs,m", PW_CASES)
@pytest.mark.parametrize("fuse", ["", "clip", "res", "res_relu"])
def test_pointwise(xs, m, fuse):
    mdl, feeds = conv_model(xs, (m, xs[1], 1, 1), {}, fuse)
    p = params(mdl)[0]
    assert p["kind"] == "pointwise" and p["pw"]
    check(mdl, feeds, rtol=1e-4, atol=1e-5 * max(1, xs[1]) ** 0.5)


def test_pointwise_grouped_and_small_stay_on_sgemm():
    mdl, feeds = conv_model((1, 8, 24, 24), (12, 2, 1, 1), {"group": 4}, "relu")
    assert params(mdl)[0]["pw"]
    check(mdl, feeds, **TOL)
    mdl, feeds = conv_model((1, 32, 7, 7), (20, 32, 1, 1), {}, "res_relu")   # 49 pixels: SGEMM
    assert params(mdl)[0]["kind"] == "pointwise" and not params(mdl)[0]["pw"]
    check(mdl, feeds, **TOL)


@pytest.mark.parametrize("nt", [1, 2])
def test_pointwise_symbolic_batch_threads_nan(nt):
    mdl, _ = conv_model((2, 24, 30, 30), (36, 24, 1, 1), {}, "res_clip", batch="N")
    for n in (1, 2):
        feeds = {"x": rand((n, 24, 30, 30)), "z": rand((n, 36, 30, 30))}
        feeds["x"][0, 3, 4, 5], feeds["x"][n - 1, 7, 29, 29], feeds["z"][0, 1, 2, 2] = np.nan, np.inf, -np.inf
        got = run_threads(mdl, feeds, nt)
        assert np.isnan(got[0, :, 4, 5]).all() and got[0, 1, 2, 2] == 0   # -inf clipped


# The last columns of each row: with AVX-512's tiles (and AVX2's) read in place, the last vector
# masked; SSE and NEON builds read them from a padded copy (test_pointwise_last_columns_every_build)
XPAD_CASES = [
    ((1, 24, 14, 14), 40, 1),     # 196 pixels: 4 tiles + 4 columns, the last vector masked
    ((2, 300, 13, 13), 19, 1),    # 169: K > ONNXC_SGEMM_KC, batch 2, partial channel panel
    ((1, 16, 14, 14), 24, 4),     # grouped: each group's rows of the copy
]


@pytest.mark.parametrize("xs,m,group", XPAD_CASES)
@pytest.mark.parametrize("fuse", ["", "clip", "res_relu"])
def test_pointwise_padded_copy(xs, m, group, fuse):
    mdl, feeds = conv_model(xs, (m, xs[1] // group, 1, 1), {"group": group}, fuse)
    p = params(mdl)[0]
    assert p["kind"] == "pointwise" and p["pw"] and (p["pw"]["xpad"], p["pw"]["in_place"]) == (0, 2)
    check(mdl, feeds, rtol=1e-4, atol=1e-5 * max(1, xs[1]) ** 0.5)


@pytest.mark.parametrize("portable", [False, True])
@pytest.mark.parametrize("xs,m", [((1, 24, 14, 14), 40), ((2, 600, 21, 21), 19)])
def test_pointwise_last_columns_every_build(xs, m, portable, tmp_path):
    """The last partial tile in native and portable builds: native (AVX-512, AVX2) from X itself,
    the last vector's load masked; portable (SSE) from a padded copy of X (196 pixels) or, where X
    is too large to copy (600 x 441), from a per-panel copy of the last columns."""
    from onnxc.compiler import Options
    from util import assert_close
    mdl, feeds = conv_model(xs, (m, xs[1], 1, 1), {}, "res_clip")
    assert params(mdl)[0]["pw"] and params(mdl)[0]["pw"]["in_place"] == 2
    feeds["x"][0, 1, -1, -1], feeds["z"][-1, 2, -1, -2] = np.nan, np.inf
    want = ReferenceEvaluator(mdl).run(None, feeds)
    typed_outputs(mdl, want)
    path = onnxc.compiler.build_library(mdl, Options(portable=portable), cache_dir=tmp_path)
    with poisoned():
        got = onnxc.InferenceSession(str(path)).run(None, feeds)
    assert_close(want, got, 1e-4, 1e-5 * xs[1] ** 0.5)


@pytest.mark.parametrize("nt", [1, 2])
def test_pointwise_padded_copy_threads_nan(nt):
    mdl, _ = conv_model((2, 32, 14, 14), (96, 32, 1, 1), {}, "res_clip", batch="N")
    for n in (1, 2):
        feeds = {"x": rand((n, 32, 14, 14)), "z": rand((n, 96, 14, 14))}
        feeds["x"][n - 1, 3, 13, 13], feeds["x"][0, 5, 13, 12], feeds["z"][0, 1, 13, 13] = np.nan, np.inf, -np.inf
        got = run_threads(mdl, feeds, nt)
        assert np.isnan(got[n - 1, :, 13, 13]).all() and got[0, 1, 13, 13] == 0 or np.isnan(got[0, 1, 13, 13])
