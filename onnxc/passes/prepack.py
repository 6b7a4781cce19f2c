"""Compile-time weight prepacking (GraphOptimizationLevel ALL): a float Conv whose weights are
constant gets them already in onnxc_sgemm_wpack's panel layout, in the weight blob, so no call
repacks them (the GEMM streams the panels straight from the blob).

The layout depends on the SGEMM register block (ONNXC_SGEMM_MR/NR), which the compiler flags
choose (AVX-512, AVX2, NEON, portable). sgemm_block() asks the compiler itself: it preprocesses
onnxc_gemm.h with the build's flags. Only a library built here knows its flags, so only
build_library prepacks for them; the generated C checks the block at compile time (#error on a
mismatch, never a silently wrong product). Emitted firmware C gets the one layout that is the
same for every target (prepack_recurrent).

Batch-1 layers (onnxc_gemv.h, any ISA reads any strip width, so done whatever the block): a float
Gemm with constant B and few rows gets op(B) (K x N) as column strips (input 4, `_prepacked` =
{"gemv": 1, "sw": width, "max_m": the rows up to which they are used, the build's ONNXC_GEMV_MAX_M
from gemv_max_rows()}); LSTM/RNN/GRU(linear_before_reset) with constant W and R get W as
gate-interleaved SGEMM panels and R in blocks of hidden units with their gates side by side, per
direction (inputs 8 and 9, `_prepacked_rnn`; layouts in passes/prepack_rnn.py). Strip layout
(gemv_strips): columns padded with zeros to a multiple of GEMV_PAD, cut into strips of sw columns,
each strip's K rows stored contiguously, strip s at float offset s * sw * K. The width is the build's
widest 1-row tile (ONNXC_GEMV_TILE_W, gemv_strip_width()): a batch-1 product then streams the
operand front to back. The C takes the width as an argument, so a width that is not the tile's
is slower, never wrong.

Layout (onnxc__sgemm_prepack): R lines (the M rows of W, or with `swapped` the same rows as
NR-wide column panels) padded to Rp = roundup(R, P) with zeros, for each depth block pc of KC:
panels of P lines, each stored k-major (kc groups of P values) at pc * Rp + p * kc.
"""
from __future__ import annotations

import functools
import math
import re
import subprocess

import numpy as np

from ..ir import Graph, Value
from ..ops.gemm import SGEMM_KC

ALIGN = 64
GEMV_SW = 128      # strip width when the compiler cannot be asked (ONNXC_GEMV_TILE_W otherwise)
GEMV_PAD = 16      # mirrors ONNXC_GEMV_PAD in runtime_c/onnxc_gemv.h
GEMV_MAX_M = 8     # rows up to which strips / small-M kernels beat the packed SGEMM when the
                   # compiler cannot be asked (ONNXC_GEMV_MAX_M otherwise, gemv_max_rows)

_KERNEL_MACROS = ("ONNXC_SGEMM_MR", "ONNXC_SGEMM_NR", "ONNXC_GEMV_TILE_W", "ONNXC_GEMV_MAX_M")


@functools.lru_cache(maxsize=None)
def _kernel_macros(cc: str, flags: tuple[str, ...]) -> dict[str, int] | None:
    """The runtime headers' layout macros under these compiler flags (the preprocessor expands
    them; each is a product of integers), or None when they cannot be told."""
    from ..resources import runtime_dir
    src = '#include "onnxc_gemv.h"\n' + "".join(f"onnxc_q_{n} = {n} ;\n" for n in _KERNEL_MACROS)
    keep = [f for f in flags if f.startswith(("-m", "-D", "-U", "-std", "-f"))]
    try:
        out = subprocess.run([cc, *keep, "-I", str(runtime_dir()), "-E", "-P", "-x", "c", "-"], input=src,
                             capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    found = {}
    for name in _KERNEL_MACROS:
        m = re.search(rf"onnxc_q_{name} = ([0-9()* ]+);", out.stdout)
        if not m:
            return None
        found[name] = math.prod(int(t) for t in re.findall(r"\d+", m.group(1)))
    return found


def sgemm_block(cc: str, flags: tuple[str, ...]) -> tuple[int, int] | None:
    """(MR, NR) of onnxc_gemm.h under these compiler flags, or None when it cannot be told."""
    found = _kernel_macros(cc, flags)
    return (found["ONNXC_SGEMM_MR"], found["ONNXC_SGEMM_NR"]) if found else None


def gemv_strip_width(cc: str, flags: tuple[str, ...]) -> int:
    """The strip width that batch-1 products stream best under these flags (the widest 1-row
    tile of onnxc_gemv.h: 64 floats with AVX2, 128 with AVX-512); GEMV_SW when it cannot be told."""
    found = _kernel_macros(cc, flags)
    sw = found["ONNXC_GEMV_TILE_W"] if found else GEMV_SW
    return sw if sw > 0 and sw % GEMV_PAD == 0 else GEMV_SW


def gemv_max_rows(cc: str, flags: tuple[str, ...]) -> int:
    """Gemm rows up to which the strips beat the packed SGEMM under these flags (1 with AVX2's
    2-row groups, 8 with AVX-512's 6); GEMV_MAX_M when it cannot be told."""
    found = _kernel_macros(cc, flags)
    rows = found["ONNXC_GEMV_MAX_M"] if found else GEMV_MAX_M
    return rows if rows >= 1 else GEMV_MAX_M


def w_swapped(M: int, N: int, MR: int, NR: int) -> bool:
    """onnxc_sgemm_w_swapped: the orientation with less register-tile padding."""
    def up(x, m):
        return -(-x // m) * m
    return up(N, MR) * up(M, NR) < 0.9 * (up(M, MR) * up(N, NR))


def pack(w: np.ndarray, P: int) -> np.ndarray:
    """onnxc__sgemm_prepack of an R x K float matrix with panels of P lines (flat float32)."""
    R, K = w.shape
    Rp = -(-R // P) * P
    wp = np.zeros((Rp, K), np.float32)
    wp[:R] = w
    blocks = []
    for pc in range(0, K, SGEMM_KC):
        kc = min(SGEMM_KC, K - pc)
        blocks.append(wp[:, pc:pc + kc].reshape(Rp // P, P, kc).transpose(0, 2, 1).reshape(-1))
    return np.concatenate(blocks) if blocks else np.zeros(0, np.float32)


def gemv_strips(b: np.ndarray, sw: int = GEMV_SW) -> np.ndarray:
    """A K x N float matrix as onnxc_sgemv_strips reads it with strips of sw columns (flat float32)."""
    if sw <= 0 or sw % GEMV_PAD:
        raise ValueError(f"strip width {sw} is not a positive multiple of {GEMV_PAD}")
    K, N = b.shape
    Np = -(-N // GEMV_PAD) * GEMV_PAD
    bp = np.zeros((K, Np), np.float32)
    bp[:, :N] = b
    parts = [bp[:, j:j + sw].reshape(-1) for j in range(0, Np, sw)]
    return np.concatenate(parts) if parts else np.zeros(0, np.float32)


def _const_float(v) -> bool:
    return v is not None and v.const is not None and not v.is_input and v.etype.name == "float"


def _add_input(graph: Graph, node, index: int, name: str, data: np.ndarray, next_id: int) -> int:
    v = Value(name=name, id=next_id, etype=node.inputs[0].etype, shape=(data.size,), const=data)
    graph.values.append(v)
    v.consumers.append(node)
    while len(node.inputs) < index:
        node.inputs.append(None)
    node.inputs.append(v)
    return next_id + 1


def folded_rows(a) -> int | str:
    """MatMul's A rows with its leading dims folded into one GEMM ("symbolic" if any is)."""
    rows = 1
    for d in a.shape[:-1]:
        rows = rows * d if isinstance(d, int) and isinstance(rows, int) else "symbolic"
    return rows


def _gemm_strips(graph: Graph, node, next_id: int, sw: int, max_rows: int) -> int:
    """Gemm/FusedGemm, MatMul/FusedMatMul with a 2-D B: op(B) as strips (input 4) when A has at most
    max_rows rows (MatMul: its leading dims folded) or a symbolic count (the strips serve the run's
    rows up to max_rows)."""
    a, b = node.inputs[0], node.inputs[1]
    if not _const_float(b) or a.etype.name != "float" or int(node.attr("transA", 0) or 0) or len(node.inputs) > 4:
        return next_id
    if node.op_type in ("MatMul", "FusedMatMul"):
        if a.rank < 1 or b.rank != 2:
            return next_id
        M = folded_rows(a)
    else:
        M = a.shape[0]
    if isinstance(M, int) and M > max_rows:
        return next_id
    w = np.asarray(b.const, np.float32)
    if w.ndim != 2:
        return next_id
    kn = w.T if int(node.attr("transB", 0)) else w
    next_id = _add_input(graph, node, 4, f"{b.name} (strips)", gemv_strips(kn, sw), next_id)
    if isinstance(M, int):      # a symbolic row count may need the plain B for the SGEMM
        node.attrs["_unread"] = (1,)
    # finite weights: a zero of A times B's row is +-0, so a one-row A's zeros may be skipped
    node.attrs["_prepacked"] = {"gemv": 1, "plain": not isinstance(M, int), "sw": sw, "max_m": max_rows,
                                "index": 4, "finite": kn.shape[0] < 2 ** 31 - 64 and bool(np.isfinite(kn).all())}
    return next_id


def _rnn_strips(graph: Graph, node, next_id: int, block, copies: int | None = None) -> int:
    """LSTM, RNN, GRU(linear_before_reset=1) with constant W and R: gate-interleaved W (SGEMM
    panels when the block is known) and R blocks per direction, inputs 8 and 9 (prepack_rnn.py);
    copies of R: prepack_rnn.rnn_copies() unless given."""
    from .prepack_rnn import pack_rnn, sum_rnn_biases
    if node.op_type == "GRU" and not int(node.attr("linear_before_reset", 0) or 0):
        return next_id
    w, r = node.inputs[1], node.inputs[2]
    if not (_const_float(w) and _const_float(r)) or node.inputs[0].etype.name != "float" or len(node.inputs) > 8:
        return next_id
    wc, rc = np.asarray(w.const, np.float32), np.asarray(r.const, np.float32)
    if wc.ndim != 3 or rc.ndim != 3 or 0 in wc.shape or 0 in rc.shape:
        return next_id
    G = {"LSTM": 4, "GRU": 3, "RNN": 1}[node.op_type]
    if wc.shape[1] != rc.shape[1] or rc.shape[1] != G * rc.shape[2]:
        return next_id                          # the op reports the shape error
    ws, rs, attrs = pack_rnn(wc, rc, G, block, copies)
    next_id = _add_input(graph, node, 8, f"{w.name} (interleaved)", ws, next_id)
    next_id = _add_input(graph, node, 9, f"{r.name} (interleaved)", rs, next_id)
    b = node.input(3)
    if b is not None and _const_float(b) and np.asarray(b.const).shape == (wc.shape[0], 2 * wc.shape[1]):
        bsum = sum_rnn_biases(np.asarray(b.const, np.float32), G, node.op_type == "GRU")
        next_id = _add_input(graph, node, 10, f"{b.name} (summed)", bsum, next_id)
    node.attrs["_unread"] = (1, 2)
    node.attrs["_prepacked_rnn"] = attrs
    return next_id


def _direct_blocks(graph: Graph, node, next_id: int) -> int:
    """Conv on the direct kernel, channel-vectorised variant: W (G, Mg, K) as
    [g][block of 16 output channels][K][16], channels past Mg zero (input 4)."""
    from ..ops import lookup
    w = node.inputs[1]
    if not _const_float(w) or len(node.inputs) > 4 or node.attrs.get("_prepacked") is not None:
        return next_id
    p = lookup(node).params(node)
    if p["kind"] != "direct" or not p["direct"]["chan_ok"]:
        return next_id
    G, Mg, K = p["G"], p["Mg"], p["K"]
    Mp = -(-Mg // 16) * 16
    wm = np.zeros((G, Mp, K), np.float32)
    wm[:, :Mg] = np.asarray(w.const, np.float32).reshape(G, Mg, K)
    data = wm.reshape(G, Mp // 16, 16, K).transpose(0, 1, 3, 2).reshape(-1)
    next_id = _add_input(graph, node, 4, f"{w.name} (channel blocks)", np.ascontiguousarray(data), next_id)
    node.attrs["_prepacked_direct"] = True    # the plain W stays: builds without vectors use it
    return next_id


def _winograd(graph: Graph, node, block: tuple[int, int], next_id: int) -> int:
    """Conv on Winograd F(m, 3) (ops/conv.py winograd_m): U_t = G g G^T for the nn points t, each
    packed like onnxc__sgemm_prepack (M lines of C, panels of the width winograd_layout picks),
    t at float offset t * ustride (input 4). The plain W stays for the non-finite fallback."""
    from ..ops.conv import conv_geometry, winograd_layout, winograd_m, winograd_matrices
    w = node.inputs[1]
    if not _const_float(w) or len(node.inputs) > 4 or node.attrs.get("_prepacked") is not None:
        return next_id
    wc = np.asarray(w.const, np.float32)
    g = conv_geometry(node)
    m = winograd_m(node, g, wc)
    if not m:
        return next_id
    lay = winograd_layout(g, m, *block)
    _, G, _ = winograd_matrices(m)
    Gm = np.array([[float(v) for v in row] for row in G])
    U = np.einsum("ik,mckl,jl->ijmc", Gm, wc.astype(np.float64), Gm).astype(np.float32)
    U = U.reshape(lay["nn"], g["M"], g["C"])
    data = np.zeros((lay["nn"], lay["ustride"]), np.float32)
    for t in range(lay["nn"]):
        pk = pack(U[t], lay["pm"])
        data[t, :pk.size] = pk
    next_id = _add_input(graph, node, 4, f"{w.name} (winograd)", data.reshape(-1), next_id)
    node.attrs["_prepacked_wino"] = lay
    return next_id


def _strided(graph: Graph, node, block: tuple[int, int], next_id: int) -> int:
    """Conv on onnxc_conv_strided.h (ops/conv.py strided_layout): W (M, K) as [panel of MR][K][MR],
    channels past M zero (input 4)."""
    from ..ops import lookup
    from ..ops.conv import conv_geometry, pointwise_strided, strided_layout
    w = node.inputs[1]
    if not _const_float(w) or len(node.inputs) > 4 or node.attrs.get("_prepacked") is not None:
        return next_id
    g = conv_geometry(node)
    if pointwise_strided(g):
        # a 1x1 conv with strides: onnxc_pw_rows on a gathered copy of X where its pixels fill the
        # tiles, else im2col's gather and the SGEMM. The strided kernel's taps are one offset per
        # channel, no reuse: ResNet-50's 1024 -> 2048 downsample to 7x7 took 2423 us on it, 1962
        # through the SGEMM (onnxruntime 2094), the model 0.99x the time at 1 and 2 threads
        return next_id
    p = lookup(node).params(node)
    if p["kind"] != "im2col" or not strided_layout(node, g, "im2col"):
        return next_id
    MR = block[0]
    M, K = p["M"], p["K"]
    Mp = -(-M // MR) * MR
    wm = np.zeros((Mp, K), np.float32)
    wm[:M] = np.asarray(w.const, np.float32).reshape(M, K)
    data = np.ascontiguousarray(wm.reshape(Mp // MR, MR, K).transpose(0, 2, 1)).reshape(-1)
    next_id = _add_input(graph, node, 4, f"{w.name} (strided)", data, next_id)
    node.attrs["_unread"] = (1,)
    node.attrs["_prepacked_strided"] = {"mr": MR}
    return next_id


def _unpacked_recurrent(node) -> bool:
    return node.domain in ("", "ai.onnx") and node.op_type in ("LSTM", "RNN", "GRU") \
        and not node.attrs.get("_prepacked_rnn")


def prepack_recurrent(graph: Graph) -> Graph:
    """Emitted firmware C (no register block, no host): constant LSTM / RNN / GRU weights in the
    fused steps' layout, which is the same for every ISA (plain W rows, R in blocks of hidden
    units), with one copy of R (a second is a speed choice for this host's L2 and would double R
    in a target's flash). The blob keeps only the packed copies. A 128-unit LSTM's standalone C,
    32 steps: 0.71-0.73x the time of an SGEMM per step (AVX2, -O3), 0.82-0.85x (SSE2, -O2)."""
    next_id = max((v.id for v in graph.values), default=-1) + 1
    for node in graph.nodes:
        if _unpacked_recurrent(node):
            next_id = _rnn_strips(graph, node, next_id, None, copies=1)
    return graph


def prepack_weights(graph: Graph, block: tuple[int, int] | None, strip_width: int = GEMV_SW,
                    strip_rows: int = GEMV_MAX_M) -> Graph:
    from ..ops import lookup
    from ..ops.conv import pointwise_rows_ok, pointwise_strided
    next_id = max((v.id for v in graph.values), default=-1) + 1
    if block is not None:
        for node in graph.nodes:
            if node.op_type in ("Conv", "FusedConv") and node.attrs.get("_prepacked_wino") is None:
                next_id = _winograd(graph, node, block, next_id)
            if node.op_type in ("Conv", "FusedConv") and node.attrs.get("_prepacked_strided") is None \
                    and node.attrs.get("_prepacked_wino") is None:
                next_id = _strided(graph, node, block, next_id)
    for node in graph.nodes:
        if node.op_type in ("Conv", "FusedConv") and not node.attrs.get("_prepacked_direct"):
            next_id = _direct_blocks(graph, node, next_id)
        if _unpacked_recurrent(node):
            next_id = _rnn_strips(graph, node, next_id, block)
        if node.op_type in ("Gemm", "FusedGemm", "MatMul", "FusedMatMul") and node.attrs.get("_prepacked") is None:
            next_id = _gemm_strips(graph, node, next_id, strip_width, strip_rows)
    if block is None:
        return graph
    MR, NR = block
    for node in graph.nodes:
        if node.op_type not in ("Conv", "FusedConv") or node.attrs.get("_prepacked") is not None \
                or node.attrs.get("_prepacked_direct") or node.attrs.get("_prepacked_wino") is not None \
                or node.attrs.get("_prepacked_strided") is not None:
            continue
        w = node.inputs[1]
        if w.const is None or w.is_input or w.etype.name != "float" or node.inputs[0].etype.name != "float":
            continue
        spec = lookup(node)
        p = spec.params(node)
        if p["kind"] in ("depthwise", "direct", "winograd") or p["gemm"] != "s" or p["K"] <= 0 or p["Mg"] <= 0:
            continue
        G, Mg, K = p["G"], p["Mg"], p["K"]
        # 1x1 stride 1 (onnxc_pw_rows) reads the channel panels of the plain orientation
        pw = (p["kind"] == "pointwise" or pointwise_strided(p)) and pointwise_rows_ok(p, NR)
        swapped = False if pw else w_swapped(Mg, p["nch"], MR, NR)
        P = NR if swapped else MR
        wm = np.ascontiguousarray(w.const, np.float32).reshape(G, Mg, K)
        groups = [pack(wm[g], P) for g in range(G)]
        stride = -(-groups[0].size * 4 // ALIGN) * ALIGN // 4     # floats per group, 64-byte aligned
        data = np.zeros((G, stride), np.float32)
        for g, a in enumerate(groups):
            data[g, :a.size] = a
        v = Value(name=f"{w.name} (packed)", id=next_id, etype=w.etype, shape=(G * stride,),
                  const=data.reshape(-1))
        next_id += 1
        graph.values.append(v)
        v.consumers.append(node)
        while len(node.inputs) < 4:
            node.inputs.append(None)
        node.inputs.append(v)                          # input 4: the packed weights
        node.attrs["_unread"] = (1,)                   # the plain weights stay out of the blob
        node.attrs["_prepacked"] = {"swapped": int(swapped), "mr": MR, "nr": NR, "stride": stride * 4, "pw": int(pw)}
    return graph
