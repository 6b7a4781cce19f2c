"""DFT-20 with its axis fed as a graph input when the output shape depends on it (onesided,
irfft, dft_length), and STFT with frame_step/frame_length fed as graph inputs: one library,
several values, compared to onnx.reference; bad values raise an onnxc error naming the node."""
import numpy as np
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

import onnxc
from util import assert_close, make_model_from_nodes, typed_outputs

rng = np.random.default_rng(21)


def session(nodes, feeds, inits=None, opset=20):
    m = make_model_from_nodes(nodes, feeds, inits or {}, ["y0"], opset)
    ref = ReferenceEvaluator(m)
    typed_outputs(m, ref.run(None, feeds))
    return ref, onnxc.InferenceSession(m.SerializeToString())


def run_all(ref, sess, feeds_list, tol=1e-4):
    for f in feeds_list:
        assert_close(ref.run(None, f), sess.run(None, f), tol, tol)


@pytest.mark.parametrize("attrs", [{"onesided": 1}, {"onesided": 1, "inverse": 1}, {"inverse": 1},
                                   {}])
@pytest.mark.parametrize("cin", [1, 2])
@pytest.mark.parametrize("dft_length", [None, 7])
def test_dft_axis(attrs, cin, dft_length):
    adtype = np.int64
    if attrs.get("onesided") and attrs.get("inverse") and cin == 1:
        pytest.skip("irfft takes a complex input")
    x = rng.standard_normal((3, 5, 8, cin)).astype(np.float32)
    inits = {} if dft_length is None else {"n": np.array(dft_length, np.int64)}
    node = helper.make_node("DFT", ["x", "n" if inits else "", "a"], ["y0"], **attrs)
    f0 = {"x": x, "a": np.array(1, adtype)}
    ref, sess = session([node], f0, inits)
    run_all(ref, sess, [{"x": x, "a": np.array(a, adtype)} for a in (0, 1, 2, -2, -3, -4)])


def test_dft_bad_axis():
    x = rng.standard_normal((2, 6, 2)).astype(np.float32)
    node = helper.make_node("DFT", ["x", "", "a"], ["y0"], onesided=1)
    _, sess = session([node], {"x": x, "a": np.array(1, np.int64)})
    for a in (2, 3, -4, -1):
        with pytest.raises(onnxc.Error, match=r"node 0 \(DFT"):
            sess.run(None, {"x": x, "a": np.array(a, np.int64)})


def test_irfft_length_one_axis_is_refused():
    x = rng.standard_normal((1, 6, 2)).astype(np.float32)
    node = helper.make_node("DFT", ["x", "", "a"], ["y0"], onesided=1, inverse=1)
    ref, sess = session([node], {"x": x, "a": np.array(1, np.int64)})
    run_all(ref, sess, [{"x": x, "a": np.array(1, np.int64)}])
    with pytest.raises(onnxc.Error, match=r"node 0 \(DFT"):     # length 2 * (1 - 1) = 0
        sess.run(None, {"x": x, "a": np.array(0, np.int64)})


@pytest.mark.parametrize("cin", [1, 2])
@pytest.mark.parametrize("onesided", [0, 1])
@pytest.mark.parametrize("mode", ["step", "length", "both", "step_window", "length_window"])
def test_stft(cin, onesided, mode):
    x = rng.standard_normal((2, 40, cin)).astype(np.float32)
    ins, feeds, inits = ["x", "", "", ""], {"x": x}, {}
    if "step" in mode or mode == "both":
        ins[1], feeds["s"] = "s", np.array(4, np.int64)
    else:
        ins[1], inits["s"] = "s", np.array(3, np.int64)
    if "length" in mode or mode == "both":
        ins[3], feeds["l"] = "l", np.array(16, np.int64)
    if "window" in mode:
        ins[2], feeds["w"] = "w", np.hanning(16).astype(np.float32)
    node = helper.make_node("STFT", ins, ["y0"], onesided=onesided)
    ref, sess = session([node], dict(feeds), inits, 17)
    variants = []
    for s, n in ((4, 16), (1, 16), (7, 16), (40, 16), (3, 16)) if "window" in mode else \
            ((4, 16), (5, 9), (1, 40), (13, 1), (2, 33)):
        f = dict(feeds)
        if "s" in f:
            f["s"] = np.array(s, np.int64)
        if "l" in f:
            f["l"] = np.array(n, np.int64)
        variants.append(f)
    run_all(ref, sess, variants)


def test_stft_bad_values():
    x = rng.standard_normal((1, 32, 1)).astype(np.float32)
    node = helper.make_node("STFT", ["x", "s", "w", "l"], ["y0"])
    feeds = {"x": x, "s": np.array(4, np.int64), "w": np.ones(8, np.float32), "l": np.array(8, np.int64)}
    _, sess = session([node], feeds, None, 17)
    for s, n in ((0, 8), (-2, 8), (4, 9), (4, 0), (4, 33)):
        with pytest.raises(onnxc.Error, match=r"node 0 \(STFT"):
            sess.run(None, dict(feeds, s=np.array(s, np.int64), l=np.array(n, np.int64)))
    assert sess.run(None, feeds)[0].shape == (1, 7, 5, 2)
