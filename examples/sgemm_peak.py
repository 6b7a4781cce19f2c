"""SGEMM against this core's measured FMA peak (issue 5's "1024^3 at one thread >= 85% of peak").

    python examples/sgemm_peak.py [--size 1024] [--threads 1] [--repeat 7]

The peak: a C loop of independent FMA chains (16; 12 below AVX-512, which has 16 vector registers)
on the widest vectors the compiler targets with -march=native (GCC vector extensions: 16 floats with
AVX-512, 8 with AVX2), compiled here, best of --repeat runs. The SGEMM: a MatMul model (both operands inputs, so nothing is packed ahead) built by
onnxc and timed through InferenceSession.run (median of the best round), FLOPs = 2 M N K. Both
run in this process's CPU, one after the other; run it on a quiet machine (or with `nice -n -19`).
"""
from __future__ import annotations

import argparse
import ctypes
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))   # onnxc from this checkout

PEAK_C = r"""
#include <stdint.h>
#if defined(__AVX512F__)
#define VL 16
#define CHAINS 16
#elif defined(__AVX__)
#define VL 8
#define CHAINS 12   /* 16 registers: 16 chains + b + c spilled one chain to memory every step */
#else
#define VL 4
#define CHAINS 12
#endif
typedef float vf __attribute__((vector_size(VL * 4)));
int vector_floats(void) { return VL; }
int chains(void) { return CHAINS; }
/* CHAINS independent chains of n FMAs each; returns a value so nothing is optimised away */
float fma_chains(int64_t n)
{
    vf a[CHAINS], b, c;
    for (int i = 0; i < VL; ++i) { b[i] = 1.0000001f; c[i] = 1e-7f; }
    for (int j = 0; j < CHAINS; ++j) for (int i = 0; i < VL; ++i) a[j][i] = (float)j;
    for (int64_t k = 0; k < n; ++k) {
#pragma GCC unroll 16
        for (int j = 0; j < CHAINS; ++j) a[j] = a[j] * b + c;
    }
    float s = 0;
    for (int j = 0; j < CHAINS; ++j) for (int i = 0; i < VL; ++i) s += a[j][i];
    return s;
}
"""


def fma_peak(repeat: int) -> tuple[float, int]:
    """(GFLOP/s of one core, vector width in floats)."""
    from onnxc import build
    cc = build.find_compiler()
    with tempfile.TemporaryDirectory() as d:
        src, so = Path(d) / "peak.c", Path(d) / "peak.so"
        src.write_text(PEAK_C)
        subprocess.run([cc, "-O2", "-march=native", "-ffp-contract=fast", "-shared", "-fPIC", str(src), "-o", str(so)],
                       check=True)
        lib = ctypes.CDLL(str(so))
        lib.fma_chains.restype = ctypes.c_float
        lib.fma_chains.argtypes = [ctypes.c_int64]
        vl = lib.vector_floats()
        n = 20_000_000
        best = min(_timed(lambda: lib.fma_chains(n)) for _ in range(repeat))
    return n * lib.chains() * vl * 2 / best / 1e9, vl


def _timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def sgemm(size: int, threads: int, repeat: int) -> float:
    """Seconds per size^3 product through InferenceSession.run (median of the best round)."""
    import onnx
    from onnx import TensorProto, helper

    import onnxc
    a = helper.make_tensor_value_info("A", TensorProto.FLOAT, [size, size])
    b = helper.make_tensor_value_info("B", TensorProto.FLOAT, [size, size])
    c = helper.make_tensor_value_info("C", TensorProto.FLOAT, [size, size])
    g = helper.make_graph([helper.make_node("MatMul", ["A", "B"], ["C"])], "sgemm", [a, b], [c])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(m)
    so = onnxc.SessionOptions()
    so.intra_op_num_threads = threads
    sess = onnxc.InferenceSession(m.SerializeToString(), so)
    rng = np.random.default_rng(0)
    feed = {"A": rng.standard_normal((size, size), np.float32), "B": rng.standard_normal((size, size), np.float32)}
    got = sess.run(None, feed)[0]
    np.testing.assert_allclose(got, feed["A"].astype(np.float64) @ feed["B"], rtol=1e-3, atol=1e-3)
    calls = max(3, int(0.5 / max(_timed(lambda: sess.run(None, feed)), 1e-6)))
    return min(float(np.median([_timed(lambda: sess.run(None, feed)) for _ in range(calls)]))
               for _ in range(repeat))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    peak, vl = fma_peak(args.repeat)
    t = sgemm(args.size, args.threads, args.repeat)
    gflops = 2 * args.size ** 3 / t / 1e9
    print(f"FMA peak, one core ({vl}-float vectors): {peak:.1f} GFLOP/s")
    print(f"SGEMM {args.size}^3 through InferenceSession.run, {args.threads} thread(s): {t * 1e3:.2f} ms = "
          f"{gflops:.1f} GFLOP/s = {100 * gflops / (peak * args.threads):.1f}% of {args.threads} x peak")


if __name__ == "__main__":
    main()
