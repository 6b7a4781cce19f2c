"""The session API as a drop-in for onnxruntime's: the same code runs with `import onnxc as rt`
and with `import onnxruntime as rt`, and gives the same answers."""
import os
import subprocess
import sys
import textwrap
import threading
import warnings

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

import onnxc

ort = pytest.importorskip("onnxruntime")
ort.set_default_logger_severity(3)


def model_of(nodes, inputs, outputs, inits=(), opset=17, ir=8):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=ir)


def vi(name, shape, etype=T.FLOAT):
    return helper.make_tensor_value_info(name, etype, shape)


def add_model(x_shape, y_shape=None, z_shape=None, etype=T.FLOAT):
    y_shape = x_shape if y_shape is None else y_shape
    z_shape = [None] * max(len(x_shape), len(y_shape)) if z_shape is None else z_shape
    return model_of([helper.make_node("Add", ["X", "Y"], ["Z"])], [vi("X", x_shape, etype), vi("Y", y_shape, etype)],
                    [vi("Z", z_shape, etype)])


def classifier_model():
    """probabilities = Sigmoid(X @ W + B), X: [batch, 4]; W and B are overridable initializers."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((4, 3)).astype(np.float32), "W")
    b = numpy_helper.from_array(rng.standard_normal(3).astype(np.float32), "B")
    nodes = [helper.make_node("MatMul", ["X", "W"], ["XW"]), helper.make_node("Add", ["XW", "B"], ["L"]),
             helper.make_node("Sigmoid", ["L"], ["probabilities"])]
    m = model_of(nodes, [vi("X", ["batch", 4]), vi("W", [4, 3]), vi("B", [3])],
                 [vi("probabilities", ["batch", 3])], [w, b])
    m.producer_name, m.producer_version, m.domain, m.doc_string = "onnxc-tests", "1.0", "ai.test", "a classifier"
    m.model_version = 7
    m.graph.doc_string = "the graph"
    helper.set_model_props(m, {"author": "me", "license": "MIT"})
    return m


def nodeargs(sess):
    return ([(a.name, a.type, a.shape) for a in sess.get_inputs()],
            [(a.name, a.type, a.shape) for a in sess.get_outputs()],
            [(a.name, a.type, a.shape) for a in sess.get_overridable_initializers()])


def both(model, ort_opts=None, our_opts=None):
    data = model.SerializeToString()
    return (ort.InferenceSession(data, ort_opts, providers=["CPUExecutionProvider"]),
            onnxc.InferenceSession(data, our_opts))


def _with_denotation(m, input_index, dim_index, denotation):
    m.graph.input[input_index].type.tensor_type.shape.dim[dim_index].denotation = denotation
    return m


NODEARG_MODELS = {
    "static": add_model([2, 3], z_shape=[2, 3]),
    "symbolic": add_model(["N", 3], z_shape=["N", 3]),
    "unknown_dim": add_model([None, 3]),
    "output_inferred": add_model(["N", 3]),
    "output_renamed": add_model(["N", 3], z_shape=["B", None]),
    "broadcast": add_model(["N", 1, 5], [4, 1], z_shape=None),
    "scalar": add_model([], z_shape=[]),
    "int64": add_model(["a", "b"], etype=T.INT64),
    "classifier": classifier_model(),
}


@pytest.mark.parametrize("name", sorted(NODEARG_MODELS))
def test_nodeargs_equal_onnxruntime(name):
    s_ort, s_c = both(NODEARG_MODELS[name])
    assert nodeargs(s_c) == nodeargs(s_ort)
    assert str(s_c.get_inputs()[0]) == str(s_ort.get_inputs()[0])


def test_free_dimension_override_by_name_specialises_the_library():
    m = add_model(["N", "M"])
    so_ort, so = ort.SessionOptions(), onnxc.SessionOptions()
    so_ort.add_free_dimension_override_by_name("N", 2)
    so.add_free_dimension_override_by_name("N", 2)
    s_ort, s_c = both(m, so_ort, so)
    assert nodeargs(s_c) == nodeargs(s_ort)                 # [2, 'M'] everywhere
    assert s_c._lib.symbols == ["M"]                        # compiled in: only M is left to bind
    x = np.ones((2, 5), np.float32)
    np.testing.assert_array_equal(s_c.run(None, {"X": x, "Y": x})[0], s_ort.run(None, {"X": x, "Y": x})[0])
    bad = np.ones((3, 5), np.float32)
    for s in (s_ort, s_c):
        with pytest.raises(Exception, match=r"Got invalid dimensions for input: [XY] for the following indices\n"
                                            r" index: 0 Got: 3 Expected: 2"):
            s.run(None, {"X": bad, "Y": bad})
    # the library alone describes itself the same way
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = onnxc.InferenceSession(s_c.library_path)
    assert nodeargs(again) == nodeargs(s_ort)
    with pytest.warns(UserWarning, match="ignored for an already compiled library"):
        onnxc.InferenceSession(s_c.library_path, so)


def test_free_dimension_override_by_denotation():
    m = _with_denotation(add_model(["N", "M"], z_shape=["N", "M"]), 0, 1, "DATA_CHANNEL")
    so_ort, so = ort.SessionOptions(), onnxc.SessionOptions()
    so_ort.add_free_dimension_override_by_denotation("DATA_CHANNEL", 3)
    so.add_free_dimension_override_by_denotation("DATA_CHANNEL", 3)
    s_ort, s_c = both(m, so_ort, so)
    assert [a.shape for a in s_c.get_inputs()] == [a.shape for a in s_ort.get_inputs()] == [["N", 3], ["N", "M"]]
    x = np.ones((2, 3), np.float32)
    np.testing.assert_array_equal(s_c.run(None, {"X": x, "Y": x})[0], s_ort.run(None, {"X": x, "Y": x})[0])
    with pytest.raises(onnxc.InvalidArgument, match="index: 1 Got: 4 Expected: 3"):
        s_c.run(None, {"X": np.ones((2, 4), np.float32), "Y": np.ones((2, 4), np.float32)})


def test_overridable_initializers_like_onnxruntime():
    s_ort, s_c = both(classifier_model())
    x = np.random.default_rng(1).standard_normal((5, 4)).astype(np.float32)
    np.testing.assert_allclose(s_c.run(None, {"X": x})[0], s_ort.run(None, {"X": x})[0], rtol=1e-5, atol=1e-6)
    w = np.ones((4, 3), np.float32)
    ref = s_ort.run(None, {"X": x, "W": w})[0]
    np.testing.assert_allclose(s_c.run(None, {"X": x, "W": w})[0], ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(s_c.run(None, {"X": x, "W": w, "B": None})[0], ref, rtol=1e-5, atol=1e-6)
    with pytest.raises(onnxc.InvalidArgument, match="Got invalid dimensions for input: W"):
        s_c.run(None, {"X": x, "W": np.ones((3, 3), np.float32)})


def test_model_metadata_like_onnxruntime():
    s_ort, s_c = both(classifier_model())
    a, b = s_ort.get_modelmeta(), s_c.get_modelmeta()
    for f in ("producer_name", "graph_name", "domain", "description", "graph_description", "version",
              "custom_metadata_map"):
        assert getattr(a, f) == getattr(b, f), f


def tutorial(rt, path):
    """onnxruntime's documented flows, written once, run with either module as `rt`."""
    seen = {}
    sess = rt.InferenceSession(path, providers=rt.get_available_providers())
    input_name = sess.get_inputs()[0].name
    seen["input"] = (input_name, sess.get_inputs()[0].shape, sess.get_inputs()[0].type)
    label_name = sess.get_outputs()[0].name
    x = np.random.default_rng(3).standard_normal((6, 4)).astype(np.float32)
    seen["run_names"] = sess.run([label_name], {input_name: x})[0]
    seen["run_none"] = sess.run(None, {input_name: x})[0]
    seen["run_list"] = sess.run(None, {input_name: x.tolist()})[0]
    meta = sess.get_modelmeta()
    seen["meta"] = (meta.producer_name, meta.graph_name, meta.domain, meta.description, meta.version,
                    meta.custom_metadata_map)
    seen["providers"] = sess.get_providers()[-1]
    seen["provider_options"] = sess.get_provider_options().get("CPUExecutionProvider")
    so = sess.get_session_options()
    seen["so"] = (so.graph_optimization_level == rt.GraphOptimizationLevel.ORT_ENABLE_ALL,)
    # OrtValue
    x_ortvalue = rt.OrtValue.ortvalue_from_numpy(x, "cpu", 0)
    seen["ortvalue"] = (x_ortvalue.device_name(), x_ortvalue.shape(), x_ortvalue.data_type(),
                        x_ortvalue.is_tensor(), np.array_equal(x_ortvalue.numpy(), x))
    seen["run_ortvalue"] = sess.run([label_name], {input_name: x_ortvalue})[0]
    # IOBinding, every form
    io_binding = sess.io_binding()
    io_binding.bind_cpu_input(input_name, x)
    io_binding.bind_output(label_name)
    sess.run_with_iobinding(io_binding)
    seen["iob_cpu"] = io_binding.copy_outputs_to_cpu()[0]
    io_binding = sess.io_binding()
    io_binding.bind_input(name=input_name, device_type=x_ortvalue.device_name(), device_id=0,
                          element_type=np.float32, shape=x_ortvalue.shape(), buffer_ptr=x_ortvalue.data_ptr())
    io_binding.bind_output(label_name)
    sess.run_with_iobinding(io_binding)
    seen["iob_ptr"] = io_binding.get_outputs()[0].numpy()
    y_ortvalue = rt.OrtValue.ortvalue_from_shape_and_type([6, 3], np.float32, "cpu", 0)
    io_binding.bind_output(name=label_name, device_type=y_ortvalue.device_name(), device_id=0,
                           element_type=np.float32, shape=y_ortvalue.shape(), buffer_ptr=y_ortvalue.data_ptr())
    sess.run_with_iobinding(io_binding)
    seen["iob_prealloc"] = y_ortvalue.numpy().copy()
    io_binding = sess.io_binding()
    io_binding.bind_ortvalue_input(input_name, x_ortvalue)
    y2 = rt.OrtValue.ortvalue_from_shape_and_type([6, 3], np.float32, "cpu", 0)
    io_binding.bind_ortvalue_output(label_name, y2)
    sess.run_with_iobinding(io_binding)
    seen["iob_ortvalue"] = y2.numpy().copy()
    seen["iob_get_ptr"] = io_binding.get_outputs()[0].data_ptr() == y2.data_ptr()
    io_binding.clear_binding_inputs()
    io_binding.clear_binding_outputs()
    seen["ort_values"] = sess.run_with_ort_values([label_name], {input_name: x_ortvalue})[0].numpy()
    return seen


def test_tutorial_flow_runs_the_same_with_import_onnxc_as_rt(tmp_path):
    path = str(tmp_path / "classifier.onnx")
    onnx.save(classifier_model(), path)
    theirs, ours = tutorial(ort, path), tutorial(onnxc, path)
    assert ours.keys() == theirs.keys()
    for k in ours:
        if isinstance(ours[k], np.ndarray):
            assert ours[k].dtype == theirs[k].dtype and ours[k].shape == theirs[k].shape, k
            np.testing.assert_allclose(ours[k], theirs[k], rtol=1e-5, atol=1e-6, err_msg=k)
        else:
            assert ours[k] == theirs[k], k


def test_module_functions():
    assert onnxc.get_device() == ort.get_device() == "CPU"
    assert onnxc.get_available_providers() == ["CPUExecutionProvider"]
    # onnxc lists the providers of the newest onnxruntime it knows; an installed onnxruntime can be
    # older (fewer names) or newer (a name or two more), so compare the names both know, in order.
    ours, theirs = onnxc.get_all_providers(), ort.get_all_providers()
    assert ours[-1] == "CPUExecutionProvider" and "CUDAExecutionProvider" in ours
    assert len(set(ours)) == len(ours) and all(p.endswith("ExecutionProvider") for p in ours)
    common = [p for p in theirs if p in ours]
    assert common == [p for p in ours if p in theirs] and len(common) >= len(theirs) - 2, (ours, theirs)
    assert isinstance(onnxc.__version__, str) and onnxc.get_version_string() == onnxc.__version__
    for name in ("InferenceSession", "SessionOptions", "RunOptions", "OrtValue", "IOBinding", "NodeArg",
                 "ModelMetadata", "GraphOptimizationLevel", "ExecutionMode", "ExecutionOrder", "OrtDevice",
                 "get_device", "get_available_providers", "get_all_providers", "OrtDeviceVendorId"):
        assert hasattr(ort, name) and hasattr(onnxc, name), name
    for e in (onnxc.GraphOptimizationLevel, onnxc.ExecutionMode, onnxc.ExecutionOrder):
        theirs = getattr(ort, e.__name__)
        assert {m.name: int(m) for m in e} == {n: int(v) for n, v in theirs.__members__.items()}


def test_providers_like_onnxruntime():
    data = add_model([2]).SerializeToString()
    s = onnxc.InferenceSession(data, providers=["CPUExecutionProvider"])
    assert s.get_providers() == ["CPUExecutionProvider"]
    assert s.get_provider_options() == {"CPUExecutionProvider": {}}
    with pytest.warns(UserWarning, match="Specified provider 'CUDAExecutionProvider' is not in available"):
        s = onnxc.InferenceSession(data, providers=["CUDAExecutionProvider", "CPUExecutionProvider"])
    assert s.get_providers() == ["CPUExecutionProvider"]
    with pytest.warns(UserWarning):
        onnxc.InferenceSession(data, providers=["FooExecutionProvider"])
    s = onnxc.InferenceSession(data, providers=[("CPUExecutionProvider", {"arena_extend_strategy": 1})])
    assert s.get_provider_options() == {"CPUExecutionProvider": {}}
    for bad_p, bad_o, msg in [(["CPUExecutionProvider"], [{}, {}], "same length"),
                              ("CPUExecutionProvider", None, "should be a sequence"),
                              ([1], None, "must be either strings or"),
                              ([("CPUExecutionProvider", {})], [{}], "Only string values")]:
        # onnxruntime's check raises the same ValueError, then its __init__ catches it, prints
        # "EP Error" and falls back to the CPU; onnxc lets it through
        with pytest.raises(ValueError, match=msg):
            onnxc.InferenceSession(data, providers=bad_p, provider_options=bad_o)
    s.set_providers(["CPUExecutionProvider"])
    assert s.get_providers() == ["CPUExecutionProvider"]


def test_session_options_and_run_options():
    so = onnxc.SessionOptions()
    theirs = ort.SessionOptions()
    for attr in ("intra_op_num_threads", "inter_op_num_threads", "enable_profiling", "log_severity_level",
                 "enable_cpu_mem_arena", "enable_mem_pattern", "use_deterministic_compute", "logid"):
        assert getattr(so, attr) == getattr(theirs, attr), attr
    assert int(so.graph_optimization_level) == int(theirs.graph_optimization_level)
    for mod, o in ((ort, theirs), (onnxc, so)):
        o.intra_op_num_threads = 3
        o.graph_optimization_level = mod.GraphOptimizationLevel.ORT_DISABLE_ALL
        with pytest.raises(TypeError):
            o.intra_op_num_threads = "four"
        with pytest.raises(RuntimeError, match="SessionOptions does not have configuration with key: nope"):
            o.get_session_config_entry("nope")
        o.add_session_config_entry("session.intra_op.allow_spinning", "0")
        assert o.get_session_config_entry("session.intra_op.allow_spinning") == "0"
        ro = mod.RunOptions()
        with pytest.raises(RuntimeError, match="RunOptions does not have configuration with key: nope"):
            ro.get_run_config_entry("nope")
        ro.add_run_config_entry("k", "v")
        assert ro.get_run_config_entry("k") == "v"
        assert (ro.log_severity_level, ro.logid, ro.only_execute_path_to_fetches, ro.terminate) == (
            -1, "", False, False)
    assert so.intra_op_num_threads == 3
    so.graph_optimization_level = 1
    assert so.graph_optimization_level is onnxc.GraphOptimizationLevel.ORT_ENABLE_BASIC
    with pytest.raises(onnxc.InvalidArgument):
        so.add_free_dimension_override_by_name("N", -1)
    s = onnxc.InferenceSession(add_model([2]).SerializeToString(), so)
    assert s.get_session_options() is so and s._threads == 3
    x = np.ones(2, np.float32)
    np.testing.assert_array_equal(s.run(None, {"X": x, "Y": x}, onnxc.RunOptions())[0], x * 2)


THREADS_SCRIPT = textwrap.dedent("""
    import os, sys
    import numpy as np
    import onnxc
    so = onnxc.SessionOptions()
    so.intra_op_num_threads = int(sys.argv[2])
    s = onnxc.InferenceSession(sys.argv[1], so)
    x = np.ones((64, 4096), np.float32)          # far above ONNXC_PAR_MIN: the loop runs in parallel
    before = len(os.listdir("/proc/self/task"))
    s.run(None, {"X": x, "Y": x})
    print(len(os.listdir("/proc/self/task")) - before)
""")


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="counts threads through /proc")
def test_intra_op_num_threads_reaches_openmp(tmp_path):
    path = str(tmp_path / "add.onnx")
    onnx.save(add_model(["N", 4096]), path)
    onnxc.InferenceSession(path)                  # build once; the subprocesses load from the cache
    script = tmp_path / "threads.py"
    script.write_text(THREADS_SCRIPT)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "GOMP_"))}
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(os.path.dirname(onnxc.__file__)),
                                         env.get("PYTHONPATH", "")])
    new = {}
    for n in (1, 3, 5):
        out = subprocess.run([sys.executable, str(script), path, str(n)], env=env, capture_output=True, text=True,
                             timeout=300)
        assert out.returncode == 0, out.stderr
        new[n] = int(out.stdout.split()[-1])
    assert new == {1: 0, 3: 2, 5: 4}, new        # OpenMP's team: the caller plus n - 1 workers


def test_run_async():
    s = onnxc.InferenceSession(add_model([2]).SerializeToString())
    done, got = threading.Event(), {}

    def callback(results, user_data, err):
        got.update(results=results, user_data=user_data, err=err)
        done.set()
    x = np.ones(2, np.float32)
    s.run_async(None, {"X": x, "Y": x}, callback, "ud")
    assert done.wait(30)
    assert got["err"] == "" and got["user_data"] == "ud"
    np.testing.assert_array_equal(got["results"][0], x * 2)
    done.clear()
    s.run_async(None, {"X": x, "Y": x.astype(np.float64)}, callback, None)
    assert done.wait(30)
    assert got["results"] == [] and got["err"].startswith("Unexpected input data type.")


def test_graph_optimization_levels_all_build_and_agree():
    m = classifier_model()
    x = np.random.default_rng(2).standard_normal((3, 4)).astype(np.float32)
    ref = None
    for level in onnxc.GraphOptimizationLevel:
        so = onnxc.SessionOptions()
        so.graph_optimization_level = level
        got = onnxc.InferenceSession(m.SerializeToString(), so).run(None, {"X": x})[0]
        if ref is None:
            ref = got
        np.testing.assert_allclose(got, ref, rtol=1e-6)


def test_session_sources_path_bytes_modelproto_library(tmp_path):
    m = add_model(["N", 2])
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    x = np.ones((3, 2), np.float32)
    sessions = [onnxc.InferenceSession(str(path)), onnxc.InferenceSession(path), onnxc.InferenceSession(m),
                onnxc.InferenceSession(m.SerializeToString())]
    sessions.append(onnxc.InferenceSession(sessions[0].library_path))
    for s in sessions:
        np.testing.assert_array_equal(s.run(None, {"X": x, "Y": x})[0], x * 2)
        assert nodeargs(s) == nodeargs(sessions[0])
