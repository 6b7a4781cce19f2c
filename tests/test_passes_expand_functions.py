"""expand_functions: an operator onnxc has no kernel for, defined by onnx as a function (fixed or
built for its input types), is replaced by that body; names inside never meet the model's."""
import numpy as np
import onnx
from onnx import TensorProto as T, helper as h
from onnx.reference import ReferenceEvaluator

import onnxc
from onnxc.passes.expand_functions import expand_functions, expandable


def _seq_map_model():
    seq = h.make_sequence_type_proto(h.make_tensor_type_proto(T.FLOAT, ["n"]))
    body = h.make_graph([h.make_node("Add", ["in0", "in1"], ["out0"]), h.make_node("Shape", ["in0"], ["out1"])],
                        "b", [h.make_tensor_value_info("in0", T.FLOAT, ["n"]),
                              h.make_tensor_value_info("in1", T.FLOAT, ["n"])],
                        [h.make_tensor_value_info("out0", T.FLOAT, ["n"]),
                         h.make_tensor_value_info("out1", T.INT64, [1])])
    # the model's own names collide with names the expanded body uses internally
    g = h.make_graph([h.make_node("Neg", ["t"], ["in0"]),
                      h.make_node("SequenceMap", ["s", "in0"], ["r", "shapes"], body=body),
                      h.make_node("ConcatFromSequence", ["r"], ["out0"], axis=0)], "g",
                     [h.make_value_info("s", seq), h.make_tensor_value_info("t", T.FLOAT, [3])],
                     [h.make_value_info("r", seq), h.make_tensor_value_info("out0", T.FLOAT, None),
                      h.make_value_info("shapes", h.make_sequence_type_proto(h.make_tensor_type_proto(T.INT64, [1])))])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 18)])


def test_sequence_map_expands_and_runs():
    m = _seq_map_model()
    assert expandable("", "SequenceMap", 18) and not expandable("", "Add", 18)
    ex = expand_functions(m)
    assert "SequenceMap" not in {n.op_type for n in ex.graph.node}
    defined = [o for n in ex.graph.node for o in n.output if o]
    assert len(defined) == len(set(defined))          # single assignment kept
    rng = np.random.default_rng(0)
    feeds = {"s": [rng.standard_normal(3).astype(np.float32) for _ in range(4)],
             "t": rng.standard_normal(3).astype(np.float32)}
    got = onnxc.InferenceSession(m.SerializeToString()).run(None, feeds)
    want = ReferenceEvaluator(m).run(None, feeds)
    for a, b in zip(got[0], want[0]):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(got[1], want[1])
    assert [list(x) for x in got[2]] == [list(x) for x in want[2]]


def test_models_without_function_ops_are_untouched():
    g = h.make_graph([h.make_node("Relu", ["x"], ["y"])], "g", [h.make_tensor_value_info("x", T.FLOAT, [2])],
                     [h.make_tensor_value_info("y", T.FLOAT, [2])])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 18)])
    assert expand_functions(m) is m
