"""The benchmark tool works (figures are reported, never asserted: machines here are noisy)."""
import json
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper

from onnxc import bench


def _model(tmp_path):
    m = helper.make_model(helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 8])]),
        opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    p = tmp_path / "relu.onnx"
    onnx.save(m, p)
    return str(p)


def test_bench_model_side_by_side(tmp_path):
    r = bench.bench_model(_model(tmp_path), threads=1, batch=4, seconds=0.2)
    assert r.onnxc.runs >= 5 and r.onnxc.median_us > 0
    if r.onnxruntime is not None:
        assert r.ratio > 0 and r.max_abs_diff == 0.0
    assert "| relu.onnx |" in bench.markdown([r])
    assert json.loads(bench.to_json([r]))[0]["threads"] == 1


def test_bench_cli_writes_table_and_json(tmp_path):
    out = tmp_path / "res"
    res = subprocess.run([sys.executable, "-m", "onnxc", "bench", _model(tmp_path), "--seconds", "0.2",
                          "--vs", "none", "--out", str(out)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert os.path.exists(f"{out}.md") and os.path.exists(f"{out}.json")
    assert "onnxc median" in res.stdout


def test_block_size_is_not_set_by_one_slow_call(monkeypatch):
    """A slow first call (a wake-up, a page fault) must not shrink every timed block to one call:
    blocks of cold calls after each pause made a 40 us model look twice as slow next to onnxruntime."""
    from onnxc import bench
    clock = {"t": 0.0, "calls": 0}

    def call():
        clock["calls"] += 1
        clock["t"] += 0.030 if clock["calls"] == 1 else 0.0005

    monkeypatch.setattr(bench.time, "perf_counter", lambda: clock["t"])
    assert 45 <= bench._calls_per_sample(call, 0.025) <= 50       # the old single-call rule: 1


def test_blocks_grow_after_a_slow_calibration(monkeypatch):
    """Every calibration call slow (the other runtime's workers still spinning on the cores): the
    blocks must still reach their length at the speed the calls settle to, as the other runtime's do."""
    from onnxc import bench
    clock = {"t": 0.0}
    calls = {"a": [], "b": 0}

    def run_a():
        calls["a"].append(clock["t"])
        clock["t"] += 0.0013 if len(calls["a"]) <= 12 else 0.00004

    def run_b():
        calls["b"] += 1
        clock["t"] += 0.0001

    def sleep(s):
        clock["t"] += s

    monkeypatch.setattr(bench.time, "perf_counter", lambda: clock["t"])
    monkeypatch.setattr(bench.time, "sleep", sleep)
    ta, tb = bench.side_by_side(run_a, run_b, seconds=1.0, settle=bench.SETTLE_S)
    assert len(ta) == len(tb) >= 10
    # the first block is the slow calibration's size (19 calls); later ones ~25 ms of 40 us calls
    assert abs(ta[-1] - 4e-5) < 1e-9
    k_last = round(0.025 / 4e-5)
    assert len(calls["a"]) > (len(ta) - 2) * k_last * 0.9
