"""Conv (1-D to 3-D; group, pads, strides, dilations, auto_pad) as GEMMs.

Laid out as 3-D convolutions: 1-D and 2-D inputs get leading spatial dims of size 1 (kernel 1,
stride 1, no pad), so one template serves every rank. Per image and group, one of:
  pointwise  1x1 kernel, stride 1, no pad: Y_g = W_g X_g straight from the input;
  depthwise  one input and one output channel per group: a direct loop per channel;
  im2col     the input patches unrolled into the node scratch (K x out-pixels), then
             Y_g = W_g col.
The bias is written into Y first and the GEMM accumulates onto it (beta = 1).
float16/bfloat16: X, W, B (and a fused residual) are converted to float buffers placed after the
usual scratch, the convolution runs in float and Y is rounded once on store.
Channels, kernel and spatial dims must be static; the batch may be symbolic.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from .. import dtypes
from ..passes import PRIVATE_DOMAIN
from ..errors import NotImplemented as OrtNotImplemented
from ..symbolic import dim_repr, product
from .common import attr_enum, attr_ints, fail
from .gemm import (EPILOGUE_HEADERS, LOWP, SGEMM_KC, check_type, epilogue, gemm_kernel, lowp_buffers, residual_inplace,
                   sgemm_work_bytes, sgemm_wpack_bytes)
from .registry import OpSpec, register

D = dtypes.BY_NAME
FLOATS = (D["float"], D["double"]) + LOWP
AUTO_PAD = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")
COL_CHUNK_BYTES = 512 * 1024   # im2col chunk: about half an L2
CHUNK_ALIGN = 48               # chunk widths: a multiple of every SGEMM NR (8, 12, 16, 48)
CONV_SLOTS = 4                 # up to this many threads take chunks of their own (scratch: one slot each)
DIRECT_QB = 64                 # the largest ONNXC_CONV_QB (onnxc_conv.h): wide rows are sized for it
DIRECT_MAX_MACS = 4 << 20
DIRECT_MAX_BYTES = 256 << 10
# Winograd F(m x m, 3 x 3) (runtime_c/onnxc_winograd.h). Interpolation points (plus infinity)
# chosen for accuracy: {0, +-1, 2, -1/2} has a max error ~3x lower than {0, +-1, +-2}. Its
# rounding error grows with the weights' size and the channel count: with
# P = max over output channels of ||W_m||_2 * sqrt(C), outputs stay within rtol 1e-4 / atol 1e-5
# of the direct sums for N(0,1) inputs when P <= WINO_F4_MAX_P (F(4,3): 64 channels of
# N(0,0.05) weights give 9.6, 128 give 19 and miss) or P <= WINO_F2_MAX_P (F(2,3), about 5x
# more accurate: 512 channels of N(0,0.05) give 77); larger weights stay on im2col.
WINO_POINTS = {4: (0, 1, -1, 2, Fraction(-1, 2)), 2: (0, 1, -1)}
WINO_F4_MAX_P = 12.0
WINO_F2_MAX_P = 100.0
WINO_F4_MIN_TILES = 96
WINO_MIN_CH = 16          # below this the transforms cost more than the products saved
WINO_BLOCK_BYTES = 768 << 10   # V + GEMM output of one tile block: about an L2
WINO_SLOTS = 4
DW_SLOTS = 8                 # depthwise (onnxc_dwconv.h): threads with a padded-plane slot each
DW_MAX_SLOT_BYTES = 1 << 20  # larger planes keep the plain per-row loops
DW_BAND_BYTES = 16 << 10     # wide output rows computed at once (L1)
PW_CHUNK_BYTES = 192 << 10   # pointwise (onnxc_pw_rows): X columns per job, K x chunk floats in L2
PW_SLOTS = 8
PW_PANEL_MAJOR_BYTES = 640 << 10   # X up to this: pointwise jobs ordered by panel (see params)
PW_PAD = 16                  # padded copy of X for pointwise (pointwise_xpad): rows of whole vectors
PW_AVX2_PAD_SHARE = 0.35     # padding share onnxc_pw_rows may take with AVX2's 16-column tiles
PW_XPAD_MAX_BYTES = 1 << 20
PW_MASKED_NR = (48, 16)      # SGEMM tile widths of AVX-512 and AVX2: masked loads (ONNXC_PW_MASKED_TAIL)
PW_MR_MAX, PW_NR_MAX = 16, 64   # ONNXC_SGEMM_MR_MAX / NR_MAX: the tail tile's scratch
DWF_VL = 16                  # depthwise_flat: AVX-512 lanes
DWF_MAX_POSITIONS = 64 * 64  # planes up to this run as one unrolled row of chunks, larger ones per row
DWF_S2_MAX_OW = 64          # stride 2 from the input's rows up to this output width (registers)
DWF_GROUP, DWF_GROUP_BYTES = 8, 32 << 10   # stride 2: channels split into phases at once (L1)
DWF_MAX_LOADS = 2048         # chunks x taps: the loads unrolled per channel
DWR8_VL = 8                  # depthwise_rows8: AVX2 lanes
DW_VL = 16                   # slack after the planes and the band: the widest vector
STRIDED_MAX_C = 4            # onnxc_conv_strided.h: image-input convs (RGB: K = 27, 147), and deeper
STRIDED_MAX_K = 160          # ones whose output rows fill its 16-float vector tiles (STRIDED_WIDE_*)
STRIDED_WIDE_MIN_OW = 24     # rows of 24+ that fill whole vectors (padding <= 10%) take row tiles
STRIDED_WIDE_MAX_PAD = 0.1   # (112: as fast as wide tiles); rows of 28 and 56 (one part-empty
                             # vector) 7-15% faster on wide tiles, 1 and 2 threads (3x3 stride 2)
STRIDED_SHORT_MIN_OW = 7     # shorter rows of deep convs: wide-position tiles (rows of 14 and 7)
STRIDED_SHORT_MIN_FILL = 0.85   # outputs per wide position (OW / RW) at least this
STRIDED_SHORT_BAND_BYTES = 512 << 10
STRIDED_SHORT_MAX_K = 4608   # deeper sums go to im2col. Measured against it, 3x3 stride 2 at 1 / 2
                             # threads: 256 -> 512 at 14 -> 7 576 / 294 us (im2col 598 / 321),
                             # 256 -> 256 at 28 -> 14 1070 / 580 (1259 / 1066), 512 -> 512 at
                             # 14 -> 7 1114 / 567 (1195 / 683)
STRIDED_MIN_BANDS = 16       # output-row bands per image (jobs for the threads)
STRIDED_BAND_BYTES = 192 << 10


def _align(n: int) -> int:
    return -(-n // 64) * 64


def _fmt(shape) -> str:
    return "(" + ", ".join(dim_repr(d) for d in shape) + ")"


def _static(node, what: str, dims) -> list[int]:
    if not all(isinstance(d, int) for d in dims):
        raise OrtNotImplemented(f"{node.describe()}: {what} must be static for Conv, got "
                                f"{_fmt(dims)}; only the batch dimension may be symbolic")
    return list(dims)


def _at_least(node, name: str, vals: list[int], n: int, minimum: int) -> list[int]:
    if len(vals) != n:
        raise fail(node, f"attribute {name} has {len(vals)} values, expected {n} (one per spatial dim)")
    if any(v < minimum for v in vals):
        raise fail(node, f"attribute {name}={vals}: every value must be >= {minimum}")
    return vals


def conv_geometry(node) -> dict:
    """Channels, groups and per-spatial-dim sizes (static ints) of a Conv node."""
    x, w = node.inputs[0], node.inputs[1]
    if x.rank < 3:
        raise fail(node, f"input X must be N x C x spatial..., got shape {_fmt(x.shape)}")
    ns = x.rank - 2
    if ns > 3:
        raise OrtNotImplemented(f"{node.describe()}: {ns}-D convolution is not supported (1-D to 3-D)")
    if w.rank != x.rank:
        raise fail(node, f"input W has shape {_fmt(w.shape)}, expected rank {x.rank} like X {_fmt(x.shape)}")
    wshape = _static(node, "the shape of W", w.shape)
    C = _static(node, "the channel dimension of X", [x.shape[1]])[0]
    ins = _static(node, "the spatial dimensions of X", x.shape[2:])
    group = int(node.attr("group", 1))
    M, Cg, ks = wshape[0], wshape[1], wshape[2:]
    if group < 1 or C != Cg * group or M % group != 0:
        raise fail(node, f"X {_fmt(x.shape)} and W {_fmt(w.shape)} do not fit group={group} "
                   f"(need C = W.shape[1] * group and W.shape[0] divisible by group)")
    kattr = attr_ints(node, "kernel_shape")
    if kattr is not None and list(kattr) != ks:
        raise fail(node, f"attribute kernel_shape={kattr} does not match W's spatial dims {ks}")
    _at_least(node, "kernel (W spatial dims)", ks, ns, 1)
    strides = _at_least(node, "strides", attr_ints(node, "strides") or [1] * ns, ns, 1)
    dil = _at_least(node, "dilations", attr_ints(node, "dilations") or [1] * ns, ns, 1)
    pads = attr_ints(node, "pads") or [0] * (2 * ns)
    if len(pads) != 2 * ns:
        raise fail(node, f"attribute pads has {len(pads)} values, expected {2 * ns}")
    if any(p < 0 for p in pads):
        raise fail(node, f"attribute pads={pads}: values must be >= 0")
    auto_pad = attr_enum(node, "auto_pad", AUTO_PAD)
    outs, pb = [], []
    for k in range(ns):
        ke = (ks[k] - 1) * dil[k] + 1
        s, n_in = strides[k], ins[k]
        if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            out = -(-n_in // s)
            total = max(0, (out - 1) * s + ke - n_in)
            begin = total // 2 if auto_pad == "SAME_UPPER" else total - total // 2
        elif auto_pad == "VALID":
            begin, out = 0, (n_in - ke) // s + 1 if n_in >= ke else 0
        else:
            begin, out = pads[k], (n_in + pads[k] + pads[k + ns] - ke) // s + 1
        if out < 1:
            raise fail(node, f"spatial dim {k}: input {n_in} with kernel {ks[k]} (dilation {dil[k]}), "
                       f"stride {s} and pads gives an output size of {out}")
        outs.append(out)
        pb.append(begin)
    lead = 3 - ns   # pad to 3-D
    return {"ns": ns, "C": C, "M": M, "G": group, "Cg": Cg, "Mg": M // group,
            "I": [1] * lead + ins, "O": [1] * lead + outs, "KS": [1] * lead + ks,
            "S": [1] * lead + strides, "DL": [1] * lead + dil, "P": [0] * lead + pb}


def _poly(roots) -> list:
    c = [Fraction(1)]
    for a in roots:                      # times (x - a); c[k]: coefficient of x^k
        n = [Fraction(0)] * (len(c) + 1)
        for i, v in enumerate(c):
            n[i + 1] += v
            n[i] -= a * v
        c = n
    return c


def winograd_matrices(m: int, r: int = 3):
    """(A^T, G, B^T) of F(m, r) as exact fractions (Toom-Cook on WINO_POINTS plus infinity;
    correlation = the transposed linear-convolution algorithm): y = A^T [(G g) . (B^T d)]."""
    pts = [Fraction(p) for p in WINO_POINTS[m]]
    AT = [[p ** i for p in pts] + [Fraction(int(i == m - 1))] for i in range(m)]
    G, BT = [], []
    for j, a in enumerate(pts):
        others = pts[:j] + pts[j + 1:]
        f = Fraction(1)
        for o in others:
            f *= a - o
        G.append([a ** k / f for k in range(r)])
        BT.append(_poly(others) + [Fraction(0)])
    G.append([Fraction(int(k == r - 1)) for k in range(r)])
    BT.append(_poly(pts))
    return AT, G, BT


def winograd_m(node, g, w) -> int:
    """F(m x m, 3 x 3) for this Conv with constant weights w (4 or 2), or 0 when Winograd does
    not apply or pay: float 2-D 3x3, stride 1, dilation 1, one group, at least WINO_MIN_CH
    channels each way, finite weights small enough for its accuracy (WINO_F*_MAX_P)."""
    if node.inputs[0].etype != D["float"] or g["ns"] != 2 or g["G"] != 1 or g["KS"] != [1, 3, 3]:
        return 0
    if g["S"] != [1, 1, 1] or g["DL"] != [1, 1, 1] or min(g["C"], g["M"]) < WINO_MIN_CH:
        return 0
    if not np.isfinite(w).all():     # U would spread a non-finite weight over whole tiles
        return 0
    p = float(np.sqrt(np.square(w.astype(np.float64)).reshape(g["M"], -1).sum(1).max() * g["C"]))
    def tiles(m):
        return -(-g["O"][1] // m) * -(-g["O"][2] // m)
    # F(4,3) measured slower than F(2,3) below ~100 tiles (28x28: its blocks pad more, U is
    # 2.25x larger); few tiles at all: every block re-reads all of U for too few products
    m = 4 if p <= WINO_F4_MAX_P and tiles(4) >= WINO_F4_MIN_TILES else 2 if p <= WINO_F2_MAX_P else 0
    return m if m and tiles(m) >= 8 else 0


def winograd_layout(g, m: int, MR: int, NR: int) -> dict:
    """Tile blocks and GEMM orientation. Tiles (n, th, tw) are numbered across the batch and
    taken Tb at a time; per block the 36 (16) GEMMs are O_t = U_t V_t (M x C times C x Tb).
    swapped = 0: M in MR-row panels of U, tiles in NR-column panels of V; 1: tiles in MR-row
    panels of V, M in NR-column panels of U. The one with less register-tile padding wins."""
    n = m + 2
    nn, M, C = n * n, g["M"], g["C"]
    TH, TW = -(-g["O"][1] // m), -(-g["O"][2] // m)
    tpi = TH * TW
    best = None
    for swapped, (pm, pv) in enumerate(((MR, NR), (NR, MR))):
        Mp = -(-M // pm) * pm
        per_tile = 4 * nn * (C + Mp)
        # each block re-reads all of U: when U is far larger than a block, take bigger blocks
        budget = WINO_BLOCK_BYTES * (1 if 4 * nn * Mp * C <= 2 * WINO_BLOCK_BYTES else 4)
        tb_max = max(pv, budget // per_tile // pv * pv)
        nblk = -(-tpi // tb_max)
        Tb = -(-(-(-tpi // nblk)) // pv) * pv
        cost = Mp * Tb * nblk * (1.25 if swapped else 1.0)   # swapped stores its tiles transposed
        if best is None or cost < best[0]:
            best = (cost, {"swapped": swapped, "pm": pm, "pv": pv, "Mp": Mp, "Tb": Tb})
    lay = best[1]
    Mp, Tb = lay["Mp"], lay["Tb"]
    wseg = TW * m + 2
    tmp = max((2 * n + 1) * wseg, m * m * Tb) + 64   # zero row, 2 x row transform | output planes
    # planes a multiple of 4 KiB apart: each store to one would hold up later loads from the
    # others (the core matches loads to older stores by their low 12 address bits)
    vstride, ostride = (s + (16 if s % 1024 == 0 else 0) for s in (Tb * C, Mp * Tb))
    return {**lay, "m": m, "n": n, "nn": nn, "TH": TH, "TW": TW, "TPI": tpi, "wseg": wseg,
            "ustride": -(-Mp * C // 16) * 16, "vstride": vstride, "ostride": ostride,
            "v_bytes": _align(4 * nn * vstride), "o_bytes": _align(4 * nn * ostride), "tmp_bytes": _align(4 * tmp)}


def pointwise_strided(g) -> bool:
    """A 1x1 conv with no padding and a stride above 1 along height or width (not depth): it
    runs as a pointwise one on a copy of X holding only the pixels it reads (the padded copy of
    pointwise_xpad, gathered)."""
    return all(k == 1 for k in g["KS"]) and all(p == 0 for p in g["P"]) and g["S"][0] == 1 \
        and g["O"][0] == g["I"][0] and any(s > 1 for s in g["S"][1:])


def pointwise_xpad(g, nr: int) -> int:
    """Row length of the padded copy of X that onnxc_pw_rows reads its last tile from (pixels
    rounded up to 16: whole vectors), or 0 where the pixels fill NR-wide tiles, X's own rows are
    read in place (pointwise_in_place) or X is large.
    A strided 1x1 conv always takes the copy (pointwise_strided)."""
    osp = product(g["O"])
    ldp = -(-osp // PW_PAD) * PW_PAD
    if not pointwise_strided(g) and (osp % nr == 0 or pointwise_in_place(g, nr)
                                     or 4 * g["C"] * ldp > PW_XPAD_MAX_BYTES):
        return 0
    return ldp


def pointwise_in_place(g, nr: int) -> int:
    """How onnxc_pw_rows reads the last pixels of X's rows in place (its xpad argument): 1 where
    the rows are whole vectors of every ISA (16 floats: 28x28, 56x56, 112x112 planes), 2 with the
    last vector's load masked where the SGEMM tile is AVX-512's or AVX2's (NR 48 or 16: 14x14,
    7x7), 0 not at all (a padded copy, or a copy per panel). The copy into padded rows read and
    wrote all of X (MobileNetV2's 28x28 block without it: 0.95x the time at 1 thread, 0.80x at 2,
    where each thread's half rows of the copy met the other's)."""
    if pointwise_strided(g):
        return 0
    return 1 if product(g["O"]) % PW_PAD == 0 else 2 if nr in PW_MASKED_NR else 0


def pointwise_rows_ok(g, nr: int) -> bool:
    """onnxc_pw_rows for this 1x1 conv: the pixels fill NR-wide tiles with little padding, or
    whole vectors of a padded copy of X do (14x14: 13 vectors for 196 pixels). With AVX2's
    16-column tiles up to a third of padding is worth it (7x7: 49 pixels in 64): the swapped
    SGEMM that would take it stores every 6 x 16 tile transposed, 16 strided columns of 6
    floats, and ran MobileNetV2's 7x7 expansions at 0.69-0.98x onnxruntime where these run at
    0.94-1.21x (Zen 3). The wider AVX-512 tiles keep the 10% rule (measured there)."""
    osp = product(g["O"])
    if not isinstance(osp, int):
        return False
    if pointwise_xpad(g, nr) or pointwise_in_place(g, nr):
        return -(-osp // PW_PAD) * PW_PAD - osp <= (PW_AVX2_PAD_SHARE if nr == 16 else 0.1) * osp
    return (-(-osp // nr) * nr - osp) <= 0.1 * osp


def depthwise_phases(g, ct_float: bool) -> dict | None:
    """Depthwise layout of runtime_c/onnxc_dwconv.h, or None (3-D, double, huge planes).
    The zero-padded input plane is split into SH x SW phase planes of RH x RW: phase (a, b)
    holds padded element (r*SH + a, c*SW + b) at r*RW + c. Tap (kh, kw) of output (oh, ow) is
    then phase ((kh*DH) % SH, (kw*DW) % SW) at (oh + kh*DH//SH) * RW + ow + kw*DW//SW: a
    constant offset from the wide position q = oh*RW + ow, for any stride."""
    if not ct_float or g["I"][0] != 1 or g["KS"][0] != 1:
        return None
    (IH, IW), (OH, OW), (KH, KW) = g["I"][1:], g["O"][1:], g["KS"][1:]
    (SH, SW), (DH, DW), (PT, PL) = g["S"][1:], g["DL"][1:], g["P"][1:]
    RH = OH + max(kh * DH // SH for kh in range(KH))
    RW = OW + max(kw * DW // SW for kw in range(KW))
    plane = RH * RW
    taps = [((kh * DH) % SH * SW + (kw * DW) % SW) * plane + (kh * DH // SH) * RW + kw * DW // SW
            for kh in range(KH) for kw in range(KW)]
    copies = []   # per phase: rows [r0, r1) and columns [c0, c1) that hold input, source offset
    for a in range(SH):
        r0 = max(0, -(-(PT - a) // SH))
        r1 = min(RH, (IH - 1 + PT - a) // SH + 1) if IH - 1 + PT - a >= 0 else 0
        for b in range(SW):
            c0 = max(0, -(-(PL - b) // SW))
            c1 = min(RW, (IW - 1 + PL - b) // SW + 1) if IW - 1 + PL - b >= 0 else 0
            if r1 > r0 and c1 > c0:
                copies.append({"base": (a * SW + b) * plane, "r0": r0, "r1": r1, "c0": c0, "c1": c1,
                               "src": (a - PT) * IW + b - PL})
    band = max(1, min(OH, DW_BAND_BYTES // (4 * RW)))
    xp_bytes = _align(4 * (SH * SW * plane + DW_VL))
    slot_bytes = xp_bytes + _align(4 * (band * RW + DW_VL))
    if slot_bytes > DW_MAX_SLOT_BYTES:
        return None
    return {"SH": SH, "SW": SW, "RH": RH, "RW": RW, "taps": taps, "copies": copies, "band": band,
            "xp_bytes": xp_bytes, "slot_bytes": slot_bytes, "slots": DW_SLOTS}


def depthwise_flat(g, ct_float: bool) -> dict | None:
    """Depthwise with 16 output positions per vector (templates/c/ops/_conv_dw_flat.c.j2,
    AVX-512), or None. Output position p = oh * OW + ow reads tap t at p + off[t] in a plane of
    rows OW wide: the input itself at stride 1 when OW == IW; at stride 2 (IW even, OW == IW / 2)
    the four stride phases of the input, split off per channel into a thread's slot (phase (a, b)
    holds input (2r + a, 2c + b) at r * OW + c). Each chunk's masks keep the lanes whose tap lies
    inside the input, so the padding is never stored. Small planes ("flat") run as one row of
    chunks with the rows' bounds in the masks; larger ones per output row, the kernel rows outside
    the input skipped at run time."""
    if not ct_float or g["I"][0] != 1 or g["KS"][0] != 1:
        return None
    (IH, IW), (OH, OW), (KH, KW) = g["I"][1:], g["O"][1:], g["KS"][1:]
    (SH, SW), (DH, DW), (PT, PL) = g["S"][1:], g["DL"][1:], g["P"][1:]
    if (SH, SW, DH, DW) == (2, 2, 1, 1) and IW % 2 == 0 and OW == IW // 2 and OW <= DWF_S2_MAX_OW \
            and -(-OW // DWF_VL) * KH * KW <= DWF_MAX_LOADS and max(PL, KW - 1 - PL) < 2 * DWF_VL - 1:
        return _depthwise_stride2_rows(IH, IW, OW, KH, KW, PT, PL)   # shifts of fewer than 16 lanes
    n = OH * OW
    flat = n <= DWF_MAX_POSITIONS and -(-n // DWF_VL) * KH * KW <= DWF_MAX_LOADS
    width = n if flat else OW                  # positions per row of chunks
    nch = -(-width // DWF_VL)
    if n == 0 or nch * KH * KW > DWF_MAX_LOADS:
        return None
    plane = 0
    if (SH, SW) == (1, 1) and OW == IW:
        taps = [((kh * DH - PT) * IW + kw * DW - PL, IH, kh * DH - PT, kw * DW - PL)
                for kh in range(KH) for kw in range(KW)]   # (offset, rows of its plane, row, column shift)
    elif (SH, SW, DH, DW) == (2, 2, 1, 1) and IW % 2 == 0 and OW == IW // 2:
        PH = (IH + 1) // 2
        plane = PH * OW + DWF_VL   # + slack: the split stores whole vectors
        taps = []
        for kh in range(KH):
            for kw in range(KW):
                a, b = (kh - PT) % 2, (kw - PL) % 2
                dr, dc = (kh - PT - a) // 2, (kw - PL - b) // 2
                taps.append(((a * 2 + b) * plane + dr * OW + dc, (IH - a + 1) // 2, dr, dc))
    else:
        return None
    chunks = []
    for j in range(nch):
        masks = []
        for _, rows, dr, dc in taps:
            m = 0
            for lane in range(DWF_VL):
                q = j * DWF_VL + lane
                oh, ow = divmod(q, OW)
                if q < width and 0 <= ow + dc < OW and (not flat or 0 <= oh + dr < rows):
                    m |= 1 << lane
            masks.append(m)
        chunks.append({"base": j * DWF_VL, "masks": masks, "keep": (1 << min(DWF_VL, width - j * DWF_VL)) - 1})
    if flat:
        _sliding_vectors(chunks, [t[0] for t in taps], 4 * plane if plane else IH * IW)
    out = {"offs": [t[0] for t in taps], "chunks": chunks, "flat": flat, "s2rows": False,
           "kh_rows": [(taps[kh * KW][2], taps[kh * KW][1]) for kh in range(KH)],
           "phases": None, "slots": 0, "slot_bytes": 0}
    if plane:
        # each input row: chunks of 32 floats (c0, lanes of the low and high loads)
        split = [{"c0": c0, "lo": (1 << min(IW - c0, DWF_VL)) - 1, "hi": (1 << max(0, min(IW - c0, 2 * DWF_VL) - DWF_VL)) - 1}
                 for c0 in range(0, IW, 2 * DWF_VL)]
        group = max(1, min(DWF_GROUP, DWF_GROUP_BYTES // (16 * plane)))
        if 16 * plane * group > DW_MAX_SLOT_BYTES:
            return None
        out.update(phases={"plane": plane, "split": split, "group": group}, slots=DW_SLOTS,
                   slot_bytes=_align(16 * plane * group))
    return out


def depthwise_rows8(g, ct_float: bool) -> dict | None:
    """Depthwise at stride 1 or 2 with 8 outputs per vector straight from the input rows
    (templates/c/ops/_conv_dw_rows8.c.j2, AVX2), or None. Tap (kh, kw) of output column ow reads
    input column S ow + kw DW - PL of row S oh + kh DH - PT: for 8 outputs one load from column
    8 S j + kw DW - PL at stride 1, at stride 2 the even lanes of two loads from there. Chunks at
    the row's ends load masked (only the columns inside the row: the padding reads as zero);
    "edges" lists them with their per-tap (low, high) load masks, the others run in one loop of
    whole loads."""
    if not ct_float or g["I"][0] != 1 or g["KS"][0] != 1:
        return None
    (IH, IW), (OH, OW), (KH, KW) = g["I"][1:], g["O"][1:], g["KS"][1:]
    (SH, SW), (DH, DW) = g["S"][1:], g["DL"][1:]
    if SH != SW or SH not in (1, 2) or KH * KW > 49 or OW < 1 or OH < 1:
        return None
    PT, PL, VL = g["P"][1], g["P"][2], DWR8_VL
    nk, full = -(-OW // VL), (1 << VL) - 1

    def bits(c0):   # lanes of the 8 floats from column c0 that lie inside the row
        return sum(1 << i for i in range(VL) if 0 <= c0 + i < IW)

    edges = []
    for j in range(nk):
        c0 = [SW * VL * j + kw * DW - PL for kw in range(KW)]
        masks = [(bits(c), bits(c + VL) if SW == 2 else 0) for c in c0]
        keep = (1 << min(VL, OW - VL * j)) - 1
        if keep != full or any(m != (full, full if SW == 2 else 0) for m in masks):
            edges.append({"j": j, "masks": masks, "keep": keep})
    masked = {e["j"] for e in edges}
    j0 = next((j for j in range(nk) if j not in masked), nk)   # the whole chunks: [j0, j1)
    j1 = j0
    while j1 < nk and j1 not in masked:
        j1 += 1
    if any(j not in masked for j in range(j1, nk)):
        return None    # whole chunks not one run (a row narrower than its taps' reach)
    return {"S": SH, "nk": nk, "j0": j0, "j1": j1, "edges": edges,
            "rows": [kh * DH - PT for kh in range(KH)], "cols": [kw * DW - PL for kw in range(KW)]}


def _depthwise_stride2_rows(IH, IW, OW, KH, KW, PT, PL) -> dict:
    """Stride 2 straight from the input ("s2rows"): per output row and kernel row, the input row's
    vectors A (aligned to the row) give its even and odd columns E, O by two-source permutes;
    tap kw of output column ow reads column 2 ow + kw - PL, lane ow + dc of E (b = 0) or O
    (b = 1), so a vector of 16 outputs is E_k or O_k shifted by dc lanes (valignd with the next or
    previous vector; zeros past the row and before it, which are the padding)."""
    nk = -(-OW // DWF_VL)
    taps = []
    for kw in range(KW):
        b = (kw - PL) % 2
        taps.append((kw, "o" if b else "e", (kw - PL - b) // 2))
    nA = -(-IW // DWF_VL)
    tail = IW - (nA - 1) * DWF_VL
    return {"s2rows": True, "nk": nk, "nA": nA, "tailA": (1 << tail) - 1, "taps": taps, "PT": PT,
            "keep_last": (1 << (OW - (nk - 1) * DWF_VL)) - 1, "flat": False, "phases": None, "slots": 0,
            "slot_bytes": 0, "chunks": []}


def _sliding_vectors(chunks: list, offs: list, readable: int) -> None:
    """Whole-plane layout: each tap's 16 floats at chunk base + off come from the grid of
    vectors V[q] (floats 16q .. 16q + 15 of the plane) by one lane shift (valignd) of V[q], V[q+1]:
    every V[q] is loaded once, by the first chunk that needs it (masked to the readable floats
    [0, readable)), instead of one unaligned load per tap. Adds to each chunk "loads"
    [(q, mask)] and "shifts" [(tap, q, lanes, mask)]."""
    seen = set()
    for ck in chunks:
        shifts, loads = [], []
        for t, (off, m) in enumerate(zip(offs, ck["masks"])):
            if not m:
                continue
            q, lanes = divmod(ck["base"] + off, DWF_VL)
            shifts.append((t, q, lanes, m))
            for v in (q, q + 1) if lanes else (q,):
                if v not in seen:
                    seen.add(v)
                    keep = sum(1 << i for i in range(DWF_VL) if 0 <= v * DWF_VL + i < readable)
                    loads.append((v, keep))
        ck["loads"], ck["shifts"] = sorted(loads), shifts


def strided_layout(node, g, kind: str) -> dict | None:
    """runtime_c/onnxc_conv_strided.h for a float 2-D strided conv with one group and either few
    input channels and a short depth (an image model's first conv: im2col would write K floats
    per output pixel for few products each) or output rows that fill its vector tiles, or None. Jobs are
    bands of BR output rows; each copies its input rows into stride-phase planes of RB x RW per
    channel (a thread's slot) and computes every output channel from them."""
    if kind != "im2col" or node.inputs[0].etype != D["float"] or g["G"] != 1 or g["ns"] != 2:
        return None
    if g["S"][1:] == [1, 1] or g["I"][0] != 1 or g["KS"][0] != 1:
        return None
    (IH, IW), (OH, OW), (KH, KW) = g["I"][1:], g["O"][1:], g["KS"][1:]
    (SH, SW), (DH, DW), (PT, PL) = g["S"][1:], g["DL"][1:], g["P"][1:]
    C, K = g["C"], g["C"] * KH * KW
    eh = max(kh * DH // SH for kh in range(KH))
    RW = OW + max(kw * DW // SW for kw in range(KW))
    fill = OW >= STRIDED_WIDE_MIN_OW and -(-OW // 16) * 16 - OW <= STRIDED_WIDE_MAX_PAD * OW
    # deep convs with short rows: tiles of wide positions across rows (onnxc_conv_strided_wide),
    # in bands of many rows (threads split the output channels instead)
    tiles = "wide" if (C > STRIDED_MAX_C or K > STRIDED_MAX_K) and not fill else "rows"
    if tiles == "wide" and (OW < STRIDED_SHORT_MIN_OW or OW < STRIDED_SHORT_MIN_FILL * RW or K > STRIDED_SHORT_MAX_K):
        return None
    BR = max(1, min(OH, -(-OH // STRIDED_MIN_BANDS))) if tiles == "rows" else OH
    limit = STRIDED_BAND_BYTES if tiles == "rows" else STRIDED_SHORT_BAND_BYTES
    # only the phases some tap reads are copied (a 1x1 stride-2 conv reads one of its four)
    used = sorted({((kh * DH) % SH, (kw * DW) % SW) for kh in range(KH) for kw in range(KW)})
    while BR > 1 and 4 * C * len(used) * (BR + eh) * RW > limit:
        BR -= 1
    # bands of equal height (28 rows in bands of 16 and 12 left one of two threads idle 25% of
    # the time)
    BR = -(-OH // -(-OH // BR))
    RB = BR + eh
    pplane = RB * RW
    slot = {ab: i for i, ab in enumerate(used)}
    cplane = len(used) * pplane
    offs = [c * cplane + slot[(kh * DH) % SH, (kw * DW) % SW] * pplane + (kh * DH // SH) * RW + kw * DW // SW
            for c in range(C) for kh in range(KH) for kw in range(KW)]
    phases = []   # per phase (a, b): columns [c0, c1) hold input, source column c * SW + b - PL
    for a, b in used:
        c0 = max(0, -(-(PL - b) // SW))
        c1 = min(RW, (IW - 1 + PL - b) // SW + 1) if IW - 1 + PL - b >= 0 else 0
        phases.append({"a": a, "b": b, "base": slot[a, b] * pplane, "c0": c0, "c1": max(c0, c1)})
    slack = RW + 2 * DW_VL * 4   # reads past OW in the last row: up to a vector tile (NR <= 64)
    buf = _align(4 * (C * cplane + slack))
    return {"BR": BR, "RB": RB, "RW": RW, "cplane": cplane, "offs": offs, "phases": phases,
            "slack": slack, "slot_bytes": buf, "slots": CONV_SLOTS, "tiles": tiles, "IH": IH, "IW": IW, "PT": PT, "SH": SH,
            "SW": SW, "PL": PL, "nband": -(-OH // BR)}


def winograd_transforms(m: int) -> dict:
    """A^T and B^T as float coefficient rows for the template (dyadic: exact in float)."""
    AT, _, BT = winograd_matrices(m)
    return {"AT": [[float(v) for v in row] for row in AT], "BT": [[float(v) for v in row] for row in BT]}


@register
class Conv(OpSpec):
    op_type = "Conv"
    template = "conv.c.j2"
    headers = ("onnxc_gemm.h", "onnxc_conv.h", "onnxc_winograd.h", "onnxc_dwconv.h", "onnxc_conv_strided.h")

    def infer(self, node):
        x, w, b = node.inputs[0], node.inputs[1], node.input(2)
        check_type(node, x.etype, FLOATS)
        for v, name in ((w, "W"), (b, "B")):
            if v is not None and v.etype != x.etype:
                raise fail(node, f"input {name} has element type {v.etype.name}, X has {x.etype.name}")
        g = conv_geometry(node)
        if b is not None and tuple(b.shape) != (g["M"],):
            raise fail(node, f"input B has shape {_fmt(b.shape)}, expected ({g['M']},)")
        return [(x.etype, (x.shape[0], g["M"]) + tuple(g["O"][3 - g["ns"]:]))]

    def params(self, node):
        g = conv_geometry(node)
        x = node.inputs[0]
        K = g["Cg"] * product(g["KS"])
        osp, isp = product(g["O"]), product(g["I"])
        if g["Cg"] == 1 and g["Mg"] == 1:
            kind = "depthwise"
        elif all(k == 1 for k in g["KS"]) and all(s == 1 for s in g["S"]) and all(p == 0 for p in g["P"]) \
                and g["O"] == g["I"]:
            kind = "pointwise"
        elif pointwise_strided(g) and (node.attrs.get("_prepacked") or {}).get("pw"):
            kind = "pointwise"   # on onnxc_pw_rows from a gathered copy of X (passes/prepack.py)
        else:
            kind = "im2col"
        direct = self.direct(node, g, kind)
        if direct:
            kind = "direct"
        wino = node.attrs.get("_prepacked_wino")
        if wino is not None:
            return self.winograd(node, g, wino)
        sd = node.attrs.get("_prepacked_strided")
        if sd is not None:
            lay = strided_layout(node, g, kind)
            return {**g, "kind": "strided", "lowp": False, "end": lay["slots"] * lay["slot_bytes"],
                    "strided": {**lay, "mr": sd["mr"]}, "N": x.shape[0], "ISP": product(g["I"]),
                    "OSP": product(g["O"]), "has_bias": node.input(2) is not None, "gemm": "s", "K": K,
                    "Mg": g["M"], "prepacked": None, **epilogue(node)}
        # float: weights packed once per call (reused for every image and chunk); the im2col
        # buffer covers a chunk of output pixels small enough to stay in L2
        sgemm = gemm_kernel(x.etype) == "s"
        nch = osp
        if kind == "im2col" and sgemm and K * osp * 4 > COL_CHUNK_BYTES and osp >= 4 * CHUNK_ALIGN:
            nchunks = -(-K * osp * 4 // COL_CHUNK_BYTES)          # balanced chunks
            nch = min(osp, -(-osp // nchunks // CHUNK_ALIGN) * CHUNK_ALIGN or CHUNK_ALIGN)
        # packing the weights ahead pays when they are used more than once (several images or
        # chunks); one image in one chunk lets the GEMM pack as it goes (less scratch)
        wpack = sgemm and not (x.shape[0] == 1 and nch == osp)
        wpack_bytes = _align(sgemm_wpack_bytes(g["Mg"], K)) if wpack else 0
        # weights packed at compile time (passes/prepack.py): input 4, one group every `stride`
        # bytes, in the orientation and register block chosen there; the scratch keeps no copy
        pre = node.attrs.get("_prepacked")
        if pre is not None:
            wpack, wpack_bytes = True, pre["stride"]
        csize = 4 if x.etype in LOWP else x.etype.itemsize   # the compute type's size
        col_bytes = _align(K * nch * csize) if kind == "im2col" else 0
        work = max(sgemm_work_bytes(g["Mg"], nch, K), sgemm_work_bytes(nch, g["Mg"], K)) if sgemm else 0
        # chunked convolutions give threads whole chunks, each in a slot of its own (col + work)
        slots = CONV_SLOTS if wpack and osp > nch else 1
        # depthwise: output columns [dw_lo, dw_hi) have every tap inside the input row
        ow_n, iw_n, s, pb, d, kw = g["O"][2], g["I"][2], g["S"][2], g["P"][2], g["DL"][2], g["KS"][2]
        ok = [o for o in range(ow_n) if o * s - pb >= 0 and o * s - pb + (kw - 1) * d < iw_n]
        dw_lo, dw_hi = (ok[0], ok[-1] + 1) if ok else (0, 0)
        border = [(a, b) for a, b in ((0, dw_lo), (dw_hi, ow_n)) if b > a]
        dw_fast = g["KS"][0] == 1 and g["KS"][1] * g["KS"][2] <= 25   # 1-D/2-D, small kernels
        slot_off = 0 if pre else g["G"] * wpack_bytes
        slot_bytes = _align(col_bytes + work)
        native = 0 if kind == "depthwise" else slot_off + slots * slot_bytes
        pw = None
        if kind == "pointwise" and pre is not None and pre.get("pw"):
            # prepacked 1x1 on onnxc_pw_rows: jobs of (pixel chunk, MR-channel panel)
            mr = pre["mr"]
            nch = max(CHUNK_ALIGN, PW_CHUNK_BYTES // (4 * K) // CHUNK_ALIGN * CHUNK_ALIGN)
            if nch < osp:   # balanced chunks
                nchunks = -(-osp // nch)
                nch = -(-(-(-osp // nchunks)) // CHUNK_ALIGN) * CHUNK_ALIGN
            nch = min(nch, osp)
            tmp = _align(4 * (K * PW_NR_MAX + 2 * PW_MR_MAX * PW_NR_MAX))
            xpad = pointwise_xpad(g, pre["nr"])
            # jobs by panel (a thread takes whole panels, every chunk: shares even whatever the
            # chunk sizes) while X stays in L2 across panels; else by chunk (X read once)
            by_panel = 4 * K * osp <= PW_PANEL_MAJOR_BYTES
            # weights no larger than X: even pixel ranges per thread (X read once, and only the
            # columns a thread computes: 2 threads 1.3-1.6x faster on MobileNetV2's projections)
            by_pixels = g["Mg"] <= osp
            pw = {"mr": mr, "panels": -(-g["Mg"] // mr), "Rp": -(-g["Mg"] // mr) * mr, "nch": nch,
                  "tmp_bytes": tmp, "slots": PW_SLOTS, "xpad": xpad, "in_place": pointwise_in_place(g, pre["nr"]),
                  "by_panel": by_panel, "by_pixels": by_pixels, "align": CHUNK_ALIGN,
                  "sub": list(g["S"][1:]) if pointwise_strided(g) else None}
            native, wpack_bytes, slots = PW_SLOTS * tmp + _align(4 * g["C"] * xpad), pre["stride"], 1
        dw = depthwise_phases(g, x.etype == D["float"] or x.etype in LOWP) if kind == "depthwise" else None
        if dw:
            native = dw["slots"] * dw["slot_bytes"]
        dwf = depthwise_flat(g, x.etype == D["float"] or x.etype in LOWP) if kind == "depthwise" else None
        if dwf:   # the scratch serves whichever kernel the ISA picks
            native = max(native, dwf["slots"] * dwf["slot_bytes"])
        dwr8 = depthwise_rows8(g, x.etype == D["float"] or x.etype in LOWP) if kind == "depthwise" else None
        if direct:   # per slot: the padded planes, then the wide output
            wpack, wpack_bytes, pre, slot_off, slots = False, 0, None, 0, CONV_SLOTS
            slot_bytes = _align(direct["xp_bytes"]) + _align(direct["yw_bytes"])
            native = slots * slot_bytes
        w, y = node.inputs[1], node.outputs[0]
        z = node.input(3)
        lowp = lowp_buffers(x.etype, native, [product(x.shape), product(w.shape), g["M"],
                                              product(y.shape) if z is not None else 0, product(y.shape)])
        return {**g, **lowp, "wpack": wpack, "nch": nch, "wpack_bytes": wpack_bytes, "col_bytes": col_bytes,
                "prepacked": pre, "slots": slots, "slot_off": slot_off, "slot_bytes": slot_bytes,
                "dw_lo": dw_lo,
                "dw_hi": dw_hi, "dw_border": border, "dw_fast": dw_fast, "dw": dw, "dwf": dwf, "dwr8": dwr8, "pw": pw, "kind": kind,
                "gemm": gemm_kernel(x.etype), "N": x.shape[0], "K": K,
                "KSP": product(g["KS"]), "ISP": isp, "OSP": osp,
                "has_bias": node.input(2) is not None, "direct": direct, **epilogue(node)}

    def winograd(self, node, g, lay):
        """kind "winograd": U packed at compile time (passes/prepack.py) as input 4; scratch:
        WINO_SLOTS slots of [V block][GEMM outputs][transform rows]."""
        slot_bytes = lay["v_bytes"] + lay["o_bytes"] + lay["tmp_bytes"]
        return {**g, "kind": "winograd", "lowp": False, "end": WINO_SLOTS * slot_bytes, "slots": WINO_SLOTS,
                "slot_bytes": slot_bytes, "w": {**lay, **winograd_transforms(lay["m"])}, "N": node.inputs[0].shape[0],
                "ISP": product(g["I"]), "OSP": product(g["O"]), "has_bias": node.input(2) is not None,
                "gemm": "s", "K": g["C"] * 9, "Mg": g["M"], "prepacked": None, **epilogue(node)}

    def direct(self, node, g, kind):
        """runtime_c/onnxc_conv.h's direct kernel for small stride-1 2-D/1-D layers (LeNet's):
        the sizes of its padded input planes and wide output, or None. Rule: at most
        DIRECT_MAX_MACS multiply-adds per image and group on wide positions, at least half of
        them real outputs, at most DIRECT_MAX_BYTES of buffers (they stay in L2), sums of at most
        SGEMM_KC products (the SGEMM's depth blocks: no larger rounding error than it has)."""
        if kind != "im2col" or node.inputs[0].etype == D["double"] or node.attrs.get("_prepacked"):
            return None
        if g["I"][0] != 1 or g["KS"][0] != 1 or g["S"] != [1, 1, 1]:
            return None
        OH, OW, KH, KW, DH, DW = g["O"][1], g["O"][2], g["KS"][1], g["KS"][2], g["DL"][1], g["DL"][2]
        PH, PW = OH + (KH - 1) * DH, OW + (KW - 1) * DW
        Q = OH * PW
        ldy = -(-Q // DIRECT_QB) * DIRECT_QB
        K = g["Cg"] * KH * KW
        if K > SGEMM_KC:   # one accumulator per output: no deeper sums than a SGEMM depth block
            return None
        slack = ldy - Q + PW - OW + DIRECT_QB
        xp_bytes, yw_bytes = 4 * (g["Cg"] * PH * PW + slack), 4 * g["Mg"] * ldy
        if 2 * OW < PW or g["Mg"] * ldy * K > DIRECT_MAX_MACS or xp_bytes + yw_bytes > DIRECT_MAX_BYTES:
            return None
        # channel blocks of 16 (onnxc_conv_direct_c, weights prepacked) when they compute
        # clearly less than the wide positions do
        Mp = -(-g["Mg"] // 16) * 16
        chan_ok = Mp * OH * OW < 0.85 * g["Mg"] * Q and node.inputs[0].etype == D["float"]
        pre = node.attrs.get("_prepacked_direct")
        return {"PH": PH, "PW": PW, "Q": Q, "slack": slack, "xp_bytes": xp_bytes, "yw_bytes": yw_bytes,
                "chan_ok": chan_ok, "chan": bool(chan_ok and pre), "wc_stride": Mp * K}

    def scratch(self, node):
        return self.params(node)["end"]


@register
class FusedConv(Conv):
    """Conv + [residual Add] + [activation] (passes/fuse_epilogue.py): inputs X, W, B, Z;
    Y = act(conv(X, W) + B + Z), applied to each chunk of output pixels right after its GEMM."""
    op_type = "FusedConv"
    domain = PRIVATE_DOMAIN
    headers = Conv.headers + EPILOGUE_HEADERS

    def inplace(self, node):
        if self.params(node)["kind"] in ("depthwise", "strided"):   # writes Y before reading its residual
            return []
        return residual_inplace(node, node.inputs[:3])
