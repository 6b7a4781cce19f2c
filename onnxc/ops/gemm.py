"""Gemm and MatMul over the GEMM kernels of runtime_c/onnxc_gemm.h.

float uses onnxc_sgemm (packed, blocked; needs a workspace, see sgemm_work_bytes), double uses
onnxc_dgemm, the integer types use the exact wrapping onnxc_igemm_<type>. float16/bfloat16
operands are converted to float buffers in the scratch (see lowp_buffers), multiplied with
onnxc_sgemm and the result rounded once on store.
"""
from __future__ import annotations

import math
import re

from .. import dtypes
from ..errors import NotImplemented as OrtNotImplemented
from ..symbolic import Dim, align_up, dim_repr, dmax, dmin, product
from .common import broadcast, broadcast_loops, fail
from .registry import OpSpec, register

D = dtypes.BY_NAME
LOWP = (D["float16"], D["bfloat16"])   # stored in 16 bits, computed in float
GEMM_TYPES = (D["float"], D["double"], D["int32"], D["int64"], D["uint32"], D["uint64"]) + LOWP

# Mirrors of the blocking constants in runtime_c/onnxc_gemm.h (tests check they agree).
SGEMM_KC = 256
SGEMM_MCH = 960   # a multiple of every MR (8, 6, 4) and of MC
SGEMM_NC = 1536
SGEMM_MR_MAX = 16
SGEMM_NR_MAX = 64


BATCH_SLOTS = 8                  # batched MatMul: threads with a workspace each
BATCH_WORK_BYTES = 4 << 20       # ... at most this much in all (at least 2 slots)
GEMV_NZ_SLACK = 16               # int32 entries past K in the strips' nonzero list (onnxc_gemv.h)


def sgemm_work_bytes(M: Dim, N: Dim, K: Dim) -> Dim:
    """Workspace of onnxc_sgemm(M, N, K): same formula as ONNXC_SGEMM_WORK_BYTES."""
    kc = dmin(K, SGEMM_KC)
    return 4 * ((dmin(M, SGEMM_MCH) + SGEMM_MR_MAX) * kc + kc * (dmin(N, SGEMM_NC) + SGEMM_NR_MAX)) + 128


def sgemm_wpack_bytes(M: int, K: int) -> int:
    """Packed weights for onnxc_sgemm_wpack: same formula as ONNXC_SGEMM_WPACK_BYTES."""
    return 4 * (M + SGEMM_NR_MAX) * K + 64


def c_float(x: float, ct: str) -> str:
    """A float attribute as a C literal of type ct (float or double)."""
    x = float(x)
    if math.isnan(x):
        return "NAN" if ct == "float" else "(double)NAN"
    if math.isinf(x):
        inf = "INFINITY" if ct == "float" else "(double)INFINITY"
        return inf if x > 0 else f"(-{inf})"
    lit = repr(x)
    return f"{lit}f" if ct == "float" else lit


# a fused activation is an elementwise op's C expression: it needs that op's headers too
EPILOGUE_HEADERS = ("onnxc_math.h", "onnxc_vmath.h")


def epilogue(node) -> dict:
    """What a fused node (passes/fuse_epilogue.py) applies after its product: the residual
    (input 3) and the activation as a C expression over `v` ("" when none); epi_act: the
    activation as onnxc_gemm.h's tile epilogue may take it over (epilogue_act)."""
    from ..passes import PRIVATE_DOMAIN
    from ..passes.fuse_epilogue import activation_expr, clamp_bounds
    if node.domain != PRIVATE_DOMAIN:
        return {"act": "", "has_res": False, "clamp": None, "epi_act": None}
    act = node.attr("activation")
    expr = activation_expr(act) if act is not None else ""
    if expr is None:
        raise fail(node, f"the fused activation {act.op_type} has no C expression")
    # Relu / Clip also as float bounds (C literals, +-INFINITY when absent) for kernels that clamp
    # vectors in registers (onnxc_pw_rows, the AVX-512 depthwise)
    lohi = clamp_bounds(act) if act is not None and node.outputs[0].etype.name == "float" else None
    clamp = tuple(c_float(b, "float") for b in lohi) if lohi else None
    return {"act": re.sub(r"\ba0\b", "v", expr), "has_res": node.input(3) is not None, "clamp": clamp,
            "epi_act": epilogue_act(act, node.outputs[0].etype, clamp)}


def epilogue_act(act, et: dtypes.ElemType, clamp) -> tuple[str, str, str] | None:
    """The activation as onnxc_gemm.h's tile epilogue names it, (kind, lo, hi), where that
    computes what the template's expression does (float only): none, or Relu / Clip (the clamps
    of clamp_bounds); None for any other (the template applies it after the product)."""
    if et.name != "float":
        return None
    if act is None:
        return ("ONNXC_EPI_NONE", "0.0f", "0.0f")
    if clamp is not None:
        return ("ONNXC_EPI_CLAMP", clamp[0], clamp[1])
    return None


def residual_inplace(node, others) -> list[tuple[int, int]]:
    """The output may take the residual's storage when no other input shares it (the epilogue
    reads each residual element right before writing the same output element)."""
    z, y = node.input(3), node.outputs[0]
    if z is None or any(v is z for v in others) or z.shape != y.shape or z.etype != y.etype:
        return []
    return [(0, 3)]


def gemm_kernel(et: dtypes.ElemType) -> str:
    """'s' (onnxc_sgemm; float16/bfloat16 too), 'd' (onnxc_dgemm) or 'i' (onnxc_igemm_<type>)."""
    return {"float": "s", "double": "d", "float16": "s", "bfloat16": "s"}.get(et.name, "i")


def lowp_buffers(et: dtypes.ElemType, start: Dim, counts) -> dict:
    """float16/bfloat16: byte offsets in the node scratch of float buffers of `counts` elements,
    placed after the first `start` bytes (64-byte aligned), and the scratch's total size."""
    if et not in LOWP:
        return {"lowp": False, "off": [], "end": start}
    offs, at = [], align_up(start, 64)
    for n in counts:
        offs.append(at)
        at = align_up(at + 4 * n, 64)
    return {"lowp": True, "off": offs, "end": at}


def check_type(node, et: dtypes.ElemType, allowed=GEMM_TYPES) -> None:
    if et not in allowed:
        raise OrtNotImplemented(f"{node.describe()}: element type {et.name} is not supported "
                                f"(supported: {', '.join(t.name for t in allowed)})")


def _same_k(node, ka: Dim, kb: Dim, what: str) -> None:
    if isinstance(ka, int) and isinstance(kb, int) and ka != kb:
        raise fail(node, f"{what}: inner dimensions differ ({ka} vs {kb})")


def _fmt(shape) -> str:
    return "(" + ", ".join(dim_repr(d) for d in shape) + ")"


@register
class Gemm(OpSpec):
    """Y = alpha * op(A) op(B) + beta * C; C broadcast to (M, N) (opsets < 7: only when
    broadcast=1, else it must be (M, N))."""
    op_type = "Gemm"
    template = "gemm.c.j2"
    headers = ("onnxc_gemm.h", "onnxc_gemv.h")

    def dims(self, node):
        a, b = node.inputs[0], node.inputs[1]
        for v, name in ((a, "A"), (b, "B")):
            if v.rank != 2:
                raise fail(node, f"input {name} must be 2-D, got shape {_fmt(v.shape)}")
        ta, tb = int(node.attr("transA", 0)), int(node.attr("transB", 0))
        M, K = (a.shape[1], a.shape[0]) if ta else a.shape
        Kb, N = (b.shape[1], b.shape[0]) if tb else b.shape
        _same_k(node, K, Kb, f"A {_fmt(a.shape)} (transA={ta}) and B {_fmt(b.shape)} (transB={tb})")
        return ta, tb, M, N, K

    def c_strides(self, node, M: Dim, N: Dim):
        """(row stride, col stride) reading C broadcast to (M, N); None when C is not used."""
        c = node.input(2)
        if c is None or float(node.attr("beta", 1.0)) == 0.0:
            return None
        if c.rank > 2:
            raise fail(node, f"input C must have rank <= 2, got shape {_fmt(c.shape)}")
        c0, c1 = ([1, 1] + list(c.shape))[-2:]
        if node.opset < 7 and not int(node.attr("broadcast", 0)) and tuple(c.shape) != (M, N):
            raise fail(node, f"input C has shape {_fmt(c.shape)}, but broadcast=0 requires "
                       f"{_fmt((M, N))}")
        for cd, yd, what in ((c0, M, "M"), (c1, N, "N")):
            if cd != 1 and cd != yd and isinstance(cd, int) and isinstance(yd, int):
                raise fail(node, f"input C of shape {_fmt(c.shape)} cannot be broadcast to "
                           f"{_fmt((M, N))} (dim {what})")
        return (c1 if c0 != 1 else 0), (1 if c1 != 1 else 0)

    def infer(self, node):
        a = node.inputs[0]
        if node.input(2) is None and node.opset < 11:
            raise fail(node, f"input C is required before opset 11 (model opset {node.opset})")
        for i in (1, 2):
            v = node.input(i)
            if v is not None and v.etype != a.etype:
                raise fail(node, f"input {i} has element type {v.etype.name}, A has {a.etype.name}")
        check_type(node, a.etype)
        _, _, M, N, _ = self.dims(node)
        self.c_strides(node, M, N)
        return [(a.etype, (M, N))]

    def params(self, node):
        ta, tb, M, N, K = self.dims(node)
        a, b = node.inputs[0], node.inputs[1]
        et = a.etype
        kind = gemm_kernel(et)
        cs = self.c_strides(node, M, N)
        alpha, beta = float(node.attr("alpha", 1.0)), float(node.attr("beta", 1.0))
        ct = "float" if kind == "s" else "double"   # integers: alpha and beta act in double
        return {
            "kind": kind, "suffix": et.name, "ta": ta, "tb": tb, "M": M, "N": N, "K": K,
            "lda": a.shape[1], "ldb": b.shape[1],
            "alpha": c_float(alpha, ct), "beta": c_float(beta, ct),
            "has_c": cs is not None, "crs": cs[0] if cs else 0, "ccs": cs[1] if cs else 0,
            # integers: the exact product is scaled in double only when that changes something
            "epilogue": kind == "i" and (alpha != 1.0 or cs is not None),
            **epilogue(node), **self.lowp(node), **gemv_params(node, M), **panels(node),
            "here": compiled_here(K, N),
            # C one row, added as it is (no residual before it): the prepacked product's tile
            # epilogue adds it instead of a fill pass
            "epi_bias": (cs == (0, 1) and alpha == 1.0 and beta == 1.0 and node.input(3) is None
                         and et.name == "float"),
        }

    def lowp(self, node) -> dict:
        """float16/bfloat16: float copies of A and B and the float result, after the SGEMM work."""
        _, _, M, N, K = self.dims(node)
        a, b = node.inputs[0], node.inputs[1]
        return lowp_buffers(a.etype, sgemm_work_bytes(M, N, K), [product(a.shape), product(b.shape), M * N])

    def inplace(self, node):
        c, y = node.input(2), node.outputs[0]
        # float/double read C through Y (beta * Y); the integer path writes Y before reading C
        if c is not None and gemm_kernel(c.etype) != "i" and c.shape == y.shape and c.etype == y.etype:
            return [(0, 2)]
        return []

    def scratch(self, node):
        if gemm_kernel(node.inputs[0].etype) != "s":
            return 0
        _, _, M, _, K = self.dims(node)
        gv = gemv_params(node, M)
        return strips_scratch(gv, K, 0 if gv["gemv_only"] else self.lowp(node)["end"])


@register
class MatMul(OpSpec):
    """numpy.matmul: 1-D operands are promoted (and the added dim removed), batch dims broadcast."""
    op_type = "MatMul"
    template = "matmul.c.j2"
    headers = ("onnxc_gemm.h", "onnxc_gemv.h")

    def dims(self, node):
        a, b = node.inputs[0], node.inputs[1]
        if a.rank < 1 or b.rank < 1:
            raise fail(node, f"MatMul inputs must have rank >= 1, got {_fmt(a.shape)} and {_fmt(b.shape)}")
        M, K = (1, a.shape[0]) if a.rank == 1 else a.shape[-2:]
        Kb, N = (b.shape[0], 1) if b.rank == 1 else b.shape[-2:]
        _same_k(node, K, Kb, f"A {_fmt(a.shape)} and B {_fmt(b.shape)}")
        abatch, bbatch = list(a.shape[:-2]), list(b.shape[:-2])
        batch = list(broadcast(node, [abatch, bbatch], runtime_ones=True)) if (abatch or bbatch) else []
        return M, N, K, abatch, bbatch, batch

    def infer(self, node):
        a, b = node.inputs[0], node.inputs[1]
        if a.etype != b.etype:
            raise fail(node, f"inputs have element types {a.etype.name} and {b.etype.name}")
        check_type(node, a.etype)
        M, N, K, _, _, batch = self.dims(node)
        shape = batch + ([M] if a.rank > 1 else []) + ([N] if b.rank > 1 else [])
        return [(a.etype, tuple(shape))]

    def folds(self, node) -> bool:
        """B has no real batch: A's batch folds into M (one GEMM over contiguous rows)."""
        _, _, _, _, bbatch, _ = self.dims(node)
        return all(d == 1 for d in bbatch)

    def params(self, node):
        M, N, K, abatch, bbatch, batch = self.dims(node)
        et = node.inputs[0].etype
        p = {"kind": gemm_kernel(et), "suffix": et.name, "M": M, "N": N, "K": K, "dims": [],
             "astr": [], "bstr": [], "ystr": [], "has_bias": node.input(2) is not None,
             "rows": product(node.outputs[0].shape[:-1]), "panels": None, **epilogue(node)}
        # the bias with no residual before it: the prepacked product's tile epilogue adds it
        p["epi_bias"] = p["has_bias"] and not p["has_res"] and node.outputs[0].etype.name == "float"
        a, b = node.inputs[0], node.inputs[1]
        if self.folds(node):
            p["M"] = product(abatch) * M
        else:
            dims, (ast, bst) = broadcast_loops(batch, [abatch, bbatch])
            ystr, acc = [], 1
            for d in reversed(dims):
                ystr.append(acc)
                acc = acc * d
            p.update(dims=dims, astr=[s * M * K for s in ast], bstr=[s * K * N for s in bst],
                     ystr=[s * M * N for s in reversed(ystr)])
        if self.folds(node):
            p.update(panels(node), **gemv_params(node, p["M"]), here=compiled_here(p["K"], p["N"]))
        else:
            p.update(gemv=False, gemv_only=False, here=False)
        work = sgemm_work_bytes(p["M"], p["N"], p["K"])
        # batched float GEMMs (attention's per-head products, each small): whole GEMMs per thread
        # when there are enough of them, each thread with its own SGEMM workspace
        p["batch_slots"] = 0
        if p["dims"] and p["kind"] == "s" and et not in LOWP and isinstance(work, int):
            p["batch_slots"] = max(2, min(BATCH_SLOTS, BATCH_WORK_BYTES // align_up(work, 64)))
            p["work_stride"] = align_up(work, 64)
            work = p["batch_slots"] * p["work_stride"]
        # float16/bfloat16: float copies of A and B and the float result, after the SGEMM work
        p.update(lowp_buffers(et, work, [product(a.shape), product(b.shape), product(node.outputs[0].shape)]))
        return p

    def scratch(self, node):
        if gemm_kernel(node.inputs[0].etype) != "s":
            return 0
        p = self.params(node)
        return strips_scratch(p, p["K"], 0 if p["gemv_only"] else p["end"])


# A product with at least this many weights (elements of op(B)) calls a copy of its kernel's driver
# compiled into the model (onnxc_sgemv_strips_dir_here, onnxc_sgemm_bpacked_share_here): the
# call's constant shapes specialise the tile loops (a batch-1 MLP 0.92x the time, BERT's
# projections 0.97-0.98x). Smaller ones call the shared kernels (runtime_c/lib/onnxc_kernels.c,
# compiled once), which keeps their models' builds short.
HERE_MIN_WEIGHTS = 1 << 16


def compiled_here(K: Dim, N: Dim) -> bool:
    return isinstance(K, int) and isinstance(N, int) and K * N >= HERE_MIN_WEIGHTS


def gemv_params(node, M) -> dict:
    """op(B) prepacked as strips (passes/prepack.py): up to `gemv_max_m` rows use
    onnxc_sgemv_strips_dir (input `gemv_index`); `gemv_only`: M is static, so the plain B and the
    SGEMM are never needed."""
    pre = node.attrs.get("_prepacked") or {}
    if not pre.get("gemv"):
        return {"gemv": False, "gemv_only": False}
    return {"gemv": True, "gemv_only": isinstance(M, int), "gemv_max_m": pre["max_m"], "gemv_sw": pre["sw"],
            "gemv_index": pre.get("index", 4), "gemv_nz": bool(pre.get("finite"))}


def strips_scratch(gv: dict, K, other: Dim) -> Dim:
    """A node's scratch: `other` (the SGEMM path's), or onnxc_sgemv_strips_dir's list of a one-row
    A's nonzero positions where gemv_params allows it (ONNXC_GEMV_NZ_BYTES; onnxc_gemv.h keeps
    its prefetch distance under the slack), whichever is larger: the two paths never run together."""
    if not (gv["gemv"] and gv["gemv_nz"]):
        return other
    return dmax(other, (int(K) + GEMV_NZ_SLACK) * 4)


def panels(node) -> dict:
    """op(B) packed at compile time for onnxc_sgemm_bpacked (passes/prepack_gemm.py): the input
    holding it, the register block it was packed for, and whether the plain B is still there
    for rows up to `panels_min` (a symbolic row count)."""
    pan = node.attrs.get("_panels")
    if not pan:
        return {"panels": None}
    return {"panels": pan, "panels_min": pan["min"]}


def _private_domain() -> str:
    from ..passes import PRIVATE_DOMAIN
    return PRIVATE_DOMAIN


@register
class FusedGemm(Gemm):
    """Gemm + [residual Add] + [activation] (passes/fuse_epilogue.py): inputs A, B, C, Z."""
    op_type = "FusedGemm"
    domain = _private_domain()
    headers = Gemm.headers + EPILOGUE_HEADERS

    def inplace(self, node):
        if node.input(3) is not None:
            return residual_inplace(node, node.inputs[:2])
        return super().inplace(node)


@register
class FusedMatMul(MatMul):
    """MatMul + [bias Add, broadcast along rows] + [residual Add] + [activation]
    (passes/fuse_epilogue.py): inputs A, B, bias, Z."""
    op_type = "FusedMatMul"
    domain = _private_domain()
    headers = MatMul.headers + EPILOGUE_HEADERS

    def inplace(self, node):
        return residual_inplace(node, node.inputs[:3])
