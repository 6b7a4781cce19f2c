"""Scaled dot-product attention as exporters write it, fused into one FusedAttention node
(GraphOptimizationLevel >= EXTENDED; runs on the IR after shape inference, before
fuse_epilogue). The pattern, around a Softmax along the last axis of a 4-D float tensor:

    Q   <- [Mul c_q] <- [view chain] --\\
                                        MatMul -> [Mul | Div by c] -> [Add mask] -> Softmax -> [NaN -> fill] --\\
    K^T <- [Mul c_k] <- [view chain] --/                                                                       MatMul -> [Transpose]
    V   <- [view chain] ---------------------------------------------------------------------------------------/

Q is (B, H, Sq, D), K^T (B, H, D, Skv), V (B, H, Skv, Dv): the same batch dims everywhere, no
broadcasting; the mask broadcasts to (B, H, Sq, Skv); c, c_q, c_k are scalar constants; "NaN ->
fill" is Where(IsNaN(P), fill, P) (PyTorch's scaled_dot_product_attention export). A view chain
is Transposes and the 3-D swap idiom Reshape (A0*A1, A2, A3) -> Transpose (0, 2, 1) -> Reshape
(A0, A1, A3, A2) of a 4-D tensor (K^T in that export): it becomes strides (ops/fused_attention.py)
when one of the operand's two inner strides is then 1 (else the operand is read as it is); an
output Transpose is absorbed when Y's columns stay contiguous. Every absorbed intermediate feeds
only the next node and is not a graph output; the fused node takes the place of the last absorbed
node, where all of its inputs are computed.
"""
from __future__ import annotations

from ..ir import Graph, Node, Value
from ..ops.fused_attention import contiguous, logical, mask_strides
from . import PRIVATE_DOMAIN
from .irutil import fuse_matches, scalar, std

SWAP = [0, 1, 3, 2]


def _only_reader(v: Value | None) -> Node | None:
    if v is None or v.is_output or len(v.consumers) != 1:
        return None
    return v.consumers[0]


def _float4(v: Value | None) -> bool:
    return (v is not None and v.etype is not None and v.etype.name == "float" and v.shape is not None
            and len(v.shape) == 4)


def _scalar_const(v: Value | None) -> float | None:
    """A float scalar constant's value (the scale, fill and mask-free constants are float)."""
    return scalar(v) if v is not None and v.etype is not None and v.etype.name == "float" else None


def _perm(n: Node, rank: int) -> list | None:
    perm = n.attr("perm")
    perm = list(perm) if perm is not None else list(range(rank))[::-1]
    return perm if sorted(perm) == list(range(rank)) else None


def _scaled(v: Value, reader: Node):
    """Mul(x, c) (either order, c a scalar constant) producing v for `reader` alone: (x, c, Mul)."""
    n = v.producer
    if not std(n, "Mul") or _only_reader(v) is not reader or len(n.inputs) != 2:
        return None
    for x, k in (n.inputs, n.inputs[::-1]):
        c = _scalar_const(k)
        if c is not None and _scalar_const(x) is None and _float4(x) and tuple(x.shape) == tuple(v.shape):
            return x, c, n
    return None


def _view_step(v: Value, reader: Node):
    """One step of a view chain producing v for `reader` alone: (x, perm, nodes) with
    v = Transpose(x, perm), nodes the ones computing v from x (last first)."""
    n = v.producer
    if _only_reader(v) is not reader or n is None or n.domain != "" or not n.inputs:
        return None
    x = n.inputs[0]
    if n.op_type == "Transpose" and _float4(x):
        p = _perm(n, 4)
        return (x, p, [n]) if p is not None else None
    if n.op_type != "Reshape" or x is None or x.shape is None or len(x.shape) != 3:
        return None
    t = x.producer                                      # the 3-D swap idiom, from its end
    if not std(t, "Transpose") or _only_reader(x) is not n or _perm(t, 3) != [0, 2, 1]:
        return None
    r3 = t.inputs[0]
    r = r3.producer if r3 is not None else None
    if not std(r, "Reshape") or _only_reader(r3) is not t or not _float4(r.inputs[0]):
        return None
    base = r.inputs[0]
    A0, A1, A2, A3 = base.shape
    if tuple(r3.shape) != (A0 * A1, A2, A3) or tuple(v.shape) != (A0, A1, A3, A2):
        return None
    return base, SWAP, [n, t, r]


def _operand(v: Value, reader: Node, scale_ok: bool):
    """(tensor to read, perm or None, scale or None, absorbed nodes) for a MatMul operand."""
    scale, nodes = None, []
    found = _scaled(v, reader) if scale_ok else None
    if found is not None:
        v, scale, mul = found
        nodes, reader = [mul], mul
    base, perm, chain = v, None, []
    while True:
        step = _view_step(base, reader)
        if step is None:
            break
        x, p, ns = step
        perm = p if perm is None else [p[perm[i]] for i in range(4)]
        base, chain, reader = x, chain + ns, ns[-1]
    if perm is not None:
        _, st = logical(base, perm)
        if 1 in (st[2], st[3]):
            return base, perm, scale, nodes + chain
    return v, None, scale, nodes                         # read the operand itself (contiguous)


def _scores(cur: Value, reader: Node):
    """[Mul | Div by a scalar constant] . MatMul producing `cur`, which feeds `reader` alone:
    (mode, c, MatMul, nodes in order) or None."""
    if _only_reader(cur) is not reader:
        return None
    node, mode, c, chain = cur.producer, 0, 1.0, []
    if (std(node, "Mul") or std(node, "Div")) and len(node.inputs) == 2:
        a, b = node.inputs
        if node.op_type == "Mul" and _scalar_const(a) is not None and _scalar_const(b) is None:
            a, b = b, a
        k = _scalar_const(b)
        if k is None or a is None or a.shape is None or tuple(a.shape) != tuple(cur.shape) \
                or _only_reader(a) is not node:
            return None
        mode, c, chain, cur = (1 if node.op_type == "Mul" else 2), k, [node], a
        node = cur.producer
    if not std(node, "MatMul") or not _float4(cur):
        return None
    return mode, c, node, [node] + chain


def _nan_fill(p: Value):
    """Where(IsNaN(p), fill, p) reading p (p read by those two alone): (fill, [IsNaN, Where])."""
    if p.is_output or len(p.consumers) != 2:
        return None
    isnan = next((n for n in p.consumers if std(n, "IsNaN")), None)
    where = next((n for n in p.consumers if std(n, "Where")), None)
    if isnan is None or where is None or len(where.inputs) != 3 or where.inputs[0] is not isnan.outputs[0] \
            or where.inputs[2] is not p or _only_reader(isnan.outputs[0]) is not where:
        return None
    fill = _scalar_const(where.inputs[1])
    y = where.outputs[0]
    if fill is None or y is None or y.shape is None or tuple(y.shape) != tuple(p.shape) or y.etype != p.etype:
        return None
    return fill, [isnan, where]


def _match(sm: Node):
    """The fused node's pieces around Softmax `sm`, or None."""
    if not _float4(sm.inputs[0]) or int(sm.attr("axis", 1 if sm.opset < 13 else -1)) not in (-1, 3):
        return None
    x = sm.inputs[0]
    mask, found, add = None, None, x.producer
    if std(add, "Add") and _only_reader(x) is sm and len(add.inputs) == 2:
        a, b = add.inputs
        for s, m in ((a, b), (b, a)):       # which operand is the scores: the one a MatMul makes
            if s is None or m is None or m is s or m.etype != s.etype or s.shape is None \
                    or tuple(s.shape) != tuple(x.shape) or m.shape is None:
                continue
            found = _scores(s, add)
            if found is not None:
                mask = m
                break
    if found is None:
        mask, add, found = None, None, _scores(x, sm)
    if found is None:
        return None
    mode, c, qk, chain = found
    chain = chain + ([add] if add is not None else []) + [sm]
    cur = qk.outputs[0]
    probs, fill = sm.outputs[0], None
    nf = _nan_fill(probs)
    if nf is not None:
        fill, more = nf
        chain, probs = chain + more, more[-1].outputs[0]
    pv = _only_reader(probs)
    if not std(pv, "MatMul") or pv.inputs[0] is not probs or not _float4(pv.outputs[0]):
        return None
    q, kt, v = qk.inputs[0], qk.inputs[1], pv.inputs[1]
    if not (_float4(q) and _float4(kt) and _float4(v)):
        return None
    B, H, Sq, D = q.shape
    if tuple(kt.shape[:3]) != (B, H, D) or tuple(v.shape[:3]) != (B, H, kt.shape[3]):
        return None
    if tuple(cur.shape) != (B, H, Sq, kt.shape[3]):
        return None
    if mask is not None and (mask.shape is None or mask_strides(mask, list(cur.shape)) is None):
        return None
    ops = [_operand(q, qk, True), _operand(kt, qk, True), _operand(v, pv, False)]
    out, yperm, last = pv.outputs[0], None, pv
    t = _only_reader(out)
    if std(t, "Transpose") and t.outputs[0] is not None:
        perm = _perm(t, 4)
        if perm is not None:
            yst = contiguous([out.shape[p] for p in perm])
            if yst[perm.index(3)] == 1:        # the output's columns stay contiguous
                out, yperm, last = t.outputs[0], perm, t
    absorbed = chain + [pv] + [n for o in ops for n in o[3]] + ([last] if last is not pv else [])
    return {"ins": [o[0] for o in ops] + [mask],
            "attrs": {"perms": {"q": ops[0][1], "k": ops[1][1], "v": ops[2][1], "y": yperm}, "mode": mode,
                      "c": c, "cq": ops[0][2], "ck": ops[1][2], "fill": fill},
            "out": out, "nodes": absorbed, "last": last, "qk": qk}


def _fused(m) -> Node:
    qk = m["qk"]
    return Node(qk.index, "FusedAttention", PRIVATE_DOMAIN, 1, qk.name, m["attrs"], m["ins"], [m["out"]], qk.proto)


def fuse_attention(graph: Graph) -> Graph:
    return fuse_matches(graph, "Softmax", _match, _fused)
