"""RegexFullMatch: many RE2-syntax patterns against Python's re.fullmatch on random strings
(ASCII, UTF-8, empty), with RE2's ASCII meaning of \\d \\s \\w \\b (re.ASCII on the Python side),
plus onnx.reference on the suite-like cases and the rejection of unsupported syntax."""
from __future__ import annotations

import re

import numpy as np
import pytest
from onnx import TensorProto as TP, helper as h
from onnx.reference import ReferenceEvaluator

import onnxc
from onnxc.errors import InvalidGraph
from onnxc.ops import regex_compile

ALPHABET = list("abcxyzABZ019_.-@ \t\n/*\"\\?") + ["é", "ü", "中", "𝄞", "ſ", "K", "\u212a", "ß"]


def _model(pattern, shape):
    x = h.make_tensor_value_info("X", TP.STRING, shape)
    node = h.make_node("RegexFullMatch", ["X"], ["Y"], pattern=pattern)
    g = h.make_graph([node], "g", [x], [h.make_tensor_value_info("Y", TP.BOOL, shape)])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 20)])
    m.ir_version = 9
    return m


def _strings(rng, n, alphabet=ALPHABET, max_len=8):
    out = ["", "a", "ab", "aaa", "abc", "www.google.com", "x@gmail.com"]
    for _ in range(n - len(out)):
        out.append("".join(rng.choice(alphabet, int(rng.integers(0, max_len + 1)))))
    return np.array(out, object)


def _run(pattern, x):
    sess = onnxc.InferenceSession(_model(pattern, list(x.shape)).SerializeToString())
    return sess.run(None, {"X": x})[0]


# (RE2 pattern, Python equivalent or None for the same text, Python flags)
PATTERNS = [
    ("abc", None), ("a*", None), ("a+b?", None), ("(a|b)*c", None), ("a{2}", None), ("a{1,3}b", None),
    ("a{2,}", None), ("(ab){0,2}", None), ("a*?b+?", None), ("(?:ab|a)(?:c|bc)", None), ("", None),
    (".", None), (".*", None), ("..", None), ("(?s).*", None), ("[abc]+", None), ("[^abc]*", None),
    ("[a-z0-9_]+", None), ("[]a]", None), ("[^]a]", None), ("[a-]+", None), ("[-a]+", None),
    (r"\d+", None), (r"\D+", None), (r"\w+", None), (r"\W*", None), (r"\s", None), (r"\S+", None),
    (r"[\w.-]+@[\w-]+\.com", None), (r"[^\w\s]", None), (r"\bab\b.*", None), (r".*\Bb.*", None),
    (r"^a.*$", None), (r"\Aab*\z", r"\Aab*\Z"), (r"(\W|^)[\w.\-]{0,25}@(yahoo|gmail)\.com(\W|$)", None),
    (r"www\.[\w.-]+\.\bcom\b", None), (r"\x61\x{62}c", r"\x61\x62c"), (r"\101", None),
    (r"\Qa.b\E.*", r"a\.b.*"), (r"é+", None), ("[é-ü]*", None), ("[^é]", None), ("中.𝄞", None),
    ("[[:alpha:]]+", "[a-zA-Z]+"), ("[[:^digit:][:space:]]+", "[^0-9]+"),
    (r"(?i)abc", None), (r"(?i:a)b", "(?i:a)b"), (r"(?i)[a-c]+", None), ("(?i)k", None),
    ("(?i)s+", None), ("(?i)[^k]", None), (r"a|b|", None), (r"(|a)+", None), (r"(a*)*", None),
    (r"(a|ab)(c|bcd)(d*)", None), (r"\t\n?", None), (r"[\d\-]+", None), ("(?P<x>a)(?<y>b)?", "(?P<x>a)(?P<y>b)?"),
    ("a{,2}", r"a\{,2\}"), ("a{x", r"a\{x"), (r"\.\*\+\?\(\)\[\]\{\}\|\^\$\\", None),
    ("(?m)^a$\n^b$", None), ("x*(?m:$)", None),
]


def _strings_for(pattern, seed):
    rng = np.random.default_rng(seed)
    lits = [c for c in set(pattern) if c.isprintable()] or ["a"]
    return np.concatenate([_strings(rng, 60), _strings(rng, 60, alphabet=lits + ["a", "b", "\n"], max_len=12)])


@pytest.mark.parametrize("engine", ["dfa", "nfa"])
def test_patterns_vs_python(engine, monkeypatch):
    """All patterns in one model (one build): node k matches PATTERNS[k] on input X_k."""
    if engine == "nfa":     # no DFA fits: the NFA simulation runs
        monkeypatch.setattr(regex_compile, "MAX_DFA_STATES", 0)
    xs = [_strings_for(p, k) for k, (p, _) in enumerate(PATTERNS)]
    ins = [h.make_tensor_value_info(f"X{k}", TP.STRING, [len(x)]) for k, x in enumerate(xs)]
    outs = [h.make_tensor_value_info(f"Y{k}", TP.BOOL, [len(x)]) for k, x in enumerate(xs)]
    nodes = [h.make_node("RegexFullMatch", [f"X{k}"], [f"Y{k}"], pattern=p) for k, (p, _) in enumerate(PATTERNS)]
    m = h.make_model(h.make_graph(nodes, "g", ins, outs), opset_imports=[h.make_opsetid("", 20)])
    m.ir_version = 9
    got = onnxc.InferenceSession(m.SerializeToString()).run(None, {f"X{k}": x for k, x in enumerate(xs)})
    for (pattern, py), x, g in zip(PATTERNS, xs, got):
        # RE2's \s has no \v; the alphabet avoids \v so that re.ASCII's \s agrees
        rx = re.compile(py if py is not None else pattern, re.ASCII if "(?i)" not in pattern else 0)
        want = np.array([rx.fullmatch(s) is not None for s in x])
        assert g.dtype == np.bool_ and g.shape == x.shape
        bad = [(s, w) for s, w, v in zip(x, want, g) if w != v]
        assert not bad, f"{pattern!r}: mismatches {bad[:5]}"


def test_dfa_used_for_small_patterns_nfa_past_cap():
    for p in [r"(\W|^)[\w.\-]{0,25}@(yahoo|gmail)\.com(\W|$)", ".*abc.*", r"\b\w+\b"]:
        assert regex_compile.to_dfa(*regex_compile.compile_pattern(p)) is not None
    assert regex_compile.to_dfa(*regex_compile.compile_pattern("(a|b)*a(a|b){12}")) is None
    x = _strings_for("ab", 3)
    want = [re.fullmatch("(a|b)*a(a|b){12}", s) is not None for s in x]
    x = np.concatenate([x, ["ba" * 7, "a" * 13, "b" + "a" * 13]]).astype(object)
    want += [True, True, True]
    np.testing.assert_array_equal(_run("(a|b)*a(a|b){12}", x), want)


@pytest.mark.parametrize("pattern", [r"(\W|^)[\w.\-]{0,25}@(yahoo|gmail)\.com(\W|$)", r"www\.[\w.-]+\.\bcom\b",
                                     "[a-c]*b"])
@pytest.mark.parametrize("shape", [(3,), (2, 2), (2, 0), (2, 3, 4)])
def test_against_reference(pattern, shape):
    rng = np.random.default_rng(1)
    x = _strings(rng, max(int(np.prod(shape)), 7))[:int(np.prod(shape))].reshape(shape)
    ref = ReferenceEvaluator(_model(pattern, list(shape))).run(None, {"X": x})[0]
    np.testing.assert_array_equal(_run(pattern, x), ref)


def test_many_strings_parallel():
    rng = np.random.default_rng(5)
    x = _strings(rng, 5000, max_len=30)
    pattern = r"[\w.]*(ab|c\d)+.*"
    want = np.array([re.fullmatch(pattern, s, re.ASCII) is not None for s in x])
    np.testing.assert_array_equal(_run(pattern, x), want)


def test_symbolic_shape():
    sess = onnxc.InferenceSession(_model("a+", ["N"]).SerializeToString())
    for n in (0, 1, 4):
        x = np.array(["a" * k for k in range(n)], object)
        np.testing.assert_array_equal(sess.run(None, {"X": x})[0], [k > 0 for k in range(n)])


@pytest.mark.parametrize("pattern, msg", [
    (r"(a)\1", "backreference"), ("(?=a)", "lookaround"), ("(?<!a)b", "lookaround"), ("(?P=x)", "backreference"),
    (r"\pL", "Unicode class"), ("a**", "repetition"), ("*a", "missing argument"), ("(a", "missing \\)"),
    ("a)", "unexpected \\)"), ("[a", "missing \\]"), ("[b-a]", "range"), ("a{1001}", "repetition"),
    ("a{3,2}", "repetition"), (r"\q", "escape"), ("(?x)a", "flags"), (r"\xZZ", "x escape"),
    ("[[:foo:]]", "class name"), ("(.{100}){100}", "too large"),
])
def test_rejected(pattern, msg):
    with pytest.raises(InvalidGraph, match=f"{msg}.*at position|position.*{msg}|{msg}"):
        onnxc.InferenceSession(_model(pattern, [2]).SerializeToString())


def test_error_names_node_and_position():
    with pytest.raises(InvalidGraph, match=r"RegexFullMatch.*pattern 'ab\(\?=c\)'.*position 2"):
        onnxc.InferenceSession(_model("ab(?=c)", [2]).SerializeToString())


def _py_dfa_match(dfa, s: str) -> bool:
    cls, ncls, delta, accept, st = dfa
    for b in s.encode("utf-8"):
        st = delta[st * ncls + cls[b]]
        if st == 0:
            return False
    return bool(accept[st])


def _random_pattern(rng, depth=0) -> str:
    atoms = ["a", "b", "c", ".", r"\d", r"\w", r"\W", "[ab]", "[^a]", "[a-c]", "é", "[é中]", r"\.", r"\b"]
    n = int(rng.integers(1, 4))
    parts = []
    for _ in range(n):
        if depth < 2 and rng.random() < 0.3:
            inner = "|".join(_random_pattern(rng, depth + 1) for _ in range(int(rng.integers(1, 3))))
            atom = ("(?:" if rng.random() < 0.5 else "(") + inner + ")"
        else:
            atom = str(rng.choice(atoms))
        if atom != r"\b":
            atom += str(rng.choice(["", "", "*", "+", "?", "{2}", "{1,3}", "{0,2}", "*?", "{2,}"]))
        parts.append(atom)
    return "".join(parts)


def test_fuzz_compiler_vs_python():
    """Random patterns: the compiled DFA (run here in Python) against re.fullmatch (no C builds)."""
    rng = np.random.default_rng(11)
    alphabet = list("abc1._ ") + ["é", "中"]
    checked = 0
    for _ in range(150):
        pattern = _random_pattern(rng)
        dfa = regex_compile.to_dfa(*regex_compile.compile_pattern(pattern))
        if dfa is None:
            continue
        rx = re.compile(pattern, re.ASCII)
        for s in _strings(rng, 40, alphabet=alphabet, max_len=7):
            assert _py_dfa_match(dfa, s) == (rx.fullmatch(s) is not None), (pattern, s)
        checked += 1
    assert checked > 120
