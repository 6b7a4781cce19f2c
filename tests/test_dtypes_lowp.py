"""runtime_c/onnxc_lowp.h conversions against ml_dtypes / onnx.numpy_helper, exhaustively over
float16 inputs, every code of the small types, and a large random float32 sample."""
import ctypes
import subprocess

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import numpy_helper

import onnxc
from onnxc import dtypes
from onnxc.resources import runtime_dir

_WRAP = r"""
#include "onnxc_lowp.h"
void f2small(const float *x, uint8_t *y, long n, int eb, int mb, int bias, int kind, int sat)
{ for (long i = 0; i < n; ++i) y[i] = onnxc_f2small(x[i], eb, mb, bias, kind, sat); }
void small2f(const uint8_t *x, float *y, long n, int eb, int mb, int bias, int kind)
{ for (long i = 0; i < n; ++i) y[i] = onnxc_small2f(x[i], eb, mb, bias, kind); }
void f2e8m0(const float *x, uint8_t *y, long n, int mode, int sat)
{ for (long i = 0; i < n; ++i) y[i] = onnxc_f2e8m0(x[i], mode, sat); }
void e8m02f(const uint8_t *x, float *y, long n)
{ for (long i = 0; i < n; ++i) y[i] = onnxc_e8m02f(x[i]); }
void ld_int(const uint8_t *x, int8_t *y, long n, int which)
{ for (long i = 0; i < n; ++i) y[i] = which == 0 ? onnxc_ld_int4(x[i]) : which == 1 ? onnxc_ld_uint4(x[i])
                                    : which == 2 ? onnxc_ld_int2(x[i]) : (int8_t)onnxc_ld_uint2(x[i]); }
"""

# name -> (ml_dtypes type, ebits, mbits, bias, kind)
SMALL = {
    "float8e4m3fn": (ml_dtypes.float8_e4m3fn, 4, 3, 7, 0),
    "float8e4m3fnuz": (ml_dtypes.float8_e4m3fnuz, 4, 3, 8, 2),
    "float8e5m2": (ml_dtypes.float8_e5m2, 5, 2, 15, 1),
    "float8e5m2fnuz": (ml_dtypes.float8_e5m2fnuz, 5, 2, 16, 2),
    "float4e2m1": (ml_dtypes.float4_e2m1fn, 2, 1, 1, 3),
}


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    d = tmp_path_factory.mktemp("lowp")
    (d / "w.c").write_text(_WRAP)
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-std=c99", "-Wall", "-Wextra", "-Werror",
                    "-I", str(runtime_dir()), str(d / "w.c"), "-o", str(d / "w.so")], check=True)
    return ctypes.CDLL(str(d / "w.so"))


def _p(a):
    return a.ctypes.data_as(ctypes.c_void_p)


def _inputs():
    h = np.arange(65536, dtype=np.uint16).view(np.float16).astype(np.float32)
    rng = np.random.default_rng(0)
    r = rng.integers(0, 2**32, 2_000_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    # values near every rounding boundary of the 8-bit types
    near = np.concatenate([np.nextafter(h, np.inf), np.nextafter(h, -np.inf)]).astype(np.float32)
    return np.ascontiguousarray(np.concatenate([h, r, near]))


def _same(got_codes, want, dt):
    g = got_codes.view(dt).astype(np.float32)
    w = want.astype(np.float32)
    bad = ~((g == w) & (np.signbit(g) == np.signbit(w)) | (np.isnan(g) & np.isnan(w)))
    return bad


@pytest.mark.parametrize("name", list(SMALL))
@pytest.mark.parametrize("sat", [1, 0])
def test_float_to_small(lib, name, sat):
    dt, eb, mb, bias, kind = SMALL[name]
    x = _inputs()
    y = np.empty(x.size, np.uint8)
    lib.f2small(_p(x), _p(y), x.size, eb, mb, bias, kind, sat)
    if sat and kind != 3:
        want = numpy_helper.saturate_cast(x, dt)
    else:
        with np.errstate(all="ignore"):
            want = x.astype(dt)
    bad = _same(y, want, dt)
    if kind == 3:       # ml_dtypes' float4 NaN result is -0 or +0 depending on the NaN's sign
        bad &= ~np.isnan(x)
    assert not bad.any(), (x[bad][:8], y[bad][:8], want[bad][:8].view(np.uint8))


@pytest.mark.parametrize("name", list(SMALL))
def test_small_to_float(lib, name):
    dt, eb, mb, bias, kind = SMALL[name]
    n = 16 if kind == 3 else 256
    c = np.arange(n, dtype=np.uint8)
    y = np.empty(n, np.float32)
    lib.small2f(_p(c), _p(y), n, eb, mb, bias, kind)
    w = c.view(dt).astype(np.float32)
    ok = (y == w) & (np.signbit(y) == np.signbit(w)) | (np.isnan(y) & np.isnan(w))
    assert ok.all(), (c[~ok], y[~ok], w[~ok])


@pytest.mark.parametrize("mode", ["up", "nearest", "down"])
@pytest.mark.parametrize("sat", [True, False])
def test_e8m0(lib, mode, sat):
    x = _inputs()
    y = np.empty(x.size, np.uint8)
    lib.f2e8m0(_p(x), _p(y), x.size, ["up", "nearest", "down"].index(mode), int(sat))
    want = numpy_helper.to_float8e8m0(x, sat, mode).view(np.uint8)
    assert (y == want).all()
    c = np.arange(256, dtype=np.uint8)
    f = np.empty(256, np.float32)
    lib.e8m02f(_p(c), _p(f), 256)
    w = c.view(ml_dtypes.float8_e8m0fnu).astype(np.float32)
    assert ((f == w) | (np.isnan(f) & np.isnan(w))).all()


@pytest.mark.parametrize("which,dt", enumerate([ml_dtypes.int4, ml_dtypes.uint4, ml_dtypes.int2, ml_dtypes.uint2]))
def test_subbyte_int_load(lib, which, dt):
    bits = 4 if which < 2 else 2
    c = np.arange(1 << bits, dtype=np.uint8)
    y = np.empty(c.size, np.int8)
    lib.ld_int(_p(c), _p(y), c.size, which)
    assert (y == c.view(dt).astype(np.int8)).all()


def test_table():
    for name, code in [("float8e4m3fn", onnx.TensorProto.FLOAT8E4M3FN), ("int4", onnx.TensorProto.INT4),
                       ("uint2", onnx.TensorProto.UINT2), ("float8e8m0", onnx.TensorProto.FLOAT8E8M0)]:
        et = dtypes.from_onnx(code)
        assert et.name == name and et.c == "uint8_t" and et.itemsize == 1 and et in dtypes.LOWP
        assert dtypes.from_numpy(et.np) is et


def test_subbyte_initializer_identity():
    """A packed int4 initializer loads unpacked (one per byte) and comes back through a graph output."""
    from onnx import helper
    a = np.array([[-8, -1, 0, 7, 3]], ml_dtypes.int4)
    t = numpy_helper.from_array(a, "w")
    x = helper.make_tensor_value_info("x", onnx.TensorProto.INT4, [1, 5])
    g = helper.make_graph([helper.make_node("Cast", ["w"], ["y"], to=onnx.TensorProto.INT8),
                           helper.make_node("Cast", ["x"], ["z"], to=onnx.TensorProto.FLOAT)], "g", [x],
                          [helper.make_tensor_value_info("y", onnx.TensorProto.INT8, [1, 5]),
                           helper.make_tensor_value_info("z", onnx.TensorProto.FLOAT, [1, 5])], [t])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    y, z = onnxc.InferenceSession(m.SerializeToString()).run(None, {"x": a})
    assert y.tolist() == [[-8, -1, 0, 7, 3]] and z.tolist() == [[-8, -1, 0, 7, 3]]
