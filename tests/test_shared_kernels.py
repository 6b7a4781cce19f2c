"""The kernels shared by every library (runtime_c/lib/onnxc_kernels.c): compiled once per toolchain,
declared only (ONNXC_KERNELS_EXTERN) in the models that call them, linked privately into each
library; the standalone C keeps its own static copy."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxc
from onnxc import build, compiler
from onnxc.resources import runtime_dir


def gemm_model(M: int, K: int, N: int, seed: int, relu: bool = False):
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((K, N)).astype(np.float32)
    b = rng.standard_normal(N).astype(np.float32)
    nodes = [helper.make_node("Gemm", ["x", "w", "b"], ["g" if relu else "y"])]
    if relu:
        nodes.append(helper.make_node("Relu", ["g"], ["y"]))
    g = helper.make_graph(nodes, f"gemm{seed}",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [M, K])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [M, N])],
                          [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    return m, w, b


def test_one_kernel_object_serves_every_library(tmp_path):
    """Libraries of different GEMM models link the one compiled kernel object and run side by
    side in one process, each with its own (hidden) copy."""
    cache = tmp_path / "cache"
    cases = [(1, 300, 70, 1, False), (37, 64, 129, 2, True), (200, 96, 48, 3, False)]
    sessions = []
    for M, K, N, seed, relu in cases:
        m, w, b = gemm_model(M, K, N, seed, relu)
        sessions.append((onnxc.InferenceSession(m.SerializeToString(), cache_dir=str(cache)), M, K, w, b, relu))
    assert len(list((cache / "wrappers").glob("onnxc-kernels-*.o"))) == 1
    rng = np.random.default_rng(0)
    for s, M, K, w, b, relu in sessions:
        x = rng.standard_normal((M, K)).astype(np.float32)
        want = x.astype(np.float64) @ w + b
        if relu:
            want = np.maximum(want, 0)
        np.testing.assert_allclose(s.run(None, {"x": x})[0], want, rtol=1e-4, atol=1e-4)


def test_kernel_object_is_keyed_by_the_flags(tmp_path):
    tc = build.toolchain()
    a = build._kernels_object(tc, tmp_path)
    assert build._kernels_object(tc, tmp_path) == a              # reused, not rebuilt
    b = build._kernels_object(build.toolchain(debug=True), tmp_path)
    assert b != a and a.is_file() and b.is_file()
    assert all(p.suffix in (".o", ".lock") for p in tmp_path.iterdir())   # no temp folder left behind


@pytest.mark.skipif(shutil.which("nm") is None, reason="needs nm (binutils)")
def test_a_library_model_declares_the_kernels_and_the_standalone_c_defines_them(tmp_path):
    """Compiled for a library (ONNXC_KERNELS_EXTERN) the model only refers to the GEMM; compiled
    as standalone C it holds its own static copy."""
    m, _, _ = gemm_model(64, 200, 96, 4)
    comp = compiler.compile_model(m, weights_mode="c")
    (tmp_path / "model.c").write_text(comp.sources.c)
    tc = build.toolchain()
    syms = {}
    for mode, extra in (("extern", ["-DONNXC_KERNELS_EXTERN"]), ("standalone", [])):
        obj = tmp_path / f"{mode}.o"
        subprocess.run([tc.cc, *tc.flags, *extra, "-I", str(runtime_dir()), "-c", "model.c", "-o", obj.name],
                       cwd=tmp_path, check=True, capture_output=True)
        out = subprocess.run(["nm", str(obj)], capture_output=True, text=True, check=True).stdout
        syms[mode] = {line.split()[-1]: line.split()[-2] for line in out.splitlines() if line.strip()}
    gemm = [s for s in syms["extern"] if s.startswith("onnxc_sgemm")]
    assert gemm and all(syms["extern"][s] == "U" for s in gemm), syms["extern"]
    assert any(s.startswith("onnxc_sgemm") and t in "tT" for s, t in syms["standalone"].items())


def test_a_new_cache_folder_copies_the_kernels_instead_of_compiling_them(tmp_path, monkeypatch):
    m, w, b = gemm_model(5, 40, 24, 6)
    onnxc.InferenceSession(m.SerializeToString(), cache_dir=str(tmp_path / "a"))
    first = list((tmp_path / "a" / "wrappers").glob("onnxc-kernels-*.o"))
    calls = []
    real_run = build._run
    monkeypatch.setattr(build, "_run", lambda cmd, cwd, what: (calls.append(cmd), real_run(cmd, cwd, what))[1])
    m2, w2, b2 = gemm_model(5, 40, 24, 7)
    s = onnxc.InferenceSession(m2.SerializeToString(), cache_dir=str(tmp_path / "b"))
    copied = list((tmp_path / "b" / "wrappers").glob("onnxc-kernels-*.o"))
    assert [p.name for p in copied] == [p.name for p in first]
    assert copied[0].read_bytes() == first[0].read_bytes()
    assert not any("onnxc_kernels.c" in " ".join(map(str, c)) for c in calls), calls
    assert any("model.c" in c for c in calls)                        # the model itself was compiled
    x = np.random.default_rng(1).standard_normal((5, 40)).astype(np.float32)
    np.testing.assert_allclose(s.run(None, {"x": x})[0], x @ w2 + b2, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("M", [1, 64])
def test_large_products_call_their_own_driver(tmp_path, M):
    """op(B) with 64 Ki elements or more: the model compiles its own driver (`_here`: batch-1
    strips, or the prepacked product), and the results match numpy."""
    K, N = 300, 256                                    # 76800 >= ops/gemm.py HERE_MIN_WEIGHTS
    m, w, b = gemm_model(M, K, N, 8, relu=True)
    s = onnxc.InferenceSession(m.SerializeToString(), cache_dir=str(tmp_path))
    src = (Path(s.library_path).parent / "model.c").read_text()
    here = "onnxc_sgemv_strips_dir_here(" if M == 1 else "onnxc_sgemm_bpacked_share_here("
    assert here in src
    x = np.random.default_rng(2).standard_normal((M, K)).astype(np.float32)
    want = np.maximum(x.astype(np.float64) @ w + b, 0)
    np.testing.assert_allclose(s.run(None, {"x": x})[0], want, rtol=1e-4, atol=1e-4)
