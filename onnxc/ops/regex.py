"""RegexFullMatch (opset 20): bool tensor telling whether each string fully matches `pattern`.

The RE2-syntax pattern is compiled here, at compile time, into a byte-level NFA program
(regex_compile.py), and into a DFA when that stays small; the C side gets only numbers in
constant tables and runs runtime_c/onnxc_regex.h over each string. An unsupported or invalid pattern is rejected with the
position in it.
"""
from __future__ import annotations

from .. import dtypes
from ..symbolic import product
from .common import fail
from .ml_common import c_array
from .regex_compile import RegexError, compile_pattern, to_dfa
from .registry import OpSpec, register


def _program(node):
    pattern = node.attr("pattern")
    if pattern is None:
        raise fail(node, "required attribute pattern is missing")
    try:
        return compile_pattern(pattern)
    except RegexError as e:
        raise fail(node, f"attribute pattern {pattern!r}: {e}") from None


@register
class RegexFullMatch(OpSpec):
    op_type = "RegexFullMatch"
    since = 20
    template = "regex_full_match.c.j2"
    headers = ("onnxc_regex.h",)

    def infer(self, node):
        x = node.inputs[0]
        if x.etype is not dtypes.STRING:
            raise fail(node, f"input X must be a string tensor, got {x.etype.name}")
        _program(node)
        return [(dtypes.BOOL, x.shape)]

    def params(self, node):
        entry, insts = _program(node)
        n = product(node.inputs[0].shape)
        dfa = to_dfa(entry, insts)
        if dfa is not None:
            cls, ncls, delta, accept, start = dfa
            return {"n": n, "dfa": True, "cls": c_array(cls, "uint8_t"), "ncls": ncls,
                    "delta": c_array(delta, "uint16_t"), "nstates": len(accept),
                    "acc": c_array(accept, "uint8_t"), "start": start}
        rows = [f"{{{op}, {lo}, {hi}, {x}, {y}}}" for op, lo, hi, x, y in insts]
        prog = ",\n    ".join(", ".join(rows[i:i + 6]) for i in range(0, len(rows), 6))
        return {"n": n, "dfa": False, "prog": prog, "size": len(insts), "entry": entry}
