"""Scaled dot-product attention as exporters write it, fused into one FusedAttention node
(GraphOptimizationLevel >= EXTENDED; runs on the IR after shape inference, before
fuse_epilogue). The pattern, around a Softmax along the last axis of a 4-D float tensor:

    [Transpose] Q ----\\
                       MatMul -> [Mul | Div by a scalar constant] -> [Add mask] -> Softmax --\\
    [Transpose] K^T --/                                                                      MatMul -> [Transpose]
    [Transpose] V -------------------------------------------------------------------------/

Q is (B, H, Sq, D), K^T (B, H, D, Skv), V (B, H, Skv, Dv): the same batch dims everywhere, no
broadcasting; the mask broadcasts to (B, H, Sq, Skv) (PyTorch's export: Q, K, V are the Linear
outputs Reshaped to (B, S, H, D) and Transposed, K^T by perm (0, 2, 3, 1), the result Transposed
back). Absorbed Transposes become strides (ops/fused_attention.py): one of each operand's two
inner strides must be 1 (the output's column stride must be), else that Transpose stays. Every
absorbed intermediate feeds only the next node and is not a graph output; the fused node takes
the place of the last absorbed node, where all of its inputs are computed.
"""
from __future__ import annotations

from ..ir import Graph, Node, Value
from ..ops.fused_attention import contiguous, logical, mask_strides
from . import PRIVATE_DOMAIN
from .irutil import splice


def _only_reader(v: Value | None) -> Node | None:
    if v is None or v.is_output or len(v.consumers) != 1:
        return None
    return v.consumers[0]


def _std(n: Node | None, op: str) -> bool:
    return n is not None and n.domain == "" and n.op_type == op


def _float4(v: Value | None) -> bool:
    return (v is not None and v.etype is not None and v.etype.name == "float" and v.shape is not None
            and len(v.shape) == 4)


def _scalar_const(v: Value | None) -> float | None:
    if v is None or v.const is None or v.is_input or v.etype is None or v.etype.name != "float" or v.const.size != 1:
        return None
    return float(v.const.reshape(-1)[0])


def _last_axis_softmax(n: Node) -> bool:
    x = n.inputs[0] if n.inputs else None
    if not _float4(x) or n.outputs[0] is None:
        return False
    axis = int(n.attr("axis", 1 if n.opset < 13 else -1))
    return axis in (-1, 3)


def _operand(v: Value, reader: Node, inner: tuple[int, int]):
    """(tensor to read, perm or None, Transpose node absorbed or None) for a MatMul operand; the
    Transpose is absorbed when it feeds only this MatMul and one of the logical operand's two inner
    axes `inner` then has stride 1."""
    t = v.producer
    if _std(t, "Transpose") and _only_reader(v) is reader and _float4(t.inputs[0]):
        perm = t.attr("perm")
        perm = list(perm) if perm is not None else [3, 2, 1, 0]
        if sorted(perm) == [0, 1, 2, 3]:
            _, st = logical(t.inputs[0], perm)
            if 1 in (st[inner[0]], st[inner[1]]):
                return t.inputs[0], perm, t
    return v, None, None


def _scores(cur: Value, reader: Node):
    """[Mul | Div by a scalar constant] . MatMul producing `cur`, which feeds `reader` alone:
    (mode, c, MatMul, nodes in order) or None."""
    if _only_reader(cur) is not reader:
        return None
    node, mode, c, chain = cur.producer, 0, 1.0, []
    if (_std(node, "Mul") or _std(node, "Div")) and len(node.inputs) == 2:
        a, b = node.inputs
        if node.op_type == "Mul" and _scalar_const(a) is not None and _scalar_const(b) is None:
            a, b = b, a
        k = _scalar_const(b)
        if k is None or a is None or a.shape is None or tuple(a.shape) != tuple(cur.shape) \
                or _only_reader(a) is not node:
            return None
        mode, c, chain, cur = (1 if node.op_type == "Mul" else 2), k, [node], a
        node = cur.producer
    if not _std(node, "MatMul") or not _float4(cur):
        return None
    return mode, c, node, [node] + chain


def _match(sm: Node):
    """The fused node's pieces around Softmax `sm`, or None."""
    x = sm.inputs[0]
    mask, found, add = None, None, x.producer
    if _std(add, "Add") and _only_reader(x) is sm and len(add.inputs) == 2:
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
    pv = _only_reader(sm.outputs[0])
    if not _std(pv, "MatMul") or pv.inputs[0] is not sm.outputs[0] or not _float4(pv.outputs[0]):
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
    ops = [_operand(q, qk, (2, 3)), _operand(kt, qk, (2, 3)), _operand(v, pv, (2, 3))]
    out, yperm, last = pv.outputs[0], None, pv
    t = _only_reader(out)
    if _std(t, "Transpose") and t.outputs[0] is not None:
        perm = t.attr("perm")
        perm = list(perm) if perm is not None else [3, 2, 1, 0]
        if sorted(perm) == [0, 1, 2, 3]:
            yst = contiguous([out.shape[p] for p in perm])
            if yst[perm.index(3)] == 1:        # the output's columns stay contiguous
                out, yperm, last = t.outputs[0], perm, t
    absorbed = chain + [pv] + [o[2] for o in ops if o[2] is not None] + ([last] if last is not pv else [])
    return {"ins": [o[0] for o in ops] + [mask], "perms": {"q": ops[0][1], "k": ops[1][1], "v": ops[2][1],
                                                            "y": yperm},
            "mode": mode, "c": c, "out": out, "absorbed": absorbed, "last": last, "qk": qk}


def fuse_attention(graph: Graph) -> Graph:
    absorbed: set[int] = set()
    place: dict[int, Node] = {}
    dead: set[int] = set()
    for sm in list(graph.nodes):
        if id(sm) in absorbed or not _std(sm, "Softmax") or not _last_axis_softmax(sm):
            continue
        m = _match(sm)
        if m is None or any(id(n) in absorbed for n in m["absorbed"]):
            continue
        qk = m["qk"]
        fused = Node(qk.index, "FusedAttention", PRIVATE_DOMAIN, 1, qk.name,
                     {"perms": m["perms"], "mode": m["mode"], "c": m["c"]}, m["ins"], [m["out"]], qk.proto)
        gone = {id(n) for n in m["absorbed"]}
        for n in m["absorbed"]:                 # the absorbed nodes read nothing any more ...
            for v in n.inputs:
                if v is not None:
                    v.consumers = [c for c in v.consumers if id(c) not in gone]
            for v in n.outputs:
                if v is not None and v is not m["out"]:
                    dead.add(v.id)
        for v in m["ins"]:                      # ... the fused node reads its inputs
            if v is not None:
                v.consumers.append(fused)
        m["out"].producer = fused
        absorbed |= gone
        place[id(m["last"])] = fused
    return splice(graph, absorbed, place, dead)
