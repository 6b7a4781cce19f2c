"""Model-supplied strings never reach generated C except inside escaped string literals.

A model whose every string (tensor, node and graph names, doc strings, producer, domain,
metadata props, symbolic dim names, opset domains, attribute doc strings) carries C payloads
must build, run correctly, and its generated source must hold none of the payloads outside
string literals. A small C tokenizer (aware of comments, string and character literals)
removes the literals; what remains, comments included, must not contain any payload.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import onnxc
from onnxc import compiler, cstring, loader

ROOT = Path(__file__).resolve().parent.parent

# Each piece would break C somewhere: end a comment or literal, start a directive, splice a
# line (trailing backslash), form a trigraph (??/ is a backslash), or hide text (bidi, NEL).
PIECES = ["*/", '"', "\n", "\r", "#include <stdlib.h>", "??/", "??=", "'", "/*", "//", "\t", "%s%n",
          "\\", "é✓\u202e\u2028\x85", "\x01\x1b[2J", "\\"]
PAYLOAD = "".join(PIECES)        # ends with a backslash: a trailing line splice in a comment
MARK = "EVIL"


def evil(site: str) -> str:
    """A unique string per site, so a leak names the route it took."""
    return f"{MARK}{site}{PAYLOAD}"


def payload_model() -> onnx.ModelProto:
    x, w, mid, y = evil("in"), evil("weight"), evil("mid"), evil("out")
    batch = evil("dim")
    xi = helper.make_tensor_value_info(x, TensorProto.FLOAT, [batch, 4], doc_string=evil("vidoc"))
    yi = helper.make_tensor_value_info(y, TensorProto.FLOAT, [batch, 4], doc_string=evil("vodoc"))
    init = numpy_helper.from_array(np.array([1.5, -2.0, 0.25, 3.0], np.float32), w)
    init.doc_string = evil("tdoc")
    n1 = helper.make_node("Mul", [x, w], [mid], name=evil("node1"), doc_string=evil("ndoc"))
    n2 = helper.make_node("LeakyRelu", [mid], [y], name=evil("node2"), alpha=0.125)
    n2.attribute[0].doc_string = evil("adoc")
    g = helper.make_graph([n1, n2], evil("graph"), [xi], [yi], [init], doc_string=evil("gdoc"),
                          value_info=[helper.make_tensor_value_info(mid, TensorProto.FLOAT, [batch, 4],
                                                                    doc_string=evil("midoc"))])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                            helper.make_opsetid(evil("opdomain"), 1)],
                          ir_version=8, producer_name=evil("producer"), producer_version=evil("pversion"),
                          doc_string=evil("mdoc"), domain=evil("domain"), model_version=7)
    helper.set_model_props(m, {evil("key"): evil("value"), "plain": evil("value2")})
    onnx.checker.check_model(m)
    return m


# ---- a C scanner ---------------------------------------------------------------------------
_LITERAL_BODY = re.compile(r'(?:[ -!#-\[\]-~]|\\[0-7]{1,3}|\\x[0-9a-fA-F]+|\\[\\"\'?abfnrtv])*')


def scan_c(src: str):
    """Split C source into code (with comments) and string/char literal bodies. Fails on an
    unterminated literal or comment, or a raw newline inside a literal."""
    code, literals = [], []
    i, n = 0, len(src)
    while i < n:
        ch = src[i]
        if src.startswith("/*", i):
            j = src.find("*/", i + 2)
            assert j >= 0, "unterminated comment"
            code.append(src[i:j + 2])
            i = j + 2
        elif src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            code.append(src[i:j])
            i = j
        elif ch in "\"'":
            j = i + 1
            while True:
                assert j < n, "unterminated literal"
                c = src[j]
                assert c != "\n", f"raw newline inside a literal near {src[i:j][:80]!r}"
                if c == "\\":
                    j += 2
                    continue
                if c == ch:
                    break
                j += 1
            body = src[i + 1:j]
            if ch == '"':
                literals.append(body)
            code.append(ch + ch)      # keep the token's place, drop its content
            i = j + 1
        else:
            code.append(ch)
            i += 1
    return "".join(code), literals


def decode_literal(body: str) -> bytes:
    out = bytearray()
    simple = {"n": 10, "t": 9, "r": 13, "a": 7, "b": 8, "f": 12, "v": 11, "\\": 92, '"': 34, "'": 39, "?": 63}
    i = 0
    while i < len(body):
        c = body[i]
        if c != "\\":
            out.append(ord(c))
            i += 1
            continue
        m = re.match(r"[0-7]{1,3}", body[i + 1:])
        if m:
            out.append(int(m.group(), 8))
            i += 1 + len(m.group())
        elif body[i + 1] == "x":
            m = re.match(r"[0-9a-fA-F]+", body[i + 2:])
            out.append(int(m.group(), 16) & 0xFF)
            i += 2 + len(m.group())
        else:
            out.append(simple[body[i + 1]])
            i += 2
    return bytes(out)


def meta_from_source(src: str) -> dict:
    """The JSON the library describes itself with, read back from its C literal."""
    start = src.index("onnxc_meta[] =")
    end = src.index(";", start)
    _, lits = scan_c(src[start:end])
    return json.loads(b"".join(decode_literal(b) for b in lits).decode("utf-8"))


def assert_no_payload_outside_literals(src: str, where: str) -> None:
    raw = src.encode("utf-8")
    assert all(b == 10 or 32 <= b < 127 for b in raw), f"{where}: a byte outside printable ASCII"
    assert "??" not in src, f"{where}: a trigraph-like '??'"
    assert "\\\n" not in src, f"{where}: a line splice"
    code, literals = scan_c(src)
    for body in literals:
        assert _LITERAL_BODY.fullmatch(body), f"{where}: unescaped text in a literal: {body[:80]!r}"
    assert MARK not in code, f"{where}: model text outside a literal: " + \
        code[max(0, code.index(MARK) - 80):code.index(MARK) + 80]
    pieces = [p for p in PIECES if len(p) > 2 and p.isprintable() and p.isascii()]
    for piece in pieces:
        assert piece not in code, f"{where}: {piece!r} outside a literal"
    for line in code.splitlines():
        if line.lstrip().startswith("#include"):
            assert re.fullmatch(r'\s*#include\s+(""|<[a-z0-9_/]+\.h>)', line), f"{where}: {line!r}"


def check_meta(meta: dict) -> None:
    assert meta["inputs"][0]["name"] == evil("in")
    assert meta["inputs"][0]["shape"] == [evil("dim"), 4]
    assert meta["outputs"][0]["name"] == evil("out")
    assert meta["producer_name"] == evil("producer")
    assert meta["custom_metadata_map"] == {evil("key"): evil("value"), "plain": evil("value2")}


# ---- tests ---------------------------------------------------------------------------------
def test_cstring_literal_escapes_everything_dangerous():
    for text in [PAYLOAD, "", "plain", "x" * 500 + PAYLOAD * 3, bytes(range(1, 256))]:
        lit = cstring.literal(text)
        assert "??" not in lit and "\r" not in lit
        code, bodies = scan_c(lit)
        assert code.replace('""', "").strip() == "", lit      # nothing but adjacent literals
        data = text.encode("utf-8") if isinstance(text, str) else text
        assert b"".join(decode_literal(b) for b in bodies) == data
        for b in bodies:
            assert _LITERAL_BODY.fullmatch(b)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    cache = tmp_path_factory.mktemp("cache")
    model = payload_model()
    sess = onnxc.InferenceSession(model.SerializeToString(), cache_dir=str(cache))
    return model, sess


def test_payload_model_builds_and_runs_like_the_reference(built):
    model, sess = built
    x = np.array([[1, 2, -3, 4], [-1, 0.5, np.inf, np.nan], [0, -0.0, -7, 1e30]], np.float32)
    got = sess.run(None, {evil("in"): x})[0]
    want = ReferenceEvaluator(model).run(None, {evil("in"): x})[0]
    np.testing.assert_array_equal(got, want)
    assert [i.name for i in sess.get_inputs()] == [evil("in")]
    assert sess.get_inputs()[0].shape == [evil("dim"), 4]
    assert [o.name for o in sess.get_outputs()] == [evil("out")]
    np.testing.assert_array_equal(sess.run([evil("out")], {evil("in"): x})[0], got)
    meta = sess.get_modelmeta()
    assert meta.producer_name == evil("producer")
    assert meta.graph_name == evil("graph")
    assert meta.domain == evil("domain")
    assert meta.description == evil("mdoc")
    assert meta.graph_description == evil("gdoc")
    assert meta.custom_metadata_map == {evil("key"): evil("value"), "plain": evil("value2")}


def test_published_source_holds_no_payload_outside_literals(built):
    _, sess = built
    src_path = Path(sess.library_path).parent / "model.c"
    src = src_path.read_text()
    assert_no_payload_outside_literals(src, str(src_path))
    check_meta(meta_from_source(src))


def test_source_with_weights_as_c_data_is_clean_and_compiles(tmp_path):
    comp = compiler.compile_model(loader.load(payload_model()), weights_mode="c")
    assert_no_payload_outside_literals(comp.sources.c, "weights_mode=c")
    check_meta(meta_from_source(comp.sources.c))
    from onnxc.resources import runtime_dir
    (tmp_path / "model.c").write_text(comp.sources.c)
    # -trigraphs: a '??/' that slipped out would splice lines; -Werror: no other warning either
    r = subprocess.run(["gcc", "-std=c99", "-trigraphs", "-Wall", "-Werror", "-Wno-unknown-pragmas",
                        "-Wno-unused-variable",
                        "-I", str(runtime_dir()), "-c", "model.c", "-o", "model.o"],
                       cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_cli_outputs_hold_no_payload(tmp_path):
    onnx.save(payload_model(), str(tmp_path / "evil.onnx"))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, "-m", "onnxc.cli", "build", "evil.onnx", "--emit-c", "fw",
                        "--python-module", "evilpkg", "-o", "libevil.so"],
                       cwd=tmp_path, capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert MARK not in r.stdout
    for name in ("model.c", "model.h"):
        assert_no_payload_outside_literals((tmp_path / "fw" / name).read_text(), f"--emit-c {name}")
    init = (tmp_path / "evilpkg" / "__init__.py").read_text()
    assert MARK not in init and init.isascii()
    r = subprocess.run([sys.executable, "-m", "onnxc.cli", "info", "libevil.so"], cwd=tmp_path,
                       capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert all(ch == "\n" or ch.isprintable() for ch in r.stdout) and "\x1b" not in r.stdout


@pytest.mark.parametrize("op", ["Conv", "MaxPool", "AveragePool"])
def test_unknown_enum_attribute_value_is_rejected(op):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 5, 5])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 3, 3])
    inits, inputs = [], ["x"]
    if op == "Conv":
        inits = [numpy_helper.from_array(np.ones((1, 1, 3, 3), np.float32), "w")]
        inputs = ["x", "w"]
    node = helper.make_node(op, inputs, ["y"], name=evil("enum"), kernel_shape=[3, 3],
                            auto_pad=evil("value"))
    m = helper.make_model(helper.make_graph([node], "g", [x], [y], inits),
                          opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    with pytest.raises(onnxc.Error) as ei:
        onnxc.InferenceSession(m.SerializeToString())
    msg = str(ei.value)
    assert "auto_pad" in msg
    assert f"node 0 ({op}, name {evil('enum')!r})" in msg, msg


@pytest.mark.parametrize("location", ["../../etc/passwd", "../secret.bin", "/etc/passwd",
                                      "sub/../../secret.bin", "link.bin"])
@pytest.mark.parametrize("as_bytes", [False, True])
def test_external_data_outside_the_model_folder_is_rejected(tmp_path, location, as_bytes):
    secret = np.array([1, 2, 3, 4], np.float32)
    (tmp_path / "secret.bin").write_bytes(secret.tobytes())
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "sub").mkdir()
    os.symlink(tmp_path / "secret.bin", folder / "link.bin")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])
    w = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[4])
    w.data_location = TensorProto.EXTERNAL
    w.external_data.add(key="location", value=location)
    m = helper.make_model(helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "g", [x], [y], [w]),
                          opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    path = folder / "m.onnx"
    path.write_bytes(m.SerializeToString())
    cwd = os.getcwd()
    os.chdir(folder)       # even relative to the working folder, nothing outside may be read
    try:
        with pytest.raises(onnxc.Error) as ei:
            onnxc.InferenceSession(m.SerializeToString() if as_bytes else str(path))
    finally:
        os.chdir(cwd)
    assert isinstance(ei.value, (onnxc.InvalidGraph, onnxc.InvalidArgument, onnxc.NoSuchFile)), ei.value
    assert "w" in str(ei.value)


def test_external_data_inside_the_model_folder_loads(tmp_path):
    data = np.array([1, 2, 3, 4], np.float32)
    (tmp_path / "w.bin").write_bytes(data.tobytes())
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])
    w = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[4])
    w.data_location = TensorProto.EXTERNAL
    w.external_data.add(key="location", value="w.bin")
    m = helper.make_model(helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "g", [x], [y], [w]),
                          opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    (tmp_path / "m.onnx").write_bytes(m.SerializeToString())
    sess = onnxc.InferenceSession(str(tmp_path / "m.onnx"))
    np.testing.assert_array_equal(sess.run(None, {"x": np.ones(4, np.float32)})[0], data + 1)


def test_scanner_catches_a_leak():
    """The checks above can fail: a name in a comment or after a broken literal is caught."""
    leaky = [f"/* {evil('x')} */\nint a;\n", f'const char *s = "{MARK}";\nint {MARK}b;\n',
             'const char *s = "a\\\nb";\n', "int a; /* ??/ */\n"]
    for src in leaky:
        with pytest.raises(AssertionError):
            assert_no_payload_outside_literals(src, "leaky")
