"""Packaging: a plain (non-editable) install carries every module, template and C header.

The package is built with setuptools into a private folder (what a wheel would hold), then
used from there alone, from another working folder: the templates and the C runtime must be
found inside the package (onnxc/_templates, onnxc/_runtime_c), not in this checkout.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

tomllib = pytest.importorskip("tomllib") if sys.version_info >= (3, 11) else pytest.importorskip("tomli")


def pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_every_python_package_is_listed():
    listed = set(pyproject()["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "onnxc").rglob("__init__.py")
             if "__pycache__" not in p.parts}
    missing = found - listed
    assert not missing, f"add {sorted(missing)} to [tool.setuptools] packages in pyproject.toml"


def test_version_and_entry_point_agree_with_the_package():
    import onnxc
    import onnxc.cli
    proj = pyproject()["project"]
    assert proj["version"] == onnxc.__version__
    mod, func = proj["scripts"]["onnxc"].split(":")
    assert mod == "onnxc.cli" and callable(getattr(onnxc.cli, func))


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """build_py of a copy of the checkout: exactly the files a wheel would install."""
    src = tmp_path_factory.mktemp("src")
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.so", "*.o")
    for d in ("onnxc", "templates", "runtime_c"):
        shutil.copytree(ROOT / d, src / d, ignore=ignore)
    shutil.copyfile(ROOT / "pyproject.toml", src / "pyproject.toml")
    (src / "README.md").write_text("readme\n")
    out = tmp_path_factory.mktemp("site")
    r = subprocess.run([sys.executable, "-c", "from setuptools import setup; setup()", "-q", "build_py",
                        "--build-lib", str(out)], cwd=src, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return out


def _files(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and not p.name.startswith(".")}


def test_install_holds_every_module_template_and_header(built):
    pkg = built / "onnxc"
    assert {f for f in _files(ROOT / "onnxc") if f.endswith(".py")} <= _files(pkg)
    assert _files(ROOT / "templates") == _files(pkg / "_templates")
    assert _files(ROOT / "runtime_c") == _files(pkg / "_runtime_c")


def test_installed_package_builds_and_runs_a_model_on_its_own(built, tmp_path):
    code = textwrap.dedent(f"""
        import numpy as np, onnx, onnxc
        from onnx import helper, numpy_helper, TensorProto
        from onnxc import resources
        assert onnxc.__file__.startswith({str(built)!r}), onnxc.__file__
        assert resources.templates_dir() == __import__("pathlib").Path({str(built / 'onnxc' / '_templates')!r})
        assert resources.runtime_dir() == __import__("pathlib").Path({str(built / 'onnxc' / '_runtime_c')!r})
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 1, 6, 6])
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 2])
        w = numpy_helper.from_array(np.ones((2, 1, 3, 3), np.float32), "w")
        g = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["c"]),
                               helper.make_node("Relu", ["c"], ["r"]),
                               helper.make_node("GlobalAveragePool", ["r"], ["p"]),
                               helper.make_node("Flatten", ["p"], ["y"])], "g", [x], [y], [w])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
        onnx.save(m, "m.onnx")
        sess = onnxc.InferenceSession("m.onnx")
        out = sess.run(None, {{"x": np.ones((3, 1, 6, 6), np.float32)}})[0]
        assert out.shape == (3, 2) and np.all(out == 9), out
        from onnxc import cli
        assert cli.main(["build", "m.onnx", "-o", "libm.so"]) == 0
        assert cli.main(["info", "libm.so"]) == 0
        print("installed package works")
        """)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(PYTHONPATH=str(built), ONNXC_CACHE_DIR=str(tmp_path / "cache"))
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, env=env,
                       timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "installed package works" in r.stdout
