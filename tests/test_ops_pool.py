"""MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool.

Checked against onnx.reference where it is sound, and everywhere against `pool_np` below: a
plain loop model of the onnxruntime/PyTorch semantics (onnx.reference deviates for SAME_LOWER
with strides, ceil_mode windows with two or more cells of extra padding, NaN in MaxPool with
stride 1 and 1-D/3-D pads with stride 1)."""
import itertools

import numpy as np
import onnx
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

import onnxc
from util import NP2ONNX, assert_close, make_node_model, typed_outputs, poisoned

rng = np.random.default_rng(6)


def pool_np(x, kind, kernel_shape, strides=None, pads=None, dilations=None, ceil_mode=0, count_include_pad=0,
            auto_pad="NOTSET", storage_order=0, **_):
    ns = x.ndim - 2
    s = strides or [1] * ns
    d = dilations or [1] * ns
    pads = pads or [0] * (2 * ns)
    ins = x.shape[2:]
    geo = []
    for i in range(ns):
        ke = (kernel_shape[i] - 1) * d[i] + 1
        if auto_pad.startswith("SAME"):
            out = -(-ins[i] // s[i])
            total = max(0, (out - 1) * s[i] + ke - ins[i])
            pb = total // 2 if auto_pad == "SAME_UPPER" else total - total // 2
            pe = total - pb
        else:
            pb, pe = (pads[i], pads[ns + i]) if auto_pad == "NOTSET" else (0, 0)
            span = ins[i] + pb + pe - ke
            if ceil_mode:
                out = -(-span // s[i]) + 1
                if (out - 1) * s[i] >= ins[i] + pb:
                    out -= 1
            else:
                out = span // s[i] + 1
        geo.append((out, pb, pe))
    outs = [g[0] for g in geo]
    y = np.zeros(x.shape[:2] + tuple(outs), x.dtype)
    ind = np.full(y.shape, -1, np.int64)
    plane = int(np.prod(ins))
    for n, c in itertools.product(range(x.shape[0]), range(x.shape[1])):
        for o in itertools.product(*[range(v) for v in outs]):
            taps = [[o[i] * s[i] - geo[i][1] + j * d[i] for j in range(kernel_shape[i])] for i in range(ns)]
            valid = [[t for t in tp if 0 <= t < ins[i]] for i, tp in enumerate(taps)]
            if kind == "max":
                best, where = None, None
                for pos in itertools.product(*valid):
                    v = x[(n, c) + pos]
                    if best is None or v > best:
                        best, where = v, pos
                if best is None:
                    best = -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min
                y[(n, c) + o] = best
                if where is not None:
                    if storage_order:
                        flat, mul = 0, 1
                        for i in range(ns):
                            flat += where[i] * mul
                            mul *= ins[i]
                    else:
                        flat = int(np.ravel_multi_index(where, ins))
                    ind[(n, c) + o] = (n * x.shape[1] + c) * plane + flat
            else:
                vals = [x[(n, c) + pos] for pos in itertools.product(*valid)]
                if count_include_pad:
                    cnt = int(np.prod([sum(1 for t in tp if t < ins[i] + geo[i][2]) for i, tp in enumerate(taps)]))
                else:
                    cnt = len(vals)
                with np.errstate(all="ignore"):
                    y[(n, c) + o] = np.float64(np.sum(np.array(vals, np.float64))) / cnt
    return y, ind


def build(op, x, attrs, opset, n_outputs=1, input_shapes=None):
    m = make_node_model(op, {"x": x}, attrs, opset=opset, n_outputs=n_outputs, input_shapes=input_shapes)
    return m


def run_onnxc(model, x, n_outputs=1, shapes=None):
    for j, vi in enumerate(model.graph.output):
        et = NP2ONNX[x.dtype] if j == 0 else onnx.TensorProto.INT64
        vi.CopyFrom(helper.make_tensor_value_info(vi.name, et, [None] * x.ndim))
    sess = onnxc.InferenceSession(model.SerializeToString())
    with poisoned():
        return sess, sess.run(None, {"x": x})


def check_np(op, x, attrs, opset=22, indices=False, rtol=1e-6):
    kind = "max" if op == "MaxPool" else "avg"
    want, want_i = pool_np(x, kind, **attrs)
    _, got = run_onnxc(build(op, x, attrs, opset, 2 if indices else 1), x)
    np.testing.assert_allclose(got[0], want, rtol=rtol, atol=1e-6, equal_nan=True)
    if indices:
        np.testing.assert_array_equal(got[1], want_i)
    return got


def check_ref(op, x, attrs, opset=22, indices=False, rtol=1e-6):
    m = build(op, x, attrs, opset, 2 if indices else 1)
    with np.errstate(all="ignore"):
        ref = ReferenceEvaluator(m).run(None, {"x": x})
    typed_outputs(m, ref)
    sess = onnxc.InferenceSession(m.SerializeToString())
    with poisoned():
        got = sess.run(None, {"x": x})
    assert_close(ref, got, rtol, 1e-6)
    return got


def data(shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


# ---- MaxPool -------------------------------------------------------------------------------
MAX2D = [dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
         dict(kernel_shape=[2, 2], strides=[2, 2]),
         dict(kernel_shape=[3, 2], strides=[2, 3], pads=[1, 0, 2, 1]),
         dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1),
         dict(kernel_shape=[2, 3], strides=[1, 1], dilations=[2, 3], pads=[1, 2, 1, 2]),
         dict(kernel_shape=[3, 3], strides=[3, 2], dilations=[2, 1], ceil_mode=1, pads=[0, 1, 1, 0]),
         dict(kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER"),
         dict(kernel_shape=[2, 2], strides=[2, 2], auto_pad="VALID")]


@pytest.mark.parametrize("attrs", MAX2D)
@pytest.mark.parametrize("opset", [10, 11, 12, 22])
def test_maxpool_2d(attrs, opset):
    x = data((2, 3, 11, 10))
    check_ref("MaxPool", x, attrs, opset)
    check_np("MaxPool", x, attrs, opset)


@pytest.mark.parametrize("opset", [1, 8])
def test_maxpool_old_opsets(opset):
    x = data((1, 2, 9, 9))
    for attrs in (dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]), dict(kernel_shape=[2, 2])):
        check_ref("MaxPool", x, attrs, opset)


@pytest.mark.parametrize("storage_order", [0, 1])
@pytest.mark.parametrize("opset", [8, 10, 12, 22])
def test_maxpool_indices(storage_order, opset):
    x = data((2, 3, 9, 7))
    attrs = dict(kernel_shape=[3, 2], strides=[2, 2], pads=[1, 0, 1, 1], storage_order=storage_order)
    check_ref("MaxPool", x, attrs, opset, indices=True)
    check_np("MaxPool", x, attrs, opset, indices=True)


@pytest.mark.parametrize("storage_order", [0, 1])
@pytest.mark.parametrize("nd", [1, 3])
def test_maxpool_1d_3d(nd, storage_order):
    shape = (2, 3, 13) if nd == 1 else (1, 2, 6, 7, 5)
    x = data(shape)
    attrs = dict(kernel_shape=[3] * nd, strides=[2] * nd, pads=[1] * (2 * nd), storage_order=storage_order)
    check_ref("MaxPool", x, attrs, 12, indices=True)
    check_np("MaxPool", x, attrs, 12, indices=True)
    attrs = dict(kernel_shape=[2] * nd, dilations=[2] * nd, ceil_mode=1, strides=[1] * nd)
    check_np("MaxPool", x, attrs, 12, indices=True)


def test_maxpool_same_lower_and_stride_one():
    x = data((1, 2, 8, 9))
    for attrs in (dict(kernel_shape=[3, 2], strides=[2, 2], auto_pad="SAME_LOWER"),
                  dict(kernel_shape=[4, 4], auto_pad="SAME_LOWER"), dict(kernel_shape=[4, 3], auto_pad="SAME_UPPER"),
                  dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1])):
        check_np("MaxPool", x, attrs, indices=True)
    check_ref("MaxPool", x, dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1]))


def test_maxpool_nan_inf():
    """The first element of a window, then any greater: a leading NaN sticks, later ones don't."""
    x = data((1, 1, 6, 6))
    x[0, 0, 0, 0] = np.nan
    x[0, 0, 3, 3] = np.nan
    x[0, 0, 5, 0] = np.inf
    x[0, 0, 1, 4] = -np.inf
    attrs = dict(kernel_shape=[2, 2], strides=[2, 2])
    got = check_np("MaxPool", x, attrs, indices=True)
    check_ref("MaxPool", x, attrs, indices=True)
    assert np.isnan(got[0][0, 0, 0, 0]) and not np.isnan(got[0][0, 0, 1, 1])


def _specials(shape, dtype=np.float32):
    """Random data with a fifth NaN, +-inf, +-0 (NaN payloads vary): the cases where the fold
    order shows (a leading NaN sticks, the first of equal zeros keeps its sign)."""
    x = data(shape, dtype)
    pick = rng.integers(0, 10, shape)
    x[pick == 0] = np.nan
    x[pick == 1] = -0.0
    x[pick == 2] = 0.0
    x[pick == 3] = np.inf
    x[pick == 4] = -np.inf
    if dtype == np.float32:
        bits = x.view(np.uint32)
        nan = np.isnan(x)
        bits[nan] = (bits[nan] & 0xFFC00000) | rng.integers(1, 1 << 22, int(nan.sum()), dtype=np.uint32)
    return x


POOL_FOLD = [dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),    # ResNet's stem
             dict(kernel_shape=[5, 5], strides=[1, 1], pads=[2, 2, 2, 2]),    # YOLO's SPPF
             dict(kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1]),
             dict(kernel_shape=[3, 2], strides=[3, 1], pads=[2, 0, 0, 1], dilations=[1, 2]),
             dict(kernel_shape=[2, 3], strides=[2, 3], pads=[1, 2, 1, 2], ceil_mode=1),
             dict(kernel_shape=[4, 4], strides=[2, 2], auto_pad="SAME_LOWER")]


def pool_params(model, op="MaxPool"):
    from onnxc import compiler
    from onnxc.ops import lookup
    c = compiler.compile_model(model)
    return [lookup(n).params(n) for n in c.graph.nodes if n.op_type == op][0]


@pytest.mark.parametrize("attrs,shape", [(a, (2, 3, 9, w)) for a in POOL_FOLD for w in (5, 40)]
                         + [(POOL_FOLD[0], (1, 1, 260, 131)), (POOL_FOLD[1], (1, 1, 140, 120))])
def test_maxpool_fold_bits(attrs, shape):
    """Padded windows on the unrolled fold, in two passes (small planes) and in one (planes past
    FOLD_SEP_MAX): the exact bits of the first-then-greater fold (NaN payloads, signed zeros), rows
    shorter and longer than a vector, at 1 and 3 threads."""
    x = _specials(shape)
    want, _ = pool_np(x, "max", **attrs)
    m = build("MaxPool", x, attrs, 22)
    p = pool_params(m)
    assert p["fold"] and bool(p["sep"]) == (shape[2] < 100)   # the big ones pass FOLD_SEP_MAX
    for vi in m.graph.output:
        vi.CopyFrom(helper.make_tensor_value_info(vi.name, onnx.TensorProto.FLOAT, [None] * 4))
    for nt in (1, 3):
        so = onnxc.SessionOptions()
        so.intra_op_num_threads = nt
        sess = onnxc.InferenceSession(m.SerializeToString(), so)
        with poisoned():
            got = sess.run(None, {"x": x})[0]
        assert got.shape == want.shape
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("nd", [1, 3])
def test_maxpool_fold_1d_3d_and_int8(nd):
    x = _specials((1, 2) + (7,) * (nd - 1) + (33,))
    attrs = dict(kernel_shape=[3] * nd, strides=[2] * nd, pads=[1] * (2 * nd))
    want, _ = pool_np(x, "max", **attrs)
    _, got = run_onnxc(build("MaxPool", x, attrs, 22), x)
    np.testing.assert_array_equal(got[0].view(np.uint32), want.view(np.uint32))
    xi = rng.integers(-128, 127, x.shape, endpoint=True).astype(np.int8)
    want, _ = pool_np(xi, "max", **attrs)
    _, got = run_onnxc(build("MaxPool", xi, attrs, 22), xi)
    np.testing.assert_array_equal(got[0], want)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
def test_maxpool_int8(dtype):
    info = np.iinfo(dtype)
    x = rng.integers(info.min, info.max, (2, 3, 7, 7), endpoint=True).astype(dtype)
    attrs = dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    check_ref("MaxPool", x, attrs, 12)
    check_np("MaxPool", x, attrs, 12, indices=True)


def test_maxpool_double_large_parallel():
    x = data((4, 64, 56, 56), np.float64)
    attrs = dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    check_ref("MaxPool", x, attrs)


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
def test_long_kernel_last_dim(op):
    """Kernels longer than the unrolled interior path, with edges, strides and dilations."""
    x = data((1, 2, 5, 40))
    for a in (dict(kernel_shape=[2, 20], strides=[1, 3], pads=[0, 5, 1, 4]),
              dict(kernel_shape=[2, 18], strides=[1, 2], dilations=[1, 2], pads=[0, 2, 0, 1]),
              dict(kernel_shape=[1, 40])):
        check_np(op, x, a, 19, indices=op == "MaxPool")


# ---- AveragePool ---------------------------------------------------------------------------
AVG = [dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
       dict(kernel_shape=[2, 2], strides=[2, 2]),
       dict(kernel_shape=[3, 2], strides=[1, 2], pads=[2, 0, 1, 1]),
       dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1, pads=[1, 1, 0, 0]),
       dict(kernel_shape=[3, 3], auto_pad="SAME_UPPER"),
       dict(kernel_shape=[3, 3], auto_pad="SAME_LOWER"),
       dict(kernel_shape=[3, 2], strides=[2, 2], auto_pad="VALID")]


@pytest.mark.parametrize("attrs", AVG)
@pytest.mark.parametrize("cip", [0, 1])
@pytest.mark.parametrize("opset", [7, 10, 11, 19, 22])
def test_averagepool_2d(attrs, cip, opset):
    if attrs.get("ceil_mode") and opset < 10:
        pytest.skip("ceil_mode from opset 10")
    x = data((2, 3, 9, 8))
    a = dict(attrs, count_include_pad=cip)
    check_ref("AveragePool", x, a, opset)
    check_np("AveragePool", x, a, opset)


def test_averagepool_opset1():
    """Opset 1 has no count_include_pad: pads are excluded (onnx.reference averages the zeros in)."""
    x = data((1, 2, 6, 6))
    check_np("AveragePool", x, dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]), 1)


@pytest.mark.parametrize("cip", [0, 1])
@pytest.mark.parametrize("nd", [1, 3])
def test_averagepool_1d_3d(nd, cip):
    x = data((2, 3, 11) if nd == 1 else (1, 2, 5, 6, 7))
    a = dict(kernel_shape=[3] * nd, strides=[2] * nd, pads=[1] * (2 * nd), count_include_pad=cip)
    check_ref("AveragePool", x, a, 19)
    check_np("AveragePool", x, a, 19)


@pytest.mark.parametrize("cip", [0, 1])
def test_averagepool_dilations_and_ceil(cip):
    x = data((1, 2, 10, 11))
    for a in (dict(kernel_shape=[2, 3], dilations=[2, 2], pads=[1, 1, 1, 1]),
              dict(kernel_shape=[3, 3], strides=[3, 3], ceil_mode=1),          # 2 cells of extra padding
              dict(kernel_shape=[2, 2], dilations=[3, 2], strides=[2, 3], ceil_mode=1, pads=[1, 0, 1, 2])):
        check_np("AveragePool", x, dict(a, count_include_pad=cip), 19)
    check_ref("AveragePool", x, dict(kernel_shape=[2, 3], dilations=[2, 2], pads=[1, 1, 1, 1],
                                     count_include_pad=cip), 19)


@pytest.mark.parametrize("attrs", POOL_FOLD)
@pytest.mark.parametrize("cip", [0, 1])
def test_averagepool_two_pass(attrs, cip):
    """Padded windows on the two-pass sums (rows, then columns): rows shorter and longer than a
    vector, NaN and inf spreading, count_include_pad, at 1 and 3 threads."""
    a = dict(attrs, count_include_pad=cip)
    for shape in ((2, 3, 9, 5), (1, 2, 11, 40)):
        x = data(shape)
        x[0, 0, 2, 3], x[-1, -1, -1, -1] = np.nan, np.inf
        want, _ = pool_np(x, "avg", **a)
        m = build("AveragePool", x, a, 22)
        assert pool_params(m, "AveragePool")["sep"]
        for vi in m.graph.output:
            vi.CopyFrom(helper.make_tensor_value_info(vi.name, onnx.TensorProto.FLOAT, [None] * 4))
        for nt in (1, 3):
            so = onnxc.SessionOptions()
            so.intra_op_num_threads = nt
            with poisoned():
                got = onnxc.InferenceSession(m.SerializeToString(), so).run(None, {"x": x})[0]
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6, equal_nan=True)


def test_averagepool_nan_propagates():
    x = data((1, 1, 6, 6))
    x[0, 0, 1, 1] = np.nan
    x[0, 0, 4, 4] = np.inf
    a = dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], count_include_pad=1)
    check_ref("AveragePool", x, a)
    got = check_np("AveragePool", x, dict(a, count_include_pad=0))
    assert np.isnan(got[0][0, 0, 0, 0]) and np.isinf(got[0][0, 0, 2, 2])


# ---- Global pools --------------------------------------------------------------------------
@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
@pytest.mark.parametrize("shape", [(2, 3, 7), (2, 3, 5, 6), (1, 4, 3, 4, 5), (2, 70, 3, 3)])
@pytest.mark.parametrize("opset", [1, 22])
def test_global_pools(op, shape, opset):
    x = data(shape)
    x.flat[5] = np.nan
    x.flat[17] = np.inf
    m = make_node_model(op, {"x": x}, opset=opset)
    axes = tuple(range(2, x.ndim))
    with np.errstate(all="ignore"):
        if len(shape) == 4 or op == "GlobalAveragePool":   # onnx.reference's GlobalMaxPool is 2-D only
            ref = ReferenceEvaluator(m).run(None, {"x": x})
        else:
            ref = [x.max(axis=axes, keepdims=True)]
    typed_outputs(m, ref)
    with poisoned():
        got = onnxc.InferenceSession(m.SerializeToString()).run(None, {"x": x})
    assert_close(ref, got, 1e-5, 1e-6)


def test_global_pools_double():
    x = data((2, 3, 9, 9), np.float64)
    for op in ("GlobalAveragePool", "GlobalMaxPool"):
        m = make_node_model(op, {"x": x})
        ref = ReferenceEvaluator(m).run(None, {"x": x})
        typed_outputs(m, ref)
        assert_close(ref, onnxc.InferenceSession(m.SerializeToString()).run(None, {"x": x}), 1e-12, 1e-12)


# ---- symbolic dims -------------------------------------------------------------------------
@pytest.mark.parametrize("op,attrs", [
    ("MaxPool", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),
    ("AveragePool", dict(kernel_shape=[2, 2], strides=[2, 2], count_include_pad=1)),
    ("GlobalAveragePool", {}), ("GlobalMaxPool", {})])
def test_symbolic_batch(op, attrs):
    x = data((2, 3, 8, 8))
    sess, _ = run_onnxc(build(op, x, attrs, 22, input_shapes={"x": ["N", 3, 8, 8]}), x)
    for n in (1, 3, 8):
        x = data((n, 3, 8, 8))
        ref = ReferenceEvaluator(build(op, x, attrs, 22)).run(None, {"x": x})
        with poisoned():
            got = sess.run(None, {"x": x})
        assert_close(ref, got, 1e-5, 1e-6)


@pytest.mark.parametrize("op,attrs", [
    ("MaxPool", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),
    ("MaxPool", dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)),
    ("AveragePool", dict(kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER", count_include_pad=1)),
    ("AveragePool", dict(kernel_shape=[2, 3], strides=[2, 1], auto_pad="SAME_LOWER"))])
def test_symbolic_spatial(op, attrs):
    x = data((1, 2, 9, 9))
    sess, _ = run_onnxc(build(op, x, attrs, 22, input_shapes={"x": [1, 2, "H", "W"]}), x)
    for h, w in ((9, 9), (7, 12), (16, 5)):
        x = data((1, 2, h, w))
        want, _ = pool_np(x, "max" if op == "MaxPool" else "avg", **attrs)
        with poisoned():
            got = sess.run(None, {"x": x})[0]
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


# ---- errors --------------------------------------------------------------------------------
@pytest.mark.parametrize("attrs,msg", [
    (dict(kernel_shape=[0, 3]), "kernel_shape"), (dict(kernel_shape=[3, 3], strides=[1, 0]), "strides"),
    (dict(kernel_shape=[3, 3], pads=[1, -1, 1, 1]), "pads"), (dict(kernel_shape=[3]), "kernel_shape"),
    (dict(kernel_shape=[3, 3], auto_pad="SAME"), "auto_pad"),
    (dict(kernel_shape=[3, 3], dilations=[1, -2]), "dilations"), (dict(kernel_shape=[9, 3]), "too small"),
    (dict(kernel_shape=[3, 2 ** 40]), "kernel_shape"), (dict(kernel_shape=[3, 3], strides=[2 ** 62, 1]), "strides")])
@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
def test_errors(op, attrs, msg):
    x = data((1, 1, 5, 5))
    m = make_node_model(op, {"x": x}, attrs, opset=19)
    m.graph.output[0].CopyFrom(helper.make_tensor_value_info("y0", onnx.TensorProto.FLOAT, [None] * 4))
    with pytest.raises((onnxc.InvalidGraph, onnxc.NotImplemented), match=rf"node 0 \({op}.*{msg}"):
        onnxc.InferenceSession(m.SerializeToString(), )
