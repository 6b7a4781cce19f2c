#!/usr/bin/env python3
"""Write examples/tiny_cnn.onnx: a small image classifier with fixed-seed weights.

    image [batch, 1, 28, 28] -> Conv 3x3 (8) -> BatchNormalization -> Relu -> MaxPool 2
      -> Conv 3x3 (16) -> Relu -> MaxPool 2 -> GlobalAveragePool -> Flatten -> Gemm (10)
      -> Softmax -> probabilities [batch, 10]

`batch` is a symbolic dimension: one compiled library serves every batch size.
Deterministic: the same onnx version writes the same bytes.
"""
from __future__ import annotations

import argparse
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_OUT = os.path.join(HERE, "tiny_cnn.onnx")


def make_model(seed: int = 0) -> onnx.ModelProto:
    rng = np.random.default_rng(seed)

    def w(name, *shape, scale=None):
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else shape[0]
        s = scale if scale is not None else np.sqrt(2.0 / fan_in)
        return numpy_helper.from_array((rng.standard_normal(shape) * s).astype(np.float32), name)

    inits = [
        w("conv1.weight", 8, 1, 3, 3), w("conv1.bias", 8, scale=0.1),
        numpy_helper.from_array((1 + 0.1 * rng.standard_normal(8)).astype(np.float32), "bn1.scale"),
        numpy_helper.from_array((0.1 * rng.standard_normal(8)).astype(np.float32), "bn1.bias"),
        numpy_helper.from_array((0.1 * rng.standard_normal(8)).astype(np.float32), "bn1.mean"),
        numpy_helper.from_array((1 + 0.1 * rng.random(8)).astype(np.float32), "bn1.var"),
        w("conv2.weight", 16, 8, 3, 3), w("conv2.bias", 16, scale=0.1),
        w("fc.weight", 10, 16), w("fc.bias", 10, scale=0.1),
    ]
    nodes = [
        helper.make_node("Conv", ["image", "conv1.weight", "conv1.bias"], ["c1"], name="conv1",
                         kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c1", "bn1.scale", "bn1.bias", "bn1.mean", "bn1.var"],
                         ["b1"], name="bn1", epsilon=1e-5),
        helper.make_node("Relu", ["b1"], ["r1"], name="relu1"),
        helper.make_node("MaxPool", ["r1"], ["p1"], name="pool1", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "conv2.weight", "conv2.bias"], ["c2"], name="conv2",
                         kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
        helper.make_node("MaxPool", ["r2"], ["p2"], name="pool2", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("GlobalAveragePool", ["p2"], ["g"], name="gap"),
        helper.make_node("Flatten", ["g"], ["f"], name="flatten", axis=1),
        helper.make_node("Gemm", ["f", "fc.weight", "fc.bias"], ["logits"], name="fc", transB=1),
        helper.make_node("Softmax", ["logits"], ["probabilities"], name="softmax", axis=-1),
    ]
    graph = helper.make_graph(
        nodes, "tiny_cnn",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["batch", 1, 28, 28])],
        [helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, ["batch", 10])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8,
                              producer_name="onnxc-examples", producer_version="1")
    model.doc_string = "A tiny CNN with random weights, bundled with onnxc as an example."
    onnx.checker.check_model(model, full_check=True)
    return model


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--out", default=DEFAULT_OUT)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    data = make_model(args.seed).SerializeToString(deterministic=True)
    with open(args.out, "wb") as f:
        f.write(data)
    print(f"wrote {args.out} ({len(data)} bytes)")


if __name__ == "__main__":
    main()
