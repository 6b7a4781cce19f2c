"""Loops over run-time dims enter an OpenMP region only when the run has a team and enough work
(templates/c/ops/_parallel.c.j2): a region with a false if() still costs ~0.4 us. Checked on the
emitted C, and by value at 1 and 2 threads on both sides of the threshold."""
from __future__ import annotations

import re

import numpy as np
import pytest
from onnx import helper

import onnxc
from onnxc import emit, loader
from onnxc.compiler import Options, compile_model

from onnx.reference import ReferenceEvaluator

from util import NP2ONNX, make_model_from_nodes, make_node_model

PAR_MIN = 32768   # ONNXC_PAR_MIN's default (runtime_c/onnxc_runtime.h)


def _c(model) -> str:
    return compile_model(loader.load(model), Options(), module="m").sources.c


def _batch(model, feeds):
    """The inputs' first dim becomes the symbol N; outputs get the reference's element types and
    no shape (onnxc infers N's place)."""
    for vi in model.graph.input:
        vi.type.tensor_type.shape.dim[0].dim_param = "N"
    ref = ReferenceEvaluator(model).run(None, feeds)
    for vi, r in zip(model.graph.output, ref):
        vi.CopyFrom(helper.make_tensor_value_info(vi.name, NP2ONNX[np.asarray(r).dtype], None))
    return model


def _block(c: str, op: str) -> str:
    start = c.index(f"/* node 0: {op} */")
    return c[start:c.index("return ONNXC_OK", start)]


def test_constant_text():
    assert emit.is_c_constant("512")
    assert emit.is_c_constant("(INT64_C(64) + INT64_C(3))")
    assert emit.is_c_constant(7)
    assert not emit.is_c_constant("(INT64_C(64)*s0)")
    assert not emit.is_c_constant("NB * C * S")


def test_runtime_work_guards_the_region():
    x = np.zeros((2, 64), np.float32)
    m = _batch(make_node_model("Relu", {"x": x}), {"x": x})
    blk = _block(_c(m), "Relu")
    # the region only behind the run-time test, and a plain copy of the loop for the other case
    assert re.search(r"if \(nt > 1 && \(\(INT64_C\(64\)\*s0\)\) >= ONNXC_PAR_MIN\) \{\s*#pragma omp parallel for "
                     r"num_threads\(nt\)\n", blk), blk
    assert "if((INT64_C(64)*s0)" not in blk
    assert blk.count("for (int64_t i0 = 0;") == 2 and "} else {" in blk


def test_constant_work_keeps_one_loop():
    x = np.zeros((2, 64), np.float32)
    m = make_node_model("Relu", {"x": x})
    m.graph.output[0].CopyFrom(helper.make_tensor_value_info("y0", NP2ONNX[x.dtype], x.shape))
    blk = _block(_c(m), "Relu")
    assert "#pragma omp parallel for num_threads(nt) if(128 >= ONNXC_PAR_MIN)" in blk
    assert blk.count("for (int64_t i0 = 0;") == 1


def _session(model, nt):
    so = onnxc.SessionOptions()
    so.intra_op_num_threads = nt
    return onnxc.InferenceSession(model.SerializeToString(), so)


CASES = {
    # op: (attrs, feature dims, extra initializers)
    "Softmax": ({"axis": -1}, (37,), {}),
    "Sigmoid": ({}, (5, 7), {}),
    "ReduceSum": ({"keepdims": 0}, (3, 40), {"axes": np.array([2], np.int64)}),
    "ReduceMax": ({"keepdims": 1}, (6, 9), {"axes": np.array([1], np.int64)}),
    "Transpose": ({"perm": [0, 2, 1]}, (5, 33), {}),
    "CumSum": ({}, (17,), {"axis": np.array(1, np.int64)}),
    "LpNormalization": ({"axis": 1, "p": 2}, (19, 3), {}),
}


@pytest.mark.parametrize("op", sorted(CASES))
@pytest.mark.parametrize("nt", [1, 2])
def test_values_on_both_sides_of_the_threshold(op, nt):
    attrs, feat, inits = CASES[op]
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, *feat)).astype(np.float32)
    x.flat[::11] = np.nan
    x.flat[5::13] = np.inf
    x.flat[7::17] = -np.inf
    m = _batch(make_node_model(op, {"x": x}, attrs, opset=18, initializers=inits), {"x": x})
    sess, ref_eval = _session(m, nt), ReferenceEvaluator(m)
    per_row = int(np.prod(feat))
    for rows in (1, 3, PAR_MIN // per_row + 5):      # below and above the threshold
        xr = rng.standard_normal((rows, *feat)).astype(np.float32)
        xr.flat[::11] = np.nan
        xr.flat[5::13] = -np.inf
        ref = ref_eval.run(None, {"x": xr})
        got = sess.run(None, {"x": xr})
        for r, g in zip(ref, got):
            np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-6, equal_nan=True)


@pytest.mark.parametrize("nt", [1, 2])
def test_reduction_clause_sums_serially(nt):
    """DynamicQuantizeLinear's min/max are reduction() clauses: the serial copy must fold the
    same way (and an empty batch keeps the range [0, 0])."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 300)).astype(np.float32)
    m = _batch(make_model_from_nodes([helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "s", "z"])],
                                     {"x": x}, {}, ["y", "s", "z"], opset=18), {"x": x})
    sess, ref_eval = _session(m, nt), ReferenceEvaluator(m)
    for rows in (1, 4, 300):
        xr = (rng.standard_normal((rows, 300)) * 3 + 1).astype(np.float32)
        ref = ref_eval.run(None, {"x": xr})
        got = sess.run(None, {"x": xr})
        for r, g in zip(ref, got):
            np.testing.assert_array_equal(g, r)
