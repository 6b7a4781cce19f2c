"""Slice, Split, Pad, Tile, Expand, DepthToSpace, SpaceToDepth against onnx.reference."""
import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto, helper

import onnxc
from test_ops_gather import check, data, op_model, rng

BIG = 1 << 62
I64 = np.int64


def a64(v):
    return np.array(v, I64)


# ---- Slice ----------------------------------------------------------------------------------
SLICES = [
    ([0], [2], [0], None),
    ([1, -3], [BIG, -1], [1, 2], None),
    ([-100], [100], [2], None),
    ([3], [-BIG], [1], [-1]),                 # negative step, clamped end
    ([-1, BIG], [-BIG, 0], [2, 0], [-2, -1]),
    ([1, 0, 0], [3, 4, 5], [0, 1, 2], [1, 2, 3]),
    ([5], [1], [1], [1]),                     # empty
    ([0], [3], [-1], None),
]


@pytest.mark.parametrize("starts,ends,axes,steps", SLICES)
def test_slice(starts, ends, axes, steps):
    x = data((4, 5, 6))
    inits = {"s": a64(starts), "e": a64(ends), "a": a64(axes)}
    if steps is not None:
        inits["t"] = a64(steps)
    check(op_model("Slice", {"x": x}, inits), {"x": x})


@pytest.mark.parametrize("opset", [1, 10, 13])
def test_slice_opsets(opset):
    x = data((3, 4))
    if opset == 1:
        m = op_model("Slice", {"x": x}, attrs={"starts": [1, -3], "ends": [BIG, 3], "axes": [0, 1]}, opset=1)
    else:
        m = op_model("Slice", {"x": x}, {"s": a64([1]), "e": a64([-1])}, opset=opset)
    check(m, {"x": x})


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16, np.bool_, np.int8, np.uint64])
def test_slice_dtypes(dtype):
    x = data((4, 6), dtype)
    check(op_model("Slice", {"x": x}, {"s": a64([1, 5]), "e": a64([4, 0]), "a": a64([0, 1]), "t": a64([2, -2])}),
          {"x": x})


def test_slice_symbolic_batch():
    x = data((3, 6))
    m = op_model("Slice", {"x": x}, {"s": a64([1, 2]), "e": a64([BIG, 5]), "a": a64([0, 1])},
                 shapes={"x": ["N", 6]})
    check(m, {"x": x}, symbolic=True, more=[{"x": data((1, 6))}, {"x": data((7, 6))}, {"x": data((0, 6))}])


def test_slice_symbolic_bounded():
    x = data((5, 2))
    m = op_model("Slice", {"x": x}, {"s": a64([1]), "e": a64([4]), "a": a64([0]), "t": a64([2])}, shapes={"x": ["N", 2]})
    check(m, {"x": x}, symbolic=True, more=[{"x": data((2, 2))}, {"x": data((9, 2))}])


def test_slice_zero_step_rejected():
    x = data((3,))
    m = op_model("Slice", {"x": x}, {"s": a64([0]), "e": a64([2]), "a": a64([0]), "t": a64([0])})
    m.graph.output[0].CopyFrom(helper.make_tensor_value_info("y0", TensorProto.FLOAT, [None]))
    with pytest.raises(onnxc.InvalidGraph, match="steps"):
        onnxc.InferenceSession(m.SerializeToString())


# ---- Split ----------------------------------------------------------------------------------
@pytest.mark.parametrize("opset,axis,split,n", [(2, 1, [1, 4, 1], 3), (13, 1, [2, 0, 4], 3), (13, -2, None, 2),
                                               (11, 0, None, 4), (18, 2, None, 3), (18, 1, None, 4),
                                               (18, 0, [3, 1], 2)])
def test_split(opset, axis, split, n):
    x = data((4, 6, 5))
    attrs = {"axis": axis}
    inits = {}
    if split is not None:
        if opset >= 13:
            inits["s"] = a64(split)
        else:
            attrs["split"] = split
    elif opset >= 18:
        attrs["num_outputs"] = n
    check(op_model("Split", {"x": x}, inits, attrs=attrs, opset=opset, n_out=n), {"x": x})


def test_split_symbolic_other_axis():
    x = data((2, 6))
    m = op_model("Split", {"x": x}, attrs={"axis": 1, "num_outputs": 3}, shapes={"x": ["N", 6]}, n_out=3)
    check(m, {"x": x}, symbolic=True, more=[{"x": data((5, 6))}])


# ---- Pad ------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
@pytest.mark.parametrize("pads", [[0, 1, 2, 2, 1, 0], [1, 0, 0, 0, 0, 3], [0, 5, 0, 0, 7, 0], [0, 0, 0, 0, 0, 0]])
def test_pad_modes(mode, pads):
    x = data((2, 3, 4))
    check(op_model("Pad", {"x": x}, {"p": a64(pads)}, attrs={"mode": mode}, opset=19), {"x": x})


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16, np.int32, np.uint8, np.bool_, np.float64])
def test_pad_constant_value(dtype):
    x = data((3, 4), dtype)
    v = np.array(data((), dtype))
    check(op_model("Pad", {"x": x}, {"p": a64([1, 0, 2, 3]), "v": v}, opset=13), {"x": x})


def test_pad_runtime_value_and_axes():
    x, v = data((3, 4, 2)), np.array(2.5, np.float32)
    check(op_model("Pad", {"x": x, "v": v}, {"p": a64([1, 2, 0, 1]), "a": a64([-1, 1])}, opset=18,
                   order=["x", "p", "v", "a"]), {"x": x, "v": v})


def test_pad_negative_crops():
    # np.pad rejects negative pads; onnxruntime crops: compare with slicing
    x = data((4, 5))
    m = op_model("Pad", {"x": x}, {"p": a64([-1, 2, 1, -3])}, opset=13)
    m.graph.output[0].CopyFrom(helper.make_tensor_value_info("y0", TensorProto.FLOAT, (4, 4)))
    got = onnxc.InferenceSession(m.SerializeToString()).run(None, {"x": x})[0]
    want = np.pad(x[1:, :2], ((0, 1), (2, 0)))
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("opset", [1, 2, 11])
def test_pad_opsets(opset):
    x = data((2, 3))
    if opset < 11:
        name = "paddings" if opset == 1 else "pads"
        m = op_model("Pad", {"x": x}, attrs={name: [0, 1, 1, 2], "mode": "edge", "value": 0.0}, opset=opset)
        m.graph.node[0].attribute.remove([a for a in m.graph.node[0].attribute if a.name == "value"][0])
    else:
        m = op_model("Pad", {"x": x}, {"p": a64([0, 1, 1, 2])}, attrs={"mode": "reflect"}, opset=opset)
    if opset == 1:      # onnx.reference has no Pad-1: compare with numpy
        m.graph.output[0].CopyFrom(helper.make_tensor_value_info("y0", TensorProto.FLOAT, (3, 6)))
        got = onnxc.InferenceSession(m.SerializeToString()).run(None, {"x": x})[0]
        np.testing.assert_array_equal(got, np.pad(x, ((0, 1), (1, 2)), mode="edge"))
    else:
        check(m, {"x": x})


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
def test_pad_symbolic_batch(mode):
    x = data((2, 3, 4))
    m = op_model("Pad", {"x": x}, {"p": a64([0, 1, 2, 0, 2, 1])}, attrs={"mode": mode}, shapes={"x": ["N", 3, 4]})
    check(m, {"x": x}, symbolic=True, more=[{"x": data((5, 3, 4))}])


def test_pad_unknown_mode_rejected():
    x = data((2,))
    m = op_model("Pad", {"x": x}, {"p": a64([1, 1])}, attrs={"mode": "mirror"})
    m.graph.output[0].CopyFrom(helper.make_tensor_value_info("y0", TensorProto.FLOAT, [4]))
    with pytest.raises(Exception, match="mode"):
        onnxc.InferenceSession(m.SerializeToString())


# ---- Tile / Expand --------------------------------------------------------------------------
@pytest.mark.parametrize("reps", [[1, 1, 1], [2, 1, 3], [1, 3, 1], [0, 2, 1], [3, 2, 2]])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.bool_])
def test_tile(reps, dtype):
    x = data((2, 3, 4), dtype)
    check(op_model("Tile", {"x": x}, {"r": a64(reps)}), {"x": x})


def test_tile_symbolic():
    x = data((2, 3))
    m = op_model("Tile", {"x": x}, {"r": a64([2, 3])}, shapes={"x": ["N", 3]})
    check(m, {"x": x}, symbolic=True, more=[{"x": data((4, 3))}])


@pytest.mark.parametrize("xshape,shape", [((3, 1), [2, 1, 6]), ((1,), [4]), ((2, 3), [2, 3]), ((4, 1, 2), [3, 1]),
                                          ((1, 3, 1), [2, 3, 5]), ((2, 1), [0, 1, 1])])
@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16, np.int64])
def test_expand(xshape, shape, dtype):
    x = data(xshape, dtype)
    check(op_model("Expand", {"x": x}, {"s": a64(shape)}), {"x": x})


def test_expand_symbolic():
    x = data((2, 1))
    m = op_model("Expand", {"x": x}, {"s": a64([1, 5])}, shapes={"x": ["N", 1]})
    check(m, {"x": x}, symbolic=True, more=[{"x": data((6, 1))}])


def test_expand_symbolic_mismatch_fails():
    x = data((3,))
    m = op_model("Expand", {"x": x}, {"s": a64([3])}, shapes={"x": ["N"]})
    m.graph.output[0].CopyFrom(helper.make_tensor_value_info("y0", TensorProto.FLOAT, [3]))
    sess = onnxc.InferenceSession(m.SerializeToString())
    np.testing.assert_array_equal(sess.run(None, {"x": x})[0], x)
    with pytest.raises(onnxc.InvalidArgument):
        sess.run(None, {"x": data((2,))})


# ---- DepthToSpace / SpaceToDepth ------------------------------------------------------------
@pytest.mark.parametrize("mode", ["DCR", "CRD"])
@pytest.mark.parametrize("b", [1, 2, 3])
def test_depth_to_space(mode, b):
    x = data((2, 2 * b * b, 3, 4))
    check(op_model("DepthToSpace", {"x": x}, attrs={"blocksize": b, "mode": mode}, opset=13), {"x": x})


@pytest.mark.parametrize("opset,mode", [(13, None), (28, "DCR"), (28, "CRD")])
@pytest.mark.parametrize("b", [1, 2, 3])
def test_space_to_depth(opset, mode, b):
    x = data((2, 3, 2 * b, 3 * b), np.float16)
    attrs = {"blocksize": b, **({"mode": mode} if mode else {})}
    check(op_model("SpaceToDepth", {"x": x}, attrs=attrs, opset=opset), {"x": x})


def test_depth_to_space_symbolic_batch():
    x = data((1, 8, 2, 3))
    m = op_model("DepthToSpace", {"x": x}, attrs={"blocksize": 2}, shapes={"x": ["N", 8, "H", "W"]})
    check(m, {"x": x}, symbolic=True, more=[{"x": data((3, 8, 4, 1))}])


def test_depth_to_space_huge_blocksize_rejected():
    x = data((1, 4, 2, 2))
    m = op_model("DepthToSpace", {"x": x}, attrs={"blocksize": 2 ** 32})
    m.graph.output[0].CopyFrom(helper.make_tensor_value_info("y0", TensorProto.FLOAT, [None] * 4))
    with pytest.raises(onnxc.InvalidGraph, match="blocksize"):
        onnxc.InferenceSession(m.SerializeToString())
