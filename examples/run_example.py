#!/usr/bin/env python3
"""The main job end to end on the bundled example model:

    1. build examples/tiny_cnn.onnx into a shared library (the same as `onnxc build ... -o LIB`),
    2. load the library alone with onnxc.InferenceSession (no .onnx needed),
    3. run it on a fixed input and print its outputs next to onnx.reference.ReferenceEvaluator's
       (and onnxruntime's, when installed), with the largest absolute difference.

Usage:  python examples/run_example.py [--model M.onnx] [--lib LIB.so] [--batch N]
Exits with status 1 if onnxc's outputs differ from the reference by more than the tolerance.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile

import numpy as np
import onnx
from onnx.reference import ReferenceEvaluator

import onnxc
from onnxc import cli

HERE = os.path.dirname(os.path.abspath(__file__))


def main() -> int:
    ap = argparse.ArgumentParser(description="build, load and run the bundled example model")
    ap.add_argument("--model", default=os.path.join(HERE, "tiny_cnn.onnx"))
    ap.add_argument("--lib", help="library to write (default: a temporary file)")
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--rtol", type=float, default=1e-4)
    ap.add_argument("--atol", type=float, default=1e-5)
    args = ap.parse_args()
    if not os.path.exists(args.model) and args.model == os.path.join(HERE, "tiny_cnn.onnx"):
        from make_example_model import DEFAULT_OUT, make_model
        onnx.save(make_model(), DEFAULT_OUT)

    with tempfile.TemporaryDirectory() as tmp:
        lib = args.lib or os.path.join(tmp, "libtiny_cnn.so")
        print(f"$ onnxc build {os.path.relpath(args.model)} -o {lib}")
        if cli.main(["build", args.model, "-o", lib]) != 0:
            return 1

        sess = onnxc.InferenceSession(lib)          # the library alone: no .onnx needed
        model = onnx.load(args.model)
        feed = {}
        rng = np.random.default_rng(0)
        for arg in sess.get_inputs():
            shape = [args.batch if not isinstance(d, int) else d for d in arg.shape]
            feed[arg.name] = rng.standard_normal(shape).astype(np.float32)
            print(f"input  {arg.name}: {arg.type} {arg.shape} fed with {shape}")
        names = [o.name for o in sess.get_outputs()]
        results = {"onnxc": sess.run(None, feed),
                   "reference": ReferenceEvaluator(model).run(None, feed)}
        try:
            import onnxruntime
            ort = onnxruntime.InferenceSession(args.model, providers=["CPUExecutionProvider"])
            results["onnxruntime"] = ort.run(None, feed)
        except ImportError:
            pass

    ok = True
    np.set_printoptions(precision=6, suppress=True, linewidth=120)
    for j, name in enumerate(names):
        print(f"\noutput {name}:")
        for who, outs in results.items():
            print(f"  {who:>11}: {np.array2string(np.asarray(outs[j])[0], prefix=' ' * 15)}  (row 0)")
        mine = results["onnxc"][j]
        for who, outs in results.items():
            if who == "onnxc":
                continue
            ref = np.asarray(outs[j])
            diff = float(np.max(np.abs(mine - ref))) if mine.size else 0.0
            close = mine.shape == ref.shape and np.allclose(mine, ref, rtol=args.rtol, atol=args.atol)
            ok &= close
            print(f"  max |onnxc - {who}| = {diff:.3g}  {'OK' if close else 'MISMATCH'}")
    print("\nall outputs match" if ok else "\noutputs differ beyond rtol/atol")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
