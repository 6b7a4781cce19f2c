"""ai.onnx.preview.training Gradient, expanded at compile time into ordinary ai.onnx nodes
(reverse-mode differentiation); semantics, not an optimisation, so it runs at every level.

Gradient(xs, zs, y) with inputs I: the attributes name a function y(xs, zs) of the graph, the
inputs give the point where its derivative is taken (I[k] stands for (xs + zs)[k]). Where an
input differs from the name it stands for, the forward nodes between it and y are cloned with
the input substituted; otherwise the forward values are reused. The backward nodes then follow:
seed dy/dy = ones, walk the forward nodes from y back to xs with one rule per operator, add the
contributions per value, and undo broadcasting with ReduceSum (+ Reshape for dropped axes).

Broadcast reductions are decided from onnx's shape inference; a broadcast onnxc cannot decide at
compile time (a symbolic dim against another) is refused with NotImplemented, as is any
operator on the path without a rule. Gradients of xs that y does not depend on are zeros.
"""
from __future__ import annotations

import heapq

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ..errors import InvalidGraph, NotImplemented as OrtNotImplemented
from .protoutil import STD, all_names, constants, copy, fresh_name, subgraphs

DOMAIN = "ai.onnx.preview.training"
MIN_OPSET = 9        # Where and ConstantOfShape
FLOATS = {onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE, onnx.TensorProto.FLOAT16,
          onnx.TensorProto.BFLOAT16}


def is_gradient(n: onnx.NodeProto) -> bool:
    return n.op_type == "Gradient" and n.domain == DOMAIN


def _describe(n: onnx.NodeProto) -> str:
    return f"node {n.name!r} ({n.domain + '.' if n.domain not in STD else ''}{n.op_type})"


def expand_gradients(model: onnx.ModelProto) -> onnx.ModelProto:
    """Every main-graph Gradient node replaced by the nodes that compute it."""
    for n in model.graph.node:
        for sg in subgraphs(n):
            if any(is_gradient(m) for m in sg.node):
                raise OrtNotImplemented(f"{_describe(n)}: a Gradient node inside a subgraph is not supported")
    if not any(is_gradient(n) for n in model.graph.node):
        return model
    opset = next((o.version for o in model.opset_import if o.domain in STD), 0)
    if opset < MIN_OPSET:
        raise OrtNotImplemented(f"Gradient expansion needs ai.onnx opset >= {MIN_OPSET}; the model imports {opset}")
    out = copy(model)
    while True:
        _sort(out.graph)
        pending = [i for i, n in enumerate(out.graph.node) if is_gradient(n)]
        if not pending:
            return out
        # a Gradient whose forward path holds another Gradient waits until that one is expanded
        # (higher-order derivatives); then its nodes are ordinary ops with their own rules
        for i in pending:
            exp = _Expansion(out, i, opset)
            if not exp.blocked:
                exp.apply()
                break
        else:
            raise InvalidGraph(f"{_describe(out.graph.node[pending[0]])}: Gradient nodes differentiate "
                               "through each other in a cycle")


def _sort(graph: onnx.GraphProto) -> None:
    """Stable topological order (Kahn, smallest index first), in place."""
    nodes = list(graph.node)
    produced = {o: i for i, n in enumerate(nodes) for o in n.output if o}
    users: list[list[int]] = [[] for _ in nodes]
    indeg = [0] * len(nodes)
    for i, n in enumerate(nodes):
        deps = {produced[x] for x in _reads(n) if x in produced} - {i}
        indeg[i] = len(deps)
        for d in deps:
            users[d].append(i)
    heap = [i for i in range(len(nodes)) if indeg[i] == 0]
    heapq.heapify(heap)
    order = []
    while heap:
        i = heapq.heappop(heap)
        order.append(i)
        for u in users[i]:
            indeg[u] -= 1
            if indeg[u] == 0:
                heapq.heappush(heap, u)
    if len(order) != len(nodes) or order == list(range(len(nodes))):
        return      # a cycle is left for the IR to report
    kept = [onnx.NodeProto() for _ in nodes]
    for dst, i in zip(kept, order):
        dst.CopyFrom(nodes[i])
    del graph.node[:]
    graph.node.extend(kept)


def _reads(n: onnx.NodeProto) -> set[str]:
    out = {x for x in n.input if x}
    stack = list(subgraphs(n))
    while stack:
        g = stack.pop()
        for m in g.node:
            out.update(x for x in m.input if x)
            stack.extend(subgraphs(m))
    return out


def _attr(n: onnx.NodeProto, name: str, default=None):
    for a in n.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def _type_info(model: onnx.ModelProto) -> dict:
    """name -> (elem_type, dims or None); a dim is an int, a symbol name, or None (unknown)."""
    try:
        typed = onnx.shape_inference.infer_shapes(model, strict_mode=False, data_prop=True)
    except Exception:  # noqa: BLE001 - partial information is still usable
        typed = model
    g = typed.graph
    info = {}
    for t in g.initializer:
        info[t.name] = (t.data_type, [int(d) for d in t.dims])
    for vi in list(g.value_info) + list(g.input) + list(g.output):
        if not vi.type.HasField("tensor_type"):
            continue
        tt = vi.type.tensor_type
        dims = None
        if tt.HasField("shape"):
            dims = [d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tt.shape.dim]
        if vi.name not in info or (info[vi.name][1] is None and dims is not None):
            info[vi.name] = (tt.elem_type, dims)
    return info


class _Expansion:
    """One Gradient node: its forward slice, then the nodes replacing it."""

    def __init__(self, model: onnx.ModelProto, index: int, opset: int):
        self.model, self.index, self.opset = model, index, opset
        g = model.graph
        self.node = node = g.node[index]
        self.xs = list(_attr(node, "xs", []) or [])
        self.zs = list(_attr(node, "zs", []) or [])
        self.y = _attr(node, "y", b"")
        self.xs = [x.decode() if isinstance(x, bytes) else x for x in self.xs]
        self.zs = [z.decode() if isinstance(z, bytes) else z for z in self.zs]
        self.y = self.y.decode() if isinstance(self.y, bytes) else self.y
        if not self.xs or not self.y:
            raise InvalidGraph(f"{_describe(node)}: attributes 'xs' and 'y' are required")
        if len(node.input) != len(self.xs) + len(self.zs) or not all(node.input):
            raise InvalidGraph(f"{_describe(node)}: takes one input per name in 'xs' and 'zs' "
                               f"({len(self.xs) + len(self.zs)}), got {len(node.input)}")
        if len(node.output) > len(self.xs):
            raise InvalidGraph(f"{_describe(node)}: has {len(node.output)} outputs for {len(self.xs)} 'xs'")
        self.slice = self._forward_slice()
        self.blocked = any(is_gradient(g.node[i]) for i in self.slice)

    def _forward_slice(self) -> list[int]:
        """Indices (graph order) of the nodes that compute y from xs and zs."""
        g = self.model.graph
        produced = {o: i for i, n in enumerate(g.node) for o in n.output if o and i != self.index}
        leaves = set(self.xs) | set(self.zs)
        known = {t.name for t in g.initializer} | {v.name for v in g.input}
        seen, found, stack = set(), set(), [self.y]
        while stack:
            name = stack.pop()
            if name in seen or name in leaves:
                continue
            seen.add(name)
            if name in produced:
                i = produced[name]
                if i not in found:
                    found.add(i)
                    stack.extend(_reads(g.node[i]))
            elif name not in known:
                raise InvalidGraph(f"{_describe(self.node)}: tensor {name!r} on the way to y={self.y!r} "
                                   "is neither computed nor an input")
        return sorted(found)

    def apply(self) -> None:
        g = self.model.graph
        self.taken = all_names(g) | {n.name for n in g.node}
        self.prefix = self.node.name or "gradient"
        self.new_nodes: list[onnx.NodeProto] = []
        self.new_inits: list[onnx.TensorProto] = []
        self.names = self._substitute()
        probe = copy(self.model)
        probe.graph.node.extend(self.new_nodes)
        self.types = _type_info(probe)
        self._backward()
        keep = list(g.node)
        keep[self.index:self.index + 1] = self.new_nodes
        nodes = [onnx.NodeProto() for _ in keep]
        for dst, src in zip(nodes, keep):
            dst.CopyFrom(src)
        del g.node[:]
        g.node.extend(nodes)
        g.initializer.extend(self.new_inits)

    # --- forward: reuse the graph's values, or clone where an input is substituted ---------------

    def _substitute(self) -> dict:
        names = {k: v for k, v in zip(self.xs + self.zs, self.node.input)}
        dirty = {k for k, v in names.items() if k != v}
        g = self.model.graph
        for i in self.slice:
            n = g.node[i]
            if not (_reads(n) & dirty):
                continue
            if any(True for _ in subgraphs(n)):
                raise OrtNotImplemented(f"{_describe(self.node)}: cannot substitute an input into "
                                        f"{_describe(n)}, which has a subgraph")
            c = onnx.NodeProto()
            c.CopyFrom(n)
            c.name = fresh_name(self.taken, f"{self.prefix}/fwd/{n.name or n.op_type}")
            for k, x in enumerate(c.input):
                c.input[k] = names.get(x, x)
            for k, o in enumerate(c.output):
                if o:
                    names[o] = c.output[k] = fresh_name(self.taken, f"{self.prefix}/fwd/{o}")
                    dirty.add(o)
            self.new_nodes.append(c)
        return names

    def val(self, name: str) -> str:
        """The tensor that holds forward value `name` at the Gradient's point."""
        return self.names.get(name, name)

    # --- emitting ----------------------------------------------------------------------------

    def op(self, op_type: str, inputs: list, **attrs) -> str:
        out = fresh_name(self.taken, f"{self.prefix}/{op_type}")
        self.new_nodes.append(helper.make_node(op_type, inputs, [out], name=out, **attrs))
        return out

    def const(self, arr: np.ndarray) -> str:
        name = fresh_name(self.taken, f"{self.prefix}/const")
        self.new_inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    def scalar(self, value, et: int) -> str:
        return self.const(np.array(value, dtype=helper.tensor_dtype_to_np_dtype(et)))

    def fill(self, like: str, value, et: int, out: str | None = None) -> str:
        shape = self.op("Shape", [like])
        t = numpy_helper.from_array(np.array([value], dtype=helper.tensor_dtype_to_np_dtype(et)), "value")
        if out is None:
            return self.op("ConstantOfShape", [shape], value=t)
        self.new_nodes.append(helper.make_node("ConstantOfShape", [shape], [out], name=out, value=t))
        return out

    def reduce_sum(self, x: str, axes: list[int], keepdims: int) -> str:
        if self.opset >= 13:
            return self.op("ReduceSum", [x, self.const(np.array(axes, np.int64))], keepdims=keepdims)
        return self.op("ReduceSum", [x], axes=axes, keepdims=keepdims)

    def unsqueeze(self, x: str, axes: list[int]) -> str:
        if self.opset >= 13:
            return self.op("Unsqueeze", [x, self.const(np.array(axes, np.int64))])
        return self.op("Unsqueeze", [x], axes=axes)

    def reshape_like(self, x: str, like: str) -> str:
        extra = {"allowzero": 1} if self.opset >= 14 else {}
        return self.op("Reshape", [x, self.op("Shape", [like])], **extra)

    def swap_last(self, x: str, rank: int) -> str:
        perm = list(range(rank))
        perm[-2], perm[-1] = perm[-1], perm[-2]
        return self.op("Transpose", [x], perm=perm)

    # --- what shape inference knows ------------------------------------------------------------

    def etype(self, name: str) -> int:
        return self.types.get(self.val(name), (0, None))[0]

    def dims(self, name: str, n: onnx.NodeProto) -> list:
        d = self.types.get(self.val(name), (0, None))[1]
        if d is None:
            raise OrtNotImplemented(f"{_describe(self.node)}: the gradient through {_describe(n)} needs "
                                    f"the rank of {name!r}, which shape inference does not know")
        return list(d)

    def unbroadcast(self, g: str, gdims: list, x: str, n: onnx.NodeProto) -> str:
        """Sum g (shape gdims) over the axes along which x was broadcast, to x's shape."""
        xd = self.dims(x, n)
        lead = len(gdims) - len(xd)
        if lead < 0:
            raise InvalidGraph(f"{_describe(n)}: input {x!r} has a higher rank than the result")
        kept = []
        for i, dx in enumerate(xd):
            dy = gdims[lead + i]
            if (dx is not None and dx == dy) or dy == 1 or (isinstance(dx, int) and dx != 1):
                continue        # not broadcast (a known x dim other than 1 equals y's)
            if dx == 1:
                kept.append(lead + i)
                continue
            raise OrtNotImplemented(
                f"{_describe(self.node)}: cannot tell at compile time whether input {x!r} of {_describe(n)} "
                f"is broadcast along axis {i} (dim {dx!r} against {dy!r})")
        if kept:
            g = self.reduce_sum(g, kept, 1)
        if lead:
            g = self.reduce_sum(g, list(range(lead)), 0)
        return g

    # --- backward --------------------------------------------------------------------------------

    def _backward(self) -> None:
        g = self.model.graph
        nodes = [g.node[i] for i in self.slice]
        active = set(self.xs)
        for n in nodes:
            if _reads(n) & active:
                active.update(o for o in n.output if o)
        grads: dict[str, list[str]] = {}
        if self.y in active:
            et = self.etype(self.y)
            self._check_float(self.y, et)
            grads[self.y] = [self.fill(self.val(self.y), 1, et)]
        for n in reversed(nodes):
            outs = [o for o in n.output if o]
            if not any(o in grads for o in outs):
                continue
            rule = _RULES.get(n.op_type) if n.domain in STD else None
            if rule is None or len(outs) != 1:
                raise OrtNotImplemented(f"{_describe(self.node)}: no gradient rule for {_describe(n)} "
                                        f"(op {n.op_type}) on the path from xs to y={self.y!r}")
            dy = self._total(grads[outs[0]])
            ins = [x if x in active else "" for x in n.input]
            for x, dx in rule(self, n, dy, ins):
                if x:
                    grads.setdefault(x, []).append(dx)
        for k, x in enumerate(self.xs):
            out = self.node.output[k] if k < len(self.node.output) else ""
            if not out:
                continue
            et = self.etype(x)
            self._check_float(x, et)
            if x in grads:
                self.new_nodes.append(helper.make_node("Identity", [self._total(grads[x])], [out],
                                                       name=fresh_name(self.taken, f"{self.prefix}/{out}")))
            else:
                self.fill(self.val(x), 0, et, out)

    def _total(self, parts: list[str]) -> str:
        total = parts[0]
        for p in parts[1:]:
            total = self.op("Add", [total, p])
        if len(parts) > 1:
            parts[:] = [total]
        return total

    def _check_float(self, name: str, et: int) -> None:
        if et not in FLOATS:
            raise OrtNotImplemented(f"{_describe(self.node)}: {name!r} has element type "
                                    f"{onnx.TensorProto.DataType.Name(et) if et else 'unknown'}; "
                                    "gradients are defined for float tensors only")


# --- rules: (expansion, forward node, output gradient, active inputs or '') -> [(input, grad)] ---
# Forward values are read through e.val(name) (the substituted clone where there is one).

def _elementwise(e: _Expansion, n, dy, ins, local):
    """Binary broadcasting op: local(a, b, y, dy) -> (grad_a or None, grad_b or None) at y's shape."""
    a, b = n.input[0], n.input[1]
    ydims = e.dims(n.output[0], n)
    ga, gb = local(e.val(a), e.val(b), e.val(n.output[0]), dy, bool(ins[0]), bool(ins[1]))
    res = []
    if ins[0] and ga is not None:
        res.append((a, e.unbroadcast(ga, ydims, a, n)))
    if ins[1] and gb is not None:
        res.append((b, e.unbroadcast(gb, ydims, b, n)))
    return res


def _add(e, n, dy, ins):
    return _elementwise(e, n, dy, ins, lambda a, b, y, g, da, db: (g, g))


def _sub(e, n, dy, ins):
    return _elementwise(e, n, dy, ins, lambda a, b, y, g, da, db: (g, e.op("Neg", [g]) if db else None))


def _mul(e, n, dy, ins):
    return _elementwise(e, n, dy, ins, lambda a, b, y, g, da, db: (
        e.op("Mul", [g, b]) if da else None, e.op("Mul", [g, a]) if db else None))


def _div(e, n, dy, ins):
    # d(a/b)/db = -(a/b)/b: reuses y, one division fewer than -a/b^2
    return _elementwise(e, n, dy, ins, lambda a, b, y, g, da, db: (
        e.op("Div", [g, b]) if da else None,
        e.op("Neg", [e.op("Div", [e.op("Mul", [g, y]), b])]) if db else None))


def _pow(e, n, dy, ins):
    x, p = n.input[0], n.input[1]
    et = e.etype(x)
    dtype = helper.tensor_dtype_to_np_dtype(et)
    init = constants(e.model.graph)

    def local(a, b, y, g, da, db):
        ga = gb = None
        if da:
            if p in init and e.val(p) == p:   # constant exponent: p and p - 1 computed now
                pv = numpy_helper.to_array(init[p]).astype(dtype)
                pc, pm1 = e.const(pv), e.const((pv.astype(np.float64) - 1).astype(dtype))
            else:
                pc = b if e.etype(p) == et else e.op("Cast", [b], to=et)
                pm1 = e.op("Sub", [pc, e.scalar(1, et)])
            ga = e.op("Mul", [g, e.op("Mul", [pc, e.op("Pow", [a, pm1])])])
        if db:
            if e.etype(p) != et:
                raise OrtNotImplemented(f"{_describe(e.node)}: the gradient of {_describe(n)} with respect "
                                        "to an exponent of another element type is not supported")
            gb = e.op("Mul", [g, e.op("Mul", [y, e.op("Log", [a])])])
        return ga, gb
    return _elementwise(e, n, dy, ins, local)


def _unary(local):
    def rule(e, n, dy, ins):
        if not ins[0]:
            return []
        x = n.input[0]
        return [(x, local(e, e.val(x), e.val(n.output[0]), dy, e.etype(x)))]
    return rule


def _sum(e, n, dy, ins):
    ydims = e.dims(n.output[0], n)
    return [(x, e.unbroadcast(dy, ydims, x, n)) for x in ins if x]


def _cast(e, n, dy, ins):
    if not ins[0]:
        return []
    et = e.etype(n.input[0])
    e._check_float(n.input[0], et)
    return [(n.input[0], e.op("Cast", [dy], to=et))]


def _reshape_like(e, n, dy, ins):
    x = n.input[0]
    return [(x, e.reshape_like(dy, e.val(x)))] if ins[0] else []


def _transpose(e, n, dy, ins):
    if not ins[0]:
        return []
    perm = _attr(n, "perm")
    if perm is None:
        perm = list(range(len(e.dims(n.input[0], n))))[::-1]
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return [(n.input[0], e.op("Transpose", [dy], perm=inv))]


def _matmul(e, n, dy, ins):
    a, b = n.input[0], n.input[1]
    ad, bd, yd = e.dims(a, n), e.dims(b, n), e.dims(n.output[0], n)
    va, vb = e.val(a), e.val(b)
    res = []
    if len(ad) == 1 and len(bd) == 1:           # dot product: y is a scalar
        if ins[0]:
            res.append((a, e.op("Mul", [dy, vb])))
        if ins[1]:
            res.append((b, e.op("Mul", [dy, va])))
        return res
    if len(ad) == 1:                            # a (k) as (1, k); y = batch + (n)
        g2 = e.unsqueeze(dy, [len(yd) - 1])
        if ins[0]:
            ga = e.op("MatMul", [g2, e.swap_last(vb, len(bd))])     # batch + (1, k)
            if len(bd) > 2:
                ga = e.reduce_sum(ga, list(range(len(bd) - 2)), 0)
            res.append((a, e.reshape_like(ga, va)))
        if ins[1]:
            res.append((b, e.op("MatMul", [e.unsqueeze(va, [1]), g2])))     # (k, 1) @ (.., 1, n)
        return res
    if len(bd) == 1:                            # b (k) as (k, 1); y = batch + (m)
        g2 = e.unsqueeze(dy, [len(yd)])
        if ins[0]:
            res.append((a, e.op("MatMul", [g2, e.unsqueeze(vb, [0])])))
        if ins[1]:
            gb = e.op("MatMul", [e.swap_last(va, len(ad)), g2])
            if len(ad) > 2:
                gb = e.reduce_sum(gb, list(range(len(ad) - 2)), 0)
            res.append((b, e.reshape_like(gb, vb)))
        return res
    batch = yd[:-2]
    if ins[0]:
        ga = e.op("MatMul", [dy, e.swap_last(vb, len(bd))])
        res.append((a, e.unbroadcast(ga, batch + ad[-2:], a, n)))
    if ins[1]:
        gb = e.op("MatMul", [e.swap_last(va, len(ad)), dy])
        res.append((b, e.unbroadcast(gb, batch + bd[-2:], b, n)))
    return res


def _gemm(e, n, dy, ins):
    """y = alpha * A' B' + beta * C with A' = A^T if transA, B' = B^T if transB."""
    a, b = n.input[0], n.input[1]
    c = n.input[2] if len(n.input) > 2 else ""
    ta, tb = int(_attr(n, "transA", 0)), int(_attr(n, "transB", 0))
    alpha, beta = float(_attr(n, "alpha", 1.0)), float(_attr(n, "beta", 1.0))
    et = e.etype(n.output[0])
    va, vb = e.val(a), e.val(b)

    def scaled(x, s):
        return x if s == 1.0 else e.op("Mul", [x, e.scalar(s, et)])
    res = []
    if ins[0]:     # dA' = g B'^T; B'^T is B when transB
        ga = e.op("MatMul", [dy, vb if tb else e.op("Transpose", [vb], perm=[1, 0])])
        res.append((a, scaled(e.op("Transpose", [ga], perm=[1, 0]) if ta else ga, alpha)))
    if ins[1]:     # dB' = A'^T g; A'^T is A when transA
        gb = e.op("MatMul", [va if ta else e.op("Transpose", [va], perm=[1, 0]), dy])
        res.append((b, scaled(e.op("Transpose", [gb], perm=[1, 0]) if tb else gb, alpha)))
    if c and ins[2]:
        res.append((c, e.unbroadcast(scaled(dy, beta), e.dims(n.output[0], n), c, n)))
    return res


def _reduce_axes(e, n, axes_from_input: bool) -> list[int] | None:
    """The reduced axes, normalised; None for 'all axes'. Raises if they are not constants."""
    if axes_from_input:
        name = n.input[1] if len(n.input) > 1 else ""
        if not name:
            return [] if _attr(n, "noop_with_empty_axes", 0) else None
        init = constants(e.model.graph)
        if name not in init or e.val(name) != name:
            raise OrtNotImplemented(f"{_describe(e.node)}: the gradient of {_describe(n)} needs constant axes")
        axes = [int(v) for v in numpy_helper.to_array(init[name]).reshape(-1)]
    else:
        axes = _attr(n, "axes")
        if axes is None:
            return None
        axes = list(axes)
    if not axes:
        return [] if _attr(n, "noop_with_empty_axes", 0) else None
    r = len(e.dims(n.input[0], n))
    return sorted({a + r if a < 0 else a for a in axes})


def _reduce(mean: bool, since_input: int):
    def rule(e, n, dy, ins):
        if not ins[0]:
            return []
        x = n.input[0]
        axes = _reduce_axes(e, n, e.opset >= since_input)
        if axes == []:                          # noop_with_empty_axes: y = x
            return [(x, dy)]
        xd = e.dims(x, n)
        if axes is None:
            axes = list(range(len(xd)))
        g = dy if int(_attr(n, "keepdims", 1)) else e.unsqueeze(dy, axes)
        g = e.op("Expand", [g, e.op("Shape", [e.val(x)])])
        if mean:
            et = e.etype(x)
            reduced = [xd[a] for a in axes]
            if all(isinstance(d, int) for d in reduced):
                count = int(np.prod(reduced, dtype=np.int64))
                g = e.op("Div", [g, e.scalar(max(count, 1), et)])
            else:
                size = e.op("Cast", [e.op("Size", [e.val(x)])], to=et)
                kept = e.op("Cast", [e.op("Size", [e.val(n.output[0])])], to=et)
                g = e.op("Mul", [g, e.op("Div", [kept, size])])
        return [(x, g)]
    return rule


def _where(e, n, dy, ins):
    c = e.val(n.input[0])
    ydims = e.dims(n.output[0], n)
    res = []
    for k, x in ((1, ins[1]), (2, ins[2])):
        if x:
            zero = e.scalar(0, e.etype(n.output[0]))
            pick = [c, dy, zero] if k == 1 else [c, zero, dy]
            res.append((x, e.unbroadcast(e.op("Where", pick), ydims, x, n)))
    return res


def _expand(e, n, dy, ins):
    return [(n.input[0], e.unbroadcast(dy, e.dims(n.output[0], n), n.input[0], n))] if ins[0] else []


def _constant_wrt_inputs(e, n, dy, ins):
    """Results that are piecewise constant in their inputs (shapes, comparisons): no gradient."""
    return []


def _one(e, et):
    return e.scalar(1, et)


_RULES = {
    "Add": _add, "Sub": _sub, "Mul": _mul, "Div": _div, "Pow": _pow, "Sum": _sum,
    "MatMul": _matmul, "Gemm": _gemm,
    "Neg": _unary(lambda e, x, y, g, et: e.op("Neg", [g])),
    "Identity": _unary(lambda e, x, y, g, et: g),
    "Relu": _unary(lambda e, x, y, g, et: e.op("Where", [e.op("Greater", [x, e.scalar(0, et)]), g,
                                                          e.scalar(0, et)])),
    "Sigmoid": _unary(lambda e, x, y, g, et: e.op("Mul", [g, e.op("Mul", [y, e.op("Sub", [_one(e, et), y])])])),
    "Tanh": _unary(lambda e, x, y, g, et: e.op("Mul", [g, e.op("Sub", [_one(e, et), e.op("Mul", [y, y])])])),
    "Exp": _unary(lambda e, x, y, g, et: e.op("Mul", [g, y])),
    "Log": _unary(lambda e, x, y, g, et: e.op("Div", [g, x])),
    "Sqrt": _unary(lambda e, x, y, g, et: e.op("Div", [g, e.op("Mul", [y, e.scalar(2, et)])])),
    "Cast": _cast,
    "Reshape": _reshape_like, "Flatten": _reshape_like, "Squeeze": _reshape_like, "Unsqueeze": _reshape_like,
    "Transpose": _transpose,
    "ReduceSum": _reduce(False, 13), "ReduceMean": _reduce(True, 18),
    "Where": _where, "Expand": _expand,
    # these appear in expanded gradients, so they matter for higher-order derivatives
    **{op: _constant_wrt_inputs for op in ("Shape", "Size", "ConstantOfShape", "Greater", "Less", "Equal",
                                           "GreaterOrEqual", "LessOrEqual", "Not", "And", "Or", "Xor")},
}
