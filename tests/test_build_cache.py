"""The build cache: concurrent builders, damaged entries, compiler failures, cache location."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxc
from onnxc import build, compiler, emit
from onnxc.errors import BuildError, CompilerNotFound

ROOT = Path(__file__).resolve().parent.parent


def unique_model(path: Path | None = None) -> onnx.ModelProto:
    """x + c -> Relu, with c unique to this call: a model no cache has seen."""
    c = np.frombuffer(uuid.uuid4().bytes, np.uint8).astype(np.float32)[:4] / 255.0
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])
    g = helper.make_graph([helper.make_node("Add", ["x", "c"], ["t"]), helper.make_node("Relu", ["t"], ["y"])],
                          "unique", [x], [y], [numpy_helper.from_array(c, "c")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    if path is not None:
        onnx.save(m, str(path))
    return m


def expected(m: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    c = numpy_helper.to_array(m.graph.initializer[0])
    return np.maximum(x + c, 0)


def run_py(code: str, env: dict | None = None, timeout: int = 300) -> subprocess.CompletedProcess:
    full = dict(os.environ)
    full["PYTHONPATH"] = os.pathsep.join([str(ROOT), full.get("PYTHONPATH", "")])
    full.update(env or {})
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=full, timeout=timeout, cwd=str(ROOT))


SESSION_SCRIPT = """
import json, os, sys, time
import numpy as np
import onnxc
if len(sys.argv) > 3:            # start together: wait for the go file
    open(sys.argv[3] + "." + str(os.getpid()), "w").close()
    while not os.path.exists(sys.argv[3]):
        time.sleep(0.005)
kw = {} if sys.argv[2] == "-" else {"cache_dir": sys.argv[2]}
sess = onnxc.InferenceSession(sys.argv[1], **kw)
y = sess.run(None, {"x": np.arange(12, dtype=np.float32).reshape(3, 4) - 5})[0]
print(json.dumps({"lib": sess.library_path, "y": y.tolist()}))
"""


def session_in_subprocess(model_path, cache, env=None, go=None):
    full = dict(os.environ)
    full["PYTHONPATH"] = os.pathsep.join([str(ROOT), full.get("PYTHONPATH", "")])
    full.update(env or {})
    args = [str(model_path), str(cache) if cache else "-"] + ([str(go)] if go else [])
    return subprocess.Popen([sys.executable, "-c", SESSION_SCRIPT, *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=full, cwd=str(ROOT))


def published_entries(cache: Path) -> list[Path]:
    return [p for p in cache.iterdir() if p.is_dir() and p.name not in ("tmp", "locks", "wrappers")]


def test_eight_processes_build_one_model_at_once(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    model = unique_model(tmp_path / "m.onnx")
    go = tmp_path / "go"
    procs = [session_in_subprocess(tmp_path / "m.onnx", cache, go=go) for _ in range(8)]
    deadline = time.monotonic() + 120
    while len(list(tmp_path.glob("go.*"))) < 8 and time.monotonic() < deadline:   # all imported onnxc
        time.sleep(0.01)
    go.touch()
    results = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        results.append(json.loads(out.strip().splitlines()[-1]))
    libs = {r["lib"] for r in results}
    assert len(libs) == 1, libs
    lib = Path(libs.pop())
    want = expected(model, np.arange(12, dtype=np.float32).reshape(3, 4) - 5)
    for r in results:
        np.testing.assert_array_equal(np.array(r["y"], np.float32), want)
    entries = published_entries(cache)
    assert entries == [lib.parent]
    assert build.published(cache, lib.parent.name) == lib        # intact: matches its manifest
    assert sorted(p.name for p in lib.parent.iterdir()) == sorted([build.LIB_NAME, build.MANIFEST, "model.c"])
    assert list((cache / "tmp").iterdir()) == []                   # nothing partial left behind


def _build(model, cache) -> Path:
    return compiler.build_library(model, compiler.Options(), cache)


@pytest.mark.parametrize("damage", ["truncate", "flip_byte", "drop_manifest", "bad_manifest"])
def test_damaged_library_is_rebuilt_not_loaded(tmp_path, damage):
    cache = tmp_path / "cache"
    model = unique_model(tmp_path / "m.onnx")
    p = session_in_subprocess(tmp_path / "m.onnx", cache)   # built the way the rebuild will be
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0, err
    lib = Path(json.loads(out.strip().splitlines()[-1])["lib"])
    data = lib.read_bytes()
    man = lib.parent / build.MANIFEST
    if damage == "truncate":
        lib.write_bytes(data[: len(data) // 2])
    elif damage == "flip_byte":
        lib.write_bytes(data[:100] + bytes([data[100] ^ 0xFF]) + data[101:])
    elif damage == "drop_manifest":
        man.unlink()
    else:
        man.write_text("{not json")
    assert build.published(cache, lib.parent.name) is None
    # a fresh process must rebuild, never load the damaged file (which would crash or fail to import)
    p = session_in_subprocess(tmp_path / "m.onnx", cache)
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0, err
    res = json.loads(out.strip().splitlines()[-1])
    assert res["lib"] == str(lib)
    np.testing.assert_array_equal(np.array(res["y"], np.float32),
                                  expected(model, np.arange(12, dtype=np.float32).reshape(3, 4) - 5))
    assert build.published(cache, lib.parent.name) == lib   # rebuilt, complete and verified
    assert list((cache / "tmp").iterdir()) == []         # the damaged entry was removed


def test_published_library_is_reused_not_rebuilt(tmp_path):
    cache = tmp_path / "cache"
    model = unique_model()
    lib = _build(model, cache)
    st = lib.stat()
    assert _build(model, cache) == lib
    st2 = lib.stat()
    assert (st.st_ino, st.st_mtime_ns) == (st2.st_ino, st2.st_mtime_ns)


def test_build_error_carries_diagnostics_and_source(tmp_path):
    broken = emit.Sources("int onnxc_broken(void) { return undeclared_identifier_xyz; }\n", b"", {}, [])
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(BuildError) as ei:
        build.compile_library(broken, "_onnxc_broken", out, build.toolchain())
    e = ei.value
    assert "undeclared_identifier_xyz" in e.diagnostics
    assert "error" in e.diagnostics
    assert e.source_dir == str(out)
    assert (out / "model.c").read_text() == broken.c
    assert "undeclared_identifier_xyz" in str(e) and str(out) in str(e)


def test_build_error_through_the_cache_publishes_nothing(tmp_path):
    cache = tmp_path / "cache"
    broken = emit.Sources("#error deliberately broken\n", b"", {}, [])
    key = "0" * 64
    with pytest.raises(BuildError) as ei:
        build.build_cached(key, lambda: broken, build.toolchain(), cache)
    assert "deliberately broken" in ei.value.diagnostics
    kept = Path(ei.value.source_dir)
    assert kept.parent == cache / "tmp" and (kept / "model.c").is_file()   # kept for inspection
    assert not (cache / key).exists()
    assert build.published(cache, key) is None


def test_missing_compiler_fails_first_and_clearly(tmp_path):
    cache = tmp_path / "cache"
    unique_model(tmp_path / "m.onnx")
    p = run_py(f"""
        import onnxc
        from onnxc.errors import CompilerNotFound
        try:
            onnxc.InferenceSession({str(tmp_path / 'm.onnx')!r}, cache_dir={str(cache)!r})
        except CompilerNotFound as e:
            print("CompilerNotFound:", e)
        """, env={"CC": "/nonexistent/cc"})
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("CompilerNotFound:") and "/nonexistent/cc" in p.stdout, p.stdout
    assert not cache.exists()          # no work was done before the error


def test_missing_compiler_is_an_onnxc_fail():
    assert issubclass(CompilerNotFound, build.Fail)
    env = dict(os.environ, CC="/nonexistent/cc")
    old = os.environ.get("CC")
    try:
        os.environ["CC"] = env["CC"]
        with pytest.raises(CompilerNotFound, match="/nonexistent/cc"):
            build.toolchain()
    finally:
        if old is None:
            os.environ.pop("CC", None)
        else:
            os.environ["CC"] = old


def test_cache_dir_from_environment_variable(tmp_path):
    cache = tmp_path / "env-cache"
    unique_model(tmp_path / "m.onnx")
    p = session_in_subprocess(tmp_path / "m.onnx", None, env={"ONNXC_CACHE_DIR": str(cache)})
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0, err
    lib = Path(json.loads(out.strip().splitlines()[-1])["lib"])
    assert lib.parent.parent == cache


def test_cache_dir_argument_wins_over_environment(tmp_path):
    env_cache, arg_cache = tmp_path / "env-cache", tmp_path / "arg-cache"
    unique_model(tmp_path / "m.onnx")
    p = session_in_subprocess(tmp_path / "m.onnx", arg_cache, env={"ONNXC_CACHE_DIR": str(env_cache)})
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0, err
    lib = Path(json.loads(out.strip().splitlines()[-1])["lib"])
    assert lib.parent.parent == arg_cache
    assert not env_cache.exists()


def test_default_cache_dir_follows_xdg_and_home(tmp_path):
    code = "from onnxc import build; print(build.default_cache_dir())"
    env = {k: v for k, v in os.environ.items() if k not in ("ONNXC_CACHE_DIR", "XDG_CACHE_HOME")}
    env["PYTHONPATH"] = str(ROOT)

    def where(**extra):
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env={**env, **extra}, check=True)
        return Path(r.stdout.strip())

    assert where(HOME=str(tmp_path)) == tmp_path / ".cache" / "onnxc"
    assert where(HOME=str(tmp_path), XDG_CACHE_HOME=str(tmp_path / "xdg")) == tmp_path / "xdg" / "onnxc"
    assert where(HOME=str(tmp_path), ONNXC_CACHE_DIR=str(tmp_path / "o")) == tmp_path / "o"


def test_cache_key_separates_what_changes_the_library():
    tc = build.toolchain()
    base = build.cache_key(b"model", {"a": 1}, "1.0", tc)
    assert base == build.cache_key(b"model", {"a": 1}, "1.0", tc)
    assert base != build.cache_key(b"model2", {"a": 1}, "1.0", tc)
    assert base != build.cache_key(b"model", {"a": 2}, "1.0", tc)
    assert base != build.cache_key(b"model", {"a": 1}, "1.1", tc)
    other = build.Toolchain(tc.cc, tc.identity + " (other)", tc.flags)
    assert base != build.cache_key(b"model", {"a": 1}, "1.0", other)
    flags = build.Toolchain(tc.cc, tc.identity, tc.flags + ("-DX",))
    assert base != build.cache_key(b"model", {"a": 1}, "1.0", flags)


def test_one_wrapper_object_serves_every_library(tmp_path):
    """cffi's wrapper is compiled once per cache; libraries of different models link it and
    load side by side in one process under the one module name."""
    cache = tmp_path / "cache"
    sessions = []
    for k in (2, 5):
        m = helper.make_model(helper.make_graph(
            [helper.make_node("Mul", ["x", "x"], ["y"])], f"g{k}",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [k])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [k])]),
            opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
        sessions.append(onnxc.InferenceSession(m.SerializeToString(), cache_dir=str(cache)))
    assert len(list((cache / "wrappers").glob("cffi-wrapper-*.o"))) == 1
    for k, s in zip((2, 5), sessions):
        x = np.arange(k, dtype=np.float32)
        np.testing.assert_array_equal(s.run(None, {"x": x})[0], x * x)
