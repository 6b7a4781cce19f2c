"""Ops whose output *size* depends on the data: NonZero.

Each defines a run-time dim (onnxc.dynamic.assigned) that its kernel sets while it runs; memory
is planned for the upper bound (every element selected), and the caller reads the actual
output shape after the run.
"""
from __future__ import annotations

from .. import dtypes, dynamic
from ..symbolic import product
from .common import fail
from .registry import OpSpec, register

# element is non-zero: floats compare as numbers (NaN counts), packed low-precision types by bits
_NONZERO_BITS = {"float16": "0x7fff", "bfloat16": "0x7fff", "float8e4m3fn": "0x7f", "float8e5m2": "0x7f",
                 "float8e4m3fnuz": "0xff", "float8e5m2fnuz": "0xff", "float8e8m0": "0xff"}


@register
class NonZero(OpSpec):
    op_type = "NonZero"
    since = 9
    template = "nonzero.c.j2"

    def infer(self, node):
        x = node.inputs[0]
        if x.etype is dtypes.STRING or x.etype.name in ("int4", "uint4", "int2", "uint2", "float4e2m1"):
            raise fail(node, f"input of element type {x.etype.name} is not supported")
        n = dynamic.assigned(node, product(x.shape))
        node.nonzero_count = n
        return [(dtypes.INT64, (max(x.rank, 1), n))]

    def params(self, node):
        x = node.inputs[0]
        mask = _NONZERO_BITS.get(x.etype.name)
        test = f"(xp[i] & {mask}) != 0" if mask else "xp[i] != 0"
        return {"count": node.nonzero_count, "test": test, "dims": list(x.shape) or [1]}
