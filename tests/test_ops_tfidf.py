"""TfIdfVectorizer against onnx.reference on random pools and inputs: int32/int64/string, 1-D and
2-D (static and symbolic dims), TF/IDF/TFIDF with and without weights, skip-grams, gram ranges."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import AttributeProto, TensorProto as TP, helper as h
from onnx.reference import ReferenceEvaluator

import onnxc
from onnxc.errors import InvalidGraph

NP = {TP.INT32: np.int32, TP.INT64: np.int64, TP.STRING: object}
WORDS = ["a", "b", "é", "ü\u4e2d", "*/ \"q\" ??=", "\\", "", "zz"]


def _model(et, shape, **attrs):
    x = h.make_tensor_value_info("X", et, shape)
    node = h.make_node("TfIdfVectorizer", ["X"], ["Y"], **attrs)
    if "weights" not in attrs:   # onnx.reference needs the (empty) list for IDF/TFIDF
        node.attribute.append(h.make_attribute("weights", [], attr_type=AttributeProto.FLOATS))
    g = h.make_graph([node], "g", [x], [h.make_tensor_value_info("Y", TP.FLOAT, None)])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 9)])
    m.ir_version = 8
    return m


def _check(m, x):
    ref = ReferenceEvaluator(m).run(None, {"X": x})[0]
    got = onnxc.InferenceSession(m.SerializeToString()).run(None, {"X": x})[0]
    assert got.dtype == np.float32 and got.shape == ref.shape, (got.shape, ref.shape)
    np.testing.assert_array_equal(got, ref)


def _random_case(rng, et, vocab):
    """A pool of up to 3 gram sizes, random ids to output columns, random attributes."""
    sizes = [int(rng.integers(0, 6)) for _ in range(int(rng.integers(1, 4)))]
    pool, counts = [], []
    for n, k in enumerate(sizes, start=1):
        counts.append(len(pool))
        pool += list(rng.choice(vocab, n * k))
    total = sum(sizes)
    if total == 0:
        pool, counts, total = list(rng.choice(vocab, 1)), [0], 1
    n_out = int(rng.integers(1, total + 2))
    attrs = dict(min_gram_length=int(rng.integers(1, 3)), max_skip_count=int(rng.integers(0, 4)),
                 mode=str(rng.choice(["TF", "IDF", "TFIDF"])), ngram_counts=counts,
                 ngram_indexes=[int(v) for v in rng.integers(0, n_out, total)])
    attrs["max_gram_length"] = attrs["min_gram_length"] + int(rng.integers(0, 3))
    if et == TP.STRING:
        attrs["pool_strings"] = [str(s) for s in pool]
    else:
        attrs["pool_int64s"] = [int(v) for v in pool]
    if rng.random() < 0.5:
        attrs["weights"] = [float(v) for v in rng.uniform(-2, 3, max(attrs["ngram_indexes"]) + 1)
                            .astype(np.float32)]
    return attrs


@pytest.mark.parametrize("et", [TP.INT32, TP.INT64, TP.STRING])
@pytest.mark.parametrize("rank", [1, 2])
def test_random(et, rank):
    rng = np.random.default_rng(et * 10 + rank)
    vocab = np.array(WORDS, object) if et == TP.STRING else np.arange(-2, 6)
    for trial in range(12):
        attrs = _random_case(rng, et, vocab)
        shape = [int(rng.integers(1, 4)), int(rng.integers(0, 12))] if rank == 2 else [int(rng.integers(0, 15))]
        x = rng.choice(vocab, shape)
        x = x.astype(object) if et == TP.STRING else x.astype(NP[et])
        symbolic = trial % 3 == 0          # run-time dims: counts go through the int64 workspace
        _check(_model(et, [f"d{k}" for k in range(rank)] if symbolic else shape, **attrs), x)


def test_suite_like_and_batches():
    attrs = dict(max_gram_length=2, min_gram_length=1, max_skip_count=5, mode="TFIDF",
                 ngram_counts=[0, 4], ngram_indexes=[0, 1, 2, 3, 4, 5, 6],
                 pool_int64s=[2, 3, 5, 4, 5, 6, 7, 8, 6, 7], weights=[0.5, 1, 2, 3, 4, 5, 0.25])
    x = np.array([[1, 1, 3, 3, 3, 7], [8, 6, 7, 5, 6, 8]], np.int64)
    m = _model(TP.INT64, ["B", 6], **attrs)
    sess = onnxc.InferenceSession(m.SerializeToString())
    for b in (1, 2, 5):
        xb = np.tile(x, (3, 1))[:b]
        np.testing.assert_array_equal(sess.run(None, {"X": xb})[0], ReferenceEvaluator(m).run(None, {"X": xb})[0])


def test_int32_outside_pool_range_and_long_rows():
    attrs = dict(max_gram_length=3, min_gram_length=1, max_skip_count=2, mode="TF", ngram_counts=[0, 2, 4],
                 ngram_indexes=[0, 1, 2, 3, 4], pool_int64s=[2**40, 1, 1, 2, 1, 2, 1])
    rng = np.random.default_rng(0)
    x = rng.integers(0, 3, (3, 3000)).astype(np.int32)
    _check(_model(TP.INT32, [3, 3000], **attrs), x)


def test_strings_with_nul_in_pool_never_match():
    attrs = dict(max_gram_length=2, min_gram_length=1, max_skip_count=0, mode="TF", ngram_counts=[0, 2],
                 ngram_indexes=[0, 1, 2], pool_strings=["a\0b", "a", "a", "a"])
    _check(_model(TP.STRING, [4], **attrs), np.array(["a", "a", "a", "b"], object))


@pytest.mark.parametrize("attrs, msg", [
    (dict(mode="BM25"), "mode"),
    (dict(min_gram_length=0), "min_gram_length"),
    (dict(max_gram_length=0), "max_gram_length"),
    (dict(max_skip_count=-1), "max_skip_count"),
    (dict(ngram_indexes=[0, -1, 2]), "negative"),
    (dict(ngram_indexes=[0]), "ngram_indexes"),
    (dict(ngram_counts=[3, 1]), "ngram_counts"),
    (dict(weights=[1.0], mode="IDF"), "weights"),
    (dict(pool_strings=["a"]), "exactly one"),
])
def test_errors(attrs, msg):
    base = dict(max_gram_length=2, min_gram_length=1, max_skip_count=0, mode="TF", ngram_counts=[0, 2],
                ngram_indexes=[0, 1, 2], pool_int64s=[1, 2, 1, 2])
    base.update(attrs)
    with pytest.raises(InvalidGraph, match=msg):
        onnxc.InferenceSession(_model(TP.INT64, [4], **base).SerializeToString())


def test_string_input_needs_pool_strings():
    attrs = dict(max_gram_length=1, min_gram_length=1, max_skip_count=0, mode="TF", ngram_counts=[0],
                 ngram_indexes=[0], pool_int64s=[1])
    with pytest.raises(InvalidGraph, match="pool_strings"):
        onnxc.InferenceSession(_model(TP.STRING, [4], **attrs).SerializeToString())


@pytest.mark.parametrize("pool", [[-3, 7, 5, -3, 7, 7], [2**62, -2**62, 0, 2**62, 2**62, 1]])
def test_extreme_values(pool):
    """Root keys in a compact range use a direct index (first pool); sparse ones a binary search."""
    attrs = dict(max_gram_length=2, min_gram_length=1, max_skip_count=1, mode="TFIDF", ngram_counts=[0, 3],
                 ngram_indexes=[0, 1, 2, 3, 4], pool_int64s=pool, weights=[1.0, -2.0, 0.5, 3.0, 1.5])
    x = np.array([[-2**63, 2**63 - 1, -3, 7, 5, 7, 0, 2**62, -2**62, 1, 2**62, 1]], np.int64)
    _check(_model(TP.INT64, [1, 12], **attrs), x)
