"""The iris tutorial example (examples/iris_tutorial.py) prints onnxruntime's labels and probabilities."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("sklearn")
pytest.importorskip("skl2onnx")

ROOT = Path(__file__).resolve().parents[1]


def test_iris_tutorial(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, str(ROOT / "examples" / "iris_tutorial.py")], cwd=tmp_path,
                         env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert "part 1: labels equal to scikit-learn's: True" in lines
    for how in ("InferenceSession", "backend"):
        assert f"part 2, {how}: label=[1 1 0]" in lines
        assert f"part 2, {how}: probabilities={{0: 0.0273, 1: 0.5176, 2: 0.4551}}" in lines
