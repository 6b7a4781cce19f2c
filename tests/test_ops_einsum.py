"""Einsum against onnx.reference (numpy.einsum): matmul-like, transposes, traces, diagonals,
ellipsis broadcasting, implicit output, several operands, integer and half types."""
import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import helper

import onnxc
from util import NP2ONNX, check, make_model_from_nodes, typed_outputs

rng = np.random.default_rng(9)
NP2ONNX.setdefault(np.dtype(ml_dtypes.bfloat16), onnx.TensorProto.BFLOAT16)


def model(eq, arrays, opset=12):
    names = [f"x{i}" for i in range(len(arrays))]
    node = helper.make_node("Einsum", names, ["y"], equation=eq)
    return make_model_from_nodes([node], dict(zip(names, arrays)), {}, ["y"], opset=opset), dict(zip(names, arrays))


@pytest.mark.parametrize("eq,shapes", [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("ij,kj->ik", [(3, 4), (5, 4)]),
    ("ji,jk->ki", [(4, 3), (4, 5)]),
    ("bij,bkj->bki", [(2, 3, 4), (2, 5, 4)]),
    ("ii,ij->ij", [(3, 3), (3, 4)]),
    ("bij,jk->bik", [(2, 3, 4), (4, 70)]),
    ("ij->ji", [(3, 4)]),
    ("ii->i", [(4, 4)]),
    ("ii", [(4, 4)]),
    ("ij->", [(3, 4)]),
    ("i,i", [(5,), (5,)]),
    ("i,j->ij", [(3,), (4,)]),
    ("...ii->...i", [(2, 3, 3)]),
    ("...ij,...jk->...ik", [(2, 1, 3, 4), (5, 4, 2)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]),
    ("abc,cd", [(2, 3, 4), (4, 5)]),
    ("b i d, b j d -> b i j", [(2, 3, 4), (2, 5, 4)]),
    ("Ab,bA->", [(3, 4), (4, 3)]),
    ("bhqd,bhkd->bhqk", [(1, 2, 5, 8), (1, 2, 6, 8)]),
])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
def test_einsum(eq, shapes, dtype):
    arrays = [(rng.standard_normal(s) * 3).astype(dtype) for s in shapes]
    m, feeds = model(eq, arrays)
    check(m, feeds, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.float16, np.dtype(ml_dtypes.bfloat16)])
def test_einsum_half(dtype):
    a, b = rng.standard_normal((2, 3, 4)).astype(dtype), rng.standard_normal((2, 4, 5)).astype(dtype)
    m, feeds = model("bij,bjk->bik", [a, b])
    want = np.einsum("bij,bjk->bik", a.astype(np.float32), b.astype(np.float32)).astype(dtype)
    typed_outputs(m, [want])
    got = onnxc.InferenceSession(m.SerializeToString()).run(None, feeds)[0]
    assert got.dtype == dtype
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("eq", ["ij,jk", "ij->k", "ij,j->i->", "i.j", "ij,jk->ii"])
def test_einsum_errors(eq):
    m, _ = model(eq, [np.ones((3, 3), np.float32), np.ones((3, 3), np.float32)][:eq.split("->")[0].count(",") + 1])
    m.graph.output[0].CopyFrom(helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None))
    if eq == "ij,jk":
        m.graph.node[0].input.pop()
    with pytest.raises(onnxc.InvalidGraph):
        onnxc.InferenceSession(m.SerializeToString())
