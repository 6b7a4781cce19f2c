"""How fast can the `lstm` benchmark model run on this machine at all? (issue 5's lstm target)

    python examples/roofline_lstm.py --model /tmp/models/lstm.onnx [--repeat 7]

Each step of a batch-1 LSTM multiplies h by R (4H x H floats, 256 KB for H = 128): every element of R
is read once per step, and step t needs step t-1's h, so no two steps share a read. R is larger
than the core's L1, so the floor of the recurrence is T times one streaming read of R from L2 (a C
loop of vector loads and adds over an L2-resident buffer, best of many passes, timed in C; with 2
threads each reads half, then a barrier: the step's hand-off). The product X W^T (2 T 4H IN
FLOPs) adds its time at the FMA peak (examples/sgemm_peak.py) where it runs apart from the steps.
Then onnxruntime's median (if installed) and the best ratio onnxruntime / X any X could reach.
Run it on a quiet machine (`nice -n -19`): floors are bests, onnxruntime's time a median.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import onnx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from roofline_mlp import ort_median, stream_seconds  # noqa: E402
from sgemm_peak import fma_peak  # noqa: E402


def lstm_shape(model: onnx.ModelProto) -> tuple[int, int, int, int]:
    """(T, batch, input size, hidden size) of the model's one LSTM node, its input the model's
    (static dims, layout 0: sequence first)."""
    node = next(n for n in model.graph.node if n.op_type == "LSTM")
    hidden = next(a.i for a in node.attribute if a.name == "hidden_size")
    t, b, inp = (d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim)
    return t, b, inp, hidden


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="lstm.onnx from ../shared/bench/make_models.py")
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    t, b, inp, h = lstm_shape(onnx.load(args.model))
    peak, _ = fma_peak(args.repeat)
    r_floats = 4 * h * h
    xw_flops = 2 * t * b * 4 * h * inp
    print(f"T {t}, batch {b}, input {inp}, hidden {h}: R {r_floats * 4 / 1024:.0f} KB per step; "
          f"X W^T {xw_flops / 1e6:.1f} MFLOP; FMA peak {peak:.1f} GFLOP/s per core")
    for threads in (1, 2):
        step = stream_seconds(threads, args.repeat, r_floats, passes=20000)
        rec, xw = t * step, xw_flops / (peak * 1e9 * threads)
        line = (f"{threads} thread(s): one step's read of R {step * 1e6:.2f} us ({r_floats * 4 / step / 1e9:.0f} GB/s); "
                f"recurrence floor {rec * 1e6:.1f} us, with X W^T at the peak {(rec + xw) * 1e6:.1f} us")
        o = ort_median(args.model, (t, b, inp), threads)
        if o is not None:
            line += (f"\n    onnxruntime {o * 1e6:.1f} us -> best reachable ratio {o / rec:.2f} "
                     f"({o / (rec + xw):.2f} with X W^T apart)")
        print(line)


if __name__ == "__main__":
    main()
