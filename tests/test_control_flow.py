"""If, Loop and Scan: bodies compiled into C functions, checked against onnx.reference."""
import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import onnxc

F = TensorProto.FLOAT


def _vi(name, et=F, shape=None):
    return helper.make_tensor_value_info(name, et, shape)


def _check(model, feeds_list):
    sess = onnxc.InferenceSession(model.SerializeToString())
    ref = ReferenceEvaluator(model)
    for feeds in feeds_list:
        got = sess.run(None, feeds)
        want = ref.run(None, feeds)
        for g, w in zip(got, want):
            assert g.shape == w.shape
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)


def test_if_reads_outer_values_and_branch_shapes_differ():
    then_g = helper.make_graph([helper.make_node("Add", ["x", "w"], ["t"])], "then", [], [_vi("t", F, ["N", 3])])
    else_g = helper.make_graph([helper.make_node("Slice", ["x", "st", "en", "ax"], ["e"])], "else", [],
                               [_vi("e", F, None)],
                               [helper.make_tensor("st", TensorProto.INT64, [1], [0]),
                                helper.make_tensor("en", TensorProto.INT64, [1], [2]),
                                helper.make_tensor("ax", TensorProto.INT64, [1], [1])])
    g = helper.make_graph([helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)], "g",
                          [_vi("c", TensorProto.BOOL, [1]), _vi("x", F, ["N", 3])], [_vi("y", F, None)],
                          [helper.make_tensor("w", F, [3], [1.0, 2.0, np.nan])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    _check(m, [{"c": np.array([True]), "x": x}, {"c": np.array([False]), "x": x},
               {"c": np.array([False]), "x": x[:1]}])


@pytest.mark.parametrize("directions", [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_scan_running_sum_with_axes(directions):
    """Scan over axis 1 (onnx.reference handles only axis 0, forward: compared with numpy)."""
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "xs"], ["s_out"]), helper.make_node("Mul", ["s_out", "k"], ["ys"])],
        "body", [_vi("s_in", F, [2]), _vi("xs", F, [2])], [_vi("s_out", F, [2]), _vi("ys", F, [2])])
    node = helper.make_node("Scan", ["s0", "x"], ["s", "y"], body=body, num_scan_inputs=1,
                            scan_input_axes=[1], scan_input_directions=[directions[0]],
                            scan_output_axes=[1], scan_output_directions=[directions[1]])
    g = helper.make_graph([node], "g", [_vi("s0", F, [2]), _vi("x", F, [2, "T"])],
                          [_vi("s", F, None), _vi("y", F, None)],
                          [helper.make_tensor("k", F, [1], [0.5])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 16)])
    sess = onnxc.InferenceSession(m.SerializeToString())
    rng = np.random.default_rng(0)
    for t in (0, 1, 5):
        s0 = rng.standard_normal(2).astype(np.float32)
        x = rng.standard_normal((2, t)).astype(np.float32)
        xs = x[:, ::-1] if directions[0] else x
        s, ys = s0.copy(), []
        for i in range(t):
            s = s + xs[:, i]
            ys.append(s * np.float32(0.5))
        y = np.stack(ys, axis=1) if ys else np.zeros((2, 0), np.float32)
        if directions[1]:
            y = y[:, ::-1]
        got_s, got_y = sess.run(None, {"s0": s0, "x": x})
        np.testing.assert_allclose(got_s, s, rtol=1e-6)
        np.testing.assert_allclose(got_y, y, rtol=1e-6)


def test_scan_matches_reference_axis0():
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "xs"], ["s_out"]), helper.make_node("Tanh", ["s_out"], ["ys"])],
        "body", [_vi("s_in", F, [3]), _vi("xs", F, [3])], [_vi("s_out", F, [3]), _vi("ys", F, [3])])
    node = helper.make_node("Scan", ["s0", "x"], ["s", "y"], body=body, num_scan_inputs=1)
    g = helper.make_graph([node], "g", [_vi("s0", F, [3]), _vi("x", F, ["T", 3])],
                          [_vi("s", F, None), _vi("y", F, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 16)])
    rng = np.random.default_rng(2)
    _check(m, [{"s0": rng.standard_normal(3).astype(np.float32),
                "x": np.where(rng.random((t, 3)) < 0.1, np.nan, rng.standard_normal((t, 3))).astype(np.float32)}
               for t in (1, 4, 7)])


def test_loop_with_trip_count_input_and_cond():
    body = helper.make_graph(
        [helper.make_node("Add", ["v_in", "one"], ["v_out"]),
         helper.make_node("Less", ["v_out", "lim"], ["c_out"]),
         helper.make_node("Mul", ["v_out", "v_out"], ["sq"])],
        "body", [_vi("i", TensorProto.INT64, []), _vi("c_in", TensorProto.BOOL, []), _vi("v_in", F, [1])],
        [_vi("c_out", TensorProto.BOOL, [1]), _vi("v_out", F, [1]), _vi("sq", F, [1])])
    g = helper.make_graph([helper.make_node("Loop", ["M", "c", "v0"], ["v", "sqs"], body=body)], "g",
                          [_vi("M", TensorProto.INT64, [1]), _vi("c", TensorProto.BOOL, [1]), _vi("v0", F, [1]),
                           _vi("lim", F, [1])], [_vi("v", F, None), _vi("sqs", F, None)],
                          [helper.make_tensor("one", F, [1], [1.0])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 16)])
    feeds = []
    for M, c, lim in [(5, True, 100.0), (5, True, 3.0), (2, True, 9.0)]:
        feeds.append({"M": np.array([M], np.int64), "c": np.array([c]), "v0": np.array([0.5], np.float32),
                      "lim": np.array([lim], np.float32)})
    _check(m, feeds)


def test_loop_zero_iterations_and_bad_trip_count():
    body = helper.make_graph(
        [helper.make_node("Identity", ["c_in"], ["c_out"]), helper.make_node("Neg", ["v_in"], ["v_out"]),
         helper.make_node("Identity", ["v_out"], ["sc"])],
        "body", [_vi("i", TensorProto.INT64, []), _vi("c_in", TensorProto.BOOL, []), _vi("v_in", F, [2])],
        [_vi("c_out", TensorProto.BOOL, []), _vi("v_out", F, [2]), _vi("sc", F, [2])])
    g = helper.make_graph([helper.make_node("Loop", ["M", "", "v0"], ["v", "scs"], body=body)], "g",
                          [_vi("M", TensorProto.INT64, []), _vi("v0", F, [2])], [_vi("v", F, None), _vi("scs", F, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 16)])
    sess = onnxc.InferenceSession(m.SerializeToString())
    v0 = np.array([1.0, -2.0], np.float32)
    v, scs = sess.run(None, {"M": np.array(0, np.int64), "v0": v0})
    np.testing.assert_array_equal(v, v0)
    assert scs.shape == (0, 2)
    v, scs = sess.run(None, {"M": np.array(3, np.int64), "v0": v0})
    np.testing.assert_array_equal(v, -v0)
    np.testing.assert_array_equal(scs, np.stack([-v0, v0, -v0]))
    with pytest.raises(onnxc.InvalidArgument, match="Loop"):
        sess.run(None, {"M": np.array(2 ** 50, np.int64), "v0": v0})


def _sliding_window_loop():
    """Loop whose scan output is x[i:i+w]: its length is found while the body runs."""
    from onnx import TensorProto as TP, helper as hp
    body = hp.make_graph(
        [hp.make_node("Unsqueeze", ["i", "zero"], ["s"]),
         hp.make_node("Add", ["s", "w"], ["e"]),
         hp.make_node("Slice", ["x", "s", "e"], ["win"]),
         hp.make_node("Identity", ["c"], ["cout"])],
        "body", [hp.make_tensor_value_info("i", TP.INT64, []), hp.make_tensor_value_info("c", TP.BOOL, [])],
        [hp.make_tensor_value_info("cout", TP.BOOL, []), hp.make_tensor_value_info("win", TP.FLOAT, None)],
        [hp.make_tensor("zero", TP.INT64, [1], [0])])
    g = hp.make_graph([hp.make_node("Loop", ["n", "t"], ["wins"], body=body)], "g",
                      [hp.make_tensor_value_info("n", TP.INT64, []), hp.make_tensor_value_info("t", TP.BOOL, []),
                       hp.make_tensor_value_info("x", TP.FLOAT, ["L"]), hp.make_tensor_value_info("w", TP.INT64, [1])],
                      [hp.make_tensor_value_info("wins", TP.FLOAT, None)])
    return hp.make_model(g, opset_imports=[hp.make_opsetid("", 17)])


def test_loop_scan_output_with_dims_found_while_running():
    import onnxc
    from onnx.reference import ReferenceEvaluator
    m = _sliding_window_loop()
    sess, ref = onnxc.InferenceSession(m.SerializeToString()), ReferenceEvaluator(m)
    rng = np.random.default_rng(7)
    for n, L, w in [(3, 10, 4), (1, 5, 5), (8, 2000, 300), (0, 4, 2)]:
        feeds = {"n": np.array(n, np.int64), "t": np.array(True), "x": rng.standard_normal(L).astype(np.float32),
                 "w": np.array([w], np.int64)}
        got, = sess.run(None, feeds)
        if n == 0:
            assert got.shape == (0, 0)
            continue
        want, = ref.run(None, feeds)
        np.testing.assert_array_equal(got, want)
    # windows running off the end get shorter: iterations disagree, the node says so
    with pytest.raises(onnxc.InvalidArgument, match=r"node 0 \(Loop"):
        sess.run(None, {"n": np.array(4, np.int64), "t": np.array(True), "x": np.zeros(5, np.float32),
                        "w": np.array([3], np.int64)})


def test_loop_heap_request_beyond_any_memory_is_refused_cleanly():
    """A trip count of 2**40 sizes the scan output's heap buffer past what a run may ask for:
    a clear error at once, not an attempt to allocate it."""
    import onnxc
    sess = onnxc.InferenceSession(_sliding_window_loop().SerializeToString())
    with pytest.raises(onnxc.Fail, match="needs more than"):
        sess.run(None, {"n": np.array(2 ** 40, np.int64), "t": np.array(True),
                        "x": np.zeros(8, np.float32), "w": np.array([2], np.int64)})


@pytest.mark.parametrize("then_static", [False, True])
def test_if_branch_with_dims_found_while_running(then_static):
    """A branch slicing by a value the model computes: the If takes its output from the heap
    (the other branch, of known dims, gets a heap buffer)."""
    import onnxc
    from onnx import TensorProto as TP, helper as hp
    from onnx.reference import ReferenceEvaluator

    def branch(name, start):
        if then_static and name == "a":
            return hp.make_graph([hp.make_node("Neg", ["x"], ["oa"])], name, [],
                                 [hp.make_tensor_value_info("oa", TP.FLOAT, None)])
        return hp.make_graph([hp.make_node("Slice", ["x", "st" + name, "e"], ["o" + name])], name, [],
                             [hp.make_tensor_value_info("o" + name, TP.FLOAT, None)],
                             [hp.make_tensor("st" + name, TP.INT64, [1], [start])])
    g = hp.make_graph([hp.make_node("ReduceMax", ["k"], ["e"], keepdims=1),
                       hp.make_node("If", ["c"], ["y"], then_branch=branch("a", 0), else_branch=branch("b", 1)),
                       hp.make_node("Mul", ["y", "y"], ["z"])], "g",
                      [hp.make_tensor_value_info("x", TP.FLOAT, [8]), hp.make_tensor_value_info("k", TP.INT64, [2]),
                       hp.make_tensor_value_info("c", TP.BOOL, [])],
                      [hp.make_tensor_value_info("z", TP.FLOAT, None)])
    m = hp.make_model(g, opset_imports=[hp.make_opsetid("", 18)])
    sess, ref = onnxc.InferenceSession(m.SerializeToString()), ReferenceEvaluator(m)
    x = np.random.default_rng(3).standard_normal(8).astype(np.float32)
    for c in (True, False):
        for k in ([3, 1], [6, 7], [0, -2]):
            feeds = {"x": x, "k": np.array(k, np.int64), "c": np.array(c)}
            np.testing.assert_array_equal(sess.run(None, feeds)[0], ref.run(None, feeds)[0])
