"""The benchmark models of ../shared/bench/make_models.py: built with `onnxc build`, loaded from the
.so alone, equal to onnxruntime's outputs, arena within 1.1x of the liveness lower bound.

The models need torch to generate, so this module runs only where they exist: set
ONNXC_BENCH_MODELS to the folder make_models.py wrote (default /tmp/models)."""
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import onnxc

MODELS = os.environ.get("ONNXC_BENCH_MODELS", "/tmp/models")
NAMES = ["mlp", "lenet", "resnet18", "mobilenetv2"]


def have(name):
    return os.path.isfile(os.path.join(MODELS, f"{name}.onnx"))


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = {}
    for name in NAMES:
        if not have(name):
            continue
        d = tmp_path_factory.mktemp(name)
        lib = d / f"lib{name}.so"
        subprocess.run([sys.executable, "-m", "onnxc.cli", "build", os.path.join(MODELS, f"{name}.onnx"),
                        "-o", str(lib)], check=True, capture_output=True, text=True)
        alone = tmp_path_factory.mktemp(f"{name}_alone") / "model.so"   # no .onnx anywhere near
        shutil.copy(lib, alone)
        out[name] = alone
    return out


@pytest.mark.parametrize("name", NAMES)
def test_matches_onnxruntime(name, built):
    if not have(name):
        pytest.skip(f"{name}.onnx not generated in {MODELS}")
    ref = np.load(os.path.join(MODELS, f"{name}.ref.npz"))
    sess = onnxc.InferenceSession(str(built[name]))
    feed = {k[3:]: ref[k] for k in ref.files if k.startswith("in_")}
    for out, arg in zip(sess.run(None, feed), sess.get_outputs()):
        np.testing.assert_allclose(out, ref["out_" + arg.name], rtol=1e-4, atol=1e-5)


def test_mlp_dynamic_batch_against_onnxruntime(built):
    if not have("mlp"):
        pytest.skip("mlp.onnx not generated")
    ort = pytest.importorskip("onnxruntime")
    ref = ort.InferenceSession(os.path.join(MODELS, "mlp.onnx"), providers=["CPUExecutionProvider"])
    sess = onnxc.InferenceSession(str(built["mlp"]))
    rng = np.random.default_rng(0)
    name = sess.get_inputs()[0].name
    for batch in (1, 7, 32):
        x = rng.standard_normal((batch, 784)).astype(np.float32)
        np.testing.assert_allclose(sess.run(None, {name: x})[0], ref.run(None, {name: x})[0],
                                   rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", NAMES)
def test_arena_near_lower_bound(name):
    if not have(name):
        pytest.skip(f"{name}.onnx not generated")
    from onnxc import compiler, loader
    c = compiler.compile_model(loader.load(os.path.join(MODELS, f"{name}.onnx")))
    envs = [{}] if not c.plan.hint else [{s: b for s in c.plan.hint} for b in (1, 7, 32)]
    for env in envs:
        arena, lb = c.plan.arena_at(env), c.plan.lower_bound(env)
        assert arena <= 1.1 * lb, (env, arena, lb)
