"""FlexAttention (ai.onnx.preview 1) against onnx.reference: plain, scaled, GQA, score_mod/prob_mod
bodies (bias, causal -inf mask, soft cap, bodies reading outer values), float16/bfloat16/double,
softmax_precision, NaN/inf rows, and a symbolic batch."""
import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import onnxc
from util import assert_close, make_node_model, run_both, typed_outputs

PREVIEW = "ai.onnx.preview"
rng = np.random.default_rng(7)
NP2T = {np.float32: TensorProto.FLOAT, np.float64: TensorProto.DOUBLE, np.float16: TensorProto.FLOAT16,
        ml_dtypes.bfloat16: TensorProto.BFLOAT16}


def check(m, feeds, rtol, atol):
    """util.check, with bfloat16 results compared as float32 values."""
    ref, got = run_both(m, feeds)
    assert [np.asarray(r).dtype for r in ref] == [g.dtype for g in got]
    f = lambda xs: [np.asarray(x).astype(np.float32) if x.dtype == ml_dtypes.bfloat16 else x for x in xs]
    assert_close(f(ref), f(got), rtol, atol)
    return got


def qkv(b, hq, hkv, L, S, E, ev, dtype=np.float32):
    # seeded by the shapes: a test's data must not depend on which tests ran before it in the
    # same worker (pytest-xdist distributes them differently from run to run)
    r = np.random.default_rng([b, hq, hkv, L, S, E, ev])
    return {"Q": r.standard_normal((b, hq, L, E)).astype(dtype),
            "K": r.standard_normal((b, hkv, S, E)).astype(dtype),
            "V": r.standard_normal((b, hkv, S, ev)).astype(dtype)}


def model(feeds, attrs=None, graphs=None, opset=26, **kw):
    m = make_node_model("FlexAttention", feeds, attrs, opset=opset, domain=PREVIEW, **kw)
    for name, g in (graphs or {}).items():
        m.graph.node[0].attribute.append(helper.make_attribute(name, g))
    return m


def body(name, nodes, inits, dtype=TensorProto.FLOAT, dims=("B", "H", "L", "S")):
    return helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", dtype, list(dims))],
                             [helper.make_tensor_value_info("y", dtype, list(dims))], inits)


def add_bias(v, dtype=TensorProto.FLOAT):
    return body("bias", [helper.make_node("Add", ["x", "c"], ["y"])], [helper.make_tensor("c", dtype, [], [v])],
                dtype)


def mul(v, dtype=TensorProto.FLOAT):
    return body("mul", [helper.make_node("Mul", ["x", "c"], ["y"])], [helper.make_tensor("c", dtype, [], [v])],
                dtype)


def causal(dtype=TensorProto.FLOAT):
    nodes = [helper.make_node("Shape", ["x"], ["shp"]),
             helper.make_node("Gather", ["shp", "i2"], ["Ld"], axis=0),
             helper.make_node("Gather", ["shp", "i3"], ["Sd"], axis=0),
             helper.make_node("Range", ["zero", "Ld", "one"], ["qr"]),
             helper.make_node("Reshape", ["qr", "qs"], ["qi"]),
             helper.make_node("Range", ["zero", "Sd", "one"], ["kr"]),
             helper.make_node("Reshape", ["kr", "ks"], ["ki"]),
             helper.make_node("GreaterOrEqual", ["qi", "ki"], ["mask"]),
             helper.make_node("Where", ["mask", "x", "ninf"], ["y"])]
    inits = [helper.make_tensor("zero", TensorProto.INT64, [], [0]),
             helper.make_tensor("one", TensorProto.INT64, [], [1]),
             helper.make_tensor("i2", TensorProto.INT64, [], [2]),
             helper.make_tensor("i3", TensorProto.INT64, [], [3]),
             helper.make_tensor("qs", TensorProto.INT64, [4], [1, 1, -1, 1]),
             helper.make_tensor("ks", TensorProto.INT64, [4], [1, 1, 1, -1]),
             helper.make_tensor("ninf", dtype, [], [float("-inf")])]
    return body("causal", nodes, inits, dtype)


def soft_cap(cap):
    return body("cap", [helper.make_node("Div", ["x", "c"], ["t"]), helper.make_node("Tanh", ["t"], ["u"]),
                        helper.make_node("Mul", ["u", "c"], ["y"])],
                [helper.make_tensor("c", TensorProto.FLOAT, [], [cap])])


@pytest.mark.parametrize("shape", [(2, 4, 4, 8, 6, 16, 16), (2, 8, 2, 4, 6, 16, 16), (1, 3, 1, 5, 7, 4, 9),
                                   (1, 1, 1, 1, 1, 1, 1)])
@pytest.mark.parametrize("scale", [None, 0.1])
def test_plain_gqa_scale(shape, scale):
    feeds = qkv(*shape)
    check(model(feeds, {} if scale is None else {"scale": scale}), feeds, 1e-5, 1e-6)


@pytest.mark.parametrize("graphs", [{"score_mod": add_bias(0.5)}, {"prob_mod": mul(0.5)},
                                    {"score_mod": causal()}, {"score_mod": soft_cap(2.0)},
                                    {"score_mod": causal(), "prob_mod": mul(3.0)}])
def test_score_and_prob_mod(graphs):
    feeds = qkv(2, 4, 2, 5, 5, 8, 6)
    check(model(feeds, graphs=graphs), feeds, 1e-5, 1e-6)


def test_mod_reads_outer_value():
    """A score_mod body reading a graph input of the main graph (an additive per-head bias). The
    reference runs bodies without the outer scope, so it is checked against the same bias held
    as the body's own initializer."""
    feeds = qkv(1, 2, 2, 3, 4, 8, 8)
    bias = rng.standard_normal((1, 2, 1, 4)).astype(np.float32)
    inner = body("inner", [helper.make_node("Add", ["x", "bias"], ["y"])],
                 [onnx.numpy_helper.from_array(bias, "bias")])
    ref = onnx.reference.ReferenceEvaluator(model(feeds, graphs={"score_mod": inner})).run(None, feeds)
    m = model(feeds, graphs={"score_mod": body("outer", [helper.make_node("Add", ["x", "bias"], ["y"])], [])})
    m.graph.input.append(helper.make_tensor_value_info("bias", TensorProto.FLOAT, [1, 2, 1, 4]))
    typed_outputs(m, ref)
    got = onnxc.InferenceSession(m.SerializeToString()).run(None, {**feeds, "bias": bias})
    assert_close(ref, got, 1e-5, 1e-6)


@pytest.mark.parametrize("graphs", [None, {"score_mod": causal(), "prob_mod": mul(0.5)}])
def test_parallel_sizes(graphs):
    """Big enough that the row loops run on several threads (work >= ONNXC_PAR_MIN)."""
    feeds = qkv(2, 4, 2, 64, 72, 16, 24)
    check(model(feeds, graphs=graphs), feeds, 1e-5, 1e-6)


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16, np.float64])
@pytest.mark.parametrize("mod", [False, True])
def test_dtypes(dtype, mod):
    feeds = qkv(2, 4, 2, 6, 5, 16, 8, dtype)
    wt = TensorProto.DOUBLE if dtype == np.float64 else TensorProto.FLOAT
    tol = (1e-12, 1e-12) if dtype == np.float64 else (1e-2, 1e-2)
    check(model(feeds, graphs={"score_mod": causal(wt)} if mod else None), feeds, *tol)


@pytest.mark.parametrize("dtype,prec", [(np.float32, 11), (np.float32, 10), (np.float16, 1),
                                        (np.float16, 10), (np.float64, 1), (ml_dtypes.bfloat16, 16)])
def test_softmax_precision(dtype, prec):
    feeds = qkv(1, 2, 1, 4, 6, 8, 8, dtype)
    graphs = {"score_mod": add_bias(0.25, prec), "prob_mod": mul(2.0, prec)}
    tol = 1e-2 if 10 in (prec, NP2T[dtype]) or 16 in (prec, NP2T[dtype]) else 1e-5
    check(model(feeds, {"softmax_precision": prec}, graphs=graphs), feeds, tol, tol)
    check(model(feeds, {"softmax_precision": prec}), feeds, tol, tol)


def test_nan_inf_rows():
    """A fully masked row and NaN/inf inputs give NaN exactly where numpy does."""
    feeds = qkv(1, 2, 2, 4, 4, 4, 4)
    feeds["Q"][0, 0, 1, 2] = np.nan
    feeds["K"][0, 1, 3, 0] = np.inf
    g = body("mask_row", [helper.make_node("Where", ["m", "ninf", "x"], ["y"])],
             [helper.make_tensor("ninf", TensorProto.FLOAT, [], [float("-inf")]),
              helper.make_tensor("m", TensorProto.BOOL, [1, 1, 4, 1], [False, False, True, False])])
    got = check(model(feeds, graphs={"score_mod": g}), feeds, 1e-5, 1e-6)[0]
    assert np.isnan(got[0, :, 2]).all() and np.isnan(got[0, 0, 1]).all()


@pytest.mark.parametrize("dims,mod", [(("b", 5, 6), causal), (("b", "l", "s"), lambda: add_bias(0.5))])
def test_symbolic_dims(dims, mod):
    b, l, s = dims
    feeds = qkv(3, 2, 1, 5, 6, 8, 4)
    m = model(feeds, graphs={"score_mod": mod()},
              input_shapes={"Q": [b, 2, l, 8], "K": [b, 1, s, 8], "V": [b, 1, s, 4]})
    sess = None
    for f in (feeds, qkv(1, 2, 1, 5 if l == 5 else 2, 6 if s == 6 else 3, 8, 4)):
        ref = onnx.reference.ReferenceEvaluator(m).run(None, f)
        typed_outputs(m, ref)
        sess = sess or onnxc.InferenceSession(m.SerializeToString())
        assert_close(ref, sess.run(None, f), 1e-5, 1e-6)


@pytest.mark.parametrize("bad,match", [
    ({"softmax_precision": 7}, "softmax_precision"),
    ("heads", "multiple of kv heads"),
    ("rank", "rank 4"),
    ("body_type", "score_mod body gives double"),
])
def test_errors(bad, match):
    feeds = qkv(1, 3, 3, 2, 2, 4, 4)
    attrs, graphs = {}, None
    if bad == "heads":
        feeds = qkv(1, 3, 2, 2, 2, 4, 4)
    elif bad == "rank":
        feeds["Q"] = feeds["Q"][0]
    elif bad == "body_type":
        graphs = {"score_mod": body("c", [helper.make_node("Cast", ["x"], ["y"], to=TensorProto.DOUBLE)], [])}
        graphs["score_mod"].output[0].type.tensor_type.elem_type = TensorProto.DOUBLE
    else:
        attrs = bad
    m = model(feeds, attrs, graphs=graphs)
    m.graph.output[0].CopyFrom(helper.make_tensor_value_info("y0", TensorProto.FLOAT, None))
    with pytest.raises(Exception, match=match):
        onnxc.InferenceSession(m.SerializeToString())
