"""Concurrent run() on one session: exact results, and no arena ever serves two calls at once."""
import threading
import time

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper

import onnxc

N_THREADS = 16


def chain_model(width=4096):
    """Z = (X*X + Sigmoid(X)) * Relu(X): three intermediates live at once, so some live in the
    arena; batch N is symbolic, so calls with different N need arenas of different sizes."""
    x = helper.make_tensor_value_info("X", T.FLOAT, ["N", width])
    z = helper.make_tensor_value_info("Z", T.FLOAT, ["N", width])
    nodes = [helper.make_node("Mul", ["X", "X"], ["A"]), helper.make_node("Sigmoid", ["X"], ["B"]),
             helper.make_node("Relu", ["X"], ["C"]), helper.make_node("Add", ["A", "B"], ["D"]),
             helper.make_node("Mul", ["D", "C"], ["Z"])]
    g = helper.make_graph(nodes, "chain", [x], [z])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.fixture(scope="module")
def session():
    so = onnxc.SessionOptions()
    so.intra_op_num_threads = 2          # OpenMP inside each call too (N >= 8 crosses ONNXC_PAR_MIN)
    return onnxc.InferenceSession(chain_model().SerializeToString(), so)


def _inputs(seed):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((int(n), 4096)).astype(np.float32) for n in rng.integers(1, 17, size=4)]


def _hammer(n_threads, work):
    errors, barrier = [], threading.Barrier(n_threads)

    def body(t):
        try:
            barrier.wait()
            work(t)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)
    threads = [threading.Thread(target=body, args=(t,)) for t in range(n_threads)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    if errors:
        raise errors[0]


def test_sixteen_threads_exact_results(session):
    feeds = [_inputs(t) for t in range(N_THREADS)]
    expected = [[session.run(None, {"X": x})[0] for x in xs] for xs in feeds]   # single-threaded
    mismatches = []

    def work(t):
        for it in range(40):
            k = (it * 7 + t) % len(feeds[t])
            got = session.run(None, {"X": feeds[t][k]})[0]
            if not np.array_equal(got, expected[t][k]):
                mismatches.append((t, it, k))
    _hammer(N_THREADS, work)
    assert not mismatches, mismatches[:5]
    assert session._plan((16,))[1] > 0                  # the calls did use arenas ...
    assert 1 <= len(session._arenas) <= N_THREADS       # ... from the pool, at most one per thread


def test_no_arena_is_shared_between_concurrent_calls(session):
    sess = onnxc.InferenceSession(chain_model().SerializeToString())
    real, lock, busy, seen = sess._run_fn, threading.Lock(), set(), []

    def spy(ins, outs, dims, arena, nt):
        key = int(sess._ffi.cast("uintptr_t", arena))
        with lock:
            assert key not in busy, "one arena handed to two calls"
            busy.add(key)
            seen.append(key)
        try:
            time.sleep(0.001)            # widen the window: other threads run meanwhile
            return real(ins, outs, dims, arena, nt)
        finally:
            with lock:
                busy.discard(key)
    sess._run_fn = spy
    x = np.ones((4, 4096), np.float32)

    def work(t):
        for _ in range(20):
            sess.run(None, {"X": x})
    _hammer(N_THREADS, work)
    assert len(seen) == N_THREADS * 20 and len(set(seen)) > 1


def test_concurrent_iobinding_and_ort_values(session):
    feeds = [_inputs(100 + t) for t in range(8)]
    expected = [[session.run(None, {"X": x})[0] for x in xs] for xs in feeds]
    bad = []

    def work(t):
        b = session.io_binding()
        for it in range(20):
            k = it % len(feeds[t])
            x = feeds[t][k]
            if it % 2:
                b.bind_cpu_input("X", x)
                b.bind_output("Z")
                session.run_with_iobinding(b)
                got = b.get_outputs()[0].numpy()
            else:
                got = session.run_with_ort_values(None, {"X": onnxc.OrtValue.ortvalue_from_numpy(x)})[0].numpy()
            if not np.array_equal(got, expected[t][k]):
                bad.append((t, it))
    _hammer(8, work)
    assert not bad


def test_sessions_with_static_and_tiny_models_under_threads():
    x = helper.make_tensor_value_info("X", T.FLOAT, [1])
    y = helper.make_tensor_value_info("Y", T.FLOAT, [1])
    z = helper.make_tensor_value_info("Z", T.FLOAT, [1])
    g = helper.make_graph([helper.make_node("Add", ["X", "Y"], ["Z"])], "g", [x, y], [z])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    sess = onnxc.InferenceSession(m.SerializeToString())
    bad = []

    def work(t):
        a = np.array([t], np.float32)
        for i in range(500):
            if sess.run(None, {"X": a, "Y": np.array([i], np.float32)})[0][0] != t + i:
                bad.append((t, i))
    _hammer(N_THREADS, work)
    assert not bad
