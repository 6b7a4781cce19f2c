"""Test helpers: one-node models checked against onnx.reference.ReferenceEvaluator."""
from __future__ import annotations

import contextlib

import ml_dtypes
import numpy as np
import onnx
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import onnxc

NP2ONNX = {np.dtype(k): v for k, v in {
    np.float32: onnx.TensorProto.FLOAT, np.float64: onnx.TensorProto.DOUBLE,
    np.int8: onnx.TensorProto.INT8, np.int16: onnx.TensorProto.INT16, np.int32: onnx.TensorProto.INT32,
    np.int64: onnx.TensorProto.INT64, np.uint8: onnx.TensorProto.UINT8, np.uint16: onnx.TensorProto.UINT16,
    np.uint32: onnx.TensorProto.UINT32, np.uint64: onnx.TensorProto.UINT64, np.bool_: onnx.TensorProto.BOOL,
    np.float16: onnx.TensorProto.FLOAT16, ml_dtypes.bfloat16: onnx.TensorProto.BFLOAT16}.items()}


def make_node_model(op_type, inputs: dict, attrs=None, opset=17, n_outputs=1, initializers=None,
                    domain="", input_shapes=None, output_names=None):
    """inputs: name -> array (fed) ; initializers: name -> array (constant). Input order follows
    the dicts (inputs first, then initializers), '' entries in `order` mean omitted inputs."""
    initializers = initializers or {}
    order = list(inputs) + list(initializers)
    return make_model_from_nodes(
        [helper.make_node(op_type, order, output_names or [f"y{i}" for i in range(n_outputs)],
                          domain=domain or None, **(attrs or {}))],
        inputs, initializers, output_names or [f"y{i}" for i in range(n_outputs)], opset, domain,
        input_shapes)


def make_model_from_nodes(nodes, inputs: dict, initializers: dict, outputs: list, opset=17, domain="",
                          input_shapes=None):
    input_shapes = input_shapes or {}
    ins = [helper.make_tensor_value_info(n, NP2ONNX[a.dtype], input_shapes.get(n, a.shape))
           for n, a in inputs.items()]
    outs = [onnx.ValueInfoProto(name=n) for n in outputs]
    inits = [numpy_helper.from_array(a, n) for n, a in initializers.items()]
    ops = [helper.make_opsetid("", opset)]
    if domain:
        ops.append(helper.make_opsetid(domain, 1 if domain != "ai.onnx.ml" else 3))
    g = helper.make_graph(nodes, "test", ins, outs, inits)
    m = helper.make_model(g, opset_imports=ops, ir_version=8 if opset < 21 else 10)
    return m


def typed_outputs(model, ref):
    """Declare graph outputs with the element types the reference computed (tests build
    models with untyped outputs; onnx.checker wants types)."""
    for vi, r in zip(model.graph.output, ref):
        if not vi.type.HasField("tensor_type"):
            vi.CopyFrom(helper.make_tensor_value_info(vi.name, NP2ONNX[np.asarray(r).dtype], np.shape(r)))
    return model


def run_both(model, feeds: dict):
    ref = ReferenceEvaluator(model).run(None, feeds)
    typed_outputs(model, ref)
    sess = onnxc.InferenceSession(model.SerializeToString())
    got = sess.run(None, feeds)
    return ref, got


def assert_close(ref, got, rtol=1e-5, atol=1e-6):
    assert len(ref) == len(got)
    for r, g in zip(ref, got):
        r = np.asarray(r)
        assert g.dtype == r.dtype, (g.dtype, r.dtype)
        assert g.shape == r.shape, (g.shape, r.shape)
        if r.dtype.kind == "f":
            np.testing.assert_allclose(g, r, rtol=rtol, atol=atol, equal_nan=True)
        else:
            np.testing.assert_array_equal(g, r)


def check(model, feeds, rtol=1e-5, atol=1e-6):
    ref, got = run_both(model, feeds)
    assert_close(ref, got, rtol, atol)
    return got


@contextlib.contextmanager
def poisoned():
    """Fresh numpy buffers (outputs, arenas) start as garbage, so an unwritten element fails.
    Object arrays (strings) stay as numpy makes them: their bytes are references."""
    real = np.empty

    def empty(shape, dtype=float, *a, **k):
        arr = real(shape, dtype, *a, **k)
        if arr.dtype != object:
            arr.reshape(-1).view(np.uint8).fill(0xA5)
        return arr

    np.empty = empty
    try:
        yield
    finally:
        np.empty = real
