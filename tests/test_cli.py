"""The `onnxc` command line, run as a subprocess: build, info, run, --emit-c, --python-module."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "tiny_cnn.onnx"


def env_with(**extra) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    env.update(extra)
    return env


def onnxc(*args, cwd=None, env=None, check=True) -> subprocess.CompletedProcess:
    r = subprocess.run([sys.executable, "-m", "onnxc.cli", *map(str, args)], capture_output=True, text=True,
                       cwd=cwd, env=env or env_with(), timeout=300)
    if check and r.returncode != 0:
        raise AssertionError(f"onnxc {' '.join(map(str, args))} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    return r


def python(code: str, cwd=None, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          cwd=cwd, env=env or env_with(), timeout=300)


def small_model(path: Path, c=(1.0, 2.0, 3.0, 4.0), dim="N") -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [dim, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [dim, 4])
    g = helper.make_graph([helper.make_node("Mul", ["x", "c"], ["t"]), helper.make_node("Relu", ["t"], ["y"])],
                          "small", [x], [y], [numpy_helper.from_array(np.array(c, np.float32), "c")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.save(m, str(path))
    return m


def assert_one_line_error(r: subprocess.CompletedProcess, *fragments: str) -> None:
    assert r.returncode != 0
    err = r.stderr.strip()
    assert "Traceback" not in err, err
    assert len(err.splitlines()) == 1, err
    assert err.startswith("onnxc: error: "), err
    for f in fragments:
        assert f in err, err


# ---- build ---------------------------------------------------------------------------------
def test_build_writes_a_library_that_loads_without_the_model(tmp_path):
    model = tmp_path / "cnn.onnx"
    shutil.copyfile(EXAMPLE, model)
    lib = tmp_path / "out" / "libcnn.so"
    r = onnxc("build", model, "-o", lib)
    assert re.search(r"arena: \d+ bytes.*liveness lower bound \d+ bytes", r.stdout), r.stdout
    assert re.search(r"build time: \d+\.\d+ s", r.stdout), r.stdout
    assert lib.is_file() and os.access(lib, os.X_OK)
    assert [p.name for p in lib.parent.iterdir()] == ["libcnn.so"]     # no temp files left
    feed = np.random.default_rng(1).standard_normal((3, 1, 28, 28)).astype(np.float32)
    np.save(tmp_path / "x.npy", feed)
    want = ReferenceEvaluator(str(model)).run(None, {"image": feed})[0]
    model.unlink()                                                     # the library stands alone
    r = python(f"""
        import numpy as np, onnxc
        sess = onnxc.InferenceSession({str(lib)!r})
        y = sess.run(None, {{"image": np.load({str(tmp_path / 'x.npy')!r})}})[0]
        np.save({str(tmp_path / 'y.npy')!r}, y)
        print(sess.get_inputs()[0].shape, sess.get_outputs()[0].shape)
        """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "['batch', 1, 28, 28] ['batch', 10]"
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), want, rtol=1e-4, atol=1e-5)


def test_build_default_output_name_and_cache_dir(tmp_path):
    small_model(tmp_path / "small.onnx")
    cache = tmp_path / "cache"
    r = onnxc("build", "small.onnx", "--cache-dir", cache, cwd=tmp_path)
    assert (tmp_path / "libsmall.so").is_file(), r.stdout
    assert any(p.name not in ("tmp", "locks") for p in cache.iterdir())
    r = onnxc("build", "small.onnx", "--cache-dir", cache, "-o", "again.so", cwd=tmp_path)
    assert "(from the cache)" in r.stdout or "build time" in r.stdout


def test_rebuild_replaces_the_file_atomically_while_it_is_loaded(tmp_path):
    """A running process keeps the library it loaded; the path gets a new file (new inode)."""
    small_model(tmp_path / "a.onnx", c=(1, 2, 3, 4))
    small_model(tmp_path / "b.onnx", c=(10, 20, 30, 40))
    lib = tmp_path / "lib.so"
    onnxc("build", tmp_path / "a.onnx", "-o", lib)
    ino = lib.stat().st_ino
    code = f"""
        import subprocess, sys, numpy as np, onnxc
        x = np.ones((1, 4), np.float32)
        sess = onnxc.InferenceSession({str(lib)!r})
        before = sess.run(None, {{"x": x}})[0]
        subprocess.run([sys.executable, "-m", "onnxc.cli", "build", {str(tmp_path / 'b.onnx')!r}, "-o",
                        {str(lib)!r}], check=True, capture_output=True)
        after_old = sess.run(None, {{"x": x}})[0]             # the loaded copy is intact
        fresh = onnxc.InferenceSession({str(lib)!r}).run(None, {{"x": x}})[0]   # the new file
        print(before.tolist(), after_old.tolist(), fresh.tolist())
        """
    r = python(code)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[[1.0, 2.0, 3.0, 4.0]] [[1.0, 2.0, 3.0, 4.0]] [[10.0, 20.0, 30.0, 40.0]]"
    assert lib.stat().st_ino != ino
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.onnx", "b.onnx", "lib.so"]


def test_free_dim_fixes_a_symbolic_dimension(tmp_path):
    small_model(tmp_path / "m.onnx")
    lib = tmp_path / "m.so"
    onnxc("build", tmp_path / "m.onnx", "-o", lib, "--free-dim", "N=3")
    r = python(f"""
        import numpy as np, onnxc
        sess = onnxc.InferenceSession({str(lib)!r})
        print(sess.run(None, {{"x": np.ones((3, 4), np.float32)}})[0].shape)
        try:
            sess.run(None, {{"x": np.ones((2, 4), np.float32)}})
        except onnxc.InvalidArgument as e:
            print("rejected")
        """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["(3,", "4)", "rejected"]


def test_portable_build_runs(tmp_path):
    """--portable: no -march=native, so the kernels' baseline code paths (here SSE2) compile."""
    onnxc("build", EXAMPLE, "-o", tmp_path / "m.so", "--portable")
    r = onnxc("run", tmp_path / "m.so")
    assert "probabilities: float32 [1, 10]" in r.stdout


# ---- info ----------------------------------------------------------------------------------
def test_info_on_model_and_library_agree(tmp_path):
    lib = tmp_path / "cnn.so"
    onnxc("build", EXAMPLE, "-o", lib)
    for target in (EXAMPLE, lib):
        out = onnxc("info", target).stdout
        assert "image: tensor(float) [batch, 1, 28, 28]" in out, out
        assert "probabilities: tensor(float) [batch, 10]" in out, out
        assert re.search(r"^  Conv: 2$", out, re.M) and re.search(r"^  MaxPool: 2$", out, re.M), out
        assert re.search(r"arena: \d+ bytes.*liveness lower bound \d+ bytes.* at batch=\d+", out), out
        assert "ops (11 nodes)" in out
    a = json.loads(onnxc("info", EXAMPLE, "--json").stdout)
    b = json.loads(onnxc("info", lib, "--json").stdout)
    for k in ("inputs", "outputs", "ops", "arena_hint", "symbols", "producer_name"):
        assert a[k] == b[k], k
    assert a["arena_hint"]["bytes"] >= a["arena_hint"]["lower_bound"] > 0


def test_info_with_free_dim(tmp_path):
    small_model(tmp_path / "m.onnx")
    out = onnxc("info", tmp_path / "m.onnx", "--free-dim", "N=5").stdout
    assert "symbolic dims" not in out and "arena:" in out


def test_info_escapes_control_characters_in_names(tmp_path):
    m = small_model(tmp_path / "m.onnx")
    m.graph.input[0].name = "x\x1b[31mred\u202e"
    m.graph.node[0].input[0] = m.graph.input[0].name
    onnx.save(m, str(tmp_path / "m.onnx"))
    out = onnxc("info", tmp_path / "m.onnx").stdout
    assert "\x1b" not in out and "\u202e" not in out
    assert "x\\x1b[31mred\\u202e: tensor(float)" in out, out


# ---- run -----------------------------------------------------------------------------------
def test_run_with_random_and_given_inputs(tmp_path):
    small_model(tmp_path / "m.onnx")
    r = onnxc("run", tmp_path / "m.onnx", "--free-dim", "N=2")
    assert "y: float32 [2, 4]" in r.stdout
    x = np.array([[1, -1, 2, -2]], np.float32)
    np.savez(tmp_path / "in.npz", x=x)
    r = onnxc("run", tmp_path / "m.onnx", "-i", tmp_path / "in.npz", "--save", tmp_path / "out.npz")
    assert "[[1., 0., 6., 0.]]" in r.stdout, r.stdout
    saved = np.load(tmp_path / "out.npz")
    np.testing.assert_array_equal(saved["out_y"], [[1, 0, 6, 0]])
    np.save(tmp_path / "x.npy", x)
    r = onnxc("run", tmp_path / "m.onnx", "-i", tmp_path / "x.npy", "--save", tmp_path / "out2.npz")
    np.testing.assert_array_equal(np.load(tmp_path / "out2.npz")["out_y"], [[1, 0, 6, 0]])


# ---- firmware C --------------------------------------------------------------------------------
MAIN_C = r"""
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include "model.h"

static const float x[] = { %(values)s };

int main(void)
{
    int64_t dims[1] = { %(batch)d };
    int64_t shape[2];
    onnxc_output_shapes(dims, shape);
    int64_t n = shape[0] * shape[1];
    float *y = (float *)malloc((size_t)n * sizeof(float));
    int64_t nb = onnxc_arena_bytes(dims);
    unsigned char *raw = (unsigned char *)malloc((size_t)nb + 64);
    void *arena = raw + ((64 - (uintptr_t)raw %% 64) %% 64);
    void *inputs[1] = { (void *)x };
    void *outputs[1] = { y };
    if (!y || !raw) return 2;
    int rc = onnxc_run(inputs, outputs, dims, arena, 1);
    printf("rc %%d shape %%lld %%lld\n", rc, (long long)shape[0], (long long)shape[1]);
    for (int64_t i = 0; i < n; ++i) printf("%%.9g\n", y[i]);
    free(raw);
    free(y);
    return rc;
}
"""


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
@pytest.mark.parametrize("openmp", [False, True])
def test_emit_c_compiles_standalone_and_matches_the_session(tmp_path, openmp):
    out = tmp_path / "fw"
    r = onnxc("build", EXAMPLE, "--emit-c", out)
    assert "arena:" in r.stdout
    names = sorted(p.name for p in out.iterdir() if not p.name.startswith("."))
    assert {"model.c", "model.h", "onnxc_runtime.h"} <= set(names), names
    src = (out / "model.c").read_text()
    assert "Python.h" not in src and ".incbin" not in src
    assert src.startswith("/*\n * Standalone C99 model")
    omp = ["-fopenmp"] if openmp else []
    cc = subprocess.run(["gcc", "-std=c99", "-pedantic", "-Wall", "-Werror", *omp, "-c", "model.c", "-o",
                         "model.o"], cwd=out, capture_output=True, text=True)
    assert cc.returncode == 0, cc.stderr
    assert cc.stderr == "", cc.stderr                      # not even a warning

    batch = 2
    x = np.random.default_rng(7).standard_normal((batch, 1, 28, 28)).astype(np.float32)
    (out / "main.c").write_text(MAIN_C % {"values": ", ".join(f"{v:.9g}f" for v in x.ravel()), "batch": batch})
    link = subprocess.run(["gcc", "-std=c99", "-Wall", *omp, "-I.", "main.c", "model.o", "-lm", "-o", "main"],
                          cwd=out, capture_output=True, text=True)
    assert link.returncode == 0, link.stderr
    run = subprocess.run([str(out / "main")], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
    lines = run.stdout.split("\n")
    assert lines[0] == f"rc 0 shape {batch} 10"
    got = np.array([float(v) for v in lines[1:] if v], np.float32).reshape(batch, 10)

    import onnxc as rt
    want = rt.InferenceSession(str(EXAMPLE)).run(None, {"image": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
def test_emit_c_is_warning_free_for_a_model_with_unused_dims(tmp_path):
    small_model(tmp_path / "m.onnx")           # no arena: the batch symbol goes unused there
    onnxc("build", tmp_path / "m.onnx", "--emit-c", tmp_path / "fw")
    cc = subprocess.run(["gcc", "-std=c99", "-pedantic", "-Wall", "-Wextra", "-Werror", "-c", "model.c"],
                        cwd=tmp_path / "fw", capture_output=True, text=True)
    assert cc.returncode == 0 and cc.stderr == "", cc.stderr


def test_emit_c_refuses_to_replace_a_foreign_folder(tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    r = onnxc("build", EXAMPLE, "--emit-c", tmp_path / "mine", check=False)
    assert_one_line_error(r, "was not made by onnxc")
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep me"


# ---- importable Python package -------------------------------------------------------------
def test_python_module_is_importable_and_replaceable(tmp_path):
    small_model(tmp_path / "a.onnx", c=(1, 2, 3, 4))
    small_model(tmp_path / "b.onnx", c=(5, 6, 7, 8))
    pkgdir = tmp_path / "pkgs"
    r = onnxc("build", tmp_path / "a.onnx", "--python-module", pkgdir / "mynet")
    assert "import mynet" in r.stdout
    assert sorted(p.name for p in (pkgdir / "mynet").iterdir() if not p.name.startswith(".")) == \
        ["__init__.py", "model.so"]
    (tmp_path / "a.onnx").unlink()
    code = """
        import numpy as np, mynet
        x = np.ones((2, 4), np.float32)
        print(mynet.run({"x": x})[0].tolist())
        print(mynet.run(x=x)[0].tolist() == mynet.session.run(None, {"x": x})[0].tolist())
        print(mynet.get_inputs()[0].name, mynet.get_inputs()[0].shape)
        s = mynet.InferenceSession()
        print(type(s).__module__, s.run(["y"], {"x": x[:1]})[0].tolist())
        """
    r = python(code, env=env_with(PYTHONPATH=os.pathsep.join([str(pkgdir), str(ROOT)])))
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["[[1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 4.0]]", "True", "x ['N', 4]",
                                     "onnxc.session [[1.0, 2.0, 3.0, 4.0]]"]
    onnxc("build", tmp_path / "b.onnx", "--python-module", pkgdir / "mynet")   # replaces its own package
    r = python(code, env=env_with(PYTHONPATH=os.pathsep.join([str(pkgdir), str(ROOT)])))
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == "[[5.0, 6.0, 7.0, 8.0], [5.0, 6.0, 7.0, 8.0]]"
    assert sorted(p.name for p in pkgdir.iterdir()) == ["mynet"]              # no temp folders left


def test_python_module_name_must_be_an_identifier(tmp_path):
    small_model(tmp_path / "m.onnx")
    r = onnxc("build", tmp_path / "m.onnx", "--python-module", tmp_path / "my-net", check=False)
    assert_one_line_error(r, "'my-net' is not a valid Python package name")


# ---- errors: one line, non-zero exit, no traceback ----------------------------------------
def test_user_errors_are_one_line(tmp_path):
    assert_one_line_error(onnxc("build", tmp_path / "missing.onnx", check=False), "not found")
    assert_one_line_error(onnxc("info", tmp_path / "missing.onnx", check=False), "not found")
    (tmp_path / "junk.onnx").write_bytes(b"\x00\x01not a model at all")
    assert_one_line_error(onnxc("build", tmp_path / "junk.onnx", check=False), "junk.onnx")
    small_model(tmp_path / "m.onnx")
    assert_one_line_error(onnxc("build", tmp_path / "m.onnx", "--free-dim", "N", check=False), "NAME=VALUE")
    assert_one_line_error(onnxc("build", tmp_path / "m.onnx", "--free-dim", "N=x", check=False), "integer")
    m = small_model(tmp_path / "u.onnx")
    m.graph.node[1].op_type = "NoSuchOpAnywhere"
    with open(tmp_path / "u.onnx", "wb") as f:
        f.write(m.SerializeToString())
    assert_one_line_error(onnxc("build", tmp_path / "u.onnx", check=False))


def test_missing_compiler_is_one_line(tmp_path):
    small_model(tmp_path / "m.onnx")
    r = onnxc("build", tmp_path / "m.onnx", "-o", tmp_path / "m.so", "--cache-dir", tmp_path / "c",
              env=env_with(CC="/nonexistent/cc"), check=False)
    assert_one_line_error(r, "/nonexistent/cc")
    assert not (tmp_path / "m.so").exists() and not (tmp_path / "c").exists()


def test_version_and_help():
    r = onnxc("--version")
    import onnxc as pkg
    assert r.stdout.strip() == f"onnxc {pkg.__version__}"
    r = onnxc("--help")
    for cmd in ("build", "info", "run"):
        assert cmd in r.stdout
    r = onnxc(check=False)
    assert r.returncode != 0 and "Traceback" not in r.stderr


# ---- the bundled examples ------------------------------------------------------------------
def test_bundled_model_matches_its_generator():
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        from make_example_model import make_model
    finally:
        sys.path.remove(str(ROOT / "examples"))
    committed = onnx.load(str(EXAMPLE))
    assert committed.graph == make_model().graph
    assert EXAMPLE.stat().st_size < 200_000


@pytest.mark.parametrize("script", ["run_example.py", "tutorial_ort.py"])
def test_examples_run(script, tmp_path):
    r = subprocess.run([sys.executable, str(ROOT / "examples" / script)], capture_output=True, text=True,
                       cwd=tmp_path, env=env_with(), timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    if script == "run_example.py":
        assert "all outputs match" in r.stdout and "max |onnxc - reference|" in r.stdout
    assert list(tmp_path.iterdir()) == []        # nothing written outside temp folders


HEAP_MAIN_C = r"""
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include "model.h"

int main(void)
{
    static const float x[] = { 3, -1, 4, -1, 5, -9, 2, 6 };
    int64_t dims[%(nsyms)d] = { 0 };
    dims[0] = 8;
    void *inputs[1] = { (void *)x };
    void *outputs[1] = { NULL };
    if (onnxc_resolve(inputs, dims) != 0) return 3;
    dims[%(hk)d] = 0;                        /* no heap at first: the run says how much it needs */
    int rc, tries = 0;
    unsigned char *raw = NULL;
    do {
        free(raw);
        int64_t nb = onnxc_arena_bytes(dims);
        raw = (unsigned char *)malloc((size_t)nb + 64);
        if (!raw) return 2;
        void *arena = raw + ((64 - (uintptr_t)raw %% 64) %% 64);
        rc = onnxc_run(inputs, outputs, dims, arena, 1);
        /* rc %% 256 == 4: dims[heap] now holds the bytes the run needs: run again with them */
    } while (rc %% 256 == 4 && ++tries < 40);
    int64_t shape[1];
    onnxc_output_shapes(dims, shape);
    printf("rc %%d tries %%d n %%lld\n", rc, tries, (long long)shape[0]);
    for (int64_t i = 0; i < shape[0]; ++i) printf("%%.9g\n", ((const float *)outputs[0])[i]);
    free(raw);
    return rc;
}
"""


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
def test_emit_c_heap_model_runs_standalone(tmp_path):
    """A Slice whose end the model computes: its output lives on the run's heap, sized while running;
    firmware C grows the arena when the run asks and gets the output as a pointer (no malloc inside)."""
    import onnx
    from onnx import TensorProto as TP, helper as hp
    # e = how many x are > 0, computed by the model: the Slice's length is known only while it runs
    g = hp.make_graph([hp.make_node("Greater", ["x", "fzero"], ["pos"]),
                       hp.make_node("Cast", ["pos"], ["posi"], to=TP.INT64),
                       hp.make_node("ReduceSum", ["posi", "axes"], ["e"], keepdims=1),
                       hp.make_node("Slice", ["x", "zero", "e"], ["s"]),
                       hp.make_node("Relu", ["s"], ["y"])], "g",
                      [hp.make_tensor_value_info("x", TP.FLOAT, ["L"])],
                      [hp.make_tensor_value_info("y", TP.FLOAT, None)],
                      [hp.make_tensor("zero", TP.INT64, [1], [0]), hp.make_tensor("axes", TP.INT64, [1], [0]),
                       hp.make_tensor("fzero", TP.FLOAT, [], [0.0])])
    model = tmp_path / "heap.onnx"
    onnx.save(hp.make_model(g, opset_imports=[hp.make_opsetid("", 18)]), model)
    out = tmp_path / "fw"
    onnxc("build", model, "--emit-c", out)
    cc = subprocess.run(["gcc", "-std=c99", "-pedantic", "-Wall", "-Werror", "-c", "model.c", "-o", "model.o"],
                        cwd=out, capture_output=True, text=True)
    assert cc.returncode == 0 and cc.stderr == "", cc.stderr
    src = (out / "model.c").read_text()
    # the dims layout, from the library's self-description
    import onnxc as rt
    lib_meta = rt.InferenceSession(str(model))._lib.meta
    hk, nsyms = lib_meta["heap_symbol"], len(lib_meta["symbols"])
    assert lib_meta["outputs"][0].get("heap") and "malloc" not in src
    (out / "main.c").write_text(HEAP_MAIN_C % {"nsyms": nsyms, "hk": hk})
    link = subprocess.run(["gcc", "-std=c99", "-Wall", "-I.", "main.c", "model.o", "-lm", "-o", "main"],
                          cwd=out, capture_output=True, text=True)
    assert link.returncode == 0, link.stderr
    run = subprocess.run([str(out / "main")], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
    lines = [ln for ln in run.stdout.split("\n") if ln]
    assert lines[0].startswith("rc 0 tries ") and lines[0].endswith(" n 5")
    assert int(lines[0].split()[3]) == 1                   # one retry, with the size the run asked for
    assert [float(v) for v in lines[1:]] == [3, 0, 4, 0, 5]
