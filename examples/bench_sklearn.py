"""scikit-learn models through onnxc and onnxruntime, side by side in one process (issue 4's
benchmark): a 100-tree depth-8 random forest and an RBF SVC with probabilities, converted by
skl2onnx with its defaults (ZipMap included), one intra-op thread each, batch 1 and 1000.

    pip install scikit-learn skl2onnx onnxruntime      # then, from the repository root:
    python examples/bench_sklearn.py [--threads N] [--repeat R] [--cpu-time]

Timings are the best of R rounds; in each round both runtimes run the same number of calls back
to back, so a busy machine slows both alike. --cpu-time measures this thread's CPU time instead of
wall time (steadier on a shared machine; the same for both runtimes). Prints a markdown table.
"""
from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))   # onnxc from this checkout

warnings.filterwarnings("ignore")


def models(X, y):
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.svm import SVC
    return {
        "RandomForest (100 trees, depth 8)": RandomForestClassifier(100, max_depth=8, random_state=0).fit(X, y),
        "SVC (RBF, probability=True)": SVC(probability=True, random_state=0).fit(X[:500], y[:500]),
    }


def best_of(fns, calls: int, rounds: int, clock) -> list[float]:
    """Seconds per call of each fn: the best round, the fns interleaved within each round."""
    best = [float("inf")] * len(fns)
    for _ in range(rounds):
        for k, f in enumerate(fns):
            t = clock()
            for _ in range(calls):
                f()
            best[k] = min(best[k], (clock() - t) / calls)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1, help="intra_op_num_threads for both (default 1)")
    ap.add_argument("--repeat", type=int, default=7, help="rounds; the best is kept (default 7)")
    ap.add_argument("--cpu-time", action="store_true", help="time this thread's CPU time, not wall time")
    args = ap.parse_args()

    import onnxruntime as ort
    from skl2onnx import to_onnx
    from sklearn.datasets import make_classification

    import onnxc

    clock = time.thread_time if args.cpu_time else time.perf_counter
    X, y = make_classification(2000, 20, n_informative=10, n_classes=3, random_state=0)
    X = X.astype(np.float32)
    rows = []
    for name, m in models(X, y).items():
        onx = to_onnx(m, X[:1]).SerializeToString()
        so = ort.SessionOptions()
        so.intra_op_num_threads = args.threads
        o = ort.InferenceSession(onx, so, providers=["CPUExecutionProvider"])
        cso = onnxc.SessionOptions()
        cso.intra_op_num_threads = args.threads
        c = onnxc.InferenceSession(onx, cso)
        for b in (1, 1000):
            feed = {"X": X[:b].copy()}
            ro, rc = o.run(None, feed), c.run(None, feed)       # same labels, same probabilities
            assert (ro[0] == rc[0]).all(), f"{name}: labels differ"
            po = np.array([[d[k] for k in sorted(d)] for d in ro[1]])
            pc = np.array([[d[k] for k in sorted(d)] for d in rc[1]])
            assert np.allclose(po, pc, atol=1e-4), f"{name}: probabilities differ"
            calls = 2000 if b == 1 else 20
            to, tc = best_of([lambda: o.run(None, feed), lambda: c.run(None, feed)], calls, args.repeat, clock)
            rows.append((name, b, to, tc))
    unit = "CPU µs" if args.cpu_time else "µs"
    print(f"| model | batch | onnxruntime ({unit}) | onnxc ({unit}) | speed-up |")
    print("|---|---:|---:|---:|---:|")
    for name, b, to, tc in rows:
        print(f"| {name} | {b} | {to * 1e6:.1f} | {tc * 1e6:.1f} | {to / tc:.2f}× |")
    print(f"\n{args.threads} intra-op thread(s), best of {args.repeat} rounds, onnxruntime {ort.__version__}, "
          f"onnxc {onnxc.__version__ if hasattr(onnxc, '__version__') else ''}".rstrip())


if __name__ == "__main__":
    main()
