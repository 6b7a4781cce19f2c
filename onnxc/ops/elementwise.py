"""Elementwise operators as a table: one line per op, a C expression over a0, a1, ...

Each input is loaded into its compute type (float for float16/bfloat16) with onnxc_ld_<type>,
and the result is stored with onnxc_st_<type>. Math functions are written with their double
names (exp, tanh, ...); when the computation is in float they become expf, tanhf, ... The
element types each op accepts come from onnx's schema for the node's opset (common.schema_types).
Every op renders elementwise.c.j2.
"""
from __future__ import annotations

import math
import re

import numpy as np
import onnx.defs

from .. import dtypes
from .cast import convert
from .common import attr_enum, broadcast, fail, loop_params, schema_types
from .registry import OpSpec, register

D = dtypes.BY_NAME
FLOATS = (D["float"], D["double"], D["float16"], D["bfloat16"])
SIGNED = (D["int8"], D["int16"], D["int32"], D["int64"])
UNSIGNED = (D["uint8"], D["uint16"], D["uint32"], D["uint64"])
INTS = SIGNED + UNSIGNED
NUMERIC = FLOATS + INTS
BOOL = (D["bool"],)

_MATH = re.compile(r"\b(exp|log|sqrt|tanh|fabs|floor|ceil|pow|fmod|sin|cos|tan|asin|acos|atan|"
                   r"sinh|cosh|asinh|acosh|atanh|erf|rint|nearbyint|round|fmax|fmin|expm1|log1p|"
                   r"copysign)\(")


# float functions with a vectorisable, branch-free version in onnxc_vmath.h (documented error)
VMATH_FLOAT = {"exp": "onnxc_vexpf(", "tanh": "onnxc_vtanhf(", "erf": "onnxc_verff("}


def c_math(expr: str, cc: str) -> str:
    """Double math names -> the float variants when computing in float (cc is a C type)."""
    if cc != "float":
        return _MATH.sub(lambda m: m.group(1) + "(", expr)
    return _MATH.sub(lambda m: VMATH_FLOAT.get(m.group(1), m.group(1) + "f("), expr)


class K:
    """What an expression rule sees: the node, input 0's element type and literal helpers."""

    def __init__(self, node, et: dtypes.ElemType):
        self.node, self.et, self.cc = node, et, et.cc
        # unsigned type wide enough that integer arithmetic wraps instead of overflowing
        self.u = "uint64_t" if et.itemsize == 8 else "uint32_t"
        self.f64 = False   # the rule computes a double whatever the types (numpy's promotion)

    def lit(self, v: float) -> str:
        """A C literal of value v in the compute type (float32-rounded for float)."""
        v = float(v)
        if math.isnan(v):
            return "NAN"
        if math.isinf(v):
            return "INFINITY" if v > 0 else "(-INFINITY)"
        s = f"{np.float32(v)}f" if self.cc == "float" else repr(v)
        return f"({s})" if s.startswith("-") else s

    def attr(self, name: str) -> str:
        v = self.node.attr(name)
        if v is None:
            raise fail(self.node, f"required attribute {name} is missing")
        return self.lit(v)

    def wrap(self, op: str) -> str:
        """a0 <op> a1 with two's-complement wrap-around for integers (no signed overflow UB)."""
        if self.et.is_float:
            return f"a0 {op} a1"
        return f"({self.et.c})(({self.u})a0 {op} ({self.u})a1)"


def _minmax(op: str):
    cmp = ">" if op == "max" else "<"
    # NaN propagates, as in numpy/onnxruntime
    return lambda k: f"((a0 {cmp} a1 || a0 != a0) ? a0 : a1)" if k.et.is_float else f"(a0 {cmp} a1 ? a0 : a1)"


def _clip01(v: str) -> str:
    return f"({v} < 0 ? 0 : ({v} > 1 ? 1 : {v}))"  # NaN passes through


def _softplus(x: str) -> str:
    return f"({x} > 0 ? {x} + log1p(exp(-{x})) : log1p(exp({x})))"


def _abs(k):
    if k.et.is_float:
        return "fabs(a0)"
    return f"(a0 < 0 ? ({k.et.c})(0u - ({k.u})a0) : a0)" if k.et.is_signed else "a0"


def _neg(k):
    return "-a0" if k.et.is_float else f"(0u - ({k.u})a0)"


def _sign(k):
    if k.et.is_float:
        return "(a0 > 0 ? 1 : (a0 < 0 ? -1 : a0))"  # 0 and NaN map to themselves
    return "(a0 > 0 ? 1 : (a0 < 0 ? -1 : 0))" if k.et.is_signed else "(a0 > 0)"


def _div(k):
    if k.et.is_float:
        return "a0 / a1"
    if k.et.is_signed:  # no SIGFPE: x/0 -> 0, INT_MIN/-1 wraps
        return f"(a1 == 0 ? 0 : (a1 == -1 ? ({k.et.c})(0u - ({k.u})a0) : a0 / a1))"
    return "(a1 == 0 ? 0 : a0 / a1)"


def _mod(k):
    fmod = int(k.node.attr("fmod", 0))
    if k.et.is_float:
        if fmod:
            return "fmod(a0, a1)"
        return "onnxc_pymodf(a0, a1)" if k.cc == "float" else "onnxc_pymod(a0, a1)"  # np.mod
    if not k.et.is_signed:
        return "onnxc_rem_u64(a0, a1)"
    return "onnxc_rem_i64(a0, a1)" if fmod else "onnxc_pymod_i64(a0, a1)"


def _pow(k):
    ex = k.node.inputs[1].etype
    if k.et.is_float and ex.cc == k.cc:
        return "pow(a0, a1)"
    if not k.et.is_float and not ex.is_float:
        return "onnxc_ipow((int64_t)a0, (int64_t)a1)"
    k.f64 = True                                   # numpy promotes mixed pairs to float64
    return "onnxc_powd((double)a0, (double)a1)"


def _bitshift(k):
    left = attr_enum(k.node, "direction", ("LEFT", "RIGHT")) == "LEFT"
    bits = k.et.itemsize * 8
    ok = f"(uint64_t)a1 < {bits}"      # a negative or too large shift is out of range
    if left:
        return f"({ok} ? ({k.u})a0 << a1 : 0)"
    return f"({ok} ? a0 >> a1 : {'(a0 < 0 ? -1 : 0)' if k.et.is_signed else '0'})"


def _isinf(k):
    neg, pos = int(k.node.attr("detect_negative", 1)), int(k.node.attr("detect_positive", 1))
    return " || ".join([c for c, on in (("a0 == (-INFINITY)", neg), ("a0 == INFINITY", pos)) if on]) or "0"


def _shrink(k):
    lambd, bias = float(k.node.attr("lambd")), float(k.node.attr("bias"))
    if not k.et.is_float:   # numpy: int + float bias is float64, then cast back (see params)
        k.f64 = True
        return (f"((double)a0 < {-lambd!r} ? (double)a0 + {bias!r} : "
                f"((double)a0 > {lambd!r} ? (double)a0 - {bias!r} : 0.0))")
    lo, hi, b = k.lit(-lambd), k.lit(lambd), k.lit(bias)
    return f"(a0 < {lo} ? a0 + {b} : (a0 > {hi} ? a0 - {b} : 0))"


def _swish(k):
    """x * sigmoid(alpha x); in float with Sigmoid's own kernel, so that alpha 1 (what
    passes/fuse_silu.py makes of x * Sigmoid(x)) computes the unfused graph's values exactly."""
    alpha = float(k.node.attr("alpha"))
    if k.cc == "float":
        return "(a0 * onnxc_vsigmoidf(a0))" if alpha == 1.0 else f"(a0 * onnxc_vsigmoidf({k.lit(alpha)} * a0))"
    return f"(a0 * (1 / (1 + exp({k.lit(-alpha)} * a0))))"


def _gelu(k):
    if attr_enum(k.node, "approximate", ("none", "tanh")) == "none":
        return f"({k.lit(0.5)} * a0 * (1 + erf(a0 * {k.lit(math.sqrt(0.5))})))"
    c = k.lit(math.sqrt(2 / math.pi))
    return f"({k.lit(0.5)} * a0 * (1 + tanh({c} * (a0 + {k.lit(0.044715)} * a0 * a0 * a0))))"


# name: expression, or fn(K) -> expression
UNARY = {
    "Relu": "(a0 < 0 ? 0 : a0)",
    "Sigmoid": lambda k: ("onnxc_vsigmoidf(a0)" if k.cc == "float" else
                          "(a0 >= 0 ? 1 / (1 + exp(-a0)) : exp(a0) / (1 + exp(a0)))"),
    "Tanh": "tanh(a0)",
    "Exp": "exp(a0)",
    "Log": "log(a0)",
    "Sqrt": "sqrt(a0)",
    "Abs": _abs,
    "Neg": _neg,
    "Sign": _sign,
    "Floor": "floor(a0)",
    "Ceil": "ceil(a0)",
    "Round": "rint(a0)",           # the default rounding mode: half to even, as np.round
    "Reciprocal": "1 / a0",
    "Erf": "erf(a0)",
    "Sin": "sin(a0)", "Cos": "cos(a0)", "Tan": "tan(a0)",
    "Asin": "asin(a0)", "Acos": "acos(a0)", "Atan": "atan(a0)",
    "Sinh": "sinh(a0)", "Cosh": "cosh(a0)",
    "Asinh": "asinh(a0)", "Acosh": "acosh(a0)", "Atanh": "atanh(a0)",
    "Softplus": _softplus("a0"),
    "Softsign": "(a0 / (1 + fabs(a0)))",
    "LeakyRelu": lambda k: f"(a0 < 0 ? {k.attr('alpha')} * a0 : a0)",
    "Elu": lambda k: f"(a0 < 0 ? {k.attr('alpha')} * expm1(a0) : a0)",
    "Celu": lambda k: f"(a0 > 0 ? a0 : {k.attr('alpha')} * expm1(a0 / {k.attr('alpha')}))",
    "Selu": lambda k: f"((a0 > 0 ? a0 : {k.attr('alpha')} * expm1(a0)) * {k.attr('gamma')})",
    "ThresholdedRelu": lambda k: f"(a0 > {k.attr('alpha')} ? a0 : 0)",
    "HardSigmoid": lambda k: _clip01(f"({k.attr('alpha')} * a0 + {k.attr('beta')})"),
    "HardSwish": lambda k: "(a0 * " + _clip01(f"({k.lit(1 / 6)} * a0 + {k.lit(0.5)})") + ")",
    "Mish": f"(a0 * tanh({_softplus('a0')}))",
    "Swish": _swish,
    "Gelu": _gelu,
    "Shrink": _shrink,
    "IsNaN": "(a0 != a0)",
    "IsInf": _isinf,
    "Not": "!a0",
    "BitwiseNot": "~a0",
}

BINARY = {
    "Add": lambda k: k.wrap("+"),
    "Sub": lambda k: k.wrap("-"),
    "Mul": lambda k: k.wrap("*"),
    "Div": _div,
    "Pow": _pow,
    "Mod": _mod,
    "PRelu": lambda k: f"(a0 < 0 ? {k.wrap('*')} : a0)" if k.et.is_signed else "a0",  # is_signed: floats too
    "BitShift": _bitshift,
    "BitwiseAnd": "(a0 & a1)", "BitwiseOr": "(a0 | a1)", "BitwiseXor": "(a0 ^ a1)",
    "And": "(a0 && a1)", "Or": "(a0 || a1)", "Xor": "(a0 != a1)",
    "Equal": lambda k: "(strcmp(a0, a1) == 0)" if k.et.name == "string" else "a0 == a1",
    "Less": "a0 < a1",
    "Greater": "a0 > a1",
    "LessOrEqual": "a0 <= a1",
    "GreaterOrEqual": "a0 >= a1",
}

VARIADIC = {"Max": _minmax("max"), "Min": _minmax("min"), "Sum": lambda k: k.wrap("+"),
            "Mean": "a0 + a1"}

# ops that only select one of their inputs: they move stored values, never convert them
SELECT = {"Where": "(a0 ? a1 : a2)"}


class Elementwise(OpSpec):
    template = "elementwise.c.j2"
    headers = ("onnxc_math.h", "onnxc_vmath.h")
    expr = "a0"
    raw = False             # operate on stored values (no load/store conversion)

    def infer(self, node):
        types = schema_types(node)
        return [(types[0], broadcast(node, self.operand_shapes(node), runtime_ones=True))]

    def operand_shapes(self, node) -> list:
        """The shapes that broadcast together, in operand order."""
        return [node.inputs[i].shape for i in self.operands(node)]

    def rule(self, node, k: K) -> str:
        return self.expr(k) if callable(self.expr) else self.expr

    def operands(self, node):
        return [i for i, v in enumerate(node.inputs) if v is not None]

    def params(self, node):
        ins = [node.inputs[i] for i in self.operands(node)]
        out = node.outputs[0]
        k = K(node, ins[-1].etype if self.raw else ins[0].etype)
        p = {**loop_params(out.shape, self.operand_shapes(node)), "expr": c_math(self.rule(node, k), k.cc),
             "operands": self.operands(node), "raw": self.raw, "store": None}
        if k.f64 and not out.etype.is_float:
            # a float64 result (Pow int**float, Shrink on ints) -> integer: numpy's guarded cast
            p["store"], p["rtype"] = convert("r", D["double"], out.etype), "double"
        return p

    def inplace(self, node):
        out = node.outputs[0]
        return [(0, i) for i, v in enumerate(node.inputs)
                if v is not None and v.shape == out.shape and v.etype == out.etype]


class Variadic(Elementwise):
    """Max/Min/Sum/Mean over any number of inputs: the binary expression folded left."""

    def rule(self, node, k):
        n = len(self.operands(node))
        e = super().rule(node, k)
        acc = "a0"
        for i in range(1, n):
            acc = "(" + e.replace("a0", "\0").replace("a1", f"a{i}").replace("\0", acc) + ")"
        return f"({acc} / {n})" if self.op_type == "Mean" else acc


class PReluSpec(Elementwise):
    """PRelu: slope broadcasts to X's shape (unidirectionally)."""

    def operand_shapes(self, node) -> list:
        x, slope = node.inputs[0], node.inputs[1]
        if node.opset < 7 and slope.rank == 1 and x.rank >= 2 and slope.shape[0] == x.shape[1] != 1:
            # before opset 7 a 1-D slope is per channel (axis 1), not numpy-broadcast
            return [x.shape, (slope.shape[0],) + (1,) * (x.rank - 2)]
        return super().operand_shapes(node)

    def infer(self, node):
        (et, shape), = super().infer(node)
        x = node.inputs[0]
        if tuple(shape) != tuple(x.shape):
            raise fail(node, f"slope of shape {node.inputs[1].shape} does not broadcast to X's shape {x.shape}")
        return [(et, x.shape)]


_SINCE: dict[str, int] = {}
for _s in onnx.defs.get_all_schemas_with_history():
    if _s.domain == "":
        _SINCE[_s.name] = min(_SINCE.get(_s.name, _s.since_version), _s.since_version)


def _first_since(name: str) -> int:
    return _SINCE[name]


def _make(name, base, expr, **extra):
    cls = type(name, (base,), {"op_type": name, "since": _first_since(name),
                               "expr": staticmethod(expr) if callable(expr) else expr, **extra})
    register(cls)
    return cls


for _n, _e in UNARY.items():
    _make(_n, Elementwise, _e)
for _n, _e in BINARY.items():
    _make(_n, PReluSpec if _n == "PRelu" else Elementwise, _e)
for _n, _e in VARIADIC.items():
    _make(_n, Variadic, _e)
for _n, _e in SELECT.items():
    _make(_n, Elementwise, _e, raw=True)


@register
class Clip(Elementwise):
    """Clip: bounds are attributes before opset 11, optional scalar inputs from 11."""
    op_type = "Clip"

    def infer(self, node):
        x = node.inputs[0]
        schema_types(node)
        for i in (1, 2):
            b = node.input(i)
            if b is not None and b.shape not in ((), (1,)):
                raise fail(node, f"input {i} (bound) must be a scalar, got shape {b.shape}")
        return [(x.etype, x.shape)]

    def rule(self, node, k):
        if node.opset < 11:
            lo, hi = k.lit(node.attr("min", float("-inf"))), k.lit(node.attr("max", float("inf")))
        else:
            names = iter(f"a{j}" for j in range(1, 3))
            lo = next(names) if node.input(1) is not None else None
            hi = next(names) if node.input(2) is not None else None
        expr = "a0"
        if lo is not None:
            expr = f"(a0 < {lo} ? {lo} : a0)"
        if hi is not None:
            expr = f"({expr} > {hi} ? {hi} : {expr})"
        return expr

    def inplace(self, node):
        return [(0, 0)]
