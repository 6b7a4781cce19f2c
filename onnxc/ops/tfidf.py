"""TfIdfVectorizer (opset 9): n-gram counts of int32/int64/string rows against a constant pool.

The pool is turned into a trie at compile time exactly as onnx.reference / onnxruntime build it
(n-gram ids are numbered over every gram size, but only sizes in [min_gram_length,
max_gram_length] are inserted; a repeated n-gram keeps its last id). The trie is emitted as flat
constant tables: the children of each node are contiguous and sorted by key (int64, or the UTF-8
bytes of strings, strcmp order), so the kernel walks it with binary searches. Pool strings reach
C only as cstring.literal text.
"""
from __future__ import annotations

from .. import cstring, dtypes
from ..symbolic import product
from .common import attr_enum, fail
from .ml_common import c_array, check_len
from .registry import OpSpec, register

STRING, INT64, INT32 = dtypes.STRING, dtypes.INT64, dtypes.BY_NAME["int32"]
MODES = ("TF", "IDF", "TFIDF")
EXACT_FLOAT = 1 << 24     # counts below this are exact when accumulated in float
DENSE_MAX = 1 << 20       # largest direct index of the trie's root keys


class _Trie:
    """Node of the n-gram trie: children by key, id 0 when the path is no n-gram."""
    __slots__ = ("id", "kids")

    def __init__(self):
        self.id, self.kids = 0, {}


class _Model:
    """The node's attributes checked and its trie flattened into C tables."""

    def __init__(self, node):
        x = node.inputs[0]
        if x.etype not in (STRING, INT32, INT64):
            raise fail(node, f"input X of element type {x.etype.name} is not supported "
                       "(string, int32, int64)")
        if x.rank > 2:
            raise fail(node, f"input X must be 1-D [C] or 2-D [B, C], got rank {x.rank}")
        self.mode = attr_enum(node, "mode", MODES)
        self.min_n = int(_req(node, "min_gram_length"))
        self.max_n = int(_req(node, "max_gram_length"))
        self.max_skip = int(_req(node, "max_skip_count"))
        if self.min_n < 1 or self.max_n < self.min_n:
            raise fail(node, f"min_gram_length={self.min_n} and max_gram_length={self.max_n} must satisfy "
                       "1 <= min_gram_length <= max_gram_length")
        if self.max_skip < 0:
            raise fail(node, f"max_skip_count={self.max_skip} must be >= 0")
        counts = [int(v) for v in _req(node, "ngram_counts")]
        indexes = [int(v) for v in _req(node, "ngram_indexes")]
        if not indexes:
            raise fail(node, "attribute ngram_indexes is empty")
        if min(indexes) < 0:
            raise fail(node, f"attribute ngram_indexes holds a negative index {min(indexes)}")
        check_len(node, "ngram_indexes", len(indexes))
        self.out_size = max(indexes) + 1
        check_len(node, "output size (max(ngram_indexes) + 1)", self.out_size)
        ints, strs = node.attr("pool_int64s"), node.attr("pool_strings")
        if (ints is None) == (strs is None):
            raise fail(node, "exactly one of the attributes pool_int64s and pool_strings must be set")
        self.is_str = strs is not None
        if self.is_str != (x.etype is STRING):
            raise fail(node, f"input X of element type {x.etype.name} needs attribute "
                       f"{'pool_strings' if x.etype is STRING else 'pool_int64s'}")
        pool = [s.encode("utf-8") for s in strs] if self.is_str else [int(v) for v in ints]
        check_len(node, "pool", len(pool))
        w = node.attr("weights")
        self.weights = [float(v) for v in w] if w else []
        if self.weights and self.mode != "TF" and len(self.weights) < self.out_size:
            raise fail(node, f"attribute weights has {len(self.weights)} values, fewer than the output "
                       f"size {self.out_size} (max(ngram_indexes) + 1)")
        if any(not 0 <= c <= len(pool) for c in counts) or counts != sorted(counts):
            raise fail(node, f"attribute ngram_counts={counts} must be non-decreasing start offsets "
                       f"within the pool of {len(pool)} entries")
        self.root = self._build(node, pool, counts, indexes)

    def _build(self, node, pool, counts, indexes) -> _Trie:
        root, ngram_id = _Trie(), 1
        for i, start in enumerate(counts):
            size = i + 1
            end = counts[i + 1] if i + 1 < len(counts) else len(pool)
            n = (end - start) // size if end > start else 0
            if not self.min_n <= size <= self.max_n:
                ngram_id += n
                continue
            for g in range(n):
                t = root
                for key in pool[start + g * size:start + (g + 1) * size]:
                    t = t.kids.setdefault(key, _Trie())
                if ngram_id > len(indexes):
                    raise fail(node, f"n-gram {ngram_id} of the pool has no entry in ngram_indexes "
                               f"({len(indexes)} entries)")
                t.id = ngram_id
                ngram_id += 1
        return root

    def tables(self, indexes: list[int]) -> dict:
        """Breadth-first flattening: entry j = (key, output index or -1, first child, child count);
        the children of each node are contiguous and sorted."""
        def kids(t):   # a key holding NUL never matches a C string: drop its subtree
            return sorted((k, c) for k, c in t.kids.items() if not (self.is_str and b"\0" in k))

        keys, outs, first, count = [], [], [], []
        queue, depth, nroot = [self.root], 0, len(kids(self.root))
        nxt_start = nroot   # index the next block of children will start at
        while queue:
            nxt = []
            for t in queue:
                for k, c in kids(t):
                    keys.append(k)
                    outs.append(indexes[c.id - 1] if c.id else -1)
                    n = len(kids(c))
                    first.append(nxt_start)
                    count.append(n)
                    nxt_start += n
                    nxt.append(c)
            depth += bool(nxt)
            queue = nxt
        return {"keys": keys, "outs": outs, "first": first, "count": count, "nroot": nroot,
                "depth": depth}


def _req(node, name):
    v = node.attr(name)
    if v is None:
        raise fail(node, f"required attribute {name} is missing")
    return v


@register
class TfIdfVectorizer(OpSpec):
    op_type = "TfIdfVectorizer"
    since = 9
    template = "tfidf.c.j2"
    headers = ("onnxc_ml.h",)

    def infer(self, node):
        m = _Model(node)
        x = node.inputs[0]
        shape = (x.shape[0], m.out_size) if x.rank == 2 else (m.out_size,)
        return [(dtypes.FLOAT, shape)]

    def _rows_cols(self, node):
        x = node.inputs[0]
        if x.rank == 2:
            return x.shape[0], x.shape[1]
        return 1, (x.shape[0] if x.rank == 1 else 1)

    def _direct(self, node, m: _Model, depth: int) -> bool:
        """Counts accumulate in the float output when they provably stay exact there."""
        _, cols = self._rows_cols(node)
        return isinstance(cols, int) and cols * min(m.max_skip + 1, cols) * max(depth, 1) < EXACT_FLOAT

    def scratch(self, node):
        m = _Model(node)
        t = m.tables([int(v) for v in node.attr("ngram_indexes")])
        if self._direct(node, m, t["depth"]):
            return 0
        rows, _ = self._rows_cols(node)
        return product([rows, m.out_size, 8])

    def params(self, node):
        m = _Model(node)
        indexes = [int(v) for v in node.attr("ngram_indexes")]
        t = m.tables(indexes)
        rows, cols = self._rows_cols(node)
        if m.is_str:
            keys = ",\n    ".join(cstring.literal(k) for k in t["keys"]) or '""'
        else:
            keys = c_array(t["keys"], "int64_t")
        weighted = bool(m.weights) and m.mode != "TF"   # TF ignores weights (as the reference)
        # integer root keys in a compact range: a direct index replaces the root's binary search
        dense = None
        if not m.is_str and t["nroot"]:
            lo, hi = t["keys"][0], t["keys"][t["nroot"] - 1]
            if hi - lo < max(4 * t["nroot"], 256) and hi - lo < DENSE_MAX:
                idx = [-1] * (hi - lo + 1)
                for j in range(t["nroot"]):
                    idx[t["keys"][j] - lo] = j
                dense = {"lo": c_array([lo], "int64_t"), "span": hi - lo + 1, "idx": c_array(idx, "int32_t")}
        return {
            "rows": rows, "cols": cols, "out": m.out_size, "is_str": m.is_str,
            "kct": "char *const" if m.is_str else "int64_t", "ktab": keys,
            "outs": c_array(t["outs"], "int64_t"), "first": c_array(t["first"], "int64_t"),
            "count": c_array(t["count"], "int64_t"), "nroot": t["nroot"],
            # gram lengths beyond the trie's depth find nothing; so do skips past the row length
            "min_n": min(m.min_n, t["depth"] + 1), "max_n": min(m.max_n, t["depth"]),
            "nskip": min(m.max_skip + 1, cols) if isinstance(cols, int) else min(m.max_skip + 1, 1 << 62),
            "mode": m.mode, "weighted": weighted,
            "weights": c_array(m.weights[:m.out_size], "float") if weighted else "0",
            "direct": self._direct(node, m, t["depth"]), "dense": dense,
        }
