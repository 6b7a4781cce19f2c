"""scikit-learn estimators converted by skl2onnx (default options), run by onnxc and onnxruntime on
the same inputs: labels equal, probabilities and regression outputs within 1e-4.

Models needing ai.onnx operators onnxc does not have yet are skipped with the operator's name
(the skip reason says which), so they start running as soon as the operator lands.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

sklearn = pytest.importorskip("sklearn")
skl2onnx = pytest.importorskip("skl2onnx")
ort = pytest.importorskip("onnxruntime")

from sklearn import (cluster, decomposition, ensemble, linear_model as lm, naive_bayes,  # noqa: E402
                     neighbors, neural_network, pipeline, preprocessing, svm, tree)
from sklearn.datasets import make_classification, make_regression  # noqa: E402

import onnxc  # noqa: E402
from onnxc.errors import NotImplemented as OrtNotImplemented  # noqa: E402


def _data(kind):
    if kind == "c":
        X, y = make_classification(200, 8, n_informative=5, n_classes=3, random_state=0)
    elif kind == "b":
        X, y = make_classification(200, 8, random_state=1)
        y = np.where(y == 1, 7, 3)            # labels other than 0/1
    elif kind == "s":
        X, y = make_classification(200, 8, n_informative=5, n_classes=3, random_state=2)
        y = np.array(["cat", "dog", "émeu"])[y]   # string labels, one non-ASCII
    else:
        X, y = make_regression(200, 8, random_state=0)
    return X.astype(np.float32), y


CASES = {
    "logreg_bin": (lambda: lm.LogisticRegression(), "b"),
    "logreg_multi": (lambda: lm.LogisticRegression(max_iter=500), "c"),
    "logreg_str": (lambda: lm.LogisticRegression(max_iter=500), "s"),
    "linreg": (lambda: lm.LinearRegression(), "r"),
    "ridge": (lambda: lm.Ridge(), "r"),
    "lasso": (lambda: lm.Lasso(alpha=0.1), "r"),
    "sgd_clf": (lambda: lm.SGDClassifier(random_state=0), "c"),
    "sgd_reg": (lambda: lm.SGDRegressor(random_state=0), "r"),
    "dtree_clf": (lambda: tree.DecisionTreeClassifier(max_depth=5, random_state=0), "c"),
    "dtree_clf_str": (lambda: tree.DecisionTreeClassifier(max_depth=5, random_state=0), "s"),
    "dtree_reg": (lambda: tree.DecisionTreeRegressor(max_depth=5, random_state=0), "r"),
    "rf_clf": (lambda: ensemble.RandomForestClassifier(20, max_depth=6, random_state=0), "c"),
    "rf_clf_bin": (lambda: ensemble.RandomForestClassifier(10, max_depth=6, random_state=0), "b"),
    "rf_reg": (lambda: ensemble.RandomForestRegressor(20, max_depth=6, random_state=0), "r"),
    "extra_trees": (lambda: ensemble.ExtraTreesClassifier(20, random_state=0), "c"),
    "gb_clf": (lambda: ensemble.GradientBoostingClassifier(n_estimators=20, random_state=0), "c"),
    "gb_clf_bin": (lambda: ensemble.GradientBoostingClassifier(n_estimators=20, random_state=0), "b"),
    "gb_reg": (lambda: ensemble.GradientBoostingRegressor(n_estimators=20, random_state=0), "r"),
    "svc_rbf": (lambda: svm.SVC(probability=True, random_state=0), "c"),
    "svc_bin": (lambda: svm.SVC(probability=True, random_state=0), "b"),
    "svc_str": (lambda: svm.SVC(probability=True, random_state=0), "s"),
    "svc_poly_noprob": (lambda: svm.SVC(kernel="poly"), "c"),
    "svc_sigmoid": (lambda: svm.SVC(kernel="sigmoid", probability=True, random_state=0), "c"),
    "linear_svc": (lambda: svm.LinearSVC(), "c"),
    "svr": (lambda: svm.SVR(), "r"),
    "knn_clf": (lambda: neighbors.KNeighborsClassifier(), "c"),
    "knn_reg": (lambda: neighbors.KNeighborsRegressor(), "r"),
    "gaussian_nb": (lambda: naive_bayes.GaussianNB(), "c"),
    "mlp_clf": (lambda: neural_network.MLPClassifier(max_iter=300, random_state=0), "c"),
    "mlp_reg": (lambda: neural_network.MLPRegressor(max_iter=300, random_state=0), "r"),
    "kmeans": (lambda: cluster.KMeans(3, n_init=3, random_state=0), "c"),
    "scaler_pca_logreg": (lambda: pipeline.make_pipeline(preprocessing.StandardScaler(), decomposition.PCA(4),
                                                        lm.LogisticRegression()), "c"),
    "minmax_svc": (lambda: pipeline.make_pipeline(preprocessing.MinMaxScaler(), svm.SVC(probability=True)), "c"),
    "scaler_rf": (lambda: pipeline.make_pipeline(preprocessing.StandardScaler(),
                                                 ensemble.RandomForestClassifier(10, random_state=0)), "c"),
    "normalizer_ridge": (lambda: pipeline.make_pipeline(preprocessing.Normalizer(), lm.Ridge()), "r"),
}


def _outputs_equal(name, got, ref):
    assert len(got) == len(ref)
    for g, r in zip(got, ref):
        if isinstance(r, list):      # ZipMap: list of dicts
            assert isinstance(g, list) and len(g) == len(r)
            for dg, dr in zip(g, r):
                assert list(dg) == list(dr)
                assert all(type(a) is type(b) for a, b in zip(dg, dr))
                np.testing.assert_allclose([dg[k] for k in dr], list(dr.values()), atol=1e-4, rtol=1e-4)
        elif r.dtype.kind in "OUS" or r.dtype.kind in "iu":
            assert g.dtype == r.dtype or (r.dtype.kind == "O" and g.dtype.kind == "O"), (g.dtype, r.dtype)
            np.testing.assert_array_equal(g, r)
        else:
            assert g.dtype == r.dtype and g.shape == r.shape
            np.testing.assert_allclose(g, r, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("name", sorted(CASES))
def test_sklearn_model(name, tmp_path):
    make, kind = CASES[name]
    X, y = _data(kind)
    est = make()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(X, y) if kind != "c" or name != "kmeans" else est.fit(X)
        model = skl2onnx.to_onnx(est, X[:1])
    try:
        sess = onnxc.InferenceSession(model.SerializeToString(), cache_dir=tmp_path)
    except OrtNotImplemented as e:
        if "ai.onnx.ml" in str(e):
            raise
        pytest.skip(f"needs an ai.onnx operator onnxc lacks: {e}")
    ref_sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    name_in = sess.get_inputs()[0].name
    rng = np.random.default_rng(0)
    edge = np.array(X[:6])             # NaN / inf in one feature, a row all NaN, huge values
    edge[0, 0], edge[1, 1], edge[2, 2], edge[3, :], edge[4, :] = np.nan, np.inf, -np.inf, np.nan, 1e30
    Xt = np.concatenate([X[:50], rng.normal(0, 2, (30, X.shape[1])).astype(np.float32), edge])
    for batch in (Xt, Xt[:1]):
        ref = ref_sess.run(None, {name_in: batch})
        got = sess.run(None, {name_in: batch})
        _outputs_equal(name, got, ref)
    assert [(o.name, o.type) for o in sess.get_outputs()] == [(o.name, o.type) for o in ref_sess.get_outputs()]
