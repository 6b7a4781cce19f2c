"""How fast can the `mlp` benchmark model run on this machine at all? (issue 5's targets for mlp)

    python examples/roofline_mlp.py --model /tmp/models/mlp.onnx [--repeat 7]

Two floors no implementation gets under, measured here, then onnxruntime's time (if installed) and
the best ratio onnxruntime / X that any X could reach:
- batch 1 reads each weight once per call (784x512 + 512x512 + 512x10 floats, 2.67 MB): the time of a
  plain streaming read of that many bytes (a C loop of vector loads and adds, best of many passes timed
  in C; with 2 threads, each reads half, then a barrier);
  onnxc reads fewer: a batch-1 layer skips the weight rows of its input's zeros (the Relu'd
  activations; onnxc_gemv.h), so the floor of that is the same read of the bytes it needs for
  standard-normal inputs (mean over 16; the last layer's rows padded to 16 floats);
- batch 32 does 2 x 32 x 668,672 multiply-adds: that many FLOPs at the FMA peak of
  examples/sgemm_peak.py (16 independent FMA chains), times the thread count.
Run it on a quiet machine (`nice -n -19`): floors are bests, onnxruntime's time a median.
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sgemm_peak import fma_peak  # noqa: E402

STREAM_C = r"""
#include <omp.h>
#include <stdint.h>
#if defined(__AVX512F__)
#define VL 16
#elif defined(__AVX__)
#define VL 8
#else
#define VL 4
#endif
typedef float vf __attribute__((vector_size(VL * 4)));
/* sum of n floats (n a multiple of 8 VL) in 8 chains of vector adds: one streaming read */
static float sum_part(const float *p, int64_t n)
{
    vf s[8] = {{0}};
    for (int64_t i = 0; i < n; i += 8 * VL)
        for (int j = 0; j < 8; ++j) s[j] += *(const vf *)(p + i + j * VL);
    /* the chains' vectors summed first: 128 dependent scalar adds took ~0.12 us a pass, half
     * a microsecond-long read's margin */
    const vf v = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
    float t = 0;
    for (int i = 0; i < VL; ++i) t += v[i];
    return t;
}
/* best seconds of one of `passes` streaming reads of p[0, n), split over `threads`, each read
 * ending at a barrier; timed in C (a Python-level call costs about a microsecond) over groups of
 * `group` reads (the clock's and the barrier's own cost spread over them) */
volatile float sink;
double stream_best(const float *p, int64_t n, int threads, int passes, int group)
{
    double best = 1e9;
#pragma omp parallel num_threads(threads)
    for (int r = 0; r < passes; r += group) {
        double t0 = 0;
#pragma omp barrier
#pragma omp master
        t0 = omp_get_wtime();
        const int k = omp_get_thread_num();
        float t = 0;
        for (int g = 0; g < group; ++g) {
            t += sum_part(p + n / threads * k, n / threads);
            if (threads > 1) {
#pragma omp barrier
            }
        }
#pragma omp atomic
        sink += t;
#pragma omp barrier
#pragma omp master
        {
            const double dt = (omp_get_wtime() - t0) / group;
            best = dt < best ? dt : best;
        }
    }
    return best;
}
"""

WEIGHT_FLOATS = 784 * 512 + 512 * 512 + 512 * 10
MACS_PER_ROW = WEIGHT_FLOATS


def stream_seconds(threads: int, repeat: int, floats: int = WEIGHT_FLOATS, passes: int = 2000) -> float:
    """Best seconds of one streaming read of `floats` floats (rounded up to whole vector groups),
    each of `threads` threads reading its share, then a barrier (examples/roofline_lstm.py: one
    recurrent step's read of R and its hand-off); the best of 16 reads in a row, so the buffer
    stays in the caches that hold it."""
    from onnxc import build
    tc = build.toolchain()
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "s.c").write_text(STREAM_C)
        so = Path(d) / "s.so"
        subprocess.run([tc.cc, "-O3", "-march=native", "-fopenmp", "-shared", "-fPIC", str(Path(d) / "s.c"), "-o",
                        str(so)], check=True)
        lib = ctypes.CDLL(str(so))
        lib.stream_best.restype = ctypes.c_double
        lib.stream_best.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int, ctypes.c_int, ctypes.c_int]
        step = 8 * 16 * threads
        n = (floats + step - 1) // step * step
        buf = np.ones(n + 16, np.float32)
        p = buf.ctypes.data + (-buf.ctypes.data) % 64
        return min(lib.stream_best(p, n, threads, passes, 16) for _ in range(repeat))


def skipping_floats(model: str, samples: int = 16) -> float:
    """Mean weight floats a batch-1 call reads when each layer skips its input's zero rows:
    all of the first layer's, then one row per nonzero activation (the model's own weights,
    standard-normal inputs)."""
    import onnx
    from onnx import numpy_helper

    m = onnx.load(model)
    w = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    layers = [(w[n.input[1]], w[n.input[2]]) for n in m.graph.node if n.op_type == "Gemm"]
    rng = np.random.default_rng(0)
    total = 0.0
    for _ in range(samples):
        a = rng.standard_normal(layers[0][0].shape[1]).astype(np.float32)
        for i, (wi, bi) in enumerate(layers):
            width = -(-wi.shape[0] // 16) * 16
            total += (wi.shape[1] if i == 0 else np.count_nonzero(a)) * width
            a = np.maximum(a @ wi.T + bi, 0)
    return total / samples


def ort_median(model: str, shape: tuple, threads: int) -> float | None:
    """onnxruntime's median seconds per run on a standard-normal input of `shape` (None: not
    installed)."""
    try:
        import onnxruntime as ort
    except ImportError:
        return None
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    s = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    name = s.get_inputs()[0].name
    x = {name: np.random.default_rng(0).standard_normal(shape).astype(np.float32)}
    for _ in range(200):
        s.run(None, x)
    ts = []
    for _ in range(max(200, int(0.5 / max(1e-6, _one(s, x))))):
        ts.append(_one(s, x))
    return float(np.median(ts))


def _one(s, x) -> float:
    t = time.perf_counter()
    s.run(None, x)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", help="mlp.onnx from ../shared/bench/make_models.py (for onnxruntime's times)")
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    peak, _ = fma_peak(args.repeat)
    print(f"weights {WEIGHT_FLOATS * 4 / 1e6:.2f} MB; FMA peak {peak:.1f} GFLOP/s per core")
    for threads in (1, 2):
        t1 = stream_seconds(threads, args.repeat)
        t32 = 2 * 32 * MACS_PER_ROW / (peak * 1e9 * threads)
        line = (f"{threads} thread(s): batch 1 floor {t1 * 1e6:.1f} us ({WEIGHT_FLOATS * 4 / t1 / 1e9:.0f} GB/s); "
                f"batch 32 floor {t32 * 1e6:.1f} us")
        if args.model:
            ts = t1 * skipping_floats(args.model) / WEIGHT_FLOATS
            line += f"; batch 1 skipping zero rows {ts * 1e6:.1f} us"
            o1, o32 = ort_median(args.model, (1, 784), threads), ort_median(args.model, (32, 784), threads)
            if o1 is not None:
                line += (f"\n    onnxruntime: batch 1 {o1 * 1e6:.1f} us, batch 32 {o32 * 1e6:.1f} us -> best reachable "
                         f"ratio: batch 1 {o1 / t1:.2f} ({o1 / ts:.2f} skipping zero rows), batch 32 {o32 / t32:.2f}")
        print(line)


if __name__ == "__main__":
    main()
