"""Helpers shared by operator modules: attribute checks, axes, broadcasting, layouts."""
from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np

from .. import dtypes
from ..errors import InvalidArgument, InvalidGraph, NotImplemented as OrtNotImplemented
from ..ir import Node, Value
from ..known_values import known
from ..symbolic import Dim, Expr, dim_repr, dmin, product


def fail(node: Node, msg: str) -> InvalidGraph:
    return InvalidGraph(f"{node.describe()}: {msg}")


def attr_enum(node: Node, name: str, allowed: Iterable[str]) -> str:
    """Parse an enum-like string attribute; anything unknown is rejected, never emitted."""
    v = node.attr(name)
    allowed = tuple(allowed)
    if v not in allowed:
        raise fail(node, f"attribute {name}={v!r} is not one of {', '.join(map(repr, allowed))}")
    return v


def attr_ints(node: Node, name: str, n: int | None = None, default=None) -> list[int]:
    v = node.attr(name, default)
    if v is None:
        return None
    v = [int(x) for x in v]
    if n is not None and len(v) != n:
        raise fail(node, f"attribute {name} has {len(v)} values, expected {n}")
    return v


def attr_int(node: Node, name: str, default: int | None = None) -> int:
    v = node.attr(name, default)
    if v is None:
        raise fail(node, f"required attribute {name} is missing")
    return int(v)


def norm_axis(node: Node, axis: int, rank: int, what: str = "axis", allow_end: bool = False) -> int:
    hi = rank + 1 if allow_end else rank
    if not -hi <= axis < hi:
        raise fail(node, f"{what}={axis} is out of range for rank {rank}")
    return axis + hi if axis < 0 else axis


def const_input(node: Node, i: int, what: str) -> np.ndarray:
    v = node.input(i)
    if v is None:
        return None
    value = known(v)   # initializers (never overridable ones) and values derived at compile time
    if value is None:
        raise OrtNotImplemented(f"{node.describe()}: input {i} ({what}) must be known at compile time "
                                "(an initializer, a Constant, or computed from them) for now; "
                                "data-dependent shapes come later")
    return value


def require_types(node: Node, value: Value, allowed: Iterable[dtypes.ElemType], what: str):
    if value.etype not in tuple(allowed):
        raise OrtNotImplemented(f"{node.describe()}: {what} of element type {value.etype.name} "
                                "is not supported")


def same_etype(node: Node, values: Sequence[Value]) -> dtypes.ElemType:
    ets = {v.etype for v in values if v is not None}
    if len(ets) != 1:
        raise fail(node, "inputs have mismatched element types: "
                   + ", ".join(v.etype.name for v in values if v is not None))
    return ets.pop()


def broadcast(node: Node, shapes: Sequence[Sequence[Dim]], runtime_ones: bool = False) -> tuple[Dim, ...]:
    """Numpy (multidirectional) broadcasting. Two different dims neither of which is 1 at compile
    time (a symbolic one and another) are taken to be equal, as the kernel's strides assume; the
    node checks that at run time (Node.checks) and fails cleanly if one of them is 1 there.
    runtime_ones (kernels whose strides come from broadcast_loops): a symbolic dim against a number
    may also be 1 while running (a mask Expanded to a shape computed from data): checked to be 1 or
    that number, and broadcast_loops reads it with a stride that is 0 when it is 1."""
    rank = max(len(s) for s in shapes)
    out = []
    for k in range(rank):
        dims = [s[k - rank + len(s)] for s in shapes if k - rank + len(s) >= 0]
        cur: Dim = 1
        for d in dims:
            if d == 1:
                continue
            if cur == 1:
                cur = d
            elif isinstance(cur, int) and isinstance(d, int) and cur != d:
                raise fail(node, "input shapes cannot be broadcast together: "
                           + " vs ".join("(" + ", ".join(dim_repr(x) for x in s) + ")" for s in shapes))
            elif cur != d:   # taken as equal (the kernel's strides say so): checked at run time
                sym, num = (cur, d) if isinstance(d, int) else (d, cur)
                if runtime_ones and isinstance(num, int) and isinstance(sym, Expr):
                    check = ((sym - 1) * (sym - num), 0)      # the symbolic dim is 1 or that number
                else:
                    check = (cur, d)
                if check not in node.checks:
                    node.checks.append(check)
                if isinstance(cur, Expr) and isinstance(d, int):
                    cur = d
        out.append(cur)
    return tuple(out)


def numel(shape: Sequence[Dim]) -> Dim:
    return product(shape)


def contiguous_strides(shape: Sequence[Dim]) -> list[Dim]:
    out: list[Dim] = []
    acc: Dim = 1
    for d in reversed(shape):
        out.append(acc)
        acc = acc * d
    return out[::-1]


def broadcast_loops(out_shape: Sequence[Dim], in_shapes: Sequence[Sequence[Dim]]):
    """Loop nest for an N-input broadcast: returns (dims, strides per input) with runs of
    dims that every input treats alike merged into one, so most ops get a flat loop. An input's
    symbolic dim under a numeric output dim (broadcast(runtime_ones=True)) may be 1 or that number
    while running: that axis stays a loop of its own and the input's stride along it is
    acc * min(d - 1, 1), 0 when d is 1."""
    rank = len(out_shape)
    padded = [[1] * (rank - len(s)) + list(s) for s in in_shapes]

    def move(p, k):     # does the input advance along dim k: True, False, or "maybe" (while running)
        if isinstance(p[k], Expr) and isinstance(out_shape[k], int) and out_shape[k] != 1:
            return "maybe"
        return not (p[k] == 1 and out_shape[k] != 1)

    dims: list[Dim] = []
    pattern: list[list] = []
    axis: list[int | None] = []     # the original dim of a loop that holds a "maybe" (never merged)
    for k in range(rank):
        if out_shape[k] == 1:
            continue
        mv = [move(p, k) for p in padded]
        maybe = "maybe" in mv
        if dims and not maybe and axis[-1] is None and pattern[-1] == mv:
            dims[-1] = dims[-1] * out_shape[k]
        else:
            dims.append(out_shape[k])
            pattern.append(mv)
            axis.append(k if maybe else None)
    strides = []
    for i in range(len(in_shapes)):
        st: list[Dim] = [0] * len(dims)
        acc: Dim = 1
        for k in reversed(range(len(dims))):
            if pattern[k][i] == "maybe":
                own = padded[i][axis[k]]
                st[k] = acc * dmin(own - 1, 1)
                acc = acc * own
            elif pattern[k][i]:
                st[k] = acc
                acc = acc * dims[k]
        strides.append(st)
    return dims, strides


def loop_params(out_shape: Sequence[Dim], in_shapes: Sequence[Sequence[Dim]]) -> dict:
    """Template parameters for elementwise.c.j2-style loop nests."""
    dims, strides = broadcast_loops(out_shape, in_shapes)
    return {"dims": dims, "strides": strides, "out_strides": contiguous_strides(dims)}


import functools  # noqa: E402  (helpers appended below)

import onnx.defs  # noqa: E402


@functools.lru_cache(maxsize=None)
def _schema_formals(op_type: str, domain: str, opset: int):
    s = onnx.defs.get_schema(op_type, opset, domain)
    tcs = {tc.type_param_str: tuple(tc.allowed_type_strs) for tc in s.type_constraints}
    formal = lambda f: (f.type_str, tuple(t[7:-1] for t in tcs.get(f.type_str, (f.type_str,))
                                          if t.startswith("tensor(")))
    return [formal(f) for f in s.inputs], [formal(f) for f in s.outputs]


def schema_types(node: Node) -> list[dtypes.ElemType]:
    """Check the node's input element types against onnx's schema for its opset (inputs sharing
    a type parameter must agree) and return the output element types the schema implies."""
    try:
        fins, fouts = _schema_formals(node.op_type, node.domain, node.opset)
    except onnx.defs.SchemaError:
        raise fail(node, f"onnx has no schema for {node.op_type} at opset {node.opset}") from None
    bound: dict[str, dtypes.ElemType] = {}
    for i, v in enumerate(node.inputs):
        if v is None or not fins:
            continue
        param, allowed = fins[min(i, len(fins) - 1)]
        if v.etype.name not in allowed:
            raise fail(node, f"input {i} has element type {v.etype.name}, which {node.op_type}-"
                       f"{node.opset} does not accept (allowed: {', '.join(allowed)})")
        if bound.setdefault(param, v.etype) != v.etype:
            raise fail(node, f"input {i} has element type {v.etype.name} but another input bound to "
                       f"the same type parameter {param} is {bound[param].name}")
    out = []
    for param, allowed in fouts:
        if param in bound:
            out.append(bound[param])
        elif len(allowed) == 1 and allowed[0] in dtypes.BY_NAME:
            out.append(dtypes.BY_NAME[allowed[0]])
        else:
            raise fail(node, f"cannot tell the element type of output {param}")
    return out


def data_input(node: Node, i: int, what: str, dims: bool = False):
    """Input i's contents when known at compile time (numpy array), else the Value itself: the
    dims it gives are then computed from its data by onnxc_resolve before the run when the caller
    passes it, else in the run just before the node (heap dims, see onnxc.dynamic). A Value
    returned has a static rank-1 (or scalar) shape.
    ``dims=True``: the caller also accepts contents that are symbolic dims (an object array of
    int | Expr, from shape arithmetic on symbolic dims; see known_values.known_dims)."""
    v = node.input(i)
    if v is None:
        return None
    value = known(v)
    if value is not None:
        return value
    if dims and v.known_dims is not None:   # symbolic contents (Shape arithmetic): object array
        return v.known_dims
    if any(not isinstance(d, int) for d in v.shape):
        raise OrtNotImplemented(f"{node.describe()}: input {i} ({what}) needs a static shape, got "
                                f"({', '.join(dim_repr(d) for d in v.shape)})")
    return v
