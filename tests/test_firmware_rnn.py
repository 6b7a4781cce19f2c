"""Recurrent layers in emitted firmware C (`onnxc build --emit-c`): constant W and R take the fused
steps' layout, which is the same for every target (passes/prepack.py prepack_recurrent), with one
copy of R whatever this host's L2; the C compiles as strict C99 without warnings, with and without
OpenMP, and its outputs match the spec transcription."""
import shutil
import subprocess
from pathlib import Path

import numpy as np
import onnx
import pytest

from onnxc import compiler
from test_cli import onnxc
from test_ops_rnn import make, spec
from test_ops_rnn_fused import constant_weights
from util import typed_outputs

# a standalone runner: inputs and outputs as raw bytes, their sizes on the command line
MAIN_C = r"""
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include "model.h"

int main(int argc, char **argv)
{
    /* argv: in.bin out.bin threads n_in bytes... n_out bytes... */
    FILE *f = fopen(argv[1], "rb");
    int nt = atoi(argv[3]), nin = atoi(argv[4]), nout = atoi(argv[5 + nin]);
    void *ins[8], *outs[8];
    size_t osz[8];
    for (int i = 0; i < nin; ++i) {
        size_t n = (size_t)atol(argv[5 + i]);
        ins[i] = malloc(n + 1);
        if (!f || fread(ins[i], 1, n, f) != n) return 3;
    }
    fclose(f);
    for (int i = 0; i < nout; ++i) {
        osz[i] = (size_t)atol(argv[6 + nin + i]);
        outs[i] = malloc(osz[i] + 1);
    }
    int64_t dims[1] = {0};
    unsigned char *raw = (unsigned char *)malloc((size_t)onnxc_arena_bytes(dims) + 64);
    void *arena = raw + ((64 - (uintptr_t)raw % 64) % 64);
    int rc = onnxc_run(ins, outs, dims, arena, nt);
    FILE *o = fopen(argv[2], "wb");
    for (int i = 0; i < nout; ++i) fwrite(outs[i], 1, osz[i], o);
    fclose(o);
    return rc;
}
"""

CASES = [  # op, T, batch, input, hidden, direction, sequence_lens, initial_h, attrs
    ("LSTM", 7, 3, 5, 40, "bidirectional", [7, 2, 5], True, {}),  # a team of 2 at 2 threads
    ("GRU", 6, 2, 4, 20, "reverse", None, False, {"linear_before_reset": 1}),
    ("RNN", 5, 1, 3, 17, "forward", None, True, {}),
]


def firmware(tmp_path: Path, m: onnx.ModelProto) -> Path:
    model, out = tmp_path / "m.onnx", tmp_path / "fw"
    onnx.save(m, str(model))
    onnxc("build", model, "--emit-c", out)
    return out


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
@pytest.mark.parametrize("openmp", [False, True])
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_fused_steps_in_standalone_c(tmp_path, case, openmp):
    op, T, Bn, I, H, direction, seq, h0, attrs = case
    m, ins = make(op, T=T, Bn=Bn, I=I, H=H, direction=direction, seq=seq, h0=h0, **attrs)
    feeds, _ = constant_weights(m, ins)
    lbr = attrs.get("linear_before_reset", 0)
    want = [w.astype(np.float32) for w in spec(op, ins, H, direction=direction, lbr=lbr)]
    typed_outputs(m, want)
    out = firmware(tmp_path, m)
    gates = {"LSTM": 4, "GRU": 3, "RNN": 1}[op]
    assert f"onnxc_rnn_tile_G{gates}(" in (out / "model.c").read_text()   # the fused steps
    omp = ["-fopenmp"] if openmp else []
    cc = subprocess.run(["gcc", "-std=c99", "-pedantic", "-Wall", "-Werror", "-O2", *omp, "-c", "model.c", "-o",
                         "model.o"], cwd=out, capture_output=True, text=True)
    assert cc.returncode == 0 and cc.stderr == "", cc.stderr
    (out / "main.c").write_text(MAIN_C)
    link = subprocess.run(["gcc", "-std=c99", "-O2", *omp, "-I.", "main.c", "model.o", "-lm", "-o", "main"],
                          cwd=out, capture_output=True, text=True)
    assert link.returncode == 0, link.stderr
    order = [i.name for i in m.graph.input]
    (out / "in.bin").write_bytes(b"".join(np.ascontiguousarray(feeds[n]).tobytes() for n in order))
    sizes = [str(feeds[n].nbytes) for n in order] + [str(len(want))] + [str(w.nbytes) for w in want]
    for nt in (1, 2):
        run = subprocess.run([str(out / "main"), "in.bin", "out.bin", str(nt), str(len(order)), *sizes],
                             cwd=out, capture_output=True, text=True, timeout=60)
        assert run.returncode == 0, run.stdout + run.stderr
        raw, at = (out / "out.bin").read_bytes(), 0
        for w in want:
            got = np.frombuffer(raw[at:at + w.nbytes], np.float32).reshape(w.shape)
            at += w.nbytes
            np.testing.assert_allclose(got, w, rtol=1e-4, atol=1e-5)


def test_firmware_keeps_one_copy_of_r(monkeypatch):
    """A library built here may read two copies of R in turn (this host's L2); firmware C, whose
    target is unknown, keeps one, and the original W and R are not in its weights."""
    from onnxc.passes import prepack_rnn
    monkeypatch.setattr(prepack_rnn, "l2_bytes", lambda: 1 << 20)
    m, ins = make("LSTM", T=3, Bn=1, I=8, H=128)
    constant_weights(m, ins)
    lib = compiler.compile_model(m, gemm_block=(8, 48))
    fw = compiler.compile_model(m, weights_mode="c")
    copies = [[n.attrs["_prepacked_rnn"]["copies"] for n in c.graph.nodes if n.op_type == "LSTM"] for c in (lib, fw)]
    assert copies == [[2], [1]]
    w, r, b = ins["W"].nbytes, ins["R"].nbytes, ins["B"].nbytes
    assert len(lib.sources.weights) > 2 * r
    assert w + r <= len(fw.sources.weights) <= w + r + b + b // 2 + 256   # W, R, B, the summed biases
