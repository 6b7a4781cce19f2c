"""Sequences and optionals (onnxc/ops/sequence.py): every op against onnx.reference on random
tensors of differing shapes, in loops and branches, as graph inputs and outputs; bad positions
rejected with an error naming the node."""
import numpy as np
import pytest
from onnx import TensorProto as T, helper as h
from onnx.reference import ReferenceEvaluator

import onnxc

F = T.FLOAT
SEQ2 = h.make_sequence_type_proto(h.make_tensor_type_proto(F, ["a", "b"]))


def _vi(name, tp):
    return h.make_value_info(name, tp)


def _model(nodes, inputs, outputs, opset=18):
    g = h.make_graph(nodes, "g", inputs, outputs)
    return h.make_model(g, opset_imports=[h.make_opsetid("", opset)])


def _same(got, want):
    if isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want)
        for a, b in zip(got, want):
            _same(a, b)
    elif want is None:
        assert got is None
    else:
        got, want = np.asarray(got), np.asarray(want)
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


def _check(m, feeds):
    got = onnxc.InferenceSession(m.SerializeToString()).run(None, feeds)
    want = ReferenceEvaluator(m).run(None, feeds)
    for a, b in zip(got, want):
        _same(a, b)
    return got


def _rand_seq(rng, n, cols=None):
    return [rng.standard_normal((int(rng.integers(0, 4)), cols or int(rng.integers(1, 5)))).astype(np.float32)
            for _ in range(n)]


@pytest.mark.parametrize("pos", [None, 0, -1, 2, -3])
def test_insert_at_erase_length(pos):
    rng = np.random.default_rng(1)
    pos_in = [] if pos is None else ["p"]
    m = _model([h.make_node("SequenceInsert", ["s", "x"] + pos_in, ["s1"]),
                h.make_node("SequenceErase", ["s1"] + pos_in, ["s2"]),
                h.make_node("SequenceLength", ["s1"], ["n"]),
                h.make_node("SequenceAt", ["s1", "q"], ["y"])],
               [_vi("s", SEQ2), h.make_tensor_value_info("x", F, ["c", "d"]),
                h.make_tensor_value_info("q", T.INT64, [])] +
               ([h.make_tensor_value_info("p", T.INT64, [])] if pos is not None else []),
               [_vi("s1", SEQ2), _vi("s2", SEQ2), h.make_tensor_value_info("n", T.INT64, []),
                h.make_tensor_value_info("y", F, None)])
    for q in (0, 1, -1, 3):
        feeds = {"s": _rand_seq(rng, 3), "x": rng.standard_normal((2, 5)).astype(np.float32),
                 "q": np.array(q, np.int64)}
        if pos is not None:
            feeds["p"] = np.array(pos, np.int64)
        _check(m, feeds)


def test_bad_position_names_node():
    m = _model([h.make_node("SequenceAt", ["s", "q"], ["y"])],
               [_vi("s", SEQ2), h.make_tensor_value_info("q", T.INT64, [])],
               [h.make_tensor_value_info("y", F, None)])
    sess = onnxc.InferenceSession(m.SerializeToString())
    with pytest.raises(onnxc.InvalidArgument, match=r"node 0 \(SequenceAt"):
        sess.run(None, {"s": _rand_seq(np.random.default_rng(0), 2), "q": np.array(2, np.int64)})


def test_construct_concat_split():
    rng = np.random.default_rng(2)
    nodes = [h.make_node("SequenceConstruct", ["a", "b", "a"], ["s"]),
             h.make_node("ConcatFromSequence", ["s"], ["c0"], axis=0),
             h.make_node("ConcatFromSequence", ["s"], ["c1"], axis=-1),
             h.make_node("SplitToSequence", ["c0"], ["p"], axis=1),
             h.make_node("SplitToSequence", ["c0", "k"], ["q"], axis=0),
             h.make_node("SplitToSequence", ["c0"], ["r"], axis=1, keepdims=0),
             h.make_node("SplitToSequence", ["c0", "sizes"], ["t"], axis=0)]
    outs = [h.make_tensor_value_info("c0", F, None), h.make_tensor_value_info("c1", F, None)] + \
        [_vi(n, h.make_sequence_type_proto(h.make_tensor_type_proto(F, None))) for n in "pqrt"]
    m = _model(nodes, [h.make_tensor_value_info("a", F, [2, 3]), h.make_tensor_value_info("b", F, [2, 3]),
                       h.make_tensor_value_info("k", T.INT64, []),
                       h.make_tensor_value_info("sizes", T.INT64, [3])], outs)
    for k in (1, 2, 4, 7):
        _check(m, {"a": rng.standard_normal((2, 3)).astype(np.float32),
                   "b": rng.standard_normal((2, 3)).astype(np.float32), "k": np.array(k, np.int64),
                   "sizes": np.array([1, 0, 5], np.int64)})


def test_concat_new_axis_and_mismatch():
    seq = h.make_sequence_type_proto(h.make_tensor_type_proto(F, ["a", "b"]))
    m = _model([h.make_node("ConcatFromSequence", ["s"], ["y"], axis=1, new_axis=1)], [_vi("s", seq)],
               [h.make_tensor_value_info("y", F, None)])
    rng = np.random.default_rng(3)
    _check(m, {"s": [rng.standard_normal((2, 4)).astype(np.float32) for _ in range(3)]})
    sess = onnxc.InferenceSession(m.SerializeToString())
    with pytest.raises(onnxc.InvalidArgument, match="ConcatFromSequence"):
        sess.run(None, {"s": [np.zeros((2, 4), np.float32), np.zeros((2, 5), np.float32)]})


def test_loop_builds_sequence_of_growing_slices():
    """A Loop carrying a sequence, each iteration inserting a slice whose length is the
    iteration number: dims computed inside the body, values on the heap (grown on demand)."""
    body = h.make_graph(
        [h.make_node("Add", ["i", "one"], ["e"]),
         h.make_node("Unsqueeze", ["e", "zero"], ["e1"]),
         h.make_node("Slice", ["x", "zero1", "e1"], ["sl"]),
         h.make_node("SequenceInsert", ["sin", "sl"], ["sout"]),
         h.make_node("Identity", ["c"], ["cout"])],
        "body", [h.make_tensor_value_info("i", T.INT64, []), h.make_tensor_value_info("c", T.BOOL, []),
                 _vi("sin", h.make_sequence_type_proto(h.make_tensor_type_proto(F, None)))],
        [h.make_tensor_value_info("cout", T.BOOL, []),
         _vi("sout", h.make_sequence_type_proto(h.make_tensor_type_proto(F, None)))],
        [h.make_tensor("one", T.INT64, [], [1]), h.make_tensor("zero", T.INT64, [1], [0]),
         h.make_tensor("zero1", T.INT64, [1], [0])])
    m = _model([h.make_node("SequenceEmpty", [], ["s0"]),
                h.make_node("Loop", ["n", "t", "s0"], ["s"], body=body),
                h.make_node("ConcatFromSequence", ["s"], ["flat"], axis=0)],
               [h.make_tensor_value_info("n", T.INT64, []), h.make_tensor_value_info("x", F, ["L"]),
                h.make_tensor_value_info("t", T.BOOL, [])],
               [_vi("s", h.make_sequence_type_proto(h.make_tensor_type_proto(F, None))),
                h.make_tensor_value_info("flat", F, None)])
    rng = np.random.default_rng(4)
    sess = onnxc.InferenceSession(m.SerializeToString())
    ref = ReferenceEvaluator(m)
    for n, L in [(3, 5), (1, 1), (60, 4000)]:    # the last needs far more than the first heap
        feeds = {"n": np.array(n, np.int64), "x": rng.standard_normal(L).astype(np.float32),
                 "t": np.array(True)}
        for a, b in zip(sess.run(None, feeds), ref.run(None, feeds)):
            _same(a, b)


@pytest.mark.parametrize("present", [True, False])
def test_optionals(present):
    opt_t = h.make_optional_type_proto(h.make_tensor_type_proto(F, [3]))
    m = _model([h.make_node("OptionalHasElement", ["o"], ["has"]),
                h.make_node("Optional", ["x"], ["ox"]),
                h.make_node("OptionalGetElement", ["ox"], ["gx"]),
                h.make_node("Optional", [], ["none"], type=h.make_tensor_type_proto(F, [])),
                h.make_node("OptionalHasElement", ["none"], ["has_none"])],
               [_vi("o", opt_t), h.make_tensor_value_info("x", F, [2, 3])],
               [h.make_tensor_value_info("has", T.BOOL, []), h.make_tensor_value_info("gx", F, None),
                h.make_tensor_value_info("has_none", T.BOOL, [])])
    x = np.random.default_rng(5).standard_normal((2, 3)).astype(np.float32)
    has, gx, has_none = onnxc.InferenceSession(m.SerializeToString()).run(
        None, {"o": np.ones(3, np.float32) if present else None, "x": x})
    assert bool(has) is present and not bool(has_none)   # (onnx.reference wraps gx in a list)
    _same(gx, x)


def test_optional_get_element_of_empty_names_node():
    opt_t = h.make_optional_type_proto(h.make_tensor_type_proto(F, [3]))
    m = _model([h.make_node("OptionalGetElement", ["o"], ["y"])], [_vi("o", opt_t)],
               [h.make_tensor_value_info("y", F, None)])
    sess = onnxc.InferenceSession(m.SerializeToString())
    np.testing.assert_array_equal(sess.run(None, {"o": np.arange(3, dtype=np.float32)})[0], np.arange(3))
    with pytest.raises(onnxc.Fail, match=r"node 0 \(OptionalGetElement"):
        sess.run(None, {"o": None})


def test_sequence_input_checks():
    m = _model([h.make_node("SequenceLength", ["s"], ["n"])], [_vi("s", SEQ2)],
               [h.make_tensor_value_info("n", T.INT64, [])])
    sess = onnxc.InferenceSession(m.SerializeToString())
    assert sess.get_inputs()[0].type == "seq(tensor(float))"
    assert int(sess.run(None, {"s": []})[0]) == 0
    with pytest.raises(onnxc.InvalidArgument, match="list"):
        sess.run(None, {"s": np.zeros(3, np.float32)})
    with pytest.raises(onnxc.InvalidArgument, match="element 1"):
        sess.run(None, {"s": [np.zeros(3, np.float32), np.zeros(3, np.int64)]})
