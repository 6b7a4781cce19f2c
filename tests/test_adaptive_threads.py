"""The run's thread count (runtime_c/onnxc_threads.h): full count while it pays, one thread while it
does not (a busy machine, a shape too small to split), probing back with a growing interval.
Decisions are driven here by made-up durations, so the test is exact."""
import subprocess

import numpy as np
import pytest

import onnxc
from onnxc import build
from onnxc.resources import runtime_dir

DRIVER = r"""
#include <stdio.h>
#include "onnxc_threads.h"
static onnxc_tune slots[ONNXC_TUNE_SLOTS];
/* one run: the thread count it takes, then the duration the scenario gives that count */
static int step(double full, double one)
{
    onnxc_tune *s = onnxc_tune_acquire(slots, 42);
    if (!s) return -1;
    int timed;
    const int used = onnxc_tune_threads(s, 2, &timed);
    if (timed)
        onnxc_tune_record(s, 2, used, used == 1 ? one : full);
    else
        onnxc_tune_release(s);
    return used;
}
int main(void)
{
    /* scenario: 300 runs full 1.0 / one 1.8 (threads pay), then 2000 runs busy (full 50 / one 2),
       then quiet again; prints the thread count of every run */
    for (int i = 0; i < 300; ++i) printf("%d", step(1.0, 1.8));
    printf("\n");
    for (int i = 0; i < 2000; ++i) printf("%d", step(50.0, 2.0));
    printf("\n");
    for (int i = 0; i < 3000; ++i) printf("%d", step(1.0, 1.8));
    printf("\n");
    /* a held slot: the caller takes the full count and records nothing */
    onnxc_tune *held = onnxc_tune_acquire(slots, 7);
    printf("%d\n", onnxc_tune_acquire(slots, 7) == NULL);
    onnxc_tune_release(held);
    printf("%d\n", onnxc_tune_acquire(slots, 7) != NULL);
    return 0;
}
"""


def _run_driver(tmp_path, src=DRIVER):
    tc = build.toolchain()
    (tmp_path / "d.c").write_text(src)
    res = subprocess.run([tc.cc, *tc.flags, "-I", str(runtime_dir()), "d.c", "-o", "d", "-lm"], cwd=tmp_path,
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    return subprocess.run([str(tmp_path / "d")], capture_output=True, text=True, check=True).stdout.split("\n")


def test_decisions(tmp_path):
    quiet, busy, back, held, free, _ = _run_driver(tmp_path)
    # threads pay: full count except the one-thread probes (run 4, then every 128th)
    assert [i + 1 for i, c in enumerate(quiet) if c == "1"] == [4, 128, 256]
    # busy: 4 slow runs at the full count, then one thread, with probes 16, 32, 64, ... apart, each
    # two full runs (the first wakes the team and is not judged)
    probes = [i for i, c in enumerate(busy) if c == "2"]
    assert probes[:4] == [0, 1, 2, 3]
    assert list(np.diff(probes[3:])) == [16, 1, 32, 1, 64, 1, 128, 1, 256, 1, 512, 1]
    assert busy.count("1") > 1900
    # quiet again: the next probe is fast, the full count comes back
    first_full = back.index("2")
    assert back[first_full:first_full + 100].count("2") >= 99
    assert held == "1" and free == "1"


def test_cold_first_probe_run_not_judged(tmp_path):
    """Busy, then quiet; the first full run after one-thread runs is slow (a team waking up), the
    second fast: the probe judges the second, and the full count comes back."""
    src = DRIVER.replace("for (int i = 0; i < 3000; ++i) printf(\"%d\", step(1.0, 1.8));",
                         "for (int i = 0; i < 3000; ++i) printf(\"%d\", step(prev_one ? 50.0 : 1.0, 1.8));")
    src = src.replace("static int step(double full, double one)\n{",
                      "static int prev_one;\nstatic int step(double full, double one)\n{")
    src = src.replace("    return used;\n}", "    prev_one = used == 1;\n    return used;\n}")
    back = _run_driver(tmp_path, src)[2]
    first_full = back.index("2")
    assert back[first_full:first_full + 100].count("2") >= 98


def test_short_runs_timed_one_in_eight(tmp_path):
    """Runs of a few microseconds are timed 1 in 8 (a slow phase is still noticed, a little later)."""
    src = DRIVER.replace("step(1.0, 1.8)", "step(1e-6, 1.8e-6)").replace("step(50.0, 2.0)", "step(5e-5, 2e-6)")
    quiet, busy = _run_driver(tmp_path, src)[:2]
    assert [i + 1 for i, c in enumerate(quiet) if c == "1"] == [4, 128, 256]
    assert busy.index("1") < 40 and busy.count("1") > 1900


def test_half_slow_runs_switch(tmp_path):
    """A busy machine slows some full-count runs, not all: when every other one is slow (the median
    is), runs go to one thread all the same."""
    src = DRIVER.replace("step(50.0, 2.0)", "step(i % 2 ? 50.0 : 1.0, 2.0)")
    busy = _run_driver(tmp_path, src)[1]
    assert busy[:40].count("1") > 20 and busy.count("1") > 1900


def test_team_that_does_not_pay_switches(tmp_path):
    """Full-count runs a little slower than one thread (1.3 against 1.0: a worker that sleeps between
    regions, a shape too small to split): under the busy rule's 2x, yet 6 of 8 such runs take the
    run to one thread, probing back the same way."""
    src = DRIVER.replace("step(1.0, 1.8)", "step(1.3, 1.0)")
    first = _run_driver(tmp_path, src)[0]
    assert first[:10] == "2221222222" and first[10] == "1"   # t_one from run 4, then 6 slower runs
    assert first.count("1") > 0.9 * len(first)


@pytest.mark.parametrize("full", ["0.9", "(i % 3 ? 0.6 : 1.2)"], ids=["small-gain", "noisy-gain"])
def test_team_that_pays_stays(tmp_path, full):
    """A team that gains only 10%, or gains 1.7x with every third run slower than one thread (noise):
    the full count holds (one-thread runs only at the probes 4, 128, 256)."""
    src = DRIVER.replace("for (int i = 0; i < 300; ++i) printf(\"%d\", step(1.0, 1.8));",
                         f"for (int i = 0; i < 300; ++i) printf(\"%d\", step({full}, 1.0));")
    quiet = _run_driver(tmp_path, src)[0]
    assert [i + 1 for i, c in enumerate(quiet) if c == "1"] == [4, 128, 256]


def test_same_outputs_at_any_count():
    """The adaptive count never changes results: a run at 2 threads equals one at 1."""
    from onnx import TensorProto as T, helper
    x = helper.make_tensor_value_info("X", T.FLOAT, ["N", 256])
    y = helper.make_tensor_value_info("Y", T.FLOAT, ["N", 128])
    w = helper.make_tensor("W", T.FLOAT, [256, 128], np.random.default_rng(1).standard_normal(256 * 128))
    g = helper.make_graph([helper.make_node("MatMul", ["X", "W"], ["Z"]), helper.make_node("Tanh", ["Z"], ["Y"])],
                          "g", [x], [y], [w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8).SerializeToString()
    outs = []
    for nt in (1, 2):
        so = onnxc.SessionOptions()
        so.intra_op_num_threads = nt
        s = onnxc.InferenceSession(m, so)
        xs = np.random.default_rng(2).standard_normal((300, 256)).astype(np.float32)
        outs.append([s.run(None, {"X": xs})[0] for _ in range(140)])   # crosses probes at runs 4, 128
    for a in outs[0] + outs[1]:
        np.testing.assert_array_equal(a, outs[0][0])


def test_probes_never_wait_longer_than_their_cost_repays(tmp_path):
    """Full-count runs twice as slow as one thread (4.0 against 2.0): the probes' interval doubles
    (16, 32, 64, ...) only until the one-thread runs since the last probe took 32x what it cost
    (two runs of 4.0: 256, i.e. 128 runs of 2.0); then every 128 runs (+ the probe's 2), not 4096
    apart."""
    src = DRIVER.replace("step(50.0, 2.0)", "step(4.0, 2.0)").replace("i < 2000", "i < 3000")
    busy = _run_driver(tmp_path, src)[1]
    probes = [i for i, c in enumerate(busy) if c == "2"]
    gaps = [int(g) for g in np.diff(probes[3::2])]   # from one probe's first run to the next's
    assert gaps[:4] == [17, 33, 65, 129]
    assert set(gaps[4:]) == {130} and len(gaps) > 20
