"""ai.onnx.ml operators one node at a time (Binarizer, Imputer, Scaler, Normalizer, LinearClassifier,
LinearRegressor, SVMClassifier, SVMRegressor, ArrayFeatureExtractor, ZipMap) against onnxruntime on
random rows plus NaN / +-inf / 1e30 rows, at batch > 1, 1 and 0 (and rank 1 where the op takes it),
and against onnx.reference on the rows where that reference agrees with onnxruntime.

onnxruntime is the behavioural reference: where onnx.reference differs, the case says so (REF_*).
Tree ensembles are in test_ml_ops_trees.py (which reuses the helpers here).
"""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as TP, helper as h
from onnx.reference import ReferenceEvaluator

import onnxc

ort = pytest.importorskip("onnxruntime")

NAN, INF = float("nan"), float("inf")
F = 4
NP = {TP.FLOAT: np.float32, TP.DOUBLE: np.float64, TP.INT64: np.int64, TP.INT32: np.int32, TP.STRING: object}
POSTS = ("NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO", "PROBIT")
FLOAT_SPECIAL = [[NAN, 0.5, -1, 2], [INF, 1, -2, 0.25], [-INF, 1, 2, 3], [1e30, -1, 0.5, 2],
                 [-1e30, 1e30, 1, 1], [0, 0, 0, 0], [NAN] * 4, [-0.0, 0.3, INF, -INF], [-3, -1, -2, -0.5]]
INT_SPECIAL = {np.int64: [[0, 0, 0, 0], [2**40, -2**40, 2**53 + 1, 7], [-5, -1, -2, -9]],
               np.int32: [[0, 0, 0, 0], [2**31 - 1, -2**31, 2**24 + 1, 7], [-5, -1, -2, -9]]}


# ---- helpers (also used by test_ml_ops_trees.py) ----------------------------------------------
def ml_model(op, xtype, outs, f=F, rank=2, ml=3, inputs=None, **attrs):
    """One ai.onnx.ml node reading X ([N, f], or [f] at rank 1); outs: (name, elem type) pairs, or
    (name, TypeProto) for non-tensor outputs."""
    shape = ["N", f] if rank == 2 else [f]
    ins = [h.make_tensor_value_info("X", xtype, shape)] + (inputs or [])
    node = h.make_node(op, [v.name for v in ins], [n for n, _ in outs], domain="ai.onnx.ml", **attrs)
    ovi = [h.make_tensor_value_info(n, t, None) if isinstance(t, int) else h.make_value_info(n, t)
           for n, t in outs]
    g = h.make_graph([node], "g", ins, ovi)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17), h.make_opsetid("ai.onnx.ml", ml)])
    m.ir_version = 9
    return m


def rows(dtype, f=F, n=6, seed=0):
    """(x, n_random): n random rows, then the special rows (NaN, infinities, huge, zeros)."""
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        x = np.concatenate([rng.normal(0, 2, (n, f)), np.resize(FLOAT_SPECIAL, (len(FLOAT_SPECIAL), f))])
    else:
        x = np.concatenate([rng.integers(-9, 10, (n, f)), np.resize(INT_SPECIAL[dtype], (3, f))])
    return x.astype(dtype), n


def assert_same(got, exp, rtol=1e-5, atol=1e-6, what=""):
    if isinstance(exp, list) and exp and isinstance(exp[0], dict):      # ZipMap
        assert isinstance(got, list) and len(got) == len(exp), what
        for g, e in zip(got, exp):
            assert list(g) == list(e), what
            np.testing.assert_allclose(list(g.values()), list(e.values()), rtol, atol, err_msg=what)
        return
    exp, got = np.asarray(exp), np.asarray(got)
    if exp.dtype.kind in "USO":
        assert got.tolist() == exp.tolist(), what
        return
    assert got.shape == exp.shape, (what, got.shape, exp.shape)
    assert got.dtype == exp.dtype, (what, got.dtype, exp.dtype)
    if exp.dtype.kind == "f":
        np.testing.assert_allclose(got, exp, rtol, atol, equal_nan=True, err_msg=what)
    else:
        np.testing.assert_array_equal(got, exp, err_msg=what)


def ort_session(model):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def check(model, x, n_ref=None, ref=True, rtol=1e-5, atol=1e-6, ref_tol=(1e-4, 1e-5), against_ort=True,
          extra=None, batches=True):
    """onnxc == onnxruntime on x, x[:1], x[:0]; onnxc == onnx.reference on x[:n_ref] (ref=False: the
    reference differs or has no kernel). against_ort=False: onnxruntime has no kernel for this
    input type, the reference alone decides (on every row). extra: other feeds."""
    extra = extra or {}
    sess = onnxc.InferenceSession(model.SerializeToString())
    osess = ort_session(model) if against_ort else None
    rank1 = len(model.graph.input[0].type.tensor_type.shape.dim) == 1
    for b in ([x] if rank1 or not batches else [x, x[:1], x[:0]]):
        feeds = {"X": b, **extra}
        got = sess.run(None, feeds)
        if osess is not None:
            exp = osess.run(None, feeds)
            for i, (g, e) in enumerate(zip(got, exp)):
                assert_same(g, e, rtol, atol, f"output {i}, batch {len(b)}")
    if ref and not rank1:        # the reference reads rank-1 inputs differently or not at all
        xr = x if (n_ref is None or not against_ort) else x[:n_ref]
        exp = ReferenceEvaluator(model).run(None, {"X": xr, **extra})
        got = sess.run(None, {"X": xr, **extra})
        for i, (g, e) in enumerate(zip(got, exp)):
            e = np.asarray(e)
            if e.dtype.kind in "fiu" and g.dtype.kind == "f":
                e = e.astype(g.dtype)           # the reference keeps some input types (see REF_DTYPE)
            assert_same(g, e.reshape(g.shape) if e.size == g.size else e, *ref_tol, f"reference, output {i}")
    return sess


def elem(t):
    return NP[t]


# ---- per-feature transforms --------------------------------------------------------------------
TYPES = (TP.FLOAT, TP.DOUBLE, TP.INT64, TP.INT32)


@pytest.mark.parametrize("t", TYPES)
def test_binarizer(t):
    x, n = rows(elem(t))
    m = ml_model("Binarizer", t, [("Y", t)], threshold=0.5)
    # onnxruntime has Binarizer for float only (the reference decides the other types) and fails
    # the run on a NaN input (the reference gives 0): onnxc fails on NaN for float and double.
    ok = ~np.isnan(x).any(axis=1) if x.dtype.kind == "f" else np.ones(len(x), bool)
    check(m, x[ok], against_ort=t == TP.FLOAT)
    if t in (TP.FLOAT, TP.DOUBLE):
        raises_like_ort(m, x, against_ort=t == TP.FLOAT)
    if t == TP.FLOAT:
        check(ml_model("Binarizer", t, [("Y", t)], rank=1, threshold=-1.0), x[n + 1])


def raises_like_ort(model, x, against_ort=True, extra=None):
    feeds = {"X": x, **(extra or {})}
    if against_ort:
        with pytest.raises(Exception):
            ort_session(model).run(None, feeds)
    with pytest.raises(onnxc.errors.Fail):
        onnxc.InferenceSession(model.SerializeToString()).run(None, feeds)


@pytest.mark.parametrize("case", ["float_nan", "float_value", "float_one", "int64", "int64_one", "double",
                                  "int32"])
def test_imputer(case):
    t = {"double": TP.DOUBLE, "int32": TP.INT32, "int64": TP.INT64, "int64_one": TP.INT64}.get(case, TP.FLOAT)
    if t in (TP.FLOAT, TP.DOUBLE):
        rep = {"float_value": 0.0, "double": -3.0}.get(case, NAN)
        vals = [1.5] if case == "float_one" else [1.5, -2.0, 3.25, 1e30]
        attrs = dict(imputed_value_floats=vals, replaced_value_float=rep)
    else:
        attrs = dict(imputed_value_int64s=[42] if case == "int64_one" else [1, 2, -3, 2**40 if case == "int64" else 5],
                     replaced_value_int64=0 if case != "int32" else -5)
    x, n = rows(elem(t))
    # onnxruntime has Imputer for float and int64 only: double and int32 follow the reference
    ours = t in (TP.FLOAT, TP.INT64)
    check(ml_model("Imputer", t, [("Y", t)], **attrs), x, against_ort=ours)
    if ours:
        check(ml_model("Imputer", t, [("Y", t)], rank=1, **attrs), x[-4])


@pytest.mark.parametrize("t", TYPES)
@pytest.mark.parametrize("per_feature", [True, False])
def test_scaler(t, per_feature):
    x, n = rows(elem(t))
    attrs = dict(offset=[0.5, -1.0, 2.0, 1e-3], scale=[2.0, 0.5, -3.0, 1e3]) if per_feature else \
        dict(offset=[1.5], scale=[-0.25])
    # REF_DTYPE: the reference returns integer inputs' type (truncated); the output is float
    check(ml_model("Scaler", t, [("Y", TP.FLOAT)], **attrs), x, n, ref=t in (TP.FLOAT, TP.DOUBLE))
    if per_feature and t == TP.FLOAT:
        check(ml_model("Scaler", t, [("Y", TP.FLOAT)], rank=1, **attrs), x[3])


@pytest.mark.parametrize("t", TYPES)
@pytest.mark.parametrize("norm", ["MAX", "L1", "L2"])
def test_normalizer(t, norm):
    x, n = rows(elem(t))
    m = ml_model("Normalizer", t, [("Y", TP.FLOAT)], norm=norm)
    # REF_NORM: the reference divides by max(|x|) (onnxruntime: max(x), from -FLT_MAX) and by
    # max(norm, 1e-30) (onnxruntime: rows of norm 0 are copied), fails L2 on integers; onnxruntime
    # squares (L2) and takes |x| (L1) in the input type, wrapping integers around (|INT_MIN| < 0).
    check(m, x, n, ref=norm == "L1" or (norm == "L2" and t in (TP.FLOAT, TP.DOUBLE)))
    if t in (TP.FLOAT, TP.INT32):
        check(ml_model("Normalizer", t, [("Y", TP.FLOAT)], rank=1, norm=norm), x[0])


# ---- linear models -----------------------------------------------------------------------------
def rnd(shape, seed, scale=1.0):
    return (np.random.default_rng(seed).normal(0, scale, shape)).astype(np.float32).reshape(-1).tolist()


def labels_attr(prefix, c, kind):
    """kind 'int' (non-contiguous ids) or 'str' (one non-ASCII, one C-comment-like)."""
    if kind == "int":
        return {f"{prefix}_ints" if prefix else "classlabels_int64s": [7, -3, 12, 0, 5][:c]}
    return {f"{prefix}_strings": ["cat", "émeu", "*/x", "dog", ""][:c]}


def label_type(kind):
    return TP.INT64 if kind == "int" else TP.STRING


LINCLS = [(post, shape, kind) for post in POSTS for shape in ("multi", "binary") for kind in ("int", "str")] + \
    [("NONE", "two_rows", "int"), ("LOGISTIC", "two_rows", "str"),
     ("SOFTMAX", "multi_noicpt", "int")]
# onnxruntime (not onnxc) rejects one coefficient row with other than 2 labels, and missing intercepts


@pytest.mark.parametrize("post,shape,kind", LINCLS)
def test_linear_classifier(post, shape, kind):
    c = {"multi": 3, "multi_noicpt": 3, "binary": 1, "two_rows": 2}[shape]
    attrs = dict(coefficients=rnd((c, F), 1), post_transform=post, **labels_attr("classlabels", max(c, 2), kind))
    if shape != "multi_noicpt":
        attrs["intercepts"] = rnd(c, 2)
    m = ml_model("LinearClassifier", TP.FLOAT, [("L", label_type(kind)), ("S", TP.FLOAT)], **attrs)
    x, n = rows(np.float32)
    if post == "PROBIT" and shape == "binary":
        return binary_probit(m, x)
    if shape == "multi_noicpt":     # as onnxruntime with zero intercepts (it requires them; so does the reference)
        mz = ml_model("LinearClassifier", TP.FLOAT, [("L", TP.INT64), ("S", TP.FLOAT)], intercepts=[0.0] * c, **attrs)
        for g, e in zip(onnxc.InferenceSession(m.SerializeToString()).run(None, {"X": x}),
                        ort_session(mz).run(None, {"X": x})):
            assert_same(g, e)
        return
    # REF_BINARY: with one coefficient row the reference writes [-s, s] and labels by s >= 0
    # (onnxruntime: [1 - s, s], LOGISTIC [1 - logistic(s), logistic(s)]) and fails on string labels.
    # Multiclass scores and labels agree.
    check(m, x, n, ref=shape in ("multi", "two_rows") and post != "PROBIT")
    if shape == "multi" and kind == "int":
        check(ml_model("LinearClassifier", TP.FLOAT, [("L", TP.INT64), ("S", TP.FLOAT)], rank=1, **attrs), x[2])


def binary_probit(m, x):
    """One score under PROBIT: onnxruntime transforms the packed scores and never expands them, so
    its [N, 2] output holds probit(s) of row 0 in [0, 0] and its buffer's garbage elsewhere. onnxc
    writes [probit(s), 0] on every row: compare labels, and column 0 row by row at batch 1."""
    got = onnxc.InferenceSession(m.SerializeToString()).run(None, {"X": x})
    osess = ort_session(m)
    assert_same(got[0], osess.run(None, {"X": x})[0])
    col0 = np.array([osess.run(None, {"X": x[i:i + 1]})[1][0, 0] for i in range(len(x))], np.float32)
    assert_same(got[1][:, 0], col0)
    assert (got[1][:, 1] == 0).all()


@pytest.mark.parametrize("t", [TP.DOUBLE, TP.INT64, TP.INT32])
@pytest.mark.parametrize("shape", ["multi", "binary"])
def test_linear_classifier_types(t, shape):
    c = 3 if shape == "multi" else 1
    attrs = dict(coefficients=rnd((c, F), 3), intercepts=rnd(c, 4), classlabels_ints=[1, 2, 3][:max(c, 2)],
                 post_transform="LOGISTIC")
    x, n = rows(elem(t))
    check(ml_model("LinearClassifier", t, [("L", TP.INT64), ("S", TP.FLOAT)], **attrs), x, n, ref=c > 1)


@pytest.mark.parametrize("post", POSTS)
@pytest.mark.parametrize("targets", [1, 3])
def test_linear_regressor(post, targets):
    attrs = dict(coefficients=rnd((targets, F), 5), intercepts=rnd(targets, 6), targets=targets,
                 post_transform=post)
    m = ml_model("LinearRegressor", TP.FLOAT, [("Y", TP.FLOAT)], **attrs)
    x, n = rows(np.float32)
    check(m, x, n, ref=post == "NONE")      # the reference has no post transforms
    if targets == 3 and post == "NONE":
        check(ml_model("LinearRegressor", TP.FLOAT, [("Y", TP.FLOAT)], rank=1, **attrs), x[1])
        check(ml_model("LinearRegressor", TP.FLOAT, [("Y", TP.FLOAT)], coefficients=attrs["coefficients"],
                       targets=3), x, n, ref=False)     # no intercepts (the reference adds NaN)


@pytest.mark.parametrize("t", [TP.DOUBLE, TP.INT64, TP.INT32])
def test_linear_regressor_types(t):
    # onnxruntime has LinearRegressor for float only and its other ML kernels read inputs as float:
    # compare with its float kernel on x cast to float (the reference truncates coefficients to
    # integer input types)
    attrs = dict(coefficients=rnd((2, F), 7), intercepts=rnd(2, 8), targets=2)
    x, n = rows(elem(t))
    m = ml_model("LinearRegressor", t, [("Y", TP.FLOAT)], **attrs)
    check(m, x[:n], against_ort=False, ref=t == TP.DOUBLE)
    check_as_float(m, ml_model("LinearRegressor", TP.FLOAT, [("Y", TP.FLOAT)], **attrs), x)


def check_as_float(m, mf, x):
    """onnxruntime has only a float kernel (mf) and reads its other ML kernels' inputs as float:
    onnxc on x == onnxruntime on x cast to float."""
    sess, osess = onnxc.InferenceSession(m.SerializeToString()), ort_session(mf)
    for b in (x, x[:1], x[:0]):
        for g, e in zip(sess.run(None, {"X": b}), osess.run(None, {"X": b.astype(np.float32)})):
            assert_same(g, e)


# ---- SVMs --------------------------------------------------------------------------------------
KERNELS = ("LINEAR", "POLY", "RBF", "SIGMOID")
KPARAMS = {"LINEAR": [0.0, 0.0, 0.0], "POLY": [0.5, 0.25, 3.0], "RBF": [0.3, 0.0, 0.0], "SIGMOID": [0.2, -0.1, 0.0],
           "POLY2.5": [0.5, 0.75, 2.5]}


def svc_attrs(c, kernel="RBF", proba=False, post="NONE", kind="int", seed=10):
    vpc = [2, 3, 2, 1][:c] if c > 2 else [3, 2]
    v, ncl = sum(vpc), c * (c - 1) // 2
    attrs = dict(kernel_type=kernel[:4] if kernel.startswith("POLY") else kernel, kernel_params=KPARAMS[kernel],
                 vectors_per_class=vpc, support_vectors=rnd((v, F), seed), coefficients=rnd((c - 1, v), seed + 1),
                 rho=rnd(ncl, seed + 2, 0.3), post_transform=post, **labels_attr("classlabels", c, kind))
    if proba:
        attrs.update(prob_a=(-1.5 + np.arange(ncl) * 0.25).tolist(), prob_b=rnd(ncl, seed + 3, 0.2))
    return attrs


SVC = [("multi", k, p, "NONE", "int") for k in KERNELS for p in (False, True)] + \
    [("binary", k, p, "NONE", "int") for k in ("LINEAR", "RBF") for p in (False, True)] + \
    [("multi", "RBF", False, post, "int") for post in POSTS[1:]] + \
    [("multi", "RBF", True, "SOFTMAX", "str"), ("binary", "RBF", False, "LOGISTIC", "str"),
     ("binary", "POLY", True, "LOGISTIC", "int"), ("multi", "POLY2.5", False, "NONE", "int"),
     ("four", "SIGMOID", True, "NONE", "str")]


@pytest.mark.parametrize("shape,kernel,proba,post,kind", SVC)
def test_svm_classifier(shape, kernel, proba, post, kind):
    c = {"multi": 3, "binary": 2, "four": 4}[shape]
    attrs = svc_attrs(c, kernel, proba, post, kind)
    m = ml_model("SVMClassifier", TP.FLOAT, [("L", label_type(kind)), ("S", TP.FLOAT)], **attrs)
    x, n = rows(np.float32)
    # REF_SVC: the reference's coupled probabilities differ from onnxruntime's (libsvm's) by up to
    # 0.1, and a POLY kernel with a fractional degree gives other NaN decisions (votes) there.
    # Binary string labels fail in the reference. PROBIT: onnxruntime's erfinv approximation cancels digits near 0.5, so a 1-ulp difference in a
    # decision value (summation order) shows as ~1e-5.
    check(m, x, n, ref=not proba and kernel != "POLY2.5" and (c > 2 or kind == "int"), atol=2e-5 if post == "PROBIT" else 1e-6)
    if shape == "multi" and kernel == "RBF" and post == "NONE":
        check(ml_model("SVMClassifier", TP.FLOAT, [("L", TP.INT64), ("S", TP.FLOAT)], rank=1, **attrs), x[0])


@pytest.mark.parametrize("c,post,positive", [(3, "NONE", False), (3, "SOFTMAX", False), (2, "NONE", False),
                                             (2, "NONE", True), (2, "LOGISTIC", False)])
def test_svm_classifier_liblinear(c, post, positive):
    """No support vectors: one score per class, x . coefficients + rho[0]."""
    coef = np.abs(rnd((c, F), 20)) if positive else rnd((c, F), 20)
    attrs = dict(coefficients=np.asarray(coef).tolist(), rho=[0.3], post_transform=post, classlabels_ints=[4, 5, 6][:c],
                 kernel_type="LINEAR", kernel_params=[0.0, 0.0, 0.0])     # onnxruntime requires both
    x, n = rows(np.float32)
    # REF_LIBLINEAR: the reference labels these by its binary rule (1 / 0, or label 0 unless the
    # top score > 0); onnxruntime takes the argmax label (binary: label 1 if the top score > 0,
    # >= 0.5 with all-positive coefficients). Scores agree.
    check(ml_model("SVMClassifier", TP.FLOAT, [("L", TP.INT64), ("S", TP.FLOAT)], **attrs), x, n, ref=False)


@pytest.mark.parametrize("t", [TP.DOUBLE, TP.INT64, TP.INT32])
def test_svm_classifier_types(t):
    attrs = svc_attrs(3, "RBF", True)
    x, n = rows(elem(t))
    check(ml_model("SVMClassifier", t, [("L", TP.INT64), ("S", TP.FLOAT)], **attrs), x, n, ref=False)   # REF_SVC


@pytest.mark.parametrize("kernel,mode", [(k, "svr") for k in KERNELS] + [("RBF", "one_class"), ("POLY", "one_class"),
                                                                          ("LINEAR", "linear"), ("POLY2.5", "svr")])
def test_svm_regressor(kernel, mode):
    v = 5
    if mode == "linear":
        attrs = dict(coefficients=rnd(F, 30), rho=[0.5], n_supports=0, kernel_type="LINEAR", kernel_params=[0.0] * 3)
    else:
        attrs = dict(kernel_type=kernel[:4] if kernel.startswith("POLY") else kernel, kernel_params=KPARAMS[kernel],
                     n_supports=v, support_vectors=rnd((v, F), 31), coefficients=rnd(v, 32), rho=[-0.2],
                     one_class=int(mode == "one_class"))
    m = ml_model("SVMRegressor", TP.FLOAT, [("Y", TP.FLOAT)], **attrs)
    x, n = rows(np.float32)
    check(m, x, n, ref=kernel != "POLY2.5")      # REF_SVC
    if kernel == "RBF":
        check(ml_model("SVMRegressor", TP.FLOAT, [("Y", TP.FLOAT)], rank=1, **attrs), x[1])


@pytest.mark.parametrize("t", [TP.DOUBLE, TP.INT64, TP.INT32])
def test_svm_regressor_types(t):
    attrs = dict(kernel_type="POLY", kernel_params=KPARAMS["POLY"], n_supports=3, support_vectors=rnd((3, F), 33),
                 coefficients=rnd(3, 34), rho=[0.1])
    x, n = rows(elem(t))
    check_as_float(ml_model("SVMRegressor", t, [("Y", TP.FLOAT)], **attrs),
                   ml_model("SVMRegressor", TP.FLOAT, [("Y", TP.FLOAT)], **attrs), x)


# ---- ArrayFeatureExtractor, ZipMap -------------------------------------------------------------
def afe_model(t, rank, k_shape):
    shape = {1: [F], 2: ["N", F], 3: ["N", 2, F]}[rank]
    x = h.make_tensor_value_info("X", t, shape)
    ind = h.make_tensor_value_info("I", TP.INT64, k_shape)
    node = h.make_node("ArrayFeatureExtractor", ["X", "I"], ["Y"], domain="ai.onnx.ml")
    g = h.make_graph([node], "g", [x, ind], [h.make_tensor_value_info("Y", t, None)])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17), h.make_opsetid("ai.onnx.ml", 1)])
    m.ir_version = 9
    return m


@pytest.mark.parametrize("t", [TP.FLOAT, TP.DOUBLE, TP.INT64, TP.INT32, TP.STRING])
@pytest.mark.parametrize("rank", [1, 2, 3])
def test_array_feature_extractor(t, rank):
    if t == TP.STRING:
        x = np.array([["a", "é", "", "*/"][i % 4] + str(i) for i in range(5 * 2 * F)], object).reshape(5, 2, F)
    else:
        x = np.resize(rows(elem(t))[0], (5, 2, F))
    x = {1: x[0, 0], 2: x[:, 0], 3: x}[rank]
    m = afe_model(t, rank, ["K"])
    sess, osess = onnxc.InferenceSession(m.SerializeToString()), ort_session(m)
    for ind in ([2, 0, 2], [3]):
        for b in ([x] if rank == 1 else [x, x[:1], x[:0]]):
            feeds = {"X": b, "I": np.array(ind, np.int64)}
            assert_same(sess.run(None, feeds)[0], osess.run(None, feeds)[0], what=str(ind))
            if len(b) and ind and t != TP.STRING:
                # REF_AFE: the reference keeps a 1-D X 1-D (onnxruntime: [1, k])
                exp = ReferenceEvaluator(m).run(None, feeds)[0]
                assert_same(sess.run(None, feeds)[0], exp.reshape(-1, len(ind)) if rank == 1 else exp)
    for bad in ([F], [-1], [0, 7], []):     # an index outside [0, F), or none, fails both
        feeds = {"X": x, "I": np.array(bad, np.int64)}
        with pytest.raises(Exception):
            osess.run(None, feeds)
        with pytest.raises(onnxc.errors.InvalidArgument, match="index"):
            sess.run(None, feeds)


@pytest.mark.parametrize("kind", ["int", "str"])
@pytest.mark.parametrize("rank", [1, 2])
def test_zipmap(kind, rank):
    key = TP.INT64 if kind == "int" else TP.STRING
    out = h.make_sequence_type_proto(h.make_map_type_proto(key, h.make_tensor_type_proto(TP.FLOAT, None)))
    attrs = labels_attr("classlabels_int64s" if kind == "int" else "classlabels", 3, kind)
    if kind == "int":
        attrs = {"classlabels_int64s": attrs.pop("classlabels_int64s_ints")}
    m = ml_model("ZipMap", TP.FLOAT, [("Z", out)], f=3, rank=rank, ml=1, **attrs)
    x = np.array([[0.1, 0.2, 0.7], [NAN, INF, -INF], [1e30, -0.0, 0.0]], np.float32)
    check(m, x if rank == 2 else x[1], ref=False)      # the reference has no ZipMap
