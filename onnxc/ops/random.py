"""Random generators: RandomUniform, RandomNormal, RandomUniformLike, RandomNormalLike,
Bernoulli, Multinomial.

Numbers come from a counter-based generator in generated C: element i of a node draws
splitmix64(key + (i + 1) * golden ratio), key from the seed attribute (or, without one, from the
node's output name), so a node gives the same values on every run and every thread count. The
values cannot match onnx.reference or onnxruntime (each has its own generator): only shapes, types
and distributions are comparable. Uniform: low + (high - low) * u, u in [0, 1) with 53 bits;
Normal: Box-Muller; Bernoulli: 1 where u < p (as its function body, Greater(p, u)); Multinomial:
inverse CDF over softmax(logits) per row.
"""
from __future__ import annotations

import hashlib
import struct

from .. import dtypes
from .common import attr_ints, fail
from .registry import OpSpec, register

FLOATS = ("float", "double", "float16", "bfloat16")
MAX_ELEMENTS = 1 << 34


def _key(node) -> str:
    seed = node.attr("seed")
    data = struct.pack("<d", float(seed)) if seed is not None else node.outputs[0].cname.encode()
    return f"0x{int.from_bytes(hashlib.sha256(data).digest()[:8], 'little'):016x}u"


def _etype(node, name, default, allowed):
    code = node.attr(name)
    et = default if code is None else dtypes.from_onnx(int(code), node.describe())
    if et.name not in allowed:
        raise fail(node, f"attribute {name}: element type {et.name} is not allowed here "
                         f"({', '.join(allowed)})")
    return et


class _Random(OpSpec):
    template = "random.c.j2"
    dist = "uniform"
    like = False

    def _out(self, node):
        if self.like:
            x = node.inputs[0]
            return _etype(node, "dtype", x.etype, FLOATS), tuple(x.shape)
        shape = attr_ints(node, "shape")
        if shape is None or any(d < 0 for d in shape):
            raise fail(node, f"attribute shape={shape} must be given, with dims >= 0")
        n = 1
        for d in shape:
            n *= d
        if n > MAX_ELEMENTS:
            raise fail(node, f"attribute shape={shape} has too many elements")
        return _etype(node, "dtype", dtypes.BY_NAME["float"], FLOATS), tuple(shape)

    def infer(self, node):
        return [self._out(node)]

    def params(self, node):
        if self.dist == "uniform":
            a, b = float(node.attr("low", 0.0)), float(node.attr("high", 1.0))
            return {"dist": "uniform", "key": _key(node), "a": repr(a), "b": repr(b - a)}
        return {"dist": "normal", "key": _key(node), "a": repr(float(node.attr("mean", 0.0))),
                "b": repr(float(node.attr("scale", 1.0)))}


@register
class RandomUniform(_Random):
    op_type = "RandomUniform"


@register
class RandomNormal(_Random):
    op_type = "RandomNormal"
    dist = "normal"


@register
class RandomUniformLike(_Random):
    op_type = "RandomUniformLike"
    like = True


@register
class RandomNormalLike(_Random):
    op_type = "RandomNormalLike"
    dist = "normal"
    like = True


@register
class Bernoulli(OpSpec):
    op_type = "Bernoulli"
    since = 15
    template = "random.c.j2"

    def infer(self, node):
        x = node.inputs[0]
        if x.etype.name not in FLOATS:
            raise fail(node, f"input of element type {x.etype.name} must be a float type")
        allowed = FLOATS + ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bool")
        return [(_etype(node, "dtype", x.etype, allowed), tuple(x.shape))]

    def params(self, node):
        return {"dist": "bernoulli", "key": _key(node)}


@register
class Multinomial(OpSpec):
    """[batch, classes] unnormalized log-probabilities -> [batch, sample_size] class indices."""
    op_type = "Multinomial"
    since = 7
    template = "random.c.j2"

    def infer(self, node):
        x = node.inputs[0]
        if x.etype.name not in FLOATS or x.rank != 2:
            raise fail(node, "input must be a 2-D float tensor [batch, classes]")
        s = int(node.attr("sample_size", 1))
        if s < 1 or s > 1 << 31:
            raise fail(node, f"attribute sample_size={s} must be >= 1")
        et = _etype(node, "dtype", dtypes.BY_NAME["int32"], ("int32", "int64"))
        return [(et, (x.shape[0], s))]

    def params(self, node):
        x = node.inputs[0]
        return {"dist": "multinomial", "key": _key(node), "batch": x.shape[0], "classes": x.shape[1],
                "samples": int(node.attr("sample_size", 1))}
