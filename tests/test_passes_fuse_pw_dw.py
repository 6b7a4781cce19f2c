"""passes/fuse_pw_dw.py and ops/pwdw.py: a 1x1 Conv whose output only a depthwise Conv reads
becomes one PwDwConv (before/after graphs), and its results equal onnx.reference's: strides 1
and 2, whole-plane and per-row depthwise layouts, activations on either half, bias or none, the
depthwise's residual, channel counts that leave a partial panel, batch, threads, NaN/inf, and
the portable build (no AVX-512: the scalar depthwise)."""
import numpy as np
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

import onnxc
from onnxc import compiler
from onnxc.compiler import Options
from util import assert_close, make_model_from_nodes, poisoned, typed_outputs

rng = np.random.default_rng(11)
TOL = dict(rtol=1e-4, atol=1e-5)


def rand(shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def act_nodes(kind, src, dst, inits):
    if kind == "relu":
        return [helper.make_node("Relu", [src], [dst])]
    if kind == "clip":
        inits["lo"], inits["hi"] = np.float32(0), np.float32(6)
        return [helper.make_node("Clip", [src, "lo", "hi"], [dst])]
    if kind == "clip_hi":    # only an upper bound
        inits["hi2"] = np.float32(0.5)
        return [helper.make_node("Clip", [src, "", "hi2"], [dst])]
    if kind == "sigmoid":
        return [helper.make_node("Sigmoid", [src], [dst])]
    return []   # none: the caller renames src to dst


def pair_model(C, M, hw, stride=1, act1="clip", act2="clip", bias=True, res=False, batch=1, extra_reader=False,
               pads=(1, 1, 1, 1), k=3):
    """X -> Conv 1x1 (C -> M) -> act1 -> E -> depthwise k x k -> [+ Z] -> act2 -> Y."""
    feeds = {"x": rand((batch, C, hw, hw))}
    inits = {"w1": rand((M, C, 1, 1), C ** -0.5), "w2": rand((M, 1, k, k), 1 / k)}
    c1, c2 = ["x", "w1"], ["e", "w2"]
    if bias:
        inits["b1"], inits["b2"] = rand((M,)), rand((M,))
        c1.append("b1")
        c2.append("b2")
    nodes = [helper.make_node("Conv", c1, ["e0" if act1 else "e"])] + act_nodes(act1, "e0", "e", inits)
    nodes.append(helper.make_node("Conv", c2, ["d"], group=M, strides=[stride] * 2, pads=list(pads)))
    cur = "d"
    outs = []
    if res:
        oh = ReferenceEvaluator(make_model_from_nodes(nodes, feeds, inits, ["d"])).run(None, feeds)[0].shape
        feeds["z"] = rand(oh)
        nodes.append(helper.make_node("Add", ["d", "z"], ["s"]))
        cur = "s"
    nodes += act_nodes(act2, cur, "y", inits)
    outs.append("y" if act2 else cur)
    if extra_reader:
        nodes.append(helper.make_node("Neg", ["e"], ["ne"]))
        outs.append("ne")
    return make_model_from_nodes(nodes, feeds, inits, outs), feeds


def op_types(m):
    return [n.op_type for n in compiler.compile_model(m, gemm_block=(8, 48)).graph.nodes]


def run(m, feeds, nt=1, portable=False, tmp_path=None):
    want = ReferenceEvaluator(m).run(None, feeds)
    typed_outputs(m, want)
    so = onnxc.SessionOptions()
    so.intra_op_num_threads = nt
    with poisoned():
        if portable:
            path = onnxc.compiler.build_library(m, Options(portable=True), cache_dir=tmp_path)
            got = onnxc.InferenceSession(str(path), so).run(None, feeds)
        else:
            got = onnxc.InferenceSession(m.SerializeToString(), so).run(None, feeds)
    assert_close(want, got, TOL["rtol"], TOL["atol"])
    return got


def test_pass_fuses_the_pair():
    m, _ = pair_model(16, 40, 28)
    assert op_types(m) == ["PwDwConv"]
    m, _ = pair_model(16, 40, 28, res=True, act1="relu", act2="")
    assert op_types(m) == ["PwDwConv"]


@pytest.mark.parametrize("case", ["extra_reader", "odd_width_stride2", "stride3", "level1"])
def test_pass_leaves_other_graphs(case):
    if case == "extra_reader":       # E is read by another node too: it must be stored
        m, _ = pair_model(16, 40, 28, extra_reader=True)
    elif case == "odd_width_stride2":    # no depthwise_flat layout
        m, _ = pair_model(16, 40, 27, stride=2)
    elif case == "stride3":
        m, _ = pair_model(16, 40, 28, stride=3)
    else:
        m, _ = pair_model(16, 40, 28)
        c = compiler.compile_model(m, Options(optimization_level=1), gemm_block=(8, 48))
        assert "PwDwConv" not in [n.op_type for n in c.graph.nodes]
        return
    assert "PwDwConv" not in op_types(m)


CASES = [   # C, M, hw, stride, act1, act2, bias, res
    (16, 40, 28, 1, "clip", "clip", True, False),     # 40 channels: 5 whole panels
    (24, 44, 28, 2, "clip", "clip", True, False),     # 44: a partial panel
    (8, 20, 56, 1, "relu", "", False, False),
    (8, 20, 56, 2, "", "relu", True, True),
    (12, 18, 70, 1, "clip_hi", "sigmoid", True, True),   # 4900 positions: per-row layout
    (12, 18, 132, 2, "sigmoid", "clip", True, False),    # per row, stride 2 (phases of 66 x 66)
    (16, 24, 14, 1, "clip", "clip", True, True),
    (32, 48, 20, 2, "clip", "clip", True, False),
]


@pytest.mark.parametrize("C,M,hw,stride,act1,act2,bias,res", CASES)
def test_results(C, M, hw, stride, act1, act2, bias, res):
    m, feeds = pair_model(C, M, hw, stride, act1, act2, bias, res)
    assert op_types(m).count("PwDwConv") == 1
    run(m, feeds)


@pytest.mark.parametrize("nt", [1, 2])
def test_batch_threads_nan_inf(nt):
    m, feeds = pair_model(16, 40, 28, 1, "clip", "relu", batch=3)
    x = feeds["x"]
    x[0, 3, 0, 0], x[1, 5, 13, 14], x[2, 0, 27, 27] = np.nan, np.inf, -np.inf
    got = run(m, feeds, nt)[0]
    assert np.isnan(got[0, :, :2, :2]).all()       # NaN reaches every channel's 3x3 neighbourhood
    assert not np.isnan(got[0, :, 5:, 5:]).any()


@pytest.mark.parametrize("case", [1, 3, 5])
def test_portable_build(case, tmp_path):
    C, M, hw, stride, act1, act2, bias, res = CASES[case]
    m, feeds = pair_model(C, M, hw, stride, act1, act2, bias, res)
    run(m, feeds, portable=True, tmp_path=tmp_path)
