"""String-producing operators: StringConcat (20), StringSplit (20), StringNormalizer (10).

Their output strings are new bytes: the kernels size them in a first pass and take them from the
run-time heap (onnxc_halloc; ONNXC_ERR_HEAP when it is full: the session grows it and runs again).
Semantics are onnx.reference's:

- StringConcat: numpy-broadcast concatenation.
- StringSplit: Python's ``str.split(delimiter, maxsplit)`` (no or empty delimiter: runs of Python
  whitespace, ``str.isspace``), padded with "" to the largest number of pieces, a run-time dim with
  no compile-time bound (the kernel allocates that output itself).
- StringNormalizer: accents stripped (NFKD, combining marks dropped, as onnx.reference does),
  stopwords removed from the " "-separated words (before the case change when case-sensitive,
  after it otherwise, against stopwords changed the same way), Python's ``str.lower``/``upper``
  (full mappings, Final_Sigma), then empty strings dropped from a [C] or [1, C] input ("" alone
  when none is left). The mappings are tables generated here from Python's unicodedata, so they
  match onnx.reference under the same Python. ``locale`` is accepted and ignored: the mappings are
  locale-independent, as Python's (behaves as en_US).
"""
from __future__ import annotations

import functools
import unicodedata

from .. import cstring, dtypes, dynamic
from ..symbolic import dmax, product
from .common import attr_enum, broadcast, fail, loop_params
from .ml_common import c_array
from .registry import OpSpec, register

_SURROGATES = range(0xD800, 0xE000)
_HANGUL = range(0xAC00, 0xD7A4)     # decomposed by the kernel (algorithmic)


def _require_strings(node, n):
    for i in range(n):
        v = node.input(i)
        if v is None:
            raise fail(node, f"required input {i} is missing")
        if v.etype is not dtypes.STRING:
            raise fail(node, f"input {i} must be a string tensor, got {v.etype.name}")


@register
class StringConcat(OpSpec):
    op_type = "StringConcat"
    since = 20
    template = "string_concat.c.j2"
    headers = ("onnxc_strings.h",)
    heap = True

    def infer(self, node):
        _require_strings(node, 2)
        a, b = node.inputs[0], node.inputs[1]
        return [(dtypes.STRING, broadcast(node, [a.shape, b.shape], runtime_ones=True))]

    def params(self, node):
        a, b = node.inputs[0], node.inputs[1]
        out = node.outputs[0].shape
        return {**loop_params(out, [a.shape, b.shape]), "n": product(out)}


@register
class StringSplit(OpSpec):
    op_type = "StringSplit"
    since = 20
    template = "string_split.c.j2"
    headers = ("onnxc_strings.h",)
    heap = True

    def infer(self, node):
        _require_strings(node, 1)
        x = node.inputs[0]
        d = dynamic.assigned(node, None)   # the most pieces of any element: no bound before the run
        node.split_count = d
        return [(dtypes.STRING, tuple(x.shape) + (d,)), (dtypes.INT64, tuple(x.shape))]

    def params(self, node):
        delim = node.attr("delimiter")
        maxsplit = node.attr("maxsplit")
        maxsplit = -1 if maxsplit is None else int(maxsplit)
        if maxsplit < 0:
            maxsplit = -1        # Python: any negative maxsplit means no limit
        sep = delim.encode("utf-8") if delim else None
        n = product(node.inputs[0].shape)
        # an empty input's Y is empty whatever the dim: planned (0 bytes), not allocated here
        return {"n": n, "count": node.split_count, "alloc": not (isinstance(n, int) and n == 0),
                "sep": cstring.literal(sep) if sep else "NULL", "seplen": len(sep) if sep else 0,
                "maxsplit": f"INT64_C({maxsplit})"}


# ---- StringNormalizer -------------------------------------------------------------------------

def _strip(c: str) -> str:
    return "".join(x for x in unicodedata.normalize("NFKD", c) if not unicodedata.combining(x))


@functools.lru_cache(maxsize=None)
def _table(kind: str) -> tuple[list[int], list[int], bytes]:
    """Every non-ASCII code point that Python's mapping changes: (cps, pool offsets, pool).
    kind: "strip" (onnx.reference's strip_accents_unicode, Hangul left to the kernel), "lower",
    "upper"."""
    cps, offs, pool = [], [0], bytearray()
    for cp in range(0x80, 0x110000):
        if cp in _SURROGATES:
            continue
        c = chr(cp)
        if kind == "strip":
            if cp in _HANGUL or (not unicodedata.decomposition(c) and not unicodedata.combining(c)):
                continue
            m = _strip(c)
        else:
            m = c.lower() if kind == "lower" else c.upper()
        if m != c:
            cps.append(cp)
            pool += m.encode("utf-8")
            offs.append(len(pool))
    return cps, offs, bytes(pool)


@functools.lru_cache(maxsize=None)
def _sigma_classes() -> list[int]:
    """[lo, hi, class] runs for Python's Final_Sigma rule, found through str.lower itself:
    class 1 cased (and not case-ignorable), class 2 case-ignorable."""
    def final(s):
        return s.lower()[-1] == "\u03c2"
    runs: list[list[int]] = []
    for cp in range(0x110000):
        if cp in _SURROGATES:
            continue
        c = chr(cp)
        cls = 1 if final(c + "\u03a3") else 2 if final("A" + c + "\u03a3") else 0
        if not cls:
            continue
        if runs and runs[-1][2] == cls and runs[-1][1] == cp - 1:
            runs[-1][1] = cp
        else:
            runs.append([cp, cp, cls])
    return [x for r in runs for x in r]


def _map_params(kind: str) -> dict:
    cps, offs, pool = _table(kind)
    return {"n": len(cps), "cps": c_array(cps, "int32_t"), "offs": c_array(offs, "int32_t"),
            "pool": cstring.literal(pool), "ascii": {"strip": 0, "lower": 1, "upper": 2}[kind],
            "hangul": int(kind == "strip"), "sigma": int(kind == "lower")}


def _stops_params(words: list[str]) -> dict:
    enc = sorted({w.encode("utf-8") for w in words}, key=lambda b: (len(b), b))
    return {"n": len(enc), "words": ",\n    ".join(cstring.literal(w) for w in enc) or "NULL",
            "lens": c_array([len(w) for w in enc], "int32_t")}


@register
class StringNormalizer(OpSpec):
    op_type = "StringNormalizer"
    since = 10
    template = "string_normalizer.c.j2"
    headers = ("onnxc_strings.h",)
    heap = True

    def _spec(self, node):
        x = node.inputs[0]
        _require_strings(node, 1)
        if x.rank not in (1, 2):
            raise fail(node, f"input X must be [C] or [1, C], got rank {x.rank}")
        case = attr_enum(node, "case_change_action", ("LOWER", "UPPER", "NONE"))
        sensitive = int(node.attr("is_case_sensitive", 0))
        if sensitive not in (0, 1):
            raise fail(node, f"attribute is_case_sensitive={sensitive} must be 0 or 1")
        locale = node.attr("locale")
        if locale is not None and not isinstance(locale, str):
            raise fail(node, "attribute locale must be a string")
        return x, case, sensitive, list(node.attr("stopwords") or [])

    def infer(self, node):
        x, *_ = self._spec(node)
        c = x.shape[-1]
        if x.rank == 2 and isinstance(x.shape[0], int) and x.shape[0] != 1:
            node.norm_count = None      # [N, C], N != 1: nothing is dropped
            return [(dtypes.STRING, tuple(x.shape))]
        n = dynamic.assigned(node, dmax(c, 1))   # empty strings dropped; "" alone if none left
        node.norm_count = n
        return [(dtypes.STRING, (n,) if x.rank == 1 else (x.shape[0], n))]

    def params(self, node):
        x, case, sensitive, stops = self._spec(node)
        if case == "LOWER" and not sensitive:
            stops = [w.lower() for w in stops]
        elif case == "UPPER" and not sensitive:
            stops = [w.upper() for w in stops]
        return {"total": product(x.shape), "cols": x.shape[-1], "count": node.norm_count,
                "rows": x.shape[0] if x.rank == 2 else None,
                "strip": _map_params("strip"),
                "case": _map_params(case.lower()) if case != "NONE" else None,
                "sigma": c_array(_sigma_classes(), "int32_t") if case == "LOWER" else None,
                "nsigma": len(_sigma_classes()) // 3,
                "stops": _stops_params(stops) if stops else None, "sensitive": bool(sensitive)}
