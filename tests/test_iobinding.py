"""OrtValue and IOBinding, side by side with onnxruntime: same values, same zero-copy behaviour."""
import gc

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper

import onnxc

ort = pytest.importorskip("onnxruntime")
ort.set_default_logger_severity(3)


def two_output_model(shape=("N", 3), etype=T.FLOAT):
    x = helper.make_tensor_value_info("X", etype, list(shape))
    y = helper.make_tensor_value_info("Y", etype, list(shape))
    outs = [helper.make_tensor_value_info(n, etype, list(shape)) for n in ("Z", "W")]
    nodes = [helper.make_node("Add", ["X", "Y"], ["Z"]), helper.make_node("Mul", ["X", "Y"], ["W"])]
    g = helper.make_graph(nodes, "g", [x, y], outs)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.fixture(scope="module")
def sessions():
    data = two_output_model().SerializeToString()
    return ort.InferenceSession(data, providers=["CPUExecutionProvider"]), onnxc.InferenceSession(data)


X = np.arange(6, dtype=np.float32).reshape(2, 3)
Y = np.full((2, 3), 2.0, np.float32)
DTYPES = [np.float32, np.float64, np.float16, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
          np.uint32, np.uint64, np.bool_]


# ---- OrtValue -------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_ortvalue_describes_itself_like_onnxruntime(dtype):
    a = (np.arange(24) % 3).astype(dtype).reshape(2, 3, 4)
    ours, theirs = onnxc.OrtValue.ortvalue_from_numpy(a), ort.OrtValue.ortvalue_from_numpy(a)
    for m in ("shape", "data_type", "element_type", "device_name", "tensor_size_in_bytes", "has_value",
              "is_tensor", "is_sparse_tensor", "is_tensor_sequence", "data_ptr"):
        assert getattr(ours, m)() == getattr(theirs, m)(), m
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    assert ours.numpy().dtype == theirs.numpy().dtype


def test_ortvalue_from_numpy_shares_memory_and_keeps_it_alive():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    v = onnxc.OrtValue.ortvalue_from_numpy(a)
    assert v.data_ptr() == a.ctypes.data
    n = v.numpy()
    assert np.shares_memory(n, a) and n.flags.writeable
    n[0, 0] = 42
    assert a[0, 0] == 42
    ptr = a.ctypes.data
    del a, n
    gc.collect()
    junk = [np.full((2, 3), -1, np.float32) for _ in range(100)]   # would reuse freed memory
    assert v.data_ptr() == ptr and v.numpy()[0, 0] == 42 and v.numpy()[1, 2] == 5
    del junk


def test_ortvalue_non_contiguous_is_copied_like_onnxruntime():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::2]
    ours, theirs = onnxc.OrtValue.ortvalue_from_numpy(a), ort.OrtValue.ortvalue_from_numpy(a)
    assert (ours.data_ptr() == a.ctypes.data) == (theirs.data_ptr() == a.ctypes.data) is False
    np.testing.assert_array_equal(ours.numpy(), a)
    assert ours.numpy().flags.c_contiguous


def test_ortvalue_from_shape_and_type():
    for et in (np.float32, np.dtype("float64"), T.INT64, "float32", "tensor(int8)"):
        ours = onnxc.OrtValue.ortvalue_from_shape_and_type([2, 3], et)
        if not isinstance(et, str) or not et.startswith("tensor("):
            theirs = ort.OrtValue.ortvalue_from_shape_and_type([2, 3], et)
            assert ours.data_type() == theirs.data_type()
        assert ours.shape() == [2, 3] and ours.numpy().shape == (2, 3)
        assert ours.numpy().ctypes.data == ours.data_ptr()
    assert onnxc.OrtValue.ortvalue_from_shape_and_type((), np.float32).shape() == []
    with pytest.raises(onnxc.InvalidArgument):
        onnxc.OrtValue.ortvalue_from_shape_and_type([-2, 3], np.float32)
    with pytest.raises(onnxc.NotImplemented):
        onnxc.OrtValue.ortvalue_from_shape_and_type([2], np.complex64)


def test_ortvalue_with_onnx_type_reinterprets():
    raw = np.array([0x3C00, 0x4000], np.uint16)          # 1.0 and 2.0 as float16 bits
    v = onnxc.OrtValue.ortvalue_from_numpy_with_onnx_type(raw, T.FLOAT16)
    assert v.data_type() == "tensor(float16)" and v.data_ptr() == raw.ctypes.data
    np.testing.assert_array_equal(v.numpy(), np.array([1, 2], np.float16))
    with pytest.raises(onnxc.InvalidArgument, match="Items size"):
        onnxc.OrtValue.ortvalue_from_numpy_with_onnx_type(np.zeros(3, np.uint8), T.FLOAT16)


def test_ortvalue_rejects_what_onnxruntime_rejects():
    for bad in ([1.0, 2.0], np.float32(1), np.array(["a"]), np.array([{}], dtype=object)):
        with pytest.raises(RuntimeError):
            ort.OrtValue.ortvalue_from_numpy(bad)
        with pytest.raises(RuntimeError):
            onnxc.OrtValue.ortvalue_from_numpy(bad)
    with pytest.raises(onnxc.InvalidArgument, match="Unsupported device type: tpu"):
        onnxc.OrtValue.ortvalue_from_numpy(X, "tpu")
    with pytest.raises(onnxc.NotImplemented, match="cuda"):
        onnxc.OrtValue.ortvalue_from_numpy(X, "cuda", 0)
    with pytest.raises(onnxc.NotImplemented):
        onnxc.OrtValue.ortvalue_from_numpy(X).as_sparse_tensor()


def test_ortvalue_update_inplace():
    for mod in (ort, onnxc):
        v = mod.OrtValue.ortvalue_from_shape_and_type([2, 3], np.float32)
        ptr = v.data_ptr()
        v.update_inplace(X)
        np.testing.assert_array_equal(v.numpy(), X)
        v.update_inplace(np.ascontiguousarray(X.T).T)            # non-contiguous source
        np.testing.assert_array_equal(v.numpy(), X)
        v.update_inplace(mod.OrtValue.ortvalue_from_numpy(Y))
        np.testing.assert_array_equal(v.numpy(), Y)
        assert v.data_ptr() == ptr
        with pytest.raises(RuntimeError, match="does not match the size"):
            v.update_inplace(np.ones(5, np.float32))
        with pytest.raises(TypeError):
            v.update_inplace([1, 2])
    a = X.copy()
    v = onnxc.OrtValue.ortvalue_from_numpy(a)
    v.update_inplace(Y.astype(np.float64))                       # converted, not reinterpreted
    np.testing.assert_array_equal(a, Y)


def test_ortvalue_array_and_dlpack_share_memory():
    a = X.copy()
    v = onnxc.OrtValue.ortvalue_from_numpy(a)
    assert np.shares_memory(np.asarray(v), a)
    assert np.asarray(v, dtype=np.float64).dtype == np.float64
    assert v.__dlpack_device__() == ort.OrtValue.ortvalue_from_numpy(a).__dlpack_device__() == (1, 0)
    d = np.from_dlpack(v)
    assert np.shares_memory(d, a)
    w = onnxc.OrtValue.from_dlpack(a)
    assert w.data_ptr() == a.ctypes.data
    assert onnxc.OrtValue.from_dlpack(a.__dlpack__()).data_ptr() == a.ctypes.data


def test_ortdevice_like_onnxruntime():
    ours, theirs = onnxc.OrtDevice.make("cpu", 0), ort.OrtDevice.make("cpu", 0)
    for m in ("device_id", "device_type", "device_vendor_id", "device_mem_type"):
        assert getattr(ours, m)() == getattr(theirs, m)(), m
    assert onnxc.OrtDevice.make("cuda", 1).device_type() == ort.OrtDevice.make("cuda", 1).device_type()
    assert onnxc.OrtDevice.make("cuda", 1).device_vendor_id() == ort.OrtDevice.make("cuda", 1).device_vendor_id()


# ---- IOBinding ------------------------------------------------------------------------------------
def both(sessions, bind):
    """Apply bind(session, binding) on both runtimes, run, return ([ort outputs], [our outputs],
    our binding)."""
    res = []
    for s in sessions:
        b = s.io_binding()
        bind(s, b)
        s.run_with_iobinding(b)
        b.synchronize_outputs()
        res.append(b)
    return [v.numpy() for v in res[0].get_outputs()], [v.numpy() for v in res[1].get_outputs()], res[1]


def assert_same(ref, got):
    assert len(ref) == len(got)
    for r, g in zip(ref, got):
        assert r.dtype == g.dtype and r.shape == g.shape
        np.testing.assert_array_equal(g, r)


def test_bind_cpu_input_and_device_outputs(sessions):
    def bind(s, b):
        b.bind_cpu_input("X", X)
        b.bind_cpu_input("Y", Y)
        b.synchronize_inputs()
        b.bind_output("W")          # bound out of model order: results come in binding order
        b.bind_output("Z", "cpu")
    ref, got, b = both(sessions, bind)
    assert_same(ref, got)
    np.testing.assert_array_equal(got[0], X * Y)
    outs = b.get_outputs()
    assert all(isinstance(v, onnxc.OrtValue) and v.device_name() == "cpu" for v in outs)
    assert outs[0].numpy().ctypes.data == outs[0].data_ptr()
    copies = b.copy_outputs_to_cpu()
    assert_same(ref, copies)
    assert not np.shares_memory(copies[0], outs[0].numpy())
    assert b.get_outputs_as_ortvaluevector()[0].data_ptr() == outs[0].data_ptr()


def test_only_bound_outputs_are_returned(sessions):
    def bind(s, b):
        b.bind_cpu_input("X", X)
        b.bind_cpu_input("Y", Y)
        b.bind_output("Z")
        b.bind_output("Z")          # binding twice keeps one
    ref, got, _ = both(sessions, bind)
    assert_same(ref, got)
    assert len(got) == 1


@pytest.mark.parametrize("element_type", [np.float32, T.FLOAT], ids=["numpy", "onnx"])
def test_bind_input_raw_pointer_is_not_copied(sessions, element_type):
    xs = {id(s): X.copy() for s in sessions}

    def bind(s, b):
        x = xs[id(s)]
        b.bind_input("X", "cpu", 0, element_type, list(x.shape), x.ctypes.data)
        b.bind_input("Y", "cpu", 0, element_type, Y.shape, Y.ctypes.data)
        b.bind_output("Z")
    ref, got, b = both(sessions, bind)
    assert_same(ref, got)
    xs[id(sessions[1])][:] = 100            # the library reads the bound memory itself
    sessions[1].run_with_iobinding(b)
    np.testing.assert_array_equal(b.get_outputs()[0].numpy(), np.full((2, 3), 102, np.float32))


def test_bind_cpu_input_shares_contiguous_arrays_copies_others(sessions):
    s = sessions[1]
    x, strided = X.copy(), np.zeros((2, 6), np.float32)[:, ::2]
    b = s.io_binding()
    b.bind_cpu_input("X", x)
    b.bind_cpu_input("Y", strided)
    b.bind_output("Z")
    s.run_with_iobinding(b)
    x[:] = 1
    strided[:] = 5
    s.run_with_iobinding(b)
    np.testing.assert_array_equal(b.get_outputs()[0].numpy(), np.ones((2, 3), np.float32))


def test_bind_output_preallocated_buffer(sessions):
    bufs = {id(s): np.full((2, 3), -1, np.float32) for s in sessions}

    def bind(s, b):
        z = bufs[id(s)]
        b.bind_cpu_input("X", X)
        b.bind_cpu_input("Y", Y)
        b.bind_output("Z", "cpu", 0, np.float32, list(z.shape), z.ctypes.data)
    ref, got, b = both(sessions, bind)
    assert_same(ref, got)
    z = bufs[id(sessions[1])]
    np.testing.assert_array_equal(z, X + Y)
    assert b.get_outputs()[0].data_ptr() == z.ctypes.data
    with pytest.raises(ValueError, match="`element_type` and `shape` are to be provided"):
        b.bind_output("Z", "cpu", 0, None, None, z.ctypes.data)


def test_bind_ortvalue_input_and_output(sessions):
    vals = {}

    def bind(s, b):
        mod = onnxc if isinstance(s, onnxc.InferenceSession) else ort
        out = mod.OrtValue.ortvalue_from_shape_and_type([2, 3], np.float32)
        vals[id(s)] = out
        b.bind_ortvalue_input("X", mod.OrtValue.ortvalue_from_numpy(X))
        b.bind_ortvalue_input("Y", mod.OrtValue.ortvalue_from_numpy(Y))
        b.bind_ortvalue_output("W", out)
    ref, got, b = both(sessions, bind)
    assert_same(ref, got)
    out = vals[id(sessions[1])]
    np.testing.assert_array_equal(out.numpy(), X * Y)
    assert b.get_outputs()[0].data_ptr() == out.data_ptr()
    with pytest.raises(TypeError):
        b.bind_ortvalue_input("X", X)


def test_device_bound_output_reuses_its_buffer_while_the_shape_holds(sessions):
    s = sessions[1]
    b = s.io_binding()
    b.bind_cpu_input("X", X)
    b.bind_cpu_input("Y", Y)
    b.bind_output("Z")
    s.run_with_iobinding(b)
    first = b.get_outputs()[0]
    s.run_with_iobinding(b)
    assert b.get_outputs()[0].data_ptr() == first.data_ptr()      # as onnxruntime does
    x3 = np.ones((3, 3), np.float32)
    b.bind_cpu_input("X", x3)
    b.bind_cpu_input("Y", x3)
    s.run_with_iobinding(b)                                        # onnxruntime fails here; we reallocate
    np.testing.assert_array_equal(b.get_outputs()[0].numpy(), x3 * 2)
    np.testing.assert_array_equal(first.numpy(), X + Y)


def test_clear_bindings(sessions):
    s = sessions[1]
    b = s.io_binding()
    b.bind_cpu_input("X", X)
    b.bind_cpu_input("Y", Y)
    b.bind_output("Z")
    s.run_with_iobinding(b)
    b.clear_binding_outputs()
    assert b.get_outputs() == []
    b.bind_output("W")
    s.run_with_iobinding(b)
    np.testing.assert_array_equal(b.get_outputs()[0].numpy(), X * Y)
    b.clear_binding_inputs()
    with pytest.raises(RuntimeError, match="Missing Input: X, Y"):
        s.run_with_iobinding(b)


def _error_pair(sessions, bind):
    errs = []
    for s in sessions:
        b = s.io_binding()
        with pytest.raises(Exception) as e:
            bind(s, b)
            s.run_with_iobinding(b)
        errs.append(e.value)
    return errs


ERROR_BINDINGS = {
    "no_outputs": lambda s, b: (b.bind_cpu_input("X", X), b.bind_cpu_input("Y", Y)),
    "input_type": lambda s, b: (b.bind_cpu_input("X", X.astype(np.float64)), b.bind_cpu_input("Y", Y),
                                b.bind_output("Z")),
    "input_type_ptr": lambda s, b: (b.bind_input("X", "cpu", 0, np.int32, [2, 3], X.ctypes.data),
                                    b.bind_cpu_input("Y", Y), b.bind_output("Z")),
    "input_rank": lambda s, b: (b.bind_cpu_input("X", X[0]), b.bind_cpu_input("Y", Y), b.bind_output("Z")),
    "input_dims": lambda s, b: (b.bind_input("X", "cpu", 0, np.float32, [1, 4], X.ctypes.data),
                                b.bind_cpu_input("Y", Y), b.bind_output("Z")),
    "unknown_output": lambda s, b: (b.bind_cpu_input("X", X), b.bind_cpu_input("Y", Y), b.bind_output("Q")),
    "unknown_input": lambda s, b: b.bind_cpu_input("Q", X),
    "unknown_input_ptr": lambda s, b: b.bind_input("Q", "cpu", 0, np.float32, [2, 3], X.ctypes.data),
    "list_input": lambda s, b: b.bind_cpu_input("X", [[1.0, 2.0, 3.0]]),
    "output_type": lambda s, b: (b.bind_cpu_input("X", X), b.bind_cpu_input("Y", Y),
                                 b.bind_output("Z", "cpu", 0, np.float64, [2, 3], np.empty((2, 3)).ctypes.data)),
    "bad_device": lambda s, b: b.bind_output("Z", "tpu", 0),
}
SAME_TEXT = {"no_outputs", "input_type", "input_type_ptr", "input_rank", "input_dims", "unknown_output",
             "unknown_input", "unknown_input_ptr", "list_input", "output_type", "bad_device"}


@pytest.mark.parametrize("case", sorted(ERROR_BINDINGS))
def test_binding_errors_like_onnxruntime(sessions, case):
    theirs, ours = _error_pair(sessions, ERROR_BINDINGS[case])
    assert isinstance(ours, onnxc.Error)
    assert isinstance(ours, type(theirs)) or type(theirs) is Exception, (ours, theirs)
    if case in SAME_TEXT:
        assert str(ours) == str(theirs)


def test_output_shape_mismatch_and_foreign_binding(sessions):
    s = sessions[1]
    b = s.io_binding()
    b.bind_cpu_input("X", X)
    b.bind_cpu_input("Y", Y)
    b.bind_ortvalue_output("Z", onnxc.OrtValue.ortvalue_from_shape_and_type([3, 3], np.float32))
    with pytest.raises(RuntimeError, match=r"output 'Z' has shape \{3,3\} but the computed output shape "
                                           r"for this run is \{2,3\}"):
        s.run_with_iobinding(b)
    other = onnxc.InferenceSession(two_output_model().SerializeToString())
    with pytest.raises(ValueError, match="IOBinding must be used with the session that created it."):
        other.run_with_iobinding(b)


def test_symbolic_batches_through_one_binding(sessions):
    s = sessions[1]
    b = s.io_binding()
    b.bind_output("Z")
    for n in (1, 5, 0, 3):
        x = np.arange(3 * n, dtype=np.float32).reshape(n, 3)
        b.bind_cpu_input("X", x)
        b.bind_cpu_input("Y", x)
        s.run_with_iobinding(b)
        np.testing.assert_array_equal(b.get_outputs()[0].numpy(), x * 2)
    b.bind_cpu_input("Y", np.ones((2, 3), np.float32))
    with pytest.raises(RuntimeError, match="inconsistent values for the symbolic dimension 'N'"):
        s.run_with_iobinding(b)


def test_run_with_ort_values(sessions):
    s_ort, s = sessions
    ref = s_ort.run_with_ort_values(None, {"X": ort.OrtValue.ortvalue_from_numpy(X),
                                           "Y": ort.OrtValue.ortvalue_from_numpy(Y)})
    got = s.run_with_ort_values(None, {"X": onnxc.OrtValue.ortvalue_from_numpy(X),
                                       "Y": onnxc.OrtValue.ortvalue_from_numpy(Y)})
    assert all(isinstance(v, onnxc.OrtValue) for v in got)
    assert_same([v.numpy() for v in ref], [v.numpy() for v in got])
    assert [v.data_type() for v in ref] == [v.data_type() for v in got]
    w = s.run_with_ort_values(["W"], {"X": onnxc.OrtValue.ortvalue_from_numpy(X), "Y": Y})
    np.testing.assert_array_equal(w[0].numpy(), X * Y)
    with pytest.raises(onnxc.InvalidArgument, match="Invalid output name:Q"):
        s.run_with_ort_values(["Q"], {"X": X, "Y": Y})
    with pytest.raises(onnxc.InvalidArgument, match=r"Unexpected input data type. Actual: \(tensor\(double\)\)"):
        s.run_with_ort_values(None, {"X": onnxc.OrtValue.ortvalue_from_numpy(X.astype(np.float64)), "Y": Y})


def test_run_takes_ortvalues_without_copies(sessions):
    s = sessions[1]
    got = s.run(None, {"X": onnxc.OrtValue.ortvalue_from_numpy(X), "Y": Y})
    np.testing.assert_array_equal(got[0], X + Y)
    raw = np.array(Y)
    v = onnxc.OrtValue._from_address(raw.ctypes.data, onnxc.OrtValue.ortvalue_from_numpy(raw)._etype, [2, 3],
                                     onnxc.OrtDevice.make("cpu", 0))
    np.testing.assert_array_equal(s.run(["W"], {"X": X, "Y": v})[0], X * Y)


def test_session_create_ortvalue(sessions):
    v = sessions[1].create_ortvalue_from_shape_and_type([2, 3], np.float32, "cpu")
    assert v.shape() == [2, 3] and v.data_type() == "tensor(float)"


def test_rebinding_after_a_run_takes_effect(sessions):
    """Runs after the first reuse the checked arguments; any bind/clear must be seen."""
    s = sessions[1]
    b = s.io_binding()
    xv = onnxc.OrtValue.ortvalue_from_numpy(X.copy())
    b.bind_ortvalue_input("X", xv)
    b.bind_cpu_input("Y", Y)
    out1 = onnxc.OrtValue.ortvalue_from_shape_and_type([2, 3], np.float32)
    b.bind_ortvalue_output("Z", out1)
    s.run_with_iobinding(b)
    s.run_with_iobinding(b)
    np.testing.assert_array_equal(out1.numpy(), X + Y)
    xv.update_inplace(np.ones((2, 3), np.float32))          # same memory, new contents
    s.run_with_iobinding(b)
    np.testing.assert_array_equal(out1.numpy(), 1 + Y)
    out2 = onnxc.OrtValue.ortvalue_from_shape_and_type([2, 3], np.float32)
    b.bind_ortvalue_output("Z", out2)                       # a new output buffer
    b.bind_cpu_input("Y", np.zeros((2, 3), np.float32))     # and a new input
    s.run_with_iobinding(b)
    np.testing.assert_array_equal(out2.numpy(), np.ones((2, 3), np.float32))
    np.testing.assert_array_equal(out1.numpy(), 1 + Y)
    assert b.get_outputs()[0].data_ptr() == out2.data_ptr()
    b.bind_output("W")
    s.run_with_iobinding(b)
    assert [v.data_ptr() == out2.data_ptr() for v in b.get_outputs()] == [True, False]
    np.testing.assert_array_equal(b.get_outputs()[1].numpy(), np.zeros((2, 3), np.float32))
    b.clear_binding_inputs()
    with pytest.raises(RuntimeError, match="Missing Input"):
        s.run_with_iobinding(b)
