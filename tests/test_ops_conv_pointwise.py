"""1x1 Conv on onnxc_pw_rows (ops/conv.py pointwise params, conv.c.j2): the thread splits, by
pixel range (weights no larger than X: each thread copies and reads only its own columns) and by
panel, at 1 to 3 threads, with the padded copy of X or without, batches, groups, bias, residual
and clamp epilogues; against onnx.reference."""
import numpy as np
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

import onnxc
from onnxc import loader
from onnxc.compiler import Options, compile_model
from onnxc.ops.registry import lookup
from util import make_model_from_nodes, poisoned, typed_outputs

TOL = dict(rtol=1e-4, atol=1e-5)


def model(n, c, hw, m, group=1, res=False, act=None, seed=0, strides=None):
    rng = np.random.default_rng(seed)
    spatial = hw if isinstance(hw, tuple) else (hw, hw)
    x = rng.standard_normal((n, c) + spatial).astype(np.float32)
    w = (rng.standard_normal((m, c // group) + (1,) * len(spatial)) / np.sqrt(c // group)).astype(np.float32)
    b = rng.standard_normal(m).astype(np.float32)
    strides = strides or [1] * len(spatial)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], group=group, strides=strides)]
    inputs, last = {"x": x}, "c"
    if res:
        out = tuple(-(-d // s) for d, s in zip(spatial, strides))
        inputs["z"] = rng.standard_normal((n, m) + out).astype(np.float32)
        nodes.append(helper.make_node("Add", ["c", "z"], ["s"]))
        last = "s"
    inits = {"w": w, "b": b}
    if act == "Clip":
        inits.update(lo=np.array(0, np.float32), hi=np.array(6, np.float32))
        nodes.append(helper.make_node("Clip", [last, "lo", "hi"], ["y"]))
    else:
        nodes.append(helper.make_node(act or "Identity", [last], ["y"]))
    mdl = make_model_from_nodes(nodes, inputs, inits, ["y"])
    typed_outputs(mdl, ReferenceEvaluator(mdl).run(None, inputs))
    return mdl, inputs


def pw_params(mdl, block=(8, 48)):
    """The pointwise kernel's parameters of the model's conv (None: another kernel took it)."""
    c = compile_model(loader.load(mdl), Options(), gemm_block=block)
    node = next(n for n in c.graph.nodes if n.op_type in ("Conv", "FusedConv"))
    return lookup(node).params(node).get("pw")


def assert_at_1_to_3_threads(mdl, feeds, ref):
    for nt in (1, 2, 3):
        so = onnxc.SessionOptions()
        so.intra_op_num_threads = nt
        with poisoned():     # an output element no thread writes fails
            got = onnxc.InferenceSession(mdl.SerializeToString(), so).run(None, feeds)[0]
        np.testing.assert_allclose(got, ref, **TOL)


# batch, channels, side, outputs, group, residual, activation
CASES = [
    (1, 384, 14, 64, 1, True, None),        # by pixels, padded copy (196 pixels: 96 | 100)
    (2, 144, 28, 32, 1, False, "Clip"),     # by pixels, batch 2
    (1, 96, 14, 576, 1, False, "Clip"),     # by panel (weights larger than X)
    (1, 16, 112, 8, 1, True, "Relu"),       # by pixels, X large: no copy
    (1, 64, 14, 32, 2, False, "Relu"),      # groups
    (1, 64, 4, 24, 1, True, "Clip"),        # 16 pixels: fewer tiles than threads
    (1, 64, 12, 24, 1, False, None),        # 144 pixels: one whole tile per thread at 3
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_thread_splits(case):
    n, c, hw, m, group, res, act = CASES[case]
    mdl, feeds = model(n, c, hw, m, group, res, act, seed=case)
    pw = pw_params(mdl)
    assert pw is not None
    assert pw["by_pixels"] == (m // group <= hw * hw)
    ref = ReferenceEvaluator(mdl).run(None, feeds)[0]
    for nt in (1, 2, 3):
        so = onnxc.SessionOptions()
        so.intra_op_num_threads = nt
        sess = onnxc.InferenceSession(mdl.SerializeToString(), so)
        for _ in range(2):       # the padded copy is rewritten each run
            with poisoned():     # an output element no thread writes fails
                got = sess.run(None, feeds)[0]
            np.testing.assert_allclose(got, ref, **TOL)


@pytest.mark.parametrize("hw, block, xpad, in_place", [
    (14, (8, 48), 0, 2),     # AVX-512: 196 = 4 x 48 + 4, the last vector masked
    (14, (6, 16), 0, 2),     # AVX2: 12 x 16 + 4
    (14, (6, 8), 208, 0),    # SSE (no masked loads): rows copied, padded to 208
    (28, (6, 8), 0, 1),      # 784 = 49 x 16 on every ISA: in place
])
def test_how_the_last_pixels_are_read(hw, block, xpad, in_place):
    mdl, feeds = model(1, 64, hw, 32, 1, True, "Relu", seed=hw)
    pw = pw_params(mdl, block=block)
    assert pw is not None and (pw["xpad"], pw["in_place"]) == (xpad, in_place)
    if block == (8, 48):
        ref = ReferenceEvaluator(mdl).run(None, feeds)[0]
        assert_at_1_to_3_threads(mdl, feeds, ref)


def test_last_vector_never_reads_past_x():
    """X read in place with its last vector masked (196 pixels: 4 past the last whole vector),
    placed to end where an unreadable page starts: a whole-vector load there would fault."""
    import ctypes
    import mmap
    mdl, feeds = model(1, 64, 14, 32, 1, False, "Relu", seed=3)
    assert pw_params(mdl)["in_place"] == 2
    x, page = feeds["x"], mmap.PAGESIZE
    pages = -(-x.nbytes // page)
    mm = mmap.mmap(-1, (pages + 1) * page)
    base = ctypes.addressof(ctypes.c_char.from_buffer(mm))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    assert libc.mprotect(base + pages * page, page, 0) == 0     # PROT_NONE
    try:
        xg = np.frombuffer(mm, np.float32, x.size, pages * page - x.nbytes).reshape(x.shape)
        xg[...] = x
        ref = ReferenceEvaluator(mdl).run(None, feeds)[0]
        assert_at_1_to_3_threads(mdl, {"x": xg}, ref)
    finally:
        libc.mprotect(base + pages * page, page, 3)               # PROT_READ | PROT_WRITE


def test_whole_vector_rows_read_in_place():
    """784 pixels (28x28) fill no 48-column tiles, but each row is 49 whole vectors: no padded
    copy of X, the last tile reads its 16 pixels in place, ending at the row's end."""
    mdl, feeds = model(1, 192, 28, 32, 1, True, "Clip", seed=7)
    pw = pw_params(mdl)
    assert pw is not None and pw["xpad"] == 0 and pw["in_place"] == 1
    ref = ReferenceEvaluator(mdl).run(None, feeds)[0]
    assert_at_1_to_3_threads(mdl, feeds, ref)


@pytest.mark.parametrize("c, m, res, act", [(160, 96, True, "Clip"), (96, 160, False, "Relu")])
def test_7x7_padded_rows_on_avx2(c, m, res, act):
    """49 pixels, 64 per row in vectors: taken with AVX2's 16-column tiles, X read in place with
    the last vector masked, left to the swapped SGEMM with AVX-512's 48 (ops/conv.py
    pointwise_rows_ok); correct on whichever the host has."""
    mdl, feeds = model(1, c, 7, m, 1, res, act, seed=c)
    pw = pw_params(mdl, block=(6, 16))
    assert pw is not None and pw["xpad"] == 0 and pw["in_place"] == 2
    assert pw_params(mdl) is None
    ref = ReferenceEvaluator(mdl).run(None, feeds)[0]
    assert_at_1_to_3_threads(mdl, feeds, ref)


@pytest.mark.parametrize("hw, c, m, res, act", [
    ((7, 7), 263, 20, True, "Clip"),     # 49 = 3 x 16 + 1: the last pixel alone; K = 256 + 7; 2-row panel
    ((5, 10), 960, 22, False, "Relu"),   # 50 = 3 x 16 + 2: two last pixels; four depth blocks
    ((5, 13), 45, 7, True, None),        # 65 = 4 x 16 + 1, K = 5 x 8 + 4 + 1
    ((4, 13), 99, 13, False, "Clip"),    # 52 = 3 x 16 + 4: the last vector's tile, odd depths apart
    ((1, 53), 257, 6, True, "Relu"),     # 53 = 3 x 16 + 5, K one past a depth block
])
def test_last_pixels_of_a_plane(hw, c, m, res, act):
    """A plane's last 1-2 pixels one at a time with k across the lanes (onnxc__pw_col, AVX2), 3-8
    of them as a 1-vector tile with two accumulator sets: residual, clamp, NaN in those pixels."""
    mdl, feeds = model(1, c, hw, m, 1, res, act, seed=c)
    assert pw_params(mdl, block=(6, 16)) is not None
    bad = {"x": feeds["x"].copy()}            # a NaN and an inf in the last two pixels
    bad["x"][0, 3, -1, -1] = np.nan
    bad["x"][0, 4, -1, -2] = np.inf
    bad.update({k: v for k, v in feeds.items() if k != "x"})
    for nt in (1, 2, 3):
        so = onnxc.SessionOptions()
        so.intra_op_num_threads = nt
        sess = onnxc.InferenceSession(mdl.SerializeToString(), so)
        for f in (feeds, bad):
            ref = ReferenceEvaluator(mdl).run(None, f)[0]
            with poisoned():
                got = sess.run(None, f)[0]
            np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
            np.testing.assert_allclose(got, ref, **TOL)


def test_clamp_keeps_nan():
    mdl, feeds = model(1, 384, 14, 64, act="Clip", seed=7)
    feeds["x"][0, 5, 3, 4] = np.nan
    ref = ReferenceEvaluator(mdl).run(None, feeds)[0]
    so = onnxc.SessionOptions()
    so.intra_op_num_threads = 2
    got = onnxc.InferenceSession(mdl.SerializeToString(), so).run(None, feeds)[0]
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    fin = np.isfinite(ref)
    np.testing.assert_allclose(got[fin], ref[fin], **TOL)


@pytest.mark.parametrize("case", [0, 2])
def test_portable_build(case, tmp_path):
    """No AVX-512 there: the 4-lane tile and the clamp's compare-and-blend form."""
    n, c, hw, m, group, res, act = CASES[case]
    mdl, feeds = model(n, c, hw, m, group, res, act="Clip", seed=case)
    ref = ReferenceEvaluator(mdl).run(None, feeds)[0]
    lib = onnxc.compiler.build_library(mdl, Options(portable=True), cache_dir=tmp_path)
    so = onnxc.SessionOptions()
    so.intra_op_num_threads = 2
    with poisoned():
        got = onnxc.InferenceSession(str(lib), so).run(None, feeds)[0]
    np.testing.assert_allclose(got, ref, **TOL)


# batch, channels, input spatial, outputs, group, residual, activation, strides
STRIDED = [
    (1, 64, (56, 56), 128, 1, True, "Relu", [2, 2]),     # ResNet's downsampling 1x1
    (2, 32, (20, 40), 24, 1, False, "Clip", [1, 2]),     # one axis only, batch 2
    (1, 16, (48, 47), 40, 2, False, None, [3, 3]),       # groups, a width the stride does not divide
    (1, 16, (480,), 32, 1, True, None, [3]),             # 1-D
]


@pytest.mark.parametrize("case", range(len(STRIDED)))
def test_strided_1x1_on_a_gathered_copy(case):
    n, c, hw, m, group, res, act, strides = STRIDED[case]
    mdl, feeds = model(n, c, hw, m, group, res, act, seed=case, strides=strides)
    pw = pw_params(mdl)
    assert pw is not None and pw["sub"] == ([1] + strides)[-2:]
    ref = ReferenceEvaluator(mdl).run(None, feeds)[0]
    assert_at_1_to_3_threads(mdl, feeds, ref)
