"""Helpers for the pass tests: op counts before/after a pass, and a model run at each
optimisation level against onnx.reference."""
from __future__ import annotations

import collections

import numpy as np
from onnx.reference import ReferenceEvaluator

import onnxc
from onnxc import loader
from onnxc.compiler import Options, compile_model, optimize_proto
from util import assert_close, typed_outputs


def ops(model) -> dict:
    return dict(collections.Counter(n.op_type for n in model.graph.node))


def graph_ops(model, level=99) -> dict:
    """Op counts of the compiled graph (after the IR passes too)."""
    import onnx
    typed = onnx.shape_inference.infer_shapes(model)
    known = {v.name: v for v in typed.graph.value_info}
    m = onnx.ModelProto()
    m.CopyFrom(model)
    for vi in m.graph.output:
        if not vi.type.HasField("tensor_type") and vi.name in known:
            vi.CopyFrom(known[vi.name])
        elif not vi.type.HasField("tensor_type"):
            out = next(o for o in typed.graph.output if o.name == vi.name)
            vi.CopyFrom(out)
    g = compile_model(loader.load(m), Options(optimization_level=level)).graph
    return dict(collections.Counter(n.op_type for n in g.nodes))


def after(model, level=99):
    return optimize_proto(model, level)


def run_levels(model, feeds, levels=(0, 1, 2, 99), rtol=1e-5, atol=1e-6):
    """Every level computes what onnx.reference does."""
    ref = ReferenceEvaluator(model).run(None, feeds)
    typed_outputs(model, ref)
    data = model.SerializeToString()
    for lv in levels:
        so = onnxc.SessionOptions()
        so.graph_optimization_level = lv
        got = onnxc.InferenceSession(data, so).run(None, feeds)
        assert_close(ref, got, rtol, atol)
    return ref


def rand(rng, shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)
