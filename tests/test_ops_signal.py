"""DFT (opsets 17, 20), STFT, window functions and MelWeightMatrix vs onnx.reference."""
import ml_dtypes
import numpy as np
import pytest

from util import check, make_node_model

rng = np.random.default_rng(7)


def _dft(x, opset, attrs, dft_length=None, axis=None):
    inits = {}
    names = {"x": x}
    order_inits = {}
    if dft_length is not None:
        order_inits["n"] = np.array(dft_length, np.int64)
    model_inputs = dict(names)
    from onnx import helper
    from util import make_model_from_nodes
    ins = ["x", "n" if dft_length is not None else ""]
    if axis is not None:
        ins.append("a")
        order_inits["a"] = np.array(axis, np.int64)
    node = helper.make_node("DFT", ins, ["y0"], **attrs)
    return make_model_from_nodes([node], model_inputs, order_inits, ["y0"], opset)


@pytest.mark.parametrize("n", [1, 2, 5, 8, 12, 16, 17, 64, 97, 100, 128, 255])
@pytest.mark.parametrize("cin", [1, 2])
def test_dft_lengths(n, cin):
    x = rng.standard_normal((3, n, cin)).astype(np.float32)
    check(_dft(x, 17, {"axis": 1}), {"x": x}, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("attrs", [{}, {"inverse": 1}, {"onesided": 1}, {"inverse": 1, "onesided": 1}])
@pytest.mark.parametrize("axis", [0, 1, 2])
@pytest.mark.parametrize("dft_length", [None, 6, 9, 13])
def test_dft_modes_opset17(attrs, axis, dft_length):
    cin = 2 if attrs.get("inverse") else 1
    x = rng.standard_normal((4, 7, 5, cin))
    check(_dft(x, 17, dict(attrs, axis=axis), dft_length), {"x": x}, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("attrs", [{}, {"inverse": 1}, {"onesided": 1}, {"inverse": 1, "onesided": 1}])
@pytest.mark.parametrize("axis", [None, -2, 1, -4])
def test_dft_opset20(attrs, axis):
    x = rng.standard_normal((2, 6, 10, 2)).astype(np.float32)
    check(_dft(x, 20, attrs, None, axis), {"x": x}, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("axis", [0, 1, 2, -2])
def test_dft_runtime_axis(axis):
    from onnx import helper
    from util import make_model_from_nodes
    x = rng.standard_normal((3, 4, 9, 1)).astype(np.float32)
    a = np.array(axis, np.int64)
    m = make_model_from_nodes([helper.make_node("DFT", ["x", "", "a"], ["y0"])],
                              {"x": x, "a": a}, {}, ["y0"], 20)
    check(m, {"x": x, "a": a}, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dt", [np.float16, ml_dtypes.bfloat16])
def test_dft_half(dt):
    x = rng.standard_normal((2, 8, 2)).astype(dt)
    ref_tol = 2e-2 if dt == np.float16 else 1e-1
    check(_dft(x, 17, {"axis": 1}), {"x": x}, rtol=ref_tol, atol=ref_tol)


@pytest.mark.parametrize("cin", [1, 2])
@pytest.mark.parametrize("onesided", [0, 1])
@pytest.mark.parametrize("window,frame_length,step", [(None, 16, 8), (16, None, 8), (16, 16, 5),
                                                        (None, None, 3), (10, None, 4)])
def test_stft(cin, onesided, window, frame_length, step):
    from onnx import helper
    from util import make_model_from_nodes
    x = rng.standard_normal((2, 64 if frame_length or window else 20, cin)).astype(np.float32)
    inits = {"s": np.array(step, np.int64)}
    ins = ["x", "s", "", ""]
    feeds = {"x": x}
    if window:
        feeds["w"] = np.hanning(window).astype(np.float32)
        ins[2] = "w"
    if frame_length:
        inits["l"] = np.array(frame_length, np.int64)
        ins[3] = "l"
    node = helper.make_node("STFT", ins, ["y0"], onesided=onesided)
    check(make_model_from_nodes([node], feeds, inits, ["y0"], 17), feeds, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("op", ["HannWindow", "HammingWindow", "BlackmanWindow"])
@pytest.mark.parametrize("periodic", [0, 1])
@pytest.mark.parametrize("size,dtype", [(10, 1), (1, 1), (0, 1), (33, 11), (16, 10), (8, 7)])
def test_windows(op, periodic, size, dtype):
    m = make_node_model(op, {}, {"periodic": periodic, "output_datatype": dtype},
                        initializers={"n": np.array(size, np.int64)})
    check(m, {}, rtol=1e-3 if dtype == 10 else 1e-6, atol=1e-3 if dtype == 10 else 1e-6)


@pytest.mark.parametrize("bins,n,sr,lo,hi", [(8, 16, 8192, 0.0, 4096.0), (20, 512, 16000, 300.0, 7000.0),
                                            (5, 64, 22050, 50.0, 11000.0)])
def test_mel_weight_matrix(bins, n, sr, lo, hi):
    feeds = {"sr": np.array(sr, np.int64), "lo": np.array(lo, np.float32), "hi": np.array(hi, np.float32)}
    from onnx import helper
    from util import make_model_from_nodes
    node = helper.make_node("MelWeightMatrix", ["b", "n", "sr", "lo", "hi"], ["y0"])
    m = make_model_from_nodes([node], feeds, {"b": np.array(bins, np.int64), "n": np.array(n, np.int64)},
                              ["y0"], 17)
    check(m, feeds)
