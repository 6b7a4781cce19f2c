#!/usr/bin/env python3
"""onnxruntime's Python tutorial, run with onnxc: only the import line differs.

    import onnxruntime as rt   ->   import onnxc as rt

Follows https://onnxruntime.ai/docs/api/python/api_summary.html: a session, inputs and outputs,
run(None, feed) and run([name], feed), OrtValue, and every IOBinding form on the CPU.
"""
from __future__ import annotations

import os
import sys

import numpy as np

import onnxc as rt

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL = os.path.join(HERE, "tiny_cnn.onnx")


def main() -> int:
    sess = rt.InferenceSession(MODEL, providers=rt.get_available_providers())
    print("device:", rt.get_device(), "providers:", sess.get_providers())
    input_name = sess.get_inputs()[0].name
    label_name = sess.get_outputs()[0].name
    print("input:", sess.get_inputs()[0], "output:", sess.get_outputs()[0])

    X = np.random.default_rng(0).standard_normal((3, 1, 28, 28)).astype(np.float32)
    pred = sess.run([label_name], {input_name: X})[0]
    print("run([name], feed):", pred.shape, pred.argmax(axis=1))
    everything = sess.run(None, {input_name: X})
    assert np.array_equal(everything[0], pred)

    # OrtValue: a tensor the session can read without a copy
    x_ortvalue = rt.OrtValue.ortvalue_from_numpy(X, "cpu", 0)
    print("OrtValue:", x_ortvalue.device_name(), x_ortvalue.shape(), x_ortvalue.data_type(),
          x_ortvalue.is_tensor())
    assert np.array_equal(sess.run(None, {input_name: x_ortvalue})[0], pred)

    # IOBinding 1: numpy input, output allocated by the session
    io_binding = sess.io_binding()
    io_binding.bind_cpu_input(input_name, X)
    io_binding.bind_output(label_name)
    sess.run_with_iobinding(io_binding)
    Y = io_binding.copy_outputs_to_cpu()[0]
    assert np.array_equal(Y, pred)

    # IOBinding 2: OrtValue input, output in the session's OrtValue
    io_binding = sess.io_binding()
    io_binding.bind_input(name=input_name, device_type=x_ortvalue.device_name(), device_id=0,
                          element_type=np.float32, shape=x_ortvalue.shape(),
                          buffer_ptr=x_ortvalue.data_ptr())
    io_binding.bind_output(label_name, "cpu")
    sess.run_with_iobinding(io_binding)
    assert np.array_equal(io_binding.get_outputs()[0].numpy(), pred)

    # IOBinding 3: a preallocated output buffer, written in place
    y_ortvalue = rt.OrtValue.ortvalue_from_shape_and_type(list(pred.shape), np.float32, "cpu", 0)
    io_binding = sess.io_binding()
    io_binding.bind_ortvalue_input(input_name, x_ortvalue)
    io_binding.bind_output(name=label_name, device_type=y_ortvalue.device_name(), device_id=0,
                           element_type=np.float32, shape=y_ortvalue.shape(),
                           buffer_ptr=y_ortvalue.data_ptr())
    sess.run_with_iobinding(io_binding)
    assert np.array_equal(y_ortvalue.numpy(), pred)

    # IOBinding 4: OrtValues on both sides
    io_binding = sess.io_binding()
    io_binding.bind_ortvalue_input(input_name, x_ortvalue)
    io_binding.bind_ortvalue_output(label_name, y_ortvalue)
    sess.run_with_iobinding(io_binding)
    assert np.array_equal(y_ortvalue.numpy(), pred)
    io_binding.clear_binding_inputs()
    io_binding.clear_binding_outputs()

    print(f"the onnxruntime tutorial flow ran with `import {rt.__name__} as rt`")
    return 0


if __name__ == "__main__":
    sys.exit(main())
