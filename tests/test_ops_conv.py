"""Conv against onnx.reference: 1-D to 3-D, groups, depthwise, pointwise, pads, strides,
dilations, auto_pad, bias, symbolic batch."""
import numpy as np
import pytest
from onnx import helper

import onnxc
from util import NP2ONNX, check, make_model_from_nodes, make_node_model, poisoned, run_both

rng = np.random.default_rng(11)


def rand(shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


def tol(dtype, k):
    return dict(rtol=1e-4, atol=2e-5 * max(1, k) ** 0.5) if dtype == np.float32 else dict(rtol=1e-10, atol=1e-10)


def conv_case(xs, ws, attrs, dtype=np.float32, bias=True, opset=17, w_input=False):
    x, w = rand(xs, dtype), rand(ws, dtype)
    inits = {"w": w}
    feeds = {"x": x}
    if w_input:
        feeds, inits = {"x": x, "w": w}, {}
    if bias:
        inits["b"] = rand((ws[0],), dtype)
    m = make_node_model("Conv", feeds, attrs, initializers=inits, opset=opset)
    k = int(np.prod(ws[1:]))
    return check(m, feeds, **tol(dtype, k))[0]


CASES_2D = [
    # x shape, w shape, attributes
    ((2, 3, 17, 19), (8, 3, 3, 3), {"pads": [1, 1, 1, 1]}),
    ((1, 5, 23, 21), (7, 5, 3, 3), {"pads": [1, 0, 2, 1], "strides": [2, 1]}),
    ((1, 3, 31, 30), (9, 3, 7, 7), {"pads": [3, 3, 3, 3], "strides": [2, 2]}),
    ((2, 6, 15, 16), (10, 3, 3, 2), {"group": 2, "pads": [1, 1, 0, 1]}),
    ((1, 4, 16, 16), (4, 1, 3, 3), {"group": 4, "pads": [1, 1, 1, 1]}),           # depthwise
    ((2, 6, 17, 15), (6, 1, 3, 3), {"group": 6, "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((1, 5, 12, 13), (5, 1, 5, 3), {"group": 5, "dilations": [2, 1], "pads": [4, 0, 3, 2]}),
    ((1, 4, 9, 9), (8, 1, 3, 3), {"group": 4}),                                  # channel multiplier
    ((2, 17, 9, 11), (13, 17, 1, 1), {}),                                        # pointwise
    ((1, 8, 9, 11), (12, 2, 1, 1), {"group": 4}),                                # grouped pointwise
    ((1, 6, 14, 14), (5, 6, 1, 1), {"strides": [2, 2]}),                         # strided 1x1
    ((1, 4, 10, 12), (3, 4, 1, 1), {"pads": [1, 0, 0, 1]}),                      # padded 1x1
    ((1, 3, 20, 20), (4, 3, 3, 3), {"dilations": [2, 3], "pads": [2, 3, 2, 3]}),
    ((1, 2, 6, 7), (3, 2, 6, 7), {}),                                            # kernel == input
    ((1, 3, 5, 5), (2, 3, 3, 3), {"pads": [4, 4, 4, 4], "strides": [3, 3]}),    # pads wider than kernel
    ((1, 64, 9, 9), (70, 64, 3, 3), {"pads": [1, 1, 1, 1]}),                     # K = 576 > KC
    ((2, 16, 40, 41), (9, 16, 3, 3), {"pads": [1, 2, 0, 1]}),                    # im2col in chunks
    ((1, 8, 64, 63), (6, 4, 3, 3), {"group": 2, "strides": [2, 1], "pads": [1, 1, 1, 1]}),
    ((1, 16, 30, 30), (40, 16, 1, 1), {}),                                       # pointwise, few rows
]


@pytest.mark.parametrize("xs,ws,attrs", CASES_2D)
def test_conv2d(xs, ws, attrs):
    conv_case(xs, ws, attrs)


@pytest.mark.parametrize("xs,ws,attrs", CASES_2D[:6])
def test_conv2d_no_bias_kernel_shape_attr(xs, ws, attrs):
    conv_case(xs, ws, {**attrs, "kernel_shape": list(ws[2:])}, bias=False)


@pytest.mark.parametrize("xs,ws,attrs", [
    ((2, 3, 30), (5, 3, 4), {"pads": [2, 1], "strides": [3]}),
    ((1, 4, 29), (4, 1, 5), {"group": 4, "dilations": [2], "pads": [3, 3]}),
    ((1, 6, 13), (9, 6, 1), {}),
])
def test_conv1d(xs, ws, attrs):
    conv_case(xs, ws, attrs)


@pytest.mark.parametrize("xs,ws,attrs", [
    ((1, 2, 7, 8, 9), (3, 2, 3, 2, 3), {"pads": [1, 0, 1, 1, 1, 0], "strides": [2, 1, 2]}),
    ((2, 4, 5, 6, 7), (4, 1, 3, 3, 3), {"group": 4, "pads": [1, 1, 1, 1, 1, 1], "dilations": [1, 2, 1]}),
    ((1, 3, 4, 5, 6), (2, 3, 1, 1, 1), {}),
])
def test_conv3d(xs, ws, attrs):
    conv_case(xs, ws, attrs)


@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER", "VALID", "NOTSET"])
@pytest.mark.parametrize("strides,dil", [([1, 1], [1, 1]), ([2, 3], [1, 1]), ([2, 1], [2, 2])])
def test_conv_auto_pad(auto_pad, strides, dil):
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"], auto_pad=auto_pad, strides=strides, dilations=dil),
             helper.make_node("Conv", ["x", "dw"], ["z"], auto_pad=auto_pad, strides=strides, dilations=dil,
                              group=4)]
    x = rand((1, 4, 13, 14))
    m = make_model_from_nodes(nodes, {"x": x}, {"w": rand((3, 4, 4, 3)), "dw": rand((4, 1, 3, 4))}, ["y", "z"])
    check(m, {"x": x}, **tol(np.float32, 48))


@pytest.mark.parametrize("opset", [1, 11, 22])
def test_conv_opsets(opset):
    conv_case((1, 3, 9, 10), (4, 3, 3, 3), {"pads": [1, 1, 1, 1]}, opset=opset)


@pytest.mark.parametrize("xs,ws,attrs", [CASES_2D[0], CASES_2D[4], CASES_2D[8], CASES_2D[3]])
def test_conv_double(xs, ws, attrs):
    conv_case(xs, ws, attrs, dtype=np.float64)


def test_conv_weights_as_input():
    conv_case((1, 3, 8, 8), (4, 3, 3, 3), {"pads": [1, 1, 1, 1]}, w_input=True)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_conv_nan_inf():
    x, w = rand((1, 3, 10, 10)), rand((4, 3, 3, 3))
    x[0, 0, 2, 3], x[0, 1, 7, 7], x[0, 2, 5, 0] = np.nan, np.inf, -np.inf
    dx = rand((1, 3, 10, 10))
    dx[0, 1, 4, 4] = np.nan
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["dx", "dw"], ["z"], pads=[1, 1, 1, 1], group=3),
             helper.make_node("Conv", ["x", "pw"], ["u"])]
    feeds = {"x": x, "dx": dx}
    m = make_model_from_nodes(nodes, feeds, {"w": w, "dw": rand((3, 1, 3, 3)), "pw": rand((2, 3, 1, 1))},
                              ["y", "z", "u"])
    y, z, u = check(m, feeds, **tol(np.float32, 27))
    assert np.isnan(y[:, :, 1:4, 2:5]).all() and np.isnan(z[0, 1, 3:6, 3:6]).all()


@pytest.mark.parametrize("ws,attrs", [((8, 3, 3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2]}),
                                      ((3, 1, 3, 3), {"group": 3, "pads": [1, 1, 1, 1]}),
                                      ((5, 3, 1, 1), {})])
def test_conv_symbolic_batch(ws, attrs):
    w, b = rand(ws), rand((ws[0],))
    x = rand((2, 3, 12, 11))
    m = make_node_model("Conv", {"x": x}, attrs, initializers={"w": w, "b": b},
                        input_shapes={"x": ["N", 3, 12, 11]})
    run_both(m, {"x": x})   # types the outputs
    from onnx.reference import ReferenceEvaluator
    ref = ReferenceEvaluator(m)
    sess = onnxc.InferenceSession(m.SerializeToString())
    assert sess.get_inputs()[0].shape == ["N", 3, 12, 11]
    for n in (1, 5, 3, 0):
        x = rand((n, 3, 12, 11))
        got = sess.run(None, {"x": x})[0]
        if n == 0:
            assert got.shape[0] == 0
            continue
        np.testing.assert_allclose(got, ref.run(None, {"x": x})[0], rtol=1e-4, atol=1e-4)


def test_resnet_like_block():
    """Conv -> Relu -> Conv + residual, stride-2 downsample: the shapes of resnet's stages."""
    x = rand((1, 16, 28, 28))
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], strides=[2, 2]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["x", "wd"], ["d"], strides=[2, 2]),
             helper.make_node("Add", ["c2", "d"], ["y"])]
    inits = {"w1": rand((32, 16, 3, 3)) * 0.1, "b1": rand((32,)), "w2": rand((32, 32, 3, 3)) * 0.1,
             "b2": rand((32,)), "wd": rand((32, 16, 1, 1))}
    check(make_model_from_nodes(nodes, {"x": x}, inits, ["y"]), {"x": x}, rtol=1e-4, atol=1e-4)


def build(model):
    for vi in model.graph.output:
        vi.CopyFrom(helper.make_tensor_value_info(vi.name, NP2ONNX[np.dtype(np.float32)], [None] * 4))
    return onnxc.InferenceSession(model.SerializeToString())


def test_conv_errors():
    x = rand((1, 4, 8, 8))
    m = make_node_model("Conv", {"x": x}, initializers={"w": rand((2, 3, 3, 3))})
    with pytest.raises(onnxc.InvalidGraph, match="group"):
        build(m)
    m = make_node_model("Conv", {"x": x}, {"kernel_shape": [2, 2]}, initializers={"w": rand((2, 4, 3, 3))})
    with pytest.raises(onnxc.InvalidGraph, match="kernel_shape"):
        build(m)
    m = make_node_model("Conv", {"x": x}, {"auto_pad": "SAME"}, initializers={"w": rand((2, 4, 3, 3))})
    with pytest.raises(onnxc.InvalidGraph, match="auto_pad"):
        build(m)
    m = make_node_model("Conv", {"x": x}, initializers={"w": rand((2, 4, 9, 9))})
    with pytest.raises(onnxc.InvalidGraph, match="output size"):
        build(m)
    m = make_node_model("Conv", {"x": x}, initializers={"w": rand((2, 4, 3, 3))},
                        input_shapes={"x": [1, 4, "H", "W"]})
    with pytest.raises(onnxc.NotImplemented, match="static"):
        build(m)


def test_conv_random_geometries():
    """Many small random geometries (one model, one build): pads wider or narrower than the
    kernel, strides, dilations, every kind of kernel path. Constant loop bounds differ per
    node, which is what once tripped a gcc -O3 vectorizer bug."""
    g = np.random.default_rng(2024)
    nodes, inits, outs = [], {}, []
    x = rand((2, 6, 13, 11))
    for i in range(40):
        group = int(g.choice([1, 2, 3, 6]))
        cg = 6 // group
        mg = int(g.choice([1, 2])) if group == 6 else int(g.integers(1, 5))
        ks = [int(g.choice([1, 1, 2, 3, 4])) for _ in range(2)]
        strides = [int(g.choice([1, 1, 2, 3])) for _ in range(2)]
        dil = [int(g.integers(1, 3)), int(g.integers(1, 3))]
        pads = [int(g.integers(0, 4)) for _ in range(4)]
        if any((13, 11)[k] + pads[k] + pads[k + 2] < (ks[k] - 1) * dil[k] + 1 for k in range(2)):
            continue
        inits[f"w{i}"] = rand((group * mg, cg, *ks))
        ins = ["x", f"w{i}"]
        if i % 2:
            inits[f"b{i}"] = rand((group * mg,))
            ins.append(f"b{i}")
        nodes.append(helper.make_node("Conv", ins, [f"y{i}"], group=group, strides=strides, dilations=dil,
                                      pads=pads))
        outs.append(f"y{i}")
    assert len(nodes) > 20
    check(make_model_from_nodes(nodes, {"x": x}, inits, outs), {"x": x}, **tol(np.float32, 96))


def check_threads(m, x, threads):
    """Every output of m at this thread count against onnx.reference."""
    ref, _ = run_both(m, {"x": x})
    so = onnxc.SessionOptions()
    so.intra_op_num_threads = threads
    sess = onnxc.InferenceSession(m.SerializeToString(), so)
    for got, want in zip(sess.run(None, {"x": x}), ref):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("threads", [1, 2, 3, 5])
def test_conv_threads_and_chunks(threads):
    """Convolutions large enough to run im2col in chunks: one thread, threads inside each
    chunk (few chunks) and threads owning whole chunks (many), all giving the same result."""
    x = rand((3, 16, 40, 41))
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 2, 0, 1]),
             helper.make_node("Conv", ["x", "w2"], ["z"], strides=[2, 2], group=2),
             helper.make_node("Conv", ["x", "pw", "b"], ["u"])]
    inits = {"w": rand((9, 16, 3, 3)), "b": rand((9,)), "w2": rand((6, 8, 3, 3)), "pw": rand((9, 16, 1, 1))}
    m = make_model_from_nodes(nodes, {"x": x}, inits, ["y", "z", "u"])
    check_threads(m, x, threads)


@pytest.mark.parametrize("threads", [2, 3, 4])
def test_conv_few_pixels_column_split(threads):
    """7x7 outputs (49 pixel rows of the swapped SGEMM, prepacked weights): threads split the
    output channels (onnxc__sgemm_bcols_share) for a 1x1 and a strided 3x3 (im2col, K > KC), and a
    1x1 with a fused residual and Relu."""
    x = rand((1, 64, 14, 14)) * 0.5
    x[0, 3, 4, 5], x[0, 40, 13, 13] = np.nan, np.inf
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["y"], strides=[2, 2], pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["y", "pw", "b2"], ["u"]),
             helper.make_node("Conv", ["u", "pw3", "b3"], ["c3"]), helper.make_node("Add", ["c3", "y"], ["s3"]),
             helper.make_node("Relu", ["s3"], ["v"])]
    inits = {"w": rand((150, 64, 3, 3)) * 0.05, "b": rand((150,)), "pw": rand((400, 150, 1, 1)) * 0.1,
             "b2": rand((400,)), "pw3": rand((150, 400, 1, 1)) * 0.05, "b3": rand((150,))}
    m = make_model_from_nodes(nodes, {"x": x}, inits, ["y", "u", "v"])
    check_threads(m, x, threads)


# ---- direct kernel (runtime_c/onnxc_conv.h): small stride-1 layers ------------------------------

def conv_kinds(model, chan=False) -> list:
    from onnxc import compiler
    from onnxc.ops import lookup
    c = compiler.compile_model(model, gemm_block=(8, 48))
    ps = [lookup(n).params(n) for n in c.graph.nodes if n.op_type in ("Conv", "FusedConv")]
    return [(p["kind"], bool(p["direct"] and p["direct"]["chan"])) if chan else p["kind"] for p in ps]


DIRECT_CASES = [
    ((1, 1, 28, 28), (6, 1, 5, 5), {"pads": [2, 2, 2, 2]}),                     # LeNet conv1
    ((1, 6, 14, 14), (16, 6, 5, 5), {}),                                          # LeNet conv2
    ((3, 4, 9, 13), (7, 4, 3, 3), {"pads": [1, 0, 2, 1]}),                       # 6 + 1 channels, batch 3
    ((2, 6, 11, 10), (10, 3, 3, 3), {"group": 2, "dilations": [2, 1], "pads": [2, 1, 2, 1]}),
    ((1, 3, 40), (5, 3, 5), {"pads": [2, 2]}),                                    # 1-D
    ((1, 2, 8, 8), (3, 2, 3, 3), {"auto_pad": "SAME_UPPER"}),
    ((1, 2, 8, 9), (3, 2, 2, 2), {"auto_pad": "SAME_LOWER"}),
    ((1, 5, 6, 70), (9, 5, 1, 3), {}),                                            # several tiles + tail
]


@pytest.mark.parametrize("xs,ws,attrs", DIRECT_CASES)
def test_conv_direct(xs, ws, attrs):
    x, w, b = rand(xs), rand(ws), rand((ws[0],))
    m = make_node_model("Conv", {"x": x}, attrs, initializers={"w": w, "b": b})
    assert conv_kinds(m) == ["direct"]
    with poisoned():
        check(m, {"x": x}, **tol(np.float32, int(np.prod(ws[1:]))))


@pytest.mark.parametrize("xs,ws,attrs", [
    ((1, 6, 14, 14), (16, 6, 5, 5), {}),                                          # LeNet conv2
    ((1, 6, 14, 14), (32, 6, 5, 5), {}),                                          # two channel blocks
    ((2, 8, 12, 12), (32, 4, 5, 5), {"group": 2}),
    ((1, 3, 10, 30), (16, 3, 5, 5), {"pads": [1, 1, 1, 1], "dilations": [1, 2]}),  # 3 row chunks
    ((1, 2, 9, 9), (15, 2, 4, 4), {"pads": [0, 2, 1, 0]}),                        # 15 of 16 channels
])
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_conv_direct_channel_blocks(xs, ws, attrs):
    """Weights prepacked in blocks of 16 output channels, positions of a row in registers."""
    x, w, b = rand(xs), rand(ws), rand((ws[0],))
    if "dilations" not in attrs:   # onnx.reference dilates with zero taps: 0 * NaN spreads
        x[0, 0, 3, 3], x[0, -1, -2, -1] = np.nan, np.inf
    m = make_node_model("Conv", {"x": x}, attrs, initializers={"w": w, "b": b})
    assert conv_kinds(m, chan=True) == [("direct", True)]
    with poisoned():
        check(m, {"x": x}, **tol(np.float32, int(np.prod(ws[1:]))))


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_conv_direct_nan_inf():
    x, w = rand((1, 2, 12, 12)), rand((4, 2, 3, 3))
    x[0, 0, 3, 4], x[0, 1, 7, 7], x[0, 1, 0, 11] = np.nan, np.inf, -np.inf
    m = make_node_model("Conv", {"x": x}, {"pads": [1, 1, 1, 1]}, initializers={"w": w})
    assert conv_kinds(m) == ["direct"]
    got = check(m, {"x": x}, **tol(np.float32, 18))[0]
    assert np.isnan(got[0, :, 2:5, 3:6]).all() and not np.isnan(got[0, :, 9:, :2]).any()


def test_conv_direct_fused_residual_relu():
    """Conv + Add(residual) + Relu fused (FusedConv) on the direct path; the output may take
    the residual's storage."""
    x, w, b, z = rand((2, 3, 10, 10)), rand((5, 3, 3, 3)), rand((5,)), rand((2, 5, 10, 10))
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["c", "z"], ["s"]), helper.make_node("Relu", ["s"], ["y"])]
    feeds = {"x": x, "z": z}
    m = make_model_from_nodes(nodes, feeds, {"w": w, "b": b}, ["y"])
    assert conv_kinds(m) == ["direct"]
    check(m, feeds, **tol(np.float32, 27))


@pytest.mark.parametrize("nt", [1, 2])
def test_conv_direct_symbolic_batch(nt):
    """Images over threads (each in its own slot) when the batch is large enough."""
    w, b = rand((16, 6, 5, 5)), rand((16,))
    x = rand((2, 6, 14, 14))
    m = make_node_model("Conv", {"x": x}, {}, initializers={"w": w, "b": b},
                        input_shapes={"x": ["N", 6, 14, 14]})
    assert conv_kinds(m) == ["direct"]
    ref, _ = run_both(m, {"x": x})
    so = onnxc.SessionOptions()
    so.intra_op_num_threads = nt
    sess = onnxc.InferenceSession(m.SerializeToString(), so)
    from onnx.reference import ReferenceEvaluator
    for n in (1, 9, 40):
        xs = rand((n, 6, 14, 14))
        np.testing.assert_allclose(sess.run(None, {"x": xs})[0], ReferenceEvaluator(m).run(None, {"x": xs})[0],
                                   rtol=1e-4, atol=1e-4)


def test_conv_direct_rule():
    """Big layers and double stay on the GEMM paths; strided few-channel ones run strided."""
    for xs, ws, attrs, dtype, kind in [
            ((1, 64, 56, 56), (64, 64, 3, 3), {"pads": [1, 1, 1, 1]}, np.float32, "im2col"),
            ((1, 3, 28, 28), (6, 3, 5, 5), {"strides": [2, 2]}, np.float32, "strided"),
            ((1, 1, 28, 28), (6, 1, 5, 5), {}, np.float64, "im2col")]:
        m = make_node_model("Conv", {"x": rand(xs, dtype)}, attrs, initializers={"w": rand(ws, dtype)})
        assert conv_kinds(m) == [kind]


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("op,attrs", [("MaxPool", {"kernel_shape": [2, 2], "strides": [2, 2]}),
                                      ("MaxPool", {"kernel_shape": [3, 3], "strides": [1, 2], "dilations": [2, 1]}),
                                      ("MaxPool", {"kernel_shape": [5, 5]}),
                                      ("AveragePool", {"kernel_shape": [2, 2], "strides": [2, 2]}),
                                      ("AveragePool", {"kernel_shape": [3, 2], "strides": [2, 1]})])
def test_pool_interior(op, attrs):
    """Pools whose windows all lie inside the input (LeNet's): taps straight; a window's
    leading NaN sticks, later NaNs are skipped (MaxPool), NaN propagates (AveragePool)."""
    x = rand((2, 3, 12, 13))
    x[1, 2, 4, 6], x[0, 1, 5, 5] = -np.inf, np.inf
    x[1, 0, 2, :] = -0.0
    m = make_node_model(op, {"x": x}, attrs, opset=12)
    with poisoned():
        check(m, {"x": x})
    # NaN (onnx.reference differs from onnxruntime here): 2x2 windows by numpy
    if attrs == {"kernel_shape": [2, 2], "strides": [2, 2]}:
        x[0, 0, 0, 0], x[0, 1, 2, 3], x[0, 2, 4, 4], x[0, 2, 5, 5] = np.nan, np.nan, 1e30, np.nan
        sess = onnxc.InferenceSession(m.SerializeToString())
        got = sess.run(None, {"x": x})[0]
        win = x[:, :, :12, :12].reshape(2, 3, 6, 2, 6, 2).transpose(0, 1, 2, 4, 3, 5).reshape(2, 3, 6, 6, 4)
        if op == "MaxPool":   # the first element, then any greater one
            want = win[..., 0].copy()
            for t in range(1, 4):
                want = np.where(win[..., t] > want, win[..., t], want)
            assert np.isnan(got[0, 0, 0, 0]) and not np.isnan(got[0, 1, 1, 1]) and got[0, 2, 2, 2] == np.float32(1e30)
        else:
            want = ((0 + (0 + win[..., 0] + win[..., 1])) + (0 + win[..., 2] + win[..., 3])) / np.float32(4)
        np.testing.assert_array_equal(got, want)


CONV_TEST_C = r"""
#include <stdio.h>
#include <stdlib.h>
#include "onnxc_conv.h"
static float *rd(FILE *f, int64_t n) { float *p = malloc(sizeof(float) * (n + 1)); if (fread(p, sizeof(float), n, f) != (size_t)n) exit(2); return p; }
int main(int argc, char **argv)
{
    FILE *f = fopen(argv[1], "rb");
    int64_t h[12];
    if (fread(h, sizeof h, 1, f) != 1) return 2;
    const int64_t M = h[0], C = h[1], IH = h[2], IW = h[3], KH = h[4], KW = h[5], DH = h[6], DW = h[7];
    const int64_t pt = h[8], pl = h[9], OH = h[10], OW = h[11];
    const int64_t PH = OH + (KH - 1) * DH, PW = OW + (KW - 1) * DW, Q = OH * PW, ldy = ONNXC_CONV_WIDE(Q);
    const int64_t Mp = (M + 15) / 16 * 16, K = C * KH * KW, slack = ldy - Q + PW - OW + 64;
    float *x = rd(f, C * IH * IW), *w = rd(f, M * K), *wc = rd(f, Mp * K);
    float *xp = malloc(sizeof(float) * (C * PH * PW + slack)), *yw = malloc(sizeof(float) * M * ldy);
    FILE *o = fopen(argv[2], "wb");
    onnxc_conv_pad(x, C, IH, IW, PH, PW, pt, pl, xp, slack);
    for (int variant = 0; variant < 2; ++variant) {
        if (variant == 0)
            onnxc_conv_direct(M, C, KH, KW, PH, PW, DH, DW, Q, xp, w, yw);
        else
            onnxc_conv_direct_c(M, C, KH, KW, PH, PW, DH, DW, OH, OW, xp, wc, yw, ldy);
        for (int64_t m = 0; m < M; ++m)
            for (int64_t oh = 0; oh < OH; ++oh)
                fwrite(yw + m * ldy + oh * PW, sizeof(float), OW, o);
    }
    fclose(o);
    return 0;
}
"""


@pytest.mark.parametrize("flags", [["-march=native"], ["-mtune=generic"], ["-mavx2", "-mfma"],
                                   ["-DONNXC_GEMM_PLAIN_C"]])
def test_conv_direct_kernels_every_isa(flags, tmp_path):
    """onnxc_conv_direct (wide positions) and onnxc_conv_direct_c (channel blocks) with every
    vector width: channel counts around the tiles (6/4/2/1, 16), row chunks, pads, dilation."""
    import subprocess
    from onnxc import build
    from onnxc.resources import runtime_dir
    tc = build.toolchain()
    base = [f for f in tc.flags if not f.startswith(("-march", "-mtune"))]
    (tmp_path / "c.c").write_text(CONV_TEST_C)
    res = subprocess.run([tc.cc, *base, *flags, "-I", str(runtime_dir()), "c.c", "-o", "c", "-lm"], cwd=tmp_path,
                         capture_output=True, text=True)
    if res.returncode != 0 and "-mavx2" in flags:
        pytest.skip("no AVX2 compiler support")
    assert res.returncode == 0, res.stderr
    for M, C, IH, IW, KH, KW, DH, DW, pads in [(6, 1, 28, 28, 5, 5, 1, 1, (2, 2, 2, 2)), (16, 6, 14, 14, 5, 5, 1, 1, (0,) * 4),
                                               (13, 3, 9, 30, 3, 3, 2, 1, (1, 0, 2, 3)), (1, 2, 5, 40, 1, 3, 1, 2, (0,) * 4),
                                               (33, 4, 7, 7, 3, 3, 1, 1, (1, 1, 1, 1)), (3, 5, 1, 70, 1, 5, 1, 1, (0, 2, 0, 2))]:
        OH, OW = IH + pads[0] + pads[2] - (KH - 1) * DH, IW + pads[1] + pads[3] - (KW - 1) * DW
        x, w = rand((C, IH, IW)), rand((M, C, KH, KW))
        Mp = -(-M // 16) * 16
        wp = np.zeros((Mp, C * KH * KW), np.float32)
        wp[:M] = w.reshape(M, -1)
        wc = wp.reshape(Mp // 16, 16, -1).transpose(0, 2, 1)
        with open(tmp_path / "in.bin", "wb") as fh:
            fh.write(np.array([M, C, IH, IW, KH, KW, DH, DW, pads[0], pads[1], OH, OW], np.int64).tobytes())
            for arr in (x, w, wc):
                fh.write(np.ascontiguousarray(arr, np.float32).tobytes())
        run = subprocess.run([str(tmp_path / "c"), "in.bin", "out.bin"], cwd=tmp_path, capture_output=True, timeout=120)
        assert run.returncode == 0, run.stderr
        out = np.fromfile(tmp_path / "out.bin", np.float32).reshape(2, M, OH, OW)
        xp = np.pad(x.astype(np.float64), ((0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
        want = np.zeros((M, OH, OW))
        for kh in range(KH):
            for kw in range(KW):
                want += np.einsum("mc,chw->mhw", w[:, :, kh, kw],
                                  xp[:, kh * DH:kh * DH + OH, kw * DW:kw * DW + OW])
        for got in out:
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * (C * KH * KW) ** 0.5)
