"""Elementwise operators as a table: one line per op, a C expression over a0, a1, ...

Math functions are written with their double names (exp, tanh, ...); for float tensors
the float variants (expf, tanhf, ...) are substituted. Every op renders elementwise.c.j2.
"""
from __future__ import annotations

import re

from .. import dtypes
from ..errors import NotImplemented as OrtNotImplemented
from .common import broadcast, fail, loop_params, same_etype
from .registry import OpSpec, register

D = dtypes.BY_NAME
FLOATS = (D["float"], D["double"])
SIGNED = (D["int8"], D["int16"], D["int32"], D["int64"])
UNSIGNED = (D["uint8"], D["uint16"], D["uint32"], D["uint64"])
INTS = SIGNED + UNSIGNED
NUMERIC = FLOATS + INTS
BOOL = (D["bool"],)

_MATH = re.compile(r"\b(exp|log|sqrt|tanh|fabs|floor|ceil|pow|fmod|sin|cos|tan|asin|acos|atan|"
                   r"sinh|cosh|asinh|acosh|atanh|erf|nearbyint|round|fmax|fmin|expm1|log1p|copysign)\(")


def c_math(expr: str, et: dtypes.ElemType) -> str:
    return _MATH.sub(lambda m: m.group(1) + ("f(" if et.c == "float" else "("), expr)


def _minmax(op: str):
    # NaN propagates, as in numpy/onnxruntime
    def f(n, et):
        cmp = ">" if op == "max" else "<"
        if et.is_float:
            return f"((a0 {cmp} a1 || a0 != a0) ? a0 : a1)"
        return f"(a0 {cmp} a1 ? a0 : a1)"
    return f


def _clip01(v: str) -> str:
    return f"({v} < 0 ? 0 : ({v} > 1 ? 1 : {v}))"  # NaN passes through


def _div(n, et):
    if et.is_float:
        return "a0 / a1"
    if et.is_signed:  # no SIGFPE: x/0 -> 0, INT_MIN/-1 wraps
        return f"(a1 == 0 ? ({et.c})0 : (a1 == -1 ? ({et.c})(0u - (uint64_t)a0) : ({et.c})(a0 / a1)))"
    return f"(a1 == 0 ? ({et.c})0 : ({et.c})(a0 / a1))"


def _pow(n, et):
    ex = n.inputs[1].etype
    if et.is_float and ex == et:
        return "pow(a0, a1)"
    return f"({et.c})pow((double)a0, (double)a1)"


def _mod(n, et):
    fmod = int(n.attr("fmod", 0))
    if et.is_float:
        if fmod:
            return "fmod(a0, a1)"
        # Python's sign rule on floats, as onnx.reference computes it (np.mod)
        return "(fmod(a0, a1) != 0 && ((fmod(a0, a1) < 0) != (a1 < 0)) ? fmod(a0, a1) + a1 : fmod(a0, a1))"
    if fmod or not et.is_signed:
        return f"(a1 == 0 ? ({et.c})0 : ({et.c})(a0 % a1))"
    # Python's sign rule: the result takes the divisor's sign
    return (f"(a1 == 0 || a1 == -1 ? ({et.c})0 : ({et.c})(((a0 % a1) + a1) % a1 == 0 ? 0 : "
            f"((a0 % a1) != 0 && ((a0 % a1) < 0) != (a1 < 0) ? (a0 % a1) + a1 : a0 % a1)))")


# name: (types, expression or fn(node, etype) -> expression)
UNARY = {
    "Relu": (NUMERIC, "(a0 < 0 ? 0 : a0)"),
    "Sigmoid": (FLOATS, "(a0 >= 0 ? 1 / (1 + exp(-a0)) : exp(a0) / (1 + exp(a0)))"),
    "Tanh": (FLOATS, "tanh(a0)"),
    "Exp": (FLOATS, "exp(a0)"),
    "Log": (FLOATS, "log(a0)"),
    "Sqrt": (FLOATS, "sqrt(a0)"),
    "Abs": (NUMERIC, lambda n, et: "fabs(a0)" if et.is_float else ("(a0 < 0 ? -a0 : a0)" if et.is_signed else "a0")),
    "Neg": (FLOATS + SIGNED, lambda n, et: "-a0" if et.is_float else f"({et.c})(0u - (uint64_t)a0)"),
    "Floor": (FLOATS, "floor(a0)"),
    "Ceil": (FLOATS, "ceil(a0)"),
    "Reciprocal": (FLOATS, "1 / a0"),
    "Erf": (FLOATS, "erf(a0)"),
    "Sin": (FLOATS, "sin(a0)"),
    "Cos": (FLOATS, "cos(a0)"),
    "Softplus": (FLOATS, "(a0 > 0 ? a0 + log1p(exp(-a0)) : log1p(exp(a0)))"),
    "Sign": (NUMERIC, "(a0 > 0 ? 1 : (a0 < 0 ? -1 : a0))"),  # 0 and NaN map to themselves
    "LeakyRelu": (FLOATS, lambda n, et: f"(a0 < 0 ? ({float(n.attr('alpha', 0.01))!r}) * a0 : a0)"),
    "Elu": (FLOATS, lambda n, et: f"(a0 < 0 ? ({float(n.attr('alpha', 1.0))!r}) * expm1(a0) : a0)"),
    "HardSigmoid": (FLOATS, lambda n, et: _clip01(f"(({float(n.attr('alpha'))!r}) * a0 + ({float(n.attr('beta'))!r}))")),
    "Not": (BOOL, "!a0"),
}

BINARY = {
    "Add": (NUMERIC, "a0 + a1"),
    "Sub": (NUMERIC, "a0 - a1"),
    "Mul": (NUMERIC, "a0 * a1"),
    "Div": (NUMERIC, _div),
    "Pow": (FLOATS + (D["int32"], D["int64"]), _pow),
    "Mod": (NUMERIC, _mod),
    "And": (BOOL, "a0 && a1"),
    "Or": (BOOL, "a0 || a1"),
    "Xor": (BOOL, "a0 != a1"),
}

COMPARE = {
    "Equal": "a0 == a1",
    "Less": "a0 < a1",
    "Greater": "a0 > a1",
    "LessOrEqual": "a0 <= a1",
    "GreaterOrEqual": "a0 >= a1",
}

VARIADIC = {"Max": _minmax("max"), "Min": _minmax("min"), "Sum": "a0 + a1", "Mean": "a0 + a1"}


class Elementwise(OpSpec):
    template = "elementwise.c.j2"
    types: tuple = NUMERIC
    expr = "a0"
    out_bool = False
    mixed_types = False     # inputs may differ in type (Pow's exponent); output takes input 0's

    def infer(self, node):
        ins = [v for v in node.inputs if v is not None]
        et = ins[0].etype if self.mixed_types else same_etype(node, ins)
        if et not in self.types:
            raise OrtNotImplemented(f"{node.describe()}: element type {et.name} is not supported "
                                    f"(supported: {', '.join(t.name for t in self.types)})")
        shape = broadcast(node, [v.shape for v in ins])
        return [(dtypes.BOOL if self.out_bool else et, shape)]

    def c_expr(self, node, et) -> str:
        e = self.expr(node, et) if callable(self.expr) else self.expr
        return c_math(e, et)

    def params(self, node):
        ins = [v for v in node.inputs if v is not None]
        out = node.outputs[0]
        return {**loop_params(out.shape, [v.shape for v in ins]), "expr": self.c_expr(node, ins[0].etype),
                "operands": [i for i, v in enumerate(node.inputs) if v is not None]}

    def inplace(self, node):
        out = node.outputs[0]
        return [(0, i) for i, v in enumerate(node.inputs)
                if v is not None and v.shape == out.shape and v.etype == out.etype]


class Variadic(Elementwise):
    """Max/Min/Sum/Mean over any number of inputs: the binary expression folded left."""

    def c_expr(self, node, et):
        n = sum(v is not None for v in node.inputs)
        e = self.expr(node, et) if callable(self.expr) else self.expr
        acc = "a0"
        for i in range(1, n):
            acc = "(" + e.replace("a0", "\0").replace("a1", f"a{i}").replace("\0", acc) + ")"
        if self.op_type == "Mean":
            acc = f"({acc} / {n})"
        return c_math(acc, et)


def _make(name, base, types, expr, **extra):
    cls = type(name, (base,), {"op_type": name, "types": types, "expr": staticmethod(expr)
                                if callable(expr) else expr, **extra})
    register(cls)
    return cls


for _n, (_t, _e) in UNARY.items():
    _make(_n, Elementwise, _t, _e)
for _n, (_t, _e) in BINARY.items():
    _make(_n, Elementwise, _t, _e, mixed_types=_n == "Pow")
for _n, _e in COMPARE.items():
    _make(_n, Elementwise, NUMERIC + BOOL, _e, out_bool=True)
for _n, _e in VARIADIC.items():
    _make(_n, Variadic, NUMERIC if _n in ("Max", "Min", "Sum") else FLOATS, _e)


@register
class Clip(Elementwise):
    """Clip: bounds are attributes before opset 11, optional scalar inputs from 11."""
    op_type = "Clip"

    def infer(self, node):
        x = node.inputs[0]
        if x.etype not in NUMERIC:
            raise OrtNotImplemented(f"{node.describe()}: element type {x.etype.name} is not supported")
        for i in (1, 2):
            b = node.input(i)
            if b is not None and b.shape not in ((), (1,)):
                raise fail(node, f"input {i} (bound) must be a scalar, got shape {b.shape}")
        return [(x.etype, x.shape)]

    def params(self, node):
        x, out = node.inputs[0], node.outputs[0]
        lo, hi = "a0", "a0"
        ins = [x]
        if node.opset < 11:
            lo, hi = repr(float(node.attr("min", float("-inf")))), repr(float(node.attr("max", float("inf"))))
            lo = lo.replace("inf", "INFINITY")
            hi = hi.replace("inf", "INFINITY")
        else:
            for i, name in ((1, "lo"), (2, "hi")):
                if node.input(i) is not None:
                    ins.append(node.input(i))
                    if name == "lo":
                        lo = f"a{len(ins) - 1}"
                    else:
                        hi = f"a{len(ins) - 1}"
        expr = "a0"
        if lo != "a0":
            expr = f"(a0 < {lo} ? {lo} : a0)"
        if hi != "a0":
            expr = f"({expr} > {hi} ? {hi} : {expr})"
        return {**loop_params(out.shape, [v.shape for v in ins]), "expr": expr,
                "operands": [i for i, v in enumerate(node.inputs) if v is not None]}

    def inplace(self, node):
        return [(0, 0)]
