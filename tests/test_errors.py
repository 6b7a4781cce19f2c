"""Run-time checks and the error hierarchy, side by side with onnxruntime on the same feeds."""
import warnings

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper

import onnxc

ort = pytest.importorskip("onnxruntime")
from onnxruntime.capi import onnxruntime_pybind11_state as ort_c  # noqa: E402

ort.set_default_logger_severity(3)


def binary_model(op, shape, etype=T.FLOAT, out_etype=None, y_shape=None):
    x = helper.make_tensor_value_info("X", etype, shape)
    y = helper.make_tensor_value_info("Y", etype, shape if y_shape is None else y_shape)
    z = helper.make_tensor_value_info("Z", out_etype or etype, [None] * len(shape))
    g = helper.make_graph([helper.make_node(op, ["X", "Y"], ["Z"])], "g", [x, y], [z])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


MODELS = {
    "sym_f32": binary_model("Add", ["N", 3]),
    "static_f32": binary_model("Add", [2, 3]),
    "vec_i64": binary_model("Add", [3], T.INT64),
    "sym_f64": binary_model("Mul", ["N"], T.DOUBLE),
    "vec_bool": binary_model("Or", [3], T.BOOL),
    "scalar_i32": binary_model("Add", [], T.INT32),
}
_SESSIONS = {}


def sessions(name):
    if name not in _SESSIONS:
        data = MODELS[name].SerializeToString()
        _SESSIONS[name] = (ort.InferenceSession(data, providers=["CPUExecutionProvider"]),
                           onnxc.InferenceSession(data))
    return _SESSIONS[name]


class ArrayLike:
    def __array__(self, dtype=None, copy=None):
        return np.ones(3, np.float32)


f32 = np.arange(6, dtype=np.float32).reshape(2, 3)
FEEDS = {   # id: (model, X, Y)
    "ok": ("sym_f32", f32, f32),
    "ok_static": ("static_f32", f32, f32 * 2),
    "noncontig": ("sym_f32", f32, np.arange(12, dtype=np.float32).reshape(2, 6)[:, ::2]),
    "fortran": ("static_f32", np.asfortranarray(f32), f32),
    "readonly": ("static_f32", np.frombuffer(f32.tobytes(), np.float32).reshape(2, 3), f32),
    "unaligned": ("vec_i64", np.frombuffer(b"\0" + np.arange(3, dtype=np.int64).tobytes(), np.int64, 3, 1),
                  np.arange(3, dtype=np.int64)),
    "zero_batch": ("sym_f32", np.empty((0, 3), np.float32), np.empty((0, 3), np.float32)),
    "list_f_to_f32": ("sym_f32", [[1.5, 2.5, 3.5]], [[1, 2, 3]]),
    "list_to_i64": ("vec_i64", [1.7, -2.2, 3], [True, False, 1]),
    "list_to_bool": ("vec_bool", [0, 1, 2.5], [False, False, True]),
    "list_to_f64": ("sym_f64", [1, 2.5, True, None], [1, 1, 1, 1]),
    "list_strings": ("sym_f64", ["1.5", "2"], [1.0, 2.0]),
    "list_of_0d": ("vec_i64", [np.int64(1), np.array(2), 3], [1, 2, 3]),
    "list_empty": ("sym_f64", [], []),
    "list_ragged": ("sym_f32", [[1.0], [1.0, 2.0]], f32),
    "list_overflow": ("vec_i64", [2 ** 70, 1, 1], [1, 2, 3]),
    "0d_array": ("scalar_i32", np.array(3, np.int32), np.array(4, np.int32)),
    "0d_wrong_type": ("scalar_i32", np.array(3.0), np.array(4, np.int32)),
    "wrong_dtype": ("sym_f32", f32, f32.astype(np.float64)),
    "wrong_dtype_int": ("vec_i64", np.arange(3, dtype=np.int32), np.arange(3)),
    "wrong_rank": ("sym_f32", f32, f32.reshape(2, 3, 1)),
    "wrong_rank_list": ("sym_f32", f32, [1.0, 2.0, 3.0]),
    "wrong_dim": ("sym_f32", f32, np.ones((2, 4), np.float32)),
    "wrong_dims_static": ("static_f32", np.ones((3, 4), np.float32), f32),
    "wrong_dim_list": ("vec_i64", [1, 2], [1, 2, 3]),
    "tuple": ("vec_i64", (1, 2, 3), [1, 2, 3]),
    "string": ("vec_i64", "abc", [1, 2, 3]),
    "bytes": ("vec_i64", b"abc", [1, 2, 3]),
    "memoryview": ("static_f32", memoryview(f32), f32),
    "array_like": ("sym_f32", ArrayLike(), f32),
    "dict": ("sym_f32", {"a": 1}, f32),
    "ortvalue": ("static_f32", "ortvalue", f32),
    "ortvalue_wrong_type": ("vec_i64", "ortvalue64f", [1, 2, 3]),
}
# Deliberate differences from onnxruntime (documented in session.py):
#  - a Python or numpy scalar is taken as a 0-d array (onnxruntime refuses it outright);
#  - inputs sharing a symbolic dim must agree (onnxruntime may broadcast them and only warn).
SCALARS = {
    "py_float_scalar": ("scalar_i32", 2.0, 3),
    "py_int_into_rank1": ("vec_i64", 2, [1, 2, 3]),
    "np_scalar": ("scalar_i32", np.int32(5), np.int32(6)),
    "np_scalar_wrong_type": ("scalar_i32", np.float32(5), np.int32(6)),
}


def _value(v, which):
    if v == "ortvalue":
        return which.OrtValue.ortvalue_from_numpy(f32)
    if v == "ortvalue64f":
        return which.OrtValue.ortvalue_from_numpy(np.arange(3, dtype=np.float64))
    return v


def _outcome(sess, mod, x, y):
    feed = {"X": _value(x, mod) if isinstance(x, str) else x, "Y": y}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return sess.run(None, feed), None
        except Exception as e:  # noqa: BLE001 - compared below
            return None, e


def _assert_same_error(ours, theirs):
    assert isinstance(ours, onnxc.Error), repr(ours)
    name = type(theirs).__name__
    if hasattr(onnxc, name) and isinstance(getattr(onnxc, name), type) and issubclass(getattr(onnxc, name),
                                                                                       onnxc.Error):
        assert isinstance(ours, getattr(onnxc, name)), (ours, theirs)
    else:   # onnxruntime's Python layer raised a builtin: ours is one too
        assert isinstance(ours, type(theirs)), (ours, theirs)
    if isinstance(theirs, ort_c.InvalidArgument) and "map(" in str(theirs):
        return   # a dict feed: onnxruntime names the map type, we say it is not a tensor
    msg = str(theirs).split(" : ", 3)[-1] if str(theirs).startswith("[ONNXRuntimeError]") else str(theirs)
    assert str(ours) == msg, (str(ours), msg)


@pytest.mark.parametrize("case", sorted(FEEDS))
def test_feed_like_onnxruntime(case):
    model, x, y = FEEDS[case]
    s_ort, s_c = sessions(model)
    ref, ref_err = _outcome(s_ort, ort, x, y)
    got, err = _outcome(s_c, onnxc, x, y)
    if ref_err is None:
        assert err is None, f"onnxruntime accepts this feed, onnxc raised {err!r}"
        for r, g in zip(ref, got):
            assert g.dtype == r.dtype and g.shape == r.shape
            np.testing.assert_array_equal(g, r)
    else:
        assert err is not None, f"onnxruntime raised {ref_err!r}, onnxc accepted the feed"
        _assert_same_error(err, ref_err)


@pytest.mark.parametrize("case", sorted(SCALARS))
def test_scalars_are_zero_d_arrays(case):
    model, x, y = SCALARS[case]
    _, s_c = sessions(model)
    got, err = _outcome(s_c, onnxc, x, y)
    if case == "py_float_scalar":
        assert err is None and got[0].dtype == np.int32 and got[0].shape == () and got[0] == 5
    elif case == "np_scalar":
        assert err is None and got[0] == 11
    elif case == "py_int_into_rank1":
        assert isinstance(err, onnxc.InvalidArgument) and "Invalid rank for input: X Got: 0 Expected: 1" in str(err)
    else:
        assert isinstance(err, onnxc.InvalidArgument) and "Unexpected input data type" in str(err)


def test_missing_unknown_and_output_names_like_onnxruntime():
    s_ort, s_c = sessions("sym_f32")
    cases = [
        (None, {"X": f32}),
        (None, {"X": f32, "Y": f32, "Q": f32}),
        (["W"], {"X": f32, "Y": f32}),
        (["Z", "W"], {"X": f32, "Y": f32}),
        (None, {"Y": f32}),
    ]
    for names, feed in cases:
        with pytest.raises(Exception) as theirs:
            s_ort.run(names, feed)
        with pytest.raises(onnxc.Error) as ours:
            s_c.run(names, feed)
        _assert_same_error(ours.value, theirs.value)
    # both problems at once: the missing input is reported first, as onnxruntime does
    with pytest.raises(ValueError, match=r"Required inputs \(\['Y'\]\) are missing"):
        s_c.run(None, {"X": f32, "Q": f32})
    # an unknown name is reported even after a valid feed was converted
    with pytest.raises(onnxc.InvalidArgument, match="Invalid input name: Q"):
        s_c.run(None, {"Q": 1, "X": f32, "Y": f32})


def test_byte_swapped_arrays_are_converted():
    # onnxruntime reads a big-endian array's bytes as they are; onnxc converts the values
    _, s = sessions("static_f32")
    np.testing.assert_array_equal(s.run(None, {"X": f32.astype(">f4"), "Y": f32})[0], f32 * 2)


def test_none_value_is_a_missing_input():
    _, s = sessions("sym_f32")
    with pytest.raises(onnxc.InvalidArgument, match=r"Required inputs \(\['Y'\]\) are missing"):
        s.run(None, {"X": f32, "Y": None})


def test_output_names_selection_and_duplicates():
    s_ort, s_c = sessions("sym_f32")
    for names in (None, [], ["Z"], ["Z", "Z"]):
        ref = s_ort.run(names, {"X": f32, "Y": f32})
        got = s_c.run(names, {"X": f32, "Y": f32})
        assert len(ref) == len(got)
        for r, g in zip(ref, got):
            np.testing.assert_array_equal(g, r)
    with pytest.raises(TypeError):
        s_c.run("Z", {"X": f32, "Y": f32})


def test_inconsistent_symbolic_dims():
    _, s = sessions("sym_f32")
    with pytest.raises(onnxc.InvalidArgument) as e:
        s.run(None, {"X": f32, "Y": np.ones((3, 3), np.float32)})
    msg = str(e.value)
    assert "symbolic dimension 'N'" in msg and "input Y index 0 has 3" in msg and "input X index 0 has 2" in msg


def test_wrong_dims_name_input_index_got_expected():
    m = binary_model("Add", [2, "N", 4])
    s = onnxc.InferenceSession(m.SerializeToString())
    x = np.ones((2, 5, 4), np.float32)
    with pytest.raises(onnxc.InvalidArgument) as e:
        s.run(None, {"X": x, "Y": np.ones((3, 5, 5), np.float32)})
    assert str(e.value) == ("Got invalid dimensions for input: Y for the following indices\n"
                            " index: 0 Got: 3 Expected: 2\n index: 2 Got: 5 Expected: 4\n"
                            " Please fix either the inputs/outputs or the model.")


def test_feed_must_be_a_mapping():
    _, s = sessions("sym_f32")
    with pytest.raises(onnxc.InvalidArgument, match="input_feed must be a dict"):
        s.run(None, [("X", f32), ("Y", f32)])


def test_terminate_flag():
    s_ort, s_c = sessions("sym_f32")
    for mod, s in ((ort, s_ort), (onnxc, s_c)):
        ro = mod.RunOptions()
        ro.terminate = True
        with pytest.raises(Exception, match="Exiting due to terminate flag being set to true."):
            s.run(None, {"X": f32, "Y": f32}, ro)
    with pytest.raises(onnxc.Fail):
        s_c.run(None, {"X": f32, "Y": f32}, ro)


# ---- the hierarchy ------------------------------------------------------------------------------
BUILTINS = {
    "Fail": RuntimeError, "InvalidArgument": ValueError, "NoSuchFile": FileNotFoundError, "NoModel": RuntimeError,
    "EngineError": RuntimeError, "RuntimeException": RuntimeError, "InvalidProtobuf": ValueError,
    "ModelLoaded": RuntimeError, "NotImplemented": NotImplementedError, "InvalidGraph": ValueError,
    "EPFail": RuntimeError, "ModelLoadCanceled": RuntimeError, "ModelRequiresCompilation": RuntimeError,
    "NotFound": LookupError, "DeviceReset": RuntimeError,
}


@pytest.mark.parametrize("name", sorted(BUILTINS))
def test_hierarchy_mirrors_onnxruntime(name):
    cls = getattr(onnxc, name)
    assert issubclass(cls, onnxc.Error) and issubclass(cls, BUILTINS[name])
    assert getattr(onnxc.errors, name) is cls
    assert hasattr(ort_c, name), f"onnxruntime has no {name}"
    e = cls("boom")
    assert str(e) == "boom" and isinstance(e, Exception)


def test_onnxruntime_error_names_all_exist():
    ort_names = {n for n in dir(ort_c) if isinstance(getattr(ort_c, n), type)
                 and issubclass(getattr(ort_c, n), Exception) and getattr(ort_c, n).__module__ == ort_c.__name__}
    assert ort_names <= set(BUILTINS), ort_names - set(BUILTINS)


def test_status_codes_match_onnxruntime_messages():
    # onnxruntime prints "[ONNXRuntimeError] : <code> : <STATUS> : ..."
    with pytest.raises(Exception) as e:
        ort.InferenceSession(b"garbage")
    assert f" {onnxc.InvalidProtobuf.code} : {onnxc.InvalidProtobuf.status} " in str(e.value)
    with pytest.raises(Exception) as e:
        ort.InferenceSession("/nonexistent/model.onnx")
    assert f" {onnxc.NoSuchFile.code} : {onnxc.NoSuchFile.status} " in str(e.value)


def test_binding_error_is_both():
    assert issubclass(onnxc.BindingError, onnxc.InvalidArgument)
    assert issubclass(onnxc.BindingError, RuntimeError) and issubclass(onnxc.BindingError, ValueError)


def test_load_errors():
    with pytest.raises(onnxc.NoSuchFile):
        onnxc.InferenceSession("/nonexistent/model.onnx")
    with pytest.raises(onnxc.InvalidProtobuf):
        onnxc.InferenceSession(b"garbage")
    with pytest.raises(TypeError):
        onnxc.InferenceSession(12)
    bad = binary_model("Add", [2])
    bad.graph.node[0].input[1] = "nope"
    with pytest.raises(onnxc.InvalidGraph):
        onnxc.InferenceSession(bad.SerializeToString())


def test_errors_are_catchable_as_builtins():
    _, s = sessions("sym_f32")
    with pytest.raises(ValueError):
        s.run(None, {"X": f32, "Y": f32.astype(np.float64)})
    with pytest.raises(RuntimeError):
        s.run(None, {"X": (1, 2), "Y": f32})
    with pytest.raises(ValueError):
        s.run(None, {"X": f32})
