"""Bias, activation and residual Add fused into the epilogue of Conv, Gemm and MatMul
(GraphOptimizationLevel >= EXTENDED). Runs on the IR after shape inference: it needs shapes
(a residual must have the producer's exact shape) and the op specs (an activation is any unary
elementwise op whose C expression is known, plus Clip with constant bounds).

    producer -> [Add bias]   -> [Add residual] -> [activation]
                 MatMul only    same shape         Relu, Clip, LeakyRelu, Sigmoid, Tanh, ...

becomes one node of PRIVATE_DOMAIN (FusedConv / FusedGemm / FusedMatMul) computing
Y = act(producer + bias + residual); inputs: the producer's, then [bias] for MatMul, then the
residual (index 3; None when absent). Attribute "activation" holds the absorbed activation node
(IR object, never emitted) or None. Each absorbed value must feed the next node alone and not be
a graph output. The fused node takes the place of the last absorbed node, where every input
(the residual's producer included) is computed.
"""
from __future__ import annotations

from ..ir import Graph, Node, Value
from . import PRIVATE_DOMAIN
from .irutil import splice

FUSED = {"Conv": "FusedConv", "Gemm": "FusedGemm", "MatMul": "FusedMatMul"}
FLOAT_NAMES = ("float", "double")


def _single_reader(v: Value) -> Node | None:
    if v.is_output or len(v.consumers) != 1:
        return None
    return v.consumers[0]


def _const(v: Value | None) -> bool:
    return v is not None and v.const is not None and not v.is_input


def activation_expr(node: Node) -> str | None:
    """The C expression (over `a0`) of a unary activation node, or None when it is not one:
    any unary elementwise op of the table whose result keeps the input's (float) type, and
    Clip whose bounds are constants."""
    from ..ops import lookup
    from ..ops.elementwise import Clip, Elementwise, K, c_math
    if node.domain != "" or len(node.outputs) != 1 or node.outputs[0] is None or not node.inputs:
        return None
    try:
        spec = lookup(node)
    except Exception:  # noqa: BLE001 - not an operator onnxc knows
        return None
    x, y = node.inputs[0], node.outputs[0]
    if x is None or x.etype is None or x.etype.name not in FLOAT_NAMES or y.etype != x.etype:
        return None
    k = K(node, x.etype)
    if isinstance(spec, Clip):
        expr = _clip_expr(node, k)
    elif type(spec) is Elementwise or (isinstance(spec, Elementwise) and type(spec).rule is Elementwise.rule
                                        and type(spec).params is Elementwise.params
                                        and type(spec).operands is Elementwise.operands):
        if sum(v is not None for v in node.inputs) != 1 or spec.raw:
            return None
        expr = spec.rule(node, k)
    else:
        return None
    if expr is None or k.f64:
        return None
    return c_math(expr, k.cc)


def clamp_bounds(node: Node) -> tuple[float, float] | None:
    """(lo, hi) when the activation is max(lo, min(hi, x)) in the form kernels apply to vectors
    (Relu, Clip with constant bounds; +-inf for an absent bound); the comparisons are those of the
    C expression: x < lo ? lo : x, then > hi, so NaN passes and a NaN bound never fires."""
    if node.domain != "" or not node.inputs or node.inputs[0] is None:
        return None
    if node.op_type == "Relu":
        return 0.0, float("inf")
    if node.op_type != "Clip":
        return None
    return _clip_bounds(node)


def _clip_bounds(node: Node) -> tuple[float, float] | None:
    if node.opset < 11:
        return float(node.attr("min", float("-inf"))), float(node.attr("max", float("inf")))
    bounds = []
    for i in (1, 2):
        b = node.input(i)
        if b is None:
            bounds.append(None)
        elif _const(b) and b.const.size == 1:
            bounds.append(float(b.const.reshape(-1)[0]))
        else:
            return None
    return (bounds[0] if bounds[0] is not None else float("-inf"),
            bounds[1] if bounds[1] is not None else float("inf"))


def _clip_expr(node: Node, k) -> str | None:
    lohi = _clip_bounds(node)
    if lohi is None:
        return None
    lo, hi = lohi
    e = "a0"
    if lo != float("-inf"):     # a NaN bound is kept: the comparison then never fires, as in C Clip
        e = f"(a0 < {k.lit(lo)} ? {k.lit(lo)} : a0)"
    if hi != float("inf"):
        e = f"({e} > {k.lit(hi)} ? {k.lit(hi)} : {e})"
    return e


def _bias_of(add: Node, y: Value) -> Value | None:
    """Add(y, b) with b a constant broadcast along the rows of a MatMul output y."""
    b = add.inputs[1] if add.inputs[0] is y else add.inputs[0]
    if not _const(b) or b is y or b.etype != y.etype or len(y.shape) < 2:
        return None
    shape = list(b.shape)
    if not shape or shape[-1] != y.shape[-1] or any(d != 1 for d in shape[:-1]) or len(shape) > len(y.shape):
        return None
    return b


def _residual_of(add: Node, y: Value) -> Value | None:
    z = add.inputs[1] if add.inputs[0] is y else add.inputs[0]
    if z is None or z is y or z.etype != y.etype or tuple(z.shape) != tuple(y.shape):
        return None
    return z


def _is_add(n: Node | None, y: Value) -> bool:
    return (n is not None and n.op_type == "Add" and n.domain == "" and len(n.inputs) == 2
            and n.outputs[0] is not None and tuple(n.outputs[0].shape) == tuple(y.shape)
            and n.outputs[0].etype == y.etype)


def fuse_epilogues(graph: Graph) -> Graph:
    absorbed: set[int] = set()       # ids of absorbed nodes
    place: dict[int, Node] = {}      # id of the last absorbed node -> fused node replacing it
    dead_values: set[int] = set()
    for node in list(graph.nodes):
        if id(node) in absorbed or node.domain != "" or node.op_type not in FUSED:
            continue
        y = node.outputs[0]
        if y is None or y.etype is None or y.etype.name not in FLOAT_NAMES or len(node.outputs) != 1:
            continue
        if node.op_type == "MatMul" and (node.inputs[0].rank < 2 or node.inputs[1].rank < 2):
            continue
        chain: list[Node] = []
        bias = res = act = None
        cur = y
        nxt = _single_reader(cur)
        if node.op_type == "MatMul" and _is_add(nxt, cur) and _bias_of(nxt, cur) is not None:
            bias, chain, cur = _bias_of(nxt, cur), chain + [nxt], nxt.outputs[0]
            nxt = _single_reader(cur)
        if _is_add(nxt, cur) and _residual_of(nxt, cur) is not None:
            res, chain, cur = _residual_of(nxt, cur), chain + [nxt], nxt.outputs[0]
            nxt = _single_reader(cur)
        if nxt is not None and nxt.inputs and nxt.inputs[0] is cur and activation_expr(nxt) is not None \
                and nxt.outputs[0].shape == cur.shape and nxt.outputs[0].etype == cur.etype:
            act, chain, cur = nxt, chain + [nxt], nxt.outputs[0]
        if not chain:
            continue
        ins = list(node.inputs[:3]) + [None] * (3 - len(node.inputs[:3]))
        if node.op_type == "MatMul":
            ins[2] = bias
        ins.append(res)
        attrs = dict(node.attrs)
        attrs["activation"] = act
        # the producer's opset is kept: its spec's opset-dependent rules still apply
        fused = Node(node.index, FUSED[node.op_type], PRIVATE_DOMAIN, node.opset, node.name, attrs, ins,
                     [cur], node.proto)
        for v in node.inputs:                          # readers: the producer's inputs ...
            if v is not None:
                v.consumers = [fused if c is node else c for c in v.consumers]
        for n in chain:                                # ... and the absorbed nodes' other inputs
            for v in n.inputs:
                if v is not None:
                    v.consumers = [c for c in v.consumers if c is not n]
        for v in (bias, res):
            if v is not None:
                v.consumers.append(fused)
        cur.producer = fused
        dead_values.add(y.id)
        dead_values.update(n.outputs[0].id for n in chain[:-1])
        absorbed.add(id(node))
        absorbed.update(id(n) for n in chain[:-1])
        place[id(chain[-1])] = fused
    return splice(graph, absorbed, place, dead_values)
