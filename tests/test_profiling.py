"""SessionOptions.enable_profiling: per-node timings in a Chrome-trace file, like onnxruntime's."""
import json
import os

import numpy as np
from onnx import TensorProto, helper

import onnxc


def test_profiling_writes_node_events(tmp_path):
    m = helper.make_model(helper.make_graph(
        [helper.make_node("Relu", ["x"], ["h"], name="first"), helper.make_node("Sigmoid", ["h"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])]),
        opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    so = onnxc.SessionOptions()
    so.enable_profiling = True
    so.profile_file_prefix = str(tmp_path / "prof")
    s = onnxc.InferenceSession(m.SerializeToString(), so)
    x = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    for _ in range(3):
        np.testing.assert_allclose(s.run(None, {"x": x})[0], 1 / (1 + np.exp(-np.maximum(x, 0))), rtol=1e-6)
    assert s.get_profiling_start_time_ns() > 0
    path = s.end_profiling()
    assert os.path.isfile(path) and path.startswith(str(tmp_path / "prof"))
    events = json.load(open(path))
    nodes = [e for e in events if e["cat"] == "Node"]
    assert len([e for e in events if e["name"] == "model_run"]) == 3
    assert len(nodes) == 6
    assert {e["args"]["op_name"] for e in nodes} == {"Relu", "Sigmoid"}
    assert any(e["name"] == "first_kernel_time" for e in nodes)
    assert all(e["dur"] >= 0 and e["ph"] == "X" for e in events)


def test_no_profiling_by_default():
    m = helper.make_model(helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])]),
        opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    s = onnxc.InferenceSession(m.SerializeToString())
    assert s.end_profiling() == ""
