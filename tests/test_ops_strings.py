"""StringConcat, StringSplit, StringNormalizer against onnx.reference on random strings: empty
strings, multi-byte UTF-8 (accents, Greek final sigma, Hangul, ligatures, astral), Python's
whitespace, stopwords at any position, everything removed, 2-D inputs, broadcasting, symbolic
dims, outputs larger than the first heap (the session grows it and runs again)."""
from __future__ import annotations


import numpy as np
import pytest
from onnx import TensorProto as TP, helper as h
from onnx.reference import ReferenceEvaluator

import onnxc
from onnxc.errors import InvalidGraph
from util import poisoned


ALPHABET = (list("abcxyzABCXYZ019-.,' ") + [" ", " ", "\t", "\n", "\x1c", "\x85", "\xa0", "\u2003", "\u3000",
            "\u200b", "é", "Ü", "ñ", "ç", "Σ", "σ", "Ά", "ΐ", "Й", "ё", "ß", "İ", "ﬁ", "ǅ", "한", "中", "𝄞",
            "\u0301", "Ａ", "½", "ŉ", "\u00ad", "Ω", "K"])


def _model(op, shapes, attrs, opset, n_out=1):
    ins = [h.make_tensor_value_info(f"x{i}", TP.STRING, s) for i, s in enumerate(shapes)]
    outs = [h.make_tensor_value_info(f"y{i}", TP.STRING if i == 0 else TP.INT64, None) for i in range(n_out)]
    node = h.make_node(op, [f"x{i}" for i in range(len(shapes))], [f"y{i}" for i in range(n_out)], **attrs)
    m = h.make_model(h.make_graph([node], "g", ins, outs), opset_imports=[h.make_opsetid("", opset)])
    m.ir_version = 9
    return m


def _strings(rng, shape, alphabet=ALPHABET, max_len=10, words=()):
    n = int(np.prod(shape))
    out = []
    for _ in range(n):
        if words and rng.random() < 0.5:
            out.append(" ".join(rng.choice(list(words), int(rng.integers(0, 5)))))
        else:
            out.append("".join(rng.choice(alphabet, int(rng.integers(0, max_len + 1)))))
    return np.array(out, dtype=object).reshape(shape)


def _same(ref, got):
    assert len(ref) == len(got)
    for r, g in zip(ref, got):
        r = np.asarray(r)
        assert g.shape == r.shape, (g.shape, r.shape)
        if r.dtype == object or r.dtype.kind == "U":
            assert g.dtype == object
            assert g.tolist() == r.astype(object).tolist()
        else:
            assert g.dtype == r.dtype
            np.testing.assert_array_equal(g, r)


def _check(model, feeds, sess=None):
    ref = ReferenceEvaluator(model).run(None, feeds)
    sess = sess or onnxc.InferenceSession(model.SerializeToString())
    with poisoned():
        got = sess.run(None, feeds)
    _same(ref, got)
    return sess


# ---- StringConcat --------------------------------------------------------------------------------

@pytest.mark.parametrize("sa,sb", [((2, 3), (2, 3)), ((2, 3), (3,)), ((1, 3), (2, 1)), ((), (4,)), ((), ()),
                                   ((0, 3), (3,)), ((2, 1, 3), (4, 1)), ((5,), (1,))])
def test_concat(sa, sb):
    rng = np.random.default_rng(len(sa) * 10 + len(sb))
    a, b = _strings(rng, sa), _strings(rng, sb)
    _check(_model("StringConcat", [list(sa), list(sb)], {}, 20), {"x0": a, "x1": b})


def test_concat_symbolic_and_heap_growth():
    """One session, a symbolic batch: small runs, then one whose output outgrows the first heap."""
    m = _model("StringConcat", [["N", 3], [3]], {}, 20)
    rng = np.random.default_rng(7)
    sess = None
    for n in (1, 4, 0, 3000, 2):
        a = _strings(rng, (n, 3), max_len=30)
        b = np.array(["", "x" * 50, "é中𝄞"], dtype=object)
        sess = _check(m, {"x0": a, "x1": b}, sess)


# ---- StringSplit ---------------------------------------------------------------------------------

@pytest.mark.parametrize("delimiter", [None, "", " ", "-", "--", "ab", "é", "中𝄞", "\t"])
@pytest.mark.parametrize("maxsplit", [None, 0, 1, 2, -1])
def test_split(delimiter, maxsplit):
    rng = np.random.default_rng(abs(hash((delimiter, maxsplit))) % 1000)
    alphabet = list("ab- -é中𝄞\t") + ["--", "ab", "\xa0", "\u3000", "\x1c", "\x85", "\u200b", ""]
    x = _strings(rng, (3, 7), alphabet=alphabet, max_len=12)
    x[0, 0], x[0, 1], x[1, 0] = "", "   ", "--a----b--"
    attrs = {k: v for k, v in (("delimiter", delimiter), ("maxsplit", maxsplit)) if v is not None}
    _check(_model("StringSplit", [[3, 7]], attrs, 20, n_out=2), {"x0": x})


@pytest.mark.parametrize("shape", [(0,), (4,), (2, 0), (1, 1)])
def test_split_shapes(shape):
    x = _strings(np.random.default_rng(3), shape)
    _check(_model("StringSplit", [list(shape)], {}, 20, n_out=2), {"x0": x})


def test_split_scalar():
    """onnx.reference cannot split a scalar (its padding asserts); Python's str.split is the spec."""
    sess = onnxc.InferenceSession(_model("StringSplit", [[]], {}, 20, n_out=2).SerializeToString())
    for text in (" a  é中 b ", "", "   "):
        y, z = sess.run(None, {"x0": np.array(text, dtype=object)})
        assert y.shape == (len(text.split()),) and z.shape == () and int(z) == len(text.split())
        assert y.tolist() == text.split()


def test_split_no_pieces_and_python_whitespace():
    """Every str.isspace code point splits, its neighbours do not; all-blank rows give 0 pieces."""
    cands = [c for c in range(0x3001) if chr(c).isspace()] + [0x1B, 0x21, 0x84, 0x86, 0x9F, 0xA1, 0x180E,
                                                              0x200B, 0x200C, 0x2060, 0xFEFF]
    x = np.array([f"a{chr(c)}b" for c in cands], dtype=object)
    m = _model("StringSplit", [[len(cands)]], {}, 20, n_out=2)
    _check(m, {"x0": x})
    blank = np.array(["", " ", "\t\n", "\u3000"], dtype=object)
    _check(_model("StringSplit", [[4]], {}, 20, n_out=2), {"x0": blank})


def test_split_symbolic_and_heap_growth():
    m = _model("StringSplit", [["N"]], {"delimiter": ","}, 20, n_out=2)
    sess = None
    for n in (2, 0, 500, 1):
        x = np.array([",".join(["piece"] * (i % 40)) for i in range(n)], dtype=object)
        sess = _check(m, {"x0": x}, sess)


# ---- StringNormalizer ----------------------------------------------------------------------------

WORDS = ["monday", "Monday", "MONDAY", "tuesday", "café", "CAFE", "cafe", "straße", "STRASSE", "ΟΔΟΣ", "οδος",
         "", "x", "Ünïcödé"]
STOPS = [[], ["monday"], ["Monday", "x"], ["cafe", "straße", "ΟΔΟΣ"], ["", "tuesday"], ["STRASSE", "οδος"]]


@pytest.mark.parametrize("case", ["LOWER", "UPPER", "NONE"])
@pytest.mark.parametrize("sensitive", [0, 1])
@pytest.mark.parametrize("stops", range(len(STOPS)))
def test_normalizer(case, sensitive, stops):
    rng = np.random.default_rng(stops * 6 + sensitive * 3 + len(case))
    attrs = {"case_change_action": case, "is_case_sensitive": sensitive}
    if STOPS[stops]:
        attrs["stopwords"] = STOPS[stops]
    for shape in ((9,), (1, 7), (3, 5)):
        x = _strings(rng, shape, words=WORDS)
        _check(_model("StringNormalizer", [list(shape)], attrs, 10), {"x0": x})


@pytest.mark.parametrize("x", [[], [""], ["", ""], ["monday", "monday"], ["monday monday", "", "Monday"]])
@pytest.mark.parametrize("rank", [1, 2])
def test_normalizer_all_removed(x, rank):
    arr = np.array(x, dtype=object).reshape((len(x),) if rank == 1 else (1, len(x)))
    m = _model("StringNormalizer", [list(arr.shape)],
               {"case_change_action": "UPPER", "stopwords": ["monday", "MONDAY"]}, 10)
    _check(m, {"x0": arr})


def test_normalizer_rows_at_run_time():
    """[N, C] with N symbolic: one row drops empty strings, several rows keep every column."""
    m = _model("StringNormalizer", [["N", 4]], {"stopwords": ["b"], "locale": "fr_FR"}, 10)
    sess = None
    for rows in (["a", "b", "", "c"], ["a", "b", "", "c", "d", "e", "b", "f"], ["b", "", "b", "b"], []):
        x = np.array(rows, dtype=object).reshape(-1, 4)
        sess = _check(m, {"x0": x}, sess)


@pytest.mark.parametrize("case", ["LOWER", "UPPER", "NONE"])
def test_normalizer_every_code_point(case):
    """Every code point, 48 to a string: accent stripping (NFKD, marks dropped, Hangul), Python's
    full case mappings and Final_Sigma, against onnx.reference (same unicodedata)."""
    cps = [c for c in range(1, 0x110000) if not 0xD800 <= c < 0xE000]
    x = np.array(["".join(map(chr, cps[i:i + 48])) for i in range(0, len(cps), 48)], dtype=object)
    _check(_model("StringNormalizer", [[len(x)]], {"case_change_action": case}, 10), {"x0": x})


@pytest.mark.parametrize("text", ["ΟΔΟΣ", "Σ", "ΑΣ", "ΑΣΑ", "Α'Σ", "Α'Σ'", "Σ'Α", "ΑΣ.", "Α\u00adΣ\u00ad", "ΑΣ Β",
                                  "1Σ", "ΑΣ1", "aΣb", "aΣ", "ǅΣ", "ΑΣ\u0301", "ΑΣ\u200bΒ", "ΆΣ", "𝐀Σ", "ΣΣ"])
def test_normalizer_final_sigma(text):
    x = np.array([text, text + " " + text], dtype=object)
    _check(_model("StringNormalizer", [[2]], {"case_change_action": "LOWER"}, 10), {"x0": x})


def test_normalizer_heap_growth():
    m = _model("StringNormalizer", [["N"]], {"case_change_action": "UPPER", "stopwords": ["ab"]}, 10)
    sess = None
    for n in (3, 4000, 2):
        x = np.array([("ab straße é " * (i % 9)).strip() for i in range(n)], dtype=object)
        sess = _check(m, {"x0": x}, sess)


@pytest.mark.parametrize("attrs,shape,msg", [
    ({"case_change_action": "TITLE"}, [3], "case_change_action"),
    ({"is_case_sensitive": 2}, [3], "is_case_sensitive"),
    ({}, [1, 2, 3], "rank 3"),
])
def test_normalizer_rejects(attrs, shape, msg):
    m = _model("StringNormalizer", [shape], attrs, 10)
    with pytest.raises(InvalidGraph, match=msg):
        onnxc.InferenceSession(m.SerializeToString())
