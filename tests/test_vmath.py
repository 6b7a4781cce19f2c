"""runtime_c/onnxc_vmath.h: max error in ulp against the correctly rounded result (float64
reference), special values, native (-march=native, FMA) and portable builds; and the loops
that call the functions vectorise (no libm call left in them)."""
from __future__ import annotations

import ctypes
import math
import subprocess

import numpy as np
import pytest

from onnxc import build
from onnxc.resources import runtime_dir

SRC = r"""
#include "onnxc_vmath.h"
#include <stdint.h>
void v_exp(const float *x, float *y, int64_t n) { for (int64_t i = 0; i < n; ++i) y[i] = onnxc_vexpf(x[i]); }
void v_tanh(const float *x, float *y, int64_t n) { for (int64_t i = 0; i < n; ++i) y[i] = onnxc_vtanhf(x[i]); }
void v_sig(const float *x, float *y, int64_t n) { for (int64_t i = 0; i < n; ++i) y[i] = onnxc_vsigmoidf(x[i]); }
void v_erf(const float *x, float *y, int64_t n) { for (int64_t i = 0; i < n; ++i) y[i] = onnxc_verff(x[i]); }
"""


@pytest.fixture(scope="module", params=[False, True], ids=["native", "portable"])
def lib(request, tmp_path_factory):
    d = tmp_path_factory.mktemp("vmath")
    (d / "v.c").write_text(SRC)
    tc = build.toolchain(portable=request.param)
    so = d / "v.so"
    subprocess.run([tc.cc, *tc.flags, "-shared", "-I", str(runtime_dir()), str(d / "v.c"), "-o", str(so)],
                   check=True)
    asm = subprocess.run([tc.cc, *tc.flags, "-S", "-o", "-", "-I", str(runtime_dir()), str(d / "v.c")],
                         check=True, capture_output=True, text=True).stdout
    lib = ctypes.CDLL(str(so))
    lib.asm = asm
    return lib


def run(lib, name, x):
    x = np.ascontiguousarray(x, dtype=np.float32)
    y = np.empty_like(x)
    p = ctypes.POINTER(ctypes.c_float)
    getattr(lib, name)(x.ctypes.data_as(p), y.ctypes.data_as(p), ctypes.c_int64(x.size))
    return y


def ulp_err(got: np.ndarray, ref64: np.ndarray) -> float:
    """|got - ref| in units of the float32 ulp at the reference (subnormal spacing below)."""
    with np.errstate(over="ignore"):
        ref32 = ref64.astype(np.float32)
    ulp = np.spacing(np.abs(ref32)).astype(np.float64)
    ulp = np.maximum(ulp, np.float64(np.finfo(np.float32).smallest_subnormal))
    ok = np.isfinite(ref32)
    assert np.array_equal(got[~ok], ref32[~ok]), "non-finite results differ"
    return float(np.max(np.abs(got[ok].astype(np.float64) - ref64[ok]) / ulp[ok]))


def inputs(lo, hi, n=2_000_000, seed=0):
    r = np.random.default_rng(seed)
    x = np.concatenate([r.uniform(lo, hi, n), np.linspace(lo, hi, n)]).astype(np.float32)
    return x


def _sigmoid64(x):
    x = x.astype(np.float64)
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


CASES = {  # name: (function, reference, ranges, max ulp)
    "v_exp": (np.exp, [(-104, 89), (-1, 1), (-88, -87), (-104, -87)], 1.05),
    "v_tanh": (np.tanh, [(-10, 10), (-1, 1), (-1e-3, 1e-3), (0.5, 0.7)], 1.5),
    "v_sig": (_sigmoid64, [(-110, 20), (-2, 2), (-104, -80)], 2.3),
    "v_erf": (lambda x: np.array([math.erf(v) for v in x]),
              [(-5, 5), (0.4, 0.55), (0.85, 0.9), (-1e-3, 1e-3), (3.8, 4.2), (3.91, 3.93),
               (1.5, 1.7), (-1e-30, 1e-30)], 1.8),
}


@pytest.mark.parametrize("name", list(CASES))
def test_ulp(lib, name):
    ref, ranges, tol = CASES[name]
    worst = 0.0
    for k, (lo, hi) in enumerate(ranges):
        x = inputs(lo, hi, seed=k)
        worst = max(worst, ulp_err(run(lib, name, x), ref(x.astype(np.float64))))
    print(f"{name}: {worst:.3f} ulp")
    assert worst <= tol, f"{name}: {worst:.2f} ulp"


def test_special(lib):
    inf, nan = np.inf, np.nan
    x = np.array([0.0, -0.0, inf, -inf, nan, 1e-30, -1e-30, 200, -200, 88.72, 88.73, -103.9, -104.5,
                  np.finfo(np.float32).max, -np.finfo(np.float32).max], np.float32)
    with np.errstate(over="ignore"):
        e = np.exp(x.astype(np.float64)).astype(np.float32)
    np.testing.assert_array_equal(run(lib, "v_exp", x), e)
    t = run(lib, "v_tanh", x)
    np.testing.assert_array_equal(t, np.tanh(x))
    assert np.signbit(t[1]) and not np.signbit(t[0])
    np.testing.assert_array_equal(run(lib, "v_sig", x), _sigmoid64(x).astype(np.float32))
    e = run(lib, "v_erf", x)
    np.testing.assert_array_equal(e[:5], [0.0, -0.0, 1.0, -1.0, np.nan])
    assert np.signbit(e[1]) and not np.signbit(e[0])
    np.testing.assert_array_equal(e[7:9], [1.0, -1.0])


def test_vectorised(lib):
    if "-march=native" not in " ".join(build.toolchain().flags):
        pytest.skip("no native build")
    for fn in ("expf", "tanhf", "erff"):
        assert f"call\t{fn}" not in lib.asm and f"jmp\t{fn}" not in lib.asm


def _many_checks_source(n_checks=60):
    checks = "\n".join(f"    if (idx[{i}] < -3 || idx[{i}] >= 3) return ONNXC_ERR_INDEX;" for i in range(n_checks))
    return f"""#include "onnxc_runtime.h"
#include "onnxc_vmath.h"
#undef ONNXC_HERE
#define ONNXC_HERE 7
int many_checks(const int64_t *idx, float *y, int64_t n)
{{
{checks}
    for (int64_t e = 0; e < n; ++e) {{
        const float v = y[e];
        y[e] = 0.5f * v * (1 + onnxc_verff(v * 0.70710677f));
    }}
    return 0;
}}
"""


@pytest.mark.parametrize("portable", [False, True], ids=["native", "portable"])
def test_vectorised_after_many_error_checks(tmp_path, portable):
    """A loop after many `return ONNXC_ERR_...` checks (a model's Gather index checks) stays
    vectorised: each return goes through a cold function, so GCC does not predict the code after
    fifty checks as rarely run and compile it for size (then erf's division was scalar: divss)."""
    src = tmp_path / "checks.c"
    src.write_text(_many_checks_source())
    tc = build.toolchain(portable=portable)
    asm = subprocess.run([tc.cc, *tc.flags, "-S", "-o", "-", "-I", str(runtime_dir()), str(src)],
                         check=True, capture_output=True, text=True).stdout
    assert "divps" in asm, "the erf loop after the checks was not vectorised"
    assert "call\tonnxc_verff" not in asm
