"""Random ops: onnxc's generator is its own (values never match onnx.reference), so these check
shapes, element types, ranges, rough moments and that a node is repeatable."""
import numpy as np
import onnx
import pytest
from onnx import helper

import onnxc
from util import make_model_from_nodes

F = onnx.TensorProto


def _run(node, feeds, out_type, out_shape, opset=17):
    m = make_model_from_nodes([node], feeds, {}, ["y0"], opset)
    m.graph.output[0].CopyFrom(helper.make_tensor_value_info("y0", out_type, out_shape))
    s = onnxc.InferenceSession(m.SerializeToString())
    a = s.run(None, feeds)[0]
    b = s.run(None, feeds)[0]
    np.testing.assert_array_equal(a, b)    # same values every run
    return a


@pytest.mark.parametrize("dtype,np_dt", [(F.FLOAT, np.float32), (F.DOUBLE, np.float64), (F.FLOAT16, np.float16)])
def test_random_uniform(dtype, np_dt):
    y = _run(helper.make_node("RandomUniform", [], ["y0"], shape=[200, 50], low=-2.0, high=3.0, dtype=dtype),
             {}, dtype, [200, 50])
    assert y.dtype == np_dt and y.shape == (200, 50)
    assert y.min() >= -2 and y.max() <= 3
    assert abs(float(y.astype(np.float64).mean()) - 0.5) < 0.05


@pytest.mark.parametrize("seed", [None, 0.0, 5.0])
def test_random_normal(seed):
    kw = {} if seed is None else {"seed": seed}
    y = _run(helper.make_node("RandomNormal", [], ["y0"], shape=[100000], mean=1.0, scale=2.0, **kw),
             {}, F.FLOAT, [100000])
    assert abs(y.mean() - 1) < 0.05 and abs(y.std() - 2) < 0.05


def test_seeds_differ():
    a = _run(helper.make_node("RandomUniform", [], ["y0"], shape=[16], seed=1.0), {}, F.FLOAT, [16])
    b = _run(helper.make_node("RandomUniform", [], ["y0"], shape=[16], seed=2.0), {}, F.FLOAT, [16])
    assert not np.array_equal(a, b)


@pytest.mark.parametrize("op", ["RandomUniformLike", "RandomNormalLike"])
def test_like(op):
    x = np.zeros((3, 4, 5), np.float64)
    y = _run(helper.make_node(op, ["x"], ["y0"]), {"x": x}, F.DOUBLE, [3, 4, 5])
    assert y.dtype == np.float64 and y.shape == x.shape
    y = _run(helper.make_node(op, ["x"], ["y0"], dtype=F.FLOAT), {"x": x}, F.FLOAT, [3, 4, 5])
    assert y.dtype == np.float32


@pytest.mark.parametrize("dtype,np_dt", [(None, np.float32), (F.DOUBLE, np.float64), (F.BOOL, np.bool_),
                                         (F.INT32, np.int32)])
def test_bernoulli(dtype, np_dt):
    x = np.full((20000,), 0.3, np.float32)
    x[:10] = 0
    x[10:20] = 1
    kw = {} if dtype is None else {"dtype": dtype}
    y = _run(helper.make_node("Bernoulli", ["x"], ["y0"], **kw), {"x": x},
             dtype or F.FLOAT, [20000], opset=22)
    assert y.dtype == np_dt
    assert set(np.unique(y.astype(np.float64))) <= {0.0, 1.0}
    assert not y[:10].any() and y[10:20].all()
    assert abs(y[20:].astype(np.float64).mean() - 0.3) < 0.03


@pytest.mark.parametrize("dtype,np_dt", [(None, np.int32), (F.INT64, np.int64)])
def test_multinomial(dtype, np_dt):
    p = np.array([[0.1, 0.2, 0.7], [1.0, 0.0, 0.0]], np.float32)
    x = np.log(np.maximum(p, 1e-30)).astype(np.float32)
    kw = {} if dtype is None else {"dtype": dtype}
    y = _run(helper.make_node("Multinomial", ["x"], ["y0"], sample_size=20000, **kw), {"x": x},
             dtype or F.INT32, [2, 20000])
    assert y.dtype == np_dt and y.shape == (2, 20000)
    freq = np.bincount(y[0], minlength=3) / 20000
    np.testing.assert_allclose(freq, p[0], atol=0.02)
    assert (y[1] == 0).all()
