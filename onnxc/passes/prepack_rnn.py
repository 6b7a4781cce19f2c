"""Compile-time layout of constant LSTM / RNN / GRU(linear_before_reset) weights for the fused
step of templates/c/ops/rnn.c.j2 (runtime_c/onnxc_rnn.h).

Hidden units are cut into blocks of U = 16 (zero units pad the last one). Column q of the
gate-interleaved order is unit u * U + i of gate g for q = (u * G + g) * U + i, so one block's
gates are adjacent and the step applies them right after the block's product.

Input 9, R per direction: block u holds its H rows (k) of G * U floats contiguously, block u at
float offset u * H * G * U (a thread's blocks are one contiguous range). rnn_copies() identical copies
follow each other (see R_COPY_MIN): one thread reads copy s % copies at step s.
Input 8, W per direction, rows in the interleaved order (G * Hp rows of I floats): packed as
onnxc__sgemm_prepack's NR-wide panels for onnxc_sgemm_bpacked when the register block is known
(`_prepacked_rnn` = {"mr", "nr"}), else plain rows for onnxc_sgemm with transB (`plain`).
Directions at 64-byte aligned float strides (rnn_strides).
"""
from __future__ import annotations

import functools
import glob
import os

import numpy as np

U = 16   # mirrors ONNXC_RNN_U

# Two copies of R read on alternate steps for R of 224-320 KB per direction: measured on Zen 5
# (1 MB L2), re-reading one 256 KB range every step streams from L2 at ~46 B/cycle, two 256 KB
# ranges in turn at ~62 (a re-read under ~512 KB apart gets no hardware prefetch, it seems):
# the one-thread steps of a 128-unit LSTM 17% faster (GRU 144 units 12%). Smaller R stays in L1
# or gains nothing; both copies must fit in 5/8 of L2 (three 256 KB copies: 2x slower).
R_COPY_MIN, R_COPY_MAX = 224 << 10, 320 << 10


@functools.lru_cache(maxsize=None)
def l2_bytes() -> int:
    """This machine's L2 per core (Linux sysfs), 0 where unknown (then no copies)."""
    for d in sorted(glob.glob("/sys/devices/system/cpu/cpu0/cache/index*")):
        try:
            with open(os.path.join(d, "level")) as f:
                if f.read().strip() != "2":
                    continue
            with open(os.path.join(d, "size")) as f:
                size = f.read().strip().upper()
        except OSError:
            continue
        scale = {"K": 1 << 10, "M": 1 << 20}.get(size[-1:], 1)
        digits = size.rstrip("KM")
        return int(digits) * scale if digits.isdigit() else 0
    return 0


def _round(x: int, m: int) -> int:
    return -(-x // m) * m


def rnn_copies(G: int, H: int) -> int:
    """Copies of each direction's R (see R_COPY_MIN)."""
    r = G * _round(H, U) * H * 4
    return 2 if R_COPY_MIN <= r <= R_COPY_MAX and 16 * r <= 5 * l2_bytes() else 1


def rnn_strides(G: int, H: int, I: int, nr: int | None, copies: int) -> tuple[int, int, int]:
    """(W floats, R floats, R copy floats) per direction."""
    N = G * _round(H, U)
    wrows = _round(N, nr) if nr else N
    rc = _round(N * H, 16)
    return _round(wrows * I, 16), rc * copies, rc


def interleave_rows(m: np.ndarray, G: int, H: int) -> np.ndarray:
    """(G * H, K) gate-major rows -> (G * Hp, K) in the interleaved order, zero rows for padding."""
    Hp = _round(H, U)
    out = np.zeros((Hp // U, G, U, m.shape[1]), np.float32)
    src = np.zeros((G, Hp, m.shape[1]), np.float32)
    src[:, :H] = m.reshape(G, H, m.shape[1])
    out[:] = src.reshape(G, Hp // U, U, m.shape[1]).transpose(1, 0, 2, 3)
    return out.reshape(G * Hp, m.shape[1])


def pack_rnn(w: np.ndarray, r: np.ndarray, G: int, block: tuple[int, int] | None, copies: int | None = None):
    """(W data, R data, attrs) for W (nd, G*H, I) and R (nd, G*H, H); copies of R: rnn_copies()
    unless given (attrs["copies"] says which)."""
    from .prepack import pack
    nd, _, I = w.shape
    H = r.shape[2]
    Hp = _round(H, U)
    nr = block[1] if block else None
    copies = rnn_copies(G, H) if copies is None else copies
    wst, rst, rcs = rnn_strides(G, H, I, nr, copies)
    wd = np.zeros((nd, wst), np.float32)
    rd = np.zeros((nd, rst), np.float32)
    for d in range(nd):
        wi = interleave_rows(w[d], G, H)
        wp = pack(wi, nr) if nr else wi.reshape(-1)
        wd[d, :wp.size] = wp
        # R^T blocks: [u][k][g * U + i] = R[g * H + u * U + i, k]
        ri = interleave_rows(r[d], G, H).reshape(Hp // U, G * U, H).transpose(0, 2, 1)
        for c in range(0, rst, rcs):
            rd[d, c:c + ri.size] = ri.reshape(-1)
    attrs = {"mr": block[0], "nr": block[1]} if block else {"plain": True}
    attrs["copies"] = copies
    return wd.reshape(-1), rd.reshape(-1), attrs


def sum_rnn_biases(b: np.ndarray, G: int, gru: bool) -> np.ndarray:
    """Wb + Rb per direction in the fused steps' interleaved order ([u][g][i] for unit
    u * U + i, zero past H), as the template would sum them at run time (float32 adds: the same
    bits); GRU's candidate gate keeps Rb only (its Wb is applied with X W^T). Input 10."""
    nd, GH2 = b.shape
    H = GH2 // (2 * G)
    Hp = _round(H, U)
    wb, rb = b[:, :G * H].reshape(nd, G, H), b[:, G * H:].reshape(nd, G, H)
    s = wb + rb
    if gru:
        s[:, 2] = np.float32(0) + rb[:, 2]   # as the run-time 0.0f + rb (-0 becomes +0)
    out = np.zeros((nd, Hp // U, G, U), np.float32)
    pad = np.zeros((nd, G, Hp), np.float32)
    pad[:, :, :H] = s
    out[:] = pad.reshape(nd, G, Hp // U, U).transpose(0, 2, 1, 3)
    return out.reshape(-1)
