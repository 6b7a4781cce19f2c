"""The floor scripts behind issue 5's notes (examples/roofline_mlp.py, examples/roofline_lstm.py):
the bytes a batch-1 MLP reads when zero rows are skipped, the LSTM shape they read from a model,
and the streaming read they time."""
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
import roofline_lstm  # noqa: E402
import roofline_mlp  # noqa: E402


def two_layers(path, bias1):
    """x (1 x 20) -> Gemm 20 -> 24 (zero weights, bias1) -> Relu -> Gemm 24 -> 3"""
    w1, b1 = np.zeros((24, 20), np.float32), np.full(24, bias1, np.float32)
    w2, b2 = np.ones((3, 24), np.float32), np.zeros(3, np.float32)
    g = helper.make_graph(
        [helper.make_node("Gemm", ["x", "w1", "b1"], ["g"], transB=1), helper.make_node("Relu", ["g"], ["r"]),
         helper.make_node("Gemm", ["r", "w2", "b2"], ["y"], transB=1)], "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 20])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])],
        [numpy_helper.from_array(a, n) for n, a in (("w1", w1), ("b1", b1), ("w2", w2), ("b2", b2))])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return str(path)


@pytest.mark.parametrize("bias1, second", [(-1.0, 0), (1.0, 24 * 16)])
def test_skipping_floats_counts_the_rows_of_nonzero_inputs(tmp_path, bias1, second):
    """The first layer reads all 20 rows of 24 columns padded to 32; the second one row of 3
    columns (padded to 16) per nonzero activation: none where Relu zeroes them all, 24 where none."""
    assert roofline_mlp.skipping_floats(two_layers(tmp_path / "m.onnx", bias1)) == 20 * 32 + second


def test_lstm_shape():
    h, inp = 4, 3
    node = helper.make_node("LSTM", ["x", "w", "r"], ["y"], hidden_size=h)
    g = helper.make_graph([node], "lstm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [5, 2, inp])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(np.zeros((1, 4 * h, inp), np.float32), "w"),
                           numpy_helper.from_array(np.zeros((1, 4 * h, h), np.float32), "r")])
    assert roofline_lstm.lstm_shape(helper.make_model(g)) == (5, 2, inp, h)


def test_stream_seconds_is_a_plausible_read():
    """64 KB read within a millisecond, and no faster than 1 TB/s, at 1 and 2 threads."""
    for threads in (1, 2):
        t = roofline_mlp.stream_seconds(threads, 1, 16384, passes=64)
        assert 65536 / 1e12 < t < 1e-3
