"""Tree ensembles: TreeEnsembleClassifier, TreeEnsembleRegressor (ml opsets 1 and 3, list or
*_as_tensor attributes) and TreeEnsemble (ml opset 5, set membership).

All three are parsed into one ``Forest``: per tree, nodes renumbered in depth-first order with
the true child next (the common path stays in the same cache lines), packed into one array of
{threshold, feature|mode|missing, true child, false child}; a child < 0 is leaf ~child. The C
kernel walks each row through every tree (OpenMP over rows) and aggregates as onnxruntime does
(float or double, same order, same binary-class rules). Nothing is allocated per call.
"""
from __future__ import annotations

import numpy as np

from .. import dtypes
from ..errors import NotImplemented as OrtNotImplemented
from ..symbolic import product
from .common import fail
from .ml_common import (HEADERS, ML, Labels, c_array, check_len, floats, ints, numeric_input,
                        post_transform, rows_features, strings)
from .registry import OpSpec, register

MODES = {"BRANCH_LEQ": 0, "BRANCH_LT": 1, "BRANCH_GTE": 2, "BRANCH_GT": 3, "BRANCH_EQ": 4, "BRANCH_NEQ": 5,
         "BRANCH_MEMBER": 6, "LEAF": -1}
AGG = {"AVERAGE": 0, "SUM": 1, "MIN": 2, "MAX": 3}
# TreeEnsemble's post_transform ints -> ml_common numbering. The specification says 1 SOFTMAX,
# 2 LOGISTIC; onnxruntime (1.31) reads them in its own enum order (1 LOGISTIC, 2 SOFTMAX): as it.
POST5 = {0: 0, 1: 1, 2: 2, 3: 3, 4: 4}
MAX_FEATURE = 1 << 24
MISSING_BIT = 1 << 28
GROUP = 10                # trees walked in lockstep by the complete-tree kernel (as many as registers hold)
COMPLETE_MAX_DEPTH = 10


class Forest:
    """Trees laid out for the kernel. ``leaves``: list of [(target, weight)] per leaf."""

    def __init__(self, node):
        self.node = node
        self.feat, self.thr, self.mode, self.miss, self.yes, self.no = [], [], [], [], [], []
        self.leaves: list[list[tuple[int, float]]] = []
        self.roots: list[int] = []
        self.sets: list[list[float]] = []

    def add_tree(self, root, kind, children, split, leaf_weights):
        """Depth-first from root. kind(i) -> 'leaf' | 'node'; children(i) -> ((true, is_leaf),
        (false, is_leaf)); split(i) -> (feature, mode, threshold or set, missing_true)."""
        limit = 1 << 31
        code = self._leaf(leaf_weights(root)) if kind(root) == "leaf" else None
        if code is not None:
            self.roots.append(code)
            return
        self.roots.append(len(self.feat))
        stack = [(root, None, None)]   # (source node, parent packed index, which side)
        seen = set()
        while stack:
            src, parent, side = stack.pop()
            if kind(src) == "leaf":
                idx = self._leaf(leaf_weights(src))
            else:
                if src in seen:
                    raise fail(self.node, f"node {src} is reached twice: the nodes do not form trees")
                seen.add(src)
                idx = len(self.feat)
                if idx >= limit:
                    raise fail(self.node, "too many nodes")
                f, m, v, miss = split(src)
                if not 0 <= f < MAX_FEATURE:
                    raise fail(self.node, f"feature id {f} is out of range")
                if m == 6:
                    self.sets.append(sorted(set(float(x) for x in v)))
                    v = len(self.sets) - 1
                self.feat.append(f)
                self.mode.append(m)
                self.thr.append(v)
                self.miss.append(bool(miss))
                self.yes.append(0)
                self.no.append(0)
                (t, tl), (fa, fl) = children(src)
                stack.append((fa, idx, "no"))
                stack.append((t, idx, "yes"))   # popped first: the true child follows its parent
            if parent is not None:
                (self.yes if side == "yes" else self.no)[parent] = idx

    def _leaf(self, weights) -> int:
        self.leaves.append(weights)
        return ~(len(self.leaves) - 1)

    # ---- what the kernel needs -----------------------------------------------------------
    def layout(self, n_out: int, tt: str) -> dict:
        node = self.node
        n_leaves = len(self.leaves)
        check_len(node, "tree nodes", len(self.feat))
        for lw in self.leaves:
            for t, _ in lw:
                if not 0 <= t < n_out:
                    raise fail(node, f"leaf target/class id {t} is out of range [0, {n_out})")
        counts = {len(lw) for lw in self.leaves}
        if counts == {1}:
            kind = "single1" if n_out == 1 else "single"
        elif counts == {n_out} and all([t for t, _ in lw] == list(range(n_out)) for lw in self.leaves):
            kind = "dense"
        else:
            kind = "csr"
        modes = set(self.mode)
        packed = [f | (m << 24) | (MISSING_BIT if miss else 0)
                  for f, m, miss in zip(self.feat, self.mode, self.miss)]
        thr = [float(v) for v in self.thr]
        p = {
            "n_nodes": len(self.feat), "n_trees": len(self.roots), "n_leaves": n_leaves,
            "roots": c_array(self.roots, "int32_t"),
            "thr": c_array(thr, tt), "feat": c_array(packed, "int32_t"),
            "yes": c_array(self.yes, "int32_t"), "no": c_array(self.no, "int32_t"),
            "one_mode": next(iter(modes)) if len(modes) == 1 and not any(self.miss) else -1,
            "leaf_kind": kind,
        }
        if kind in ("single1", "dense"):
            p["lw"] = c_array([w for lw in self.leaves for _, w in lw], tt)
        elif kind == "single":
            p["lw"] = c_array([lw[0][1] for lw in self.leaves], tt)
            p["lt"] = c_array([lw[0][0] for lw in self.leaves], "int32_t")
        else:
            start = np.cumsum([0] + [len(lw) for lw in self.leaves])
            p["lstart"] = c_array(start, "int32_t")
            p["lw"] = c_array([w for lw in self.leaves for _, w in lw], tt)
            p["lt"] = c_array([t for lw in self.leaves for t, _ in lw], "int32_t")
        p.update(self._complete(p["one_mode"], tt, n_out, kind))
        sets = self.sets
        p["n_sets"] = len(sets)
        p["set_start"] = c_array(np.cumsum([0] + [len(s) for s in sets]), "int32_t")
        p["set_vals"] = c_array([v for s in sets for v in s], tt)
        # classes that every row scores (some tree has a weight for it in every leaf)
        always = set()
        ever = set()
        for lw in self.leaves:
            ever |= {t for t, _ in lw}
        leaf_sets = self._tree_leaf_sets()
        for k in ever:
            if any(all(any(t == k for t, _ in self.leaves[lf]) for lf in tree) for tree in leaf_sets):
                always.add(k)
        p["static_has"] = always == ever
        p["has"] = c_array([1 if k in always else 0 for k in range(n_out)], "uint8_t")
        return p

    def _complete(self, one_mode: int, tt: str, n_out: int, kind: str) -> dict:
        """Shallow trees with one comparison mode are padded to complete binary trees of the
        deepest tree's depth D: a walk is then D steps with no exit test, and the kernel walks
        GROUP trees in lockstep (independent loads overlap). A padded node sends both ways to
        copies of the same leaf. Nodes are stored level by level across trees (level d of tree t
        at NT*(2^d-1) + t*2^d + p), so the hot upper levels share cache lines and the next index
        is 2a + NT + !cmp. Float thresholds become order-preserving uint32 keys (see _keys): one
        integer compare per step."""
        if one_mode not in range(6) or not self.roots:
            return {"complete": False, "cw": None}
        depth = 0
        stack = [(r, 0) for r in self.roots]
        while stack:
            i, d = stack.pop()
            if i >= 0:
                stack += [(self.yes[i], d + 1), (self.no[i], d + 1)]
            else:
                depth = max(depth, d)
        n_trees = -(-len(self.roots) // GROUP) * GROUP
        ni = (1 << depth) - 1
        if depth > COMPLETE_MAX_DEPTH or n_trees * (ni + 1) > max(4 * len(self.feat), 1 << 16) + 4096:
            return {"complete": False, "cw": None}
        feat = np.zeros(n_trees * max(ni, 1), np.int64)
        thr = np.zeros(n_trees * max(ni, 1), np.float64)
        lmap = np.zeros(n_trees * (ni + 1), np.int64)   # dummy trees (padding to GROUP) use leaf 0
        for t, r in enumerate(self.roots):
            stack = [(r, 0, 0)]
            while stack:
                code, p, d = stack.pop()
                if d == depth:
                    lmap[(t << depth) + p] = ~code
                    continue
                if code >= 0:
                    a = n_trees * ((1 << d) - 1) + (t << d) + p
                    feat[a], thr[a] = self.feat[code], self.thr[code]
                    stack += [(self.yes[code], 2 * p, d + 1), (self.no[code], 2 * p + 1, d + 1)]
                else:
                    stack += [(code, 2 * p, d + 1), (code, 2 * p + 1, d + 1)]
        p = {"complete": True, "depth": depth, "n_tpad": n_trees, "group": GROUP, "last": n_trees * ni,
             "clmap": c_array(lmap, "int32_t"), "ckey": tt == "float", "cw": None}
        if tt == "float":
            node = np.empty((len(feat), 2), np.uint32)
            node[:, 0] = _keys(thr, one_mode)
            node[:, 1] = feat
            p["cnode"] = c_array(node, "uint32_t")
            p["nan_key"] = "0u" if one_mode in (2, 3) else "0xffffffffu"
        else:
            p["cfeat"], p["cthr"] = c_array(feat, "int32_t"), c_array(thr, tt)
        stride = n_out if n_out <= 2 else -(-n_out // 4) * 4     # whole vectors per slot
        if kind in ("single1", "dense") and len(lmap) * stride <= max(4 * len(self.leaves) * n_out, 1 << 16):
            w = np.zeros((len(self.leaves), stride), np.float64)
            w[:, :n_out] = np.array([w for lw in self.leaves for _, w in lw], np.float64).reshape(-1, n_out)
            p["cw"] = c_array(w[lmap], tt)    # each leaf slot's weights: no leaf-id indirection
            p["cw_stride"] = stride
        return p

    def _tree_leaf_sets(self) -> list[list[int]]:
        out = []
        for r in self.roots:
            leaves, stack = [], [r]
            while stack:
                i = stack.pop()
                if i < 0:
                    leaves.append(~i)
                else:
                    stack += [self.yes[i], self.no[i]]
            out.append(leaves)
        return out


def _keys(thr: np.ndarray, mode: int) -> np.ndarray:
    """Thresholds (rounded to float) as uint32 keys whose unsigned order is the float order:
    -0 counts as +0, and a NaN threshold gets the key that makes every comparison but != false
    (the x keys of NaN are chosen the same way in the template)."""
    f = thr.astype(np.float32) + np.float32(0.0)          # -0 -> +0
    u = f.view(np.uint32)
    key = np.where(u >> 31 == 1, ~u, u | np.uint32(1 << 31)).astype(np.uint32)
    return np.where(np.isnan(f), np.uint32(0xffffffff if mode in (2, 3) else 0), key)


def _thr_type(node, x, *arrays) -> tuple[str, dtypes.ElemType]:
    """Threshold/accumulation type: double when the input or a tensor attribute is double."""
    dbl = x.etype == dtypes.BY_NAME["double"] or any(a is not None and a.dtype == np.float64 for a in arrays)
    return ("double", dtypes.BY_NAME["double"]) if dbl else ("float", dtypes.FLOAT)


def _legacy_forest(node, prefix: str):
    """Parse TreeEnsembleClassifier/Regressor attributes (nodes_* and class_*/target_*)."""
    tids = ints(node, "nodes_treeids", True)
    nids = ints(node, "nodes_nodeids", True)
    feats = ints(node, "nodes_featureids", True)
    modes = strings(node, "nodes_modes") or []
    vals = floats(node, "nodes_values")
    tn = ints(node, "nodes_truenodeids", True)
    fn = ints(node, "nodes_falsenodeids", True)
    miss = ints(node, "nodes_missing_value_tracks_true")
    n = len(tids)
    for name, a in (("nodes_nodeids", nids), ("nodes_featureids", feats), ("nodes_modes", modes),
                    ("nodes_truenodeids", tn), ("nodes_falsenodeids", fn)):
        check_len(node, name, len(a), n)
    if vals is None:
        vals = np.zeros(n, np.float32)
    check_len(node, "nodes_values", len(vals), n)
    if miss is not None and len(miss) and len(miss) != n:
        raise fail(node, f"nodes_missing_value_tracks_true has {len(miss)} values for {n} nodes")
    for m in set(modes):
        if m not in MODES or m == "BRANCH_MEMBER":
            raise fail(node, f"nodes_modes value {m!r} is not one of "
                       f"{', '.join(repr(k) for k in MODES if k != 'BRANCH_MEMBER')}")
    l_t = ints(node, prefix + "_treeids", True)
    l_n = ints(node, prefix + "_nodeids", True)
    l_id = ints(node, prefix + "_ids", True)
    l_w = floats(node, prefix + "_weights", True)
    for name, a in (("nodeids", l_n), ("ids", l_id), ("weights", l_w)):
        check_len(node, f"{prefix}_{name}", len(a), len(l_t))
    pos = {}
    for i in range(n):
        key = (int(tids[i]), int(nids[i]))
        if key in pos:
            raise fail(node, f"tree {key[0]} node {key[1]} is defined twice")
        pos[key] = i
    weights: dict[tuple, list] = {}
    for t, nd, k, w in zip(l_t.tolist(), l_n.tolist(), l_id.tolist(), l_w.tolist()):
        if (t, nd) not in pos:
            raise fail(node, f"{prefix} weight for tree {t} node {nd}, which does not exist")
        weights.setdefault((t, nd), []).append((int(k), w))
    children = set()
    for i in range(n):
        if modes[i] != "LEAF":
            for c in (tn[i], fn[i]):
                key = (int(tids[i]), int(c))
                if key not in pos:
                    raise fail(node, f"tree {tids[i]} node {nids[i]} points to node {c}, which does not exist")
                children.add(pos[key])
    forest = Forest(node)

    def child(i, c):
        j = pos[(int(tids[i]), int(c))]
        return j, modes[j] == "LEAF"

    for r in [i for i in range(n) if i not in children]:
        forest.add_tree(
            r, lambda i: "leaf" if modes[i] == "LEAF" else "node",
            lambda i: (child(i, tn[i]), child(i, fn[i])),
            lambda i: (int(feats[i]), MODES[modes[i]], vals[i], bool(miss[i]) if miss is not None and len(miss) else False),
            lambda i: weights.get((int(tids[i]), int(nids[i])), []))
    return forest, vals, l_w


class _TreeBase(OpSpec):
    domain = ML
    template = "ml_tree.c.j2"
    headers = HEADERS

    def _cache(self, node):
        c = getattr(node, "_ml_tree", None)
        if c is None:
            c = self.build(node)
            p = c[0]
            if p["cw"] is not None and (p["agg"] >= 2 or not p["static_has"]):
                p["cw"] = None      # slot weights serve sums only (min/max track which targets were hit)
            node._ml_tree = c
        return c


@register
class TreeEnsembleClassifier(_TreeBase):
    op_type = "TreeEnsembleClassifier"

    def build(self, node):
        x = numeric_input(node)
        n, f = rows_features(node, x)
        labels = Labels(node, "classlabels_int64s", "classlabels_strings")
        forest, vals, lw = _legacy_forest(node, "class")
        base = floats(node, "base_values")
        tt, _ = _thr_type(node, x, vals, lw, base)
        nc = labels.n
        if nc < 2:
            raise OrtNotImplemented(f"{node.describe()}: a classifier with {nc} class label(s)")
        p = forest.layout(nc, tt)
        cls = {t for leaf in forest.leaves for t, _ in leaf}
        all_pos = all(w >= 0 for leaf in forest.leaves for _, w in leaf)
        base = [] if base is None else base.tolist()
        p.update({"n": n, "f": f, "tt": tt, "nout": nc, "classifier": True, "agg": AGG["SUM"],
                  "post": post_transform(node), "nbase": len(base), "base": c_array(base, tt),
                  "binary_case": nc == 2 and len(cls) == 1, "all_pos": all_pos,
                  "labels_str": labels.is_str, "labels": labels.c_init(),
                  "work": product((n, max(1, len(forest.roots)), 8))})
        if nc == 2 and len(cls) != 1 and not labels.is_str:
            p["labels"] = "0, 1"    # onnxruntime 1.31: both classes weighted, int64 labels -> 1 / 0 as such
        return p, [(labels.etype, (n,)), (dtypes.FLOAT, (n, nc))]

    def infer(self, node):
        return self._cache(node)[1]

    def params(self, node):
        return self._cache(node)[0]


@register
class TreeEnsembleRegressor(_TreeBase):
    op_type = "TreeEnsembleRegressor"

    def build(self, node):
        x = numeric_input(node)
        n, f = rows_features(node, x)
        forest, vals, lw = _legacy_forest(node, "target")
        base = floats(node, "base_values")
        tt, _ = _thr_type(node, x, vals, lw, base)
        nt = int(node.attr("n_targets", 1) or 1)
        if nt < 1:
            raise fail(node, f"n_targets={nt}")
        agg = node.attr("aggregate_function", "SUM")
        if agg not in AGG:
            raise fail(node, f"attribute aggregate_function={agg!r} is not one of {', '.join(map(repr, AGG))}")
        if nt == 1:     # onnxruntime: with one target, a leaf without weights scores 0 (MIN/MAX see it)
            forest.leaves = [lw or [(0, 0.0)] for lw in forest.leaves]
        p = forest.layout(nt, tt)
        base = [] if base is None else base.tolist()
        p.update(_regressor_params(n, f, tt, nt, AGG[agg], post_transform(node), base, len(forest.roots)))
        return p, [(dtypes.FLOAT, (n, nt))]

    def infer(self, node):
        return self._cache(node)[1]

    def params(self, node):
        return self._cache(node)[0]


def _regressor_params(n, f, tt, nt, agg, post, base, n_trees):
    use_base = len(base) == nt
    origin = base[0] if len(base) == 1 else 0.0
    return {"n": n, "f": f, "tt": tt, "nout": nt, "classifier": False, "agg": agg, "post": post,
            "nbase": len(base), "use_base": use_base, "base": c_array(base if use_base else [0.0], tt),
            "origin": c_array([origin], tt), "labels_str": False, "labels": "0",
            "binary_case": False, "all_pos": False, "work": product((n, max(1, n_trees), 8))}


@register
class TreeEnsemble(_TreeBase):
    op_type = "TreeEnsemble"
    since = 5

    def build(self, node):
        x = node.inputs[0]
        if x.etype not in (dtypes.FLOAT, dtypes.BY_NAME["double"]):
            raise OrtNotImplemented(f"{node.describe()}: input element type {x.etype.name} is not supported "
                                    "(float, double)")
        n, f = rows_features(node, x)
        g = lambda name: node.attr(name)   # noqa: E731
        splits = np.asarray(g("nodes_splits")).reshape(-1)
        feats = ints(node, "nodes_featureids", True)
        modes = np.asarray(g("nodes_modes")).reshape(-1).astype(np.int64)
        tn, fn = ints(node, "nodes_truenodeids", True), ints(node, "nodes_falsenodeids", True)
        tl, fl = ints(node, "nodes_trueleafs", True), ints(node, "nodes_falseleafs", True)
        miss = ints(node, "nodes_missing_value_tracks_true")
        lt = ints(node, "leaf_targetids", True)
        lw = np.asarray(g("leaf_weights")).reshape(-1)
        roots = ints(node, "tree_roots", True)
        nt = int(node.attr("n_targets") or 1)
        mem = node.attr("membership_values")
        mem = None if mem is None else np.asarray(mem, np.float64).reshape(-1)
        nn = len(feats)
        for name, a in (("nodes_splits", splits), ("nodes_modes", modes), ("nodes_truenodeids", tn),
                        ("nodes_falsenodeids", fn), ("nodes_trueleafs", tl), ("nodes_falseleafs", fl)):
            check_len(node, name, len(a), nn)
        check_len(node, "leaf_weights", len(lw), len(lt))
        if any(m not in range(7) for m in set(modes.tolist())):
            raise fail(node, f"nodes_modes holds values outside 0..6: {sorted(set(modes.tolist()))}")
        # membership sets, in node order, separated by NaN
        sets, cur = [], []
        for v in ([] if mem is None else mem.tolist()):
            if v != v:
                sets.append(cur)
                cur = []
            else:
                cur.append(v)
        if cur:
            sets.append(cur)
        member_nodes = [i for i in range(nn) if modes[i] == 6]
        if len(member_nodes) > len(sets):
            raise fail(node, f"{len(member_nodes)} BRANCH_MEMBER nodes but {len(sets)} membership sets")
        set_of = dict(zip(member_nodes, sets))
        forest = Forest(node)
        nl = len(lt)

        def check(i, is_leaf):
            lim = nl if is_leaf else nn
            if not 0 <= i < lim:
                raise fail(node, f"{'leaf' if is_leaf else 'node'} index {i} is out of range")
            return i

        for r in roots.tolist():
            check(r, False)
            leaf_root = bool(tl[r] and fl[r] and tn[r] == fn[r])
            src = ("leaf", int(tn[r])) if leaf_root else ("node", r)
            forest.add_tree(
                src, lambda s: s[0],
                lambda s: ((("leaf" if tl[s[1]] else "node", check(int(tn[s[1]]), bool(tl[s[1]]))), False),
                           (("leaf" if fl[s[1]] else "node", check(int(fn[s[1]]), bool(fl[s[1]]))), False)),
                lambda s: (int(feats[s[1]]), int(modes[s[1]]),
                           set_of.get(s[1], []) if modes[s[1]] == 6 else splits[s[1]],
                           bool(miss[s[1]]) if miss is not None and len(miss) else False),
                lambda s: [(int(lt[s[1]]), float(lw[s[1]]))])
        tt = "double" if x.etype.c == "double" or splits.dtype == np.float64 else "float"
        agg = int(node.attr("aggregate_function", 1))
        post = int(node.attr("post_transform", 0))
        if agg not in range(4) or post not in POST5:
            raise fail(node, f"aggregate_function={agg} / post_transform={post} out of range")
        p = forest.layout(nt, tt)
        p.update(_regressor_params(n, f, tt, nt, agg, POST5[post], [], len(forest.roots)))
        return p, [(x.etype, (n, nt))]

    def infer(self, node):
        return self._cache(node)[1]

    def params(self, node):
        return self._cache(node)[0]
