"""run()'s hot path in C (onnxc/fastcall.py): it is built here, it is taken, and it gives what the
Python path gives — outputs, ZipMap dicts, errors — for every feed, including those it hands back."""
from __future__ import annotations

import gc
import sys
import threading

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper

import onnxc
from onnxc import fastcall
from onnxc.errors import Error


def two_input_model():
    """Z = (X*X + Sigmoid(X)) * Y and W = Relu(X) + 1 (int64 count): intermediates live in the
    arena; X has a symbolic batch, Y a static shape."""
    x = helper.make_tensor_value_info("X", T.FLOAT, ["N", 64])
    y = helper.make_tensor_value_info("Y", T.FLOAT, [1, 64])
    z = helper.make_tensor_value_info("Z", T.FLOAT, ["N", 64])
    w = helper.make_tensor_value_info("W", T.INT64, ["N", 64])
    nodes = [helper.make_node("Mul", ["X", "X"], ["A"]), helper.make_node("Sigmoid", ["X"], ["B"]),
             helper.make_node("Add", ["A", "B"], ["D"]), helper.make_node("Mul", ["D", "Y"], ["Z"]),
             helper.make_node("Relu", ["X"], ["R"]), helper.make_node("Cast", ["R"], ["W"], to=T.INT64)]
    g = helper.make_graph(nodes, "two", [x, y], [z, w])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8).SerializeToString()


@pytest.fixture(scope="module")
def sessions():
    """The same model twice: one session on the C path, one forced onto the Python path."""
    fast = onnxc.InferenceSession(two_input_model())
    slow = onnxc.InferenceSession(two_input_model())
    slow._cstate = None
    return fast, slow


def expected(x, y):
    z = (x * x + 1 / (1 + np.exp(-x))) * y
    with np.errstate(invalid="ignore"):
        return z, np.maximum(x, 0).astype(np.int64)


def test_the_extension_builds_and_is_taken(sessions):
    assert fastcall.module() is not None, "the C fast path could not be built on this machine"
    fast, _ = sessions
    calls = []
    real = fast._crun
    fast._crun = lambda st, feed: calls.append(1) or real(st, feed)
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((3, 64)).astype(np.float32), rng.standard_normal((1, 64)).astype(np.float32)
    for _ in range(3):
        out = fast.run(None, {"X": x, "Y": y})
    fast._crun = real
    assert len(calls) == 3
    z, w = expected(x, y)
    np.testing.assert_allclose(out[0], z, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(out[1], w)


@pytest.mark.parametrize("batch", [0, 1, 5, 33, 5, 1])
def test_outputs_equal_the_python_path(sessions, batch):
    fast, slow = sessions
    rng = np.random.default_rng(batch)
    x = rng.standard_normal((batch, 64)).astype(np.float32)
    x[:, :3] = [np.nan, np.inf, -np.inf] if batch else x[:, :3]
    y = rng.standard_normal((1, 64)).astype(np.float32)
    for names in (None, [], ["W"], ["W", "Z", "W"]):
        a, b = fast.run(names, {"X": x, "Y": y}), slow.run(names, {"X": x, "Y": y})
        assert len(a) == len(b)
        for u, v in zip(a, b):
            assert u.dtype == v.dtype and u.shape == v.shape and u.flags.c_contiguous and u.flags.writeable
            np.testing.assert_array_equal(u, v)
    z, _ = expected(x.astype(np.float64), y)
    np.testing.assert_allclose(fast.run(["Z"], {"X": x, "Y": y})[0], z, rtol=1e-5, atol=1e-6)


def _outcome(sess, feed):
    try:
        return [np.asarray(o).tolist() for o in sess.run(None, feed)]
    except Error as e:
        return (type(e).__name__, str(e))


@pytest.mark.parametrize("case", ["float64", "transposed", "readonly", "list", "missing", "extra",
                                  "bad_static_shape", "wrong_rank", "big_endian", "subclass"])
def test_feeds_it_hands_back_get_the_python_paths_answer(sessions, case):
    """Every feed the C path does not take whole is answered exactly as the Python path answers
    it: converted and run, or refused with the same error."""
    fast, slow = sessions
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal((4, 64)).astype(np.float32), rng.standard_normal((1, 64)).astype(np.float32)
    feed = {"X": x, "Y": y}
    if case == "float64":
        feed["X"] = x.astype(np.float64)
    elif case == "transposed":
        feed["X"] = np.ascontiguousarray(x.T).T
    elif case == "readonly":
        x.setflags(write=False)
    elif case == "list":
        feed["Y"] = y.tolist()
    elif case == "missing":
        del feed["Y"]
    elif case == "extra":
        feed["Q"] = y
    elif case == "bad_static_shape":
        feed["Y"] = np.zeros((2, 64), np.float32)
    elif case == "wrong_rank":
        feed["X"] = x.reshape(4, 8, 8)
    elif case == "big_endian":
        feed["X"] = x.astype(">f4")
    elif case == "subclass":
        feed["X"] = x.view(np.matrix) if hasattr(np, "matrix") else x
    assert _outcome(fast, feed) == _outcome(slow, feed)


def test_run_errors_raise_as_on_the_python_path():
    """A failing run (an index out of range found while running) raises the library's error."""
    d = helper.make_tensor_value_info("D", T.FLOAT, [5, 3])
    i = helper.make_tensor_value_info("I", T.INT64, [2])
    o = helper.make_tensor_value_info("O", T.FLOAT, [2, 3])
    g = helper.make_graph([helper.make_node("Gather", ["D", "I"], ["O"])], "g", [d, i], [o])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8).SerializeToString()
    fast, slow = onnxc.InferenceSession(m), onnxc.InferenceSession(m)
    slow._cstate = None
    data = np.arange(15, dtype=np.float32).reshape(5, 3)
    good, bad = {"D": data, "I": np.array([4, -5], np.int64)}, {"D": data, "I": np.array([1, 5], np.int64)}
    assert _outcome(fast, good) == _outcome(slow, good) == [data[[4, 0]].tolist()]
    err = _outcome(fast, bad)
    assert isinstance(err, tuple) and err == _outcome(slow, bad)
    assert _outcome(fast, good) == [data[[4, 0]].tolist()]       # the session still runs


def test_no_reference_is_leaked_or_lost(sessions):
    fast, _ = sessions
    x, y = np.ones((2, 64), np.float32), np.ones((1, 64), np.float32)
    feed = {"X": x, "Y": y}
    fast.run(None, feed)
    owned = (x, y, feed, fast._cstate)
    shared = fast._cstate[1]       # the outputs' dtypes: singletons the whole process refers to
    gc.collect()                   # earlier tests' garbage must not be freed inside the window
    gc.disable()
    try:
        before = [sys.getrefcount(v) for v in owned], [sys.getrefcount(v) for v in shared]
        outs = [fast.run(None, feed) for _ in range(200)]
        assert all(sys.getrefcount(o[0]) == 2 for o in outs[:5])      # the list and the call's argument
        del outs           # (each output holds its dtype)
        after = [sys.getrefcount(v) for v in owned], [sys.getrefcount(v) for v in shared]
    finally:
        gc.enable()
    assert after[0] == before[0]
    # another thread of the process may hold or drop a few references to a dtype meanwhile; a
    # reference leaked or lost per call would move these by 200
    assert all(abs(a - b) < 50 for a, b in zip(after[1], before[1])), (before[1], after[1])


def test_concurrent_calls_never_share_an_arena(sessions):
    fast, _ = sessions
    rng = np.random.default_rng(2)
    feeds = [{"X": rng.standard_normal((int(n), 64)).astype(np.float32),
              "Y": rng.standard_normal((1, 64)).astype(np.float32)} for n in rng.integers(1, 40, size=8)]
    want = [expected(f["X"], f["Y"]) for f in feeds]
    errors, barrier = [], threading.Barrier(8)

    def work(k):
        barrier.wait()
        for r in range(60):
            f = (k + r) % len(feeds)
            z, w = fast.run(None, feeds[f])
            if not (np.allclose(z, want[f][0], rtol=1e-5, atol=1e-6) and (w == want[f][1]).all()):
                errors.append(f)
    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_zipmap_outputs_equal_the_python_path():
    pytest.importorskip("sklearn")
    skl2onnx = pytest.importorskip("skl2onnx")
    from sklearn.linear_model import LogisticRegression
    rng = np.random.default_rng(3)
    X = rng.standard_normal((200, 4)).astype(np.float32)
    y = (X[:, 0] + X[:, 1] > 0).astype(np.int64) + (X[:, 2] > 1)
    onx = skl2onnx.to_onnx(LogisticRegression(max_iter=500).fit(X, y), X[:1]).SerializeToString()
    fast, slow = onnxc.InferenceSession(onx), onnxc.InferenceSession(onx)
    slow._cstate = None
    assert fast._cstate is not None
    for b in (1, 7, 0, 1):
        a, s = fast.run(None, {"X": X[:b]}), slow.run(None, {"X": X[:b]})
        np.testing.assert_array_equal(a[0], s[0])
        assert isinstance(a[1], list) and len(a[1]) == b and a[1] == s[1]
        assert all(type(k) is int and type(v) is float for d in a[1] for k, v in d.items())
