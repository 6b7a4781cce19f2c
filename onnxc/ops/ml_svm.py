"""SVMClassifier and SVMRegressor (kernels LINEAR, POLY, RBF, SIGMOID; one-class; Platt
probabilities with pairwise coupling), computed as onnxruntime does: kernels in float, each
one-vs-one decision summed in double, votes choose the label, prob_a/prob_b give libsvm's
sigmoid probabilities coupled by Wu-Lin-Weng's method.
"""
from __future__ import annotations

import numpy as np

from .. import dtypes
from ..errors import NotImplemented as OrtNotImplemented
from ..symbolic import product
from .common import attr_enum, fail
from .ml_common import (HEADERS, ML, Labels, c_array, c_number, check_len, floats, ints, numeric_input,
                        post_transform, rows_features)
from .registry import OpSpec, register

KERNELS = ("LINEAR", "POLY", "RBF", "SIGMOID")
MAX_VECTORS = 16384      # kernel values of one row live on the stack (64 KiB)


def _kernel(node, linear_mode: bool) -> dict:
    kt = "LINEAR" if linear_mode else attr_enum(node, "kernel_type", KERNELS)
    kp = floats(node, "kernel_params")
    gamma, coef0, degree = (kp.tolist() + [0.0, 0.0, 0.0])[:3] if kp is not None and len(kp) else (0.0, 0.0, 0.0)
    return {"kernel": kt, "gamma": c_number(np.float32(gamma), "float"),
            "coef0": c_number(np.float32(coef0), "float"), "degree": c_number(np.float32(degree), "float"),
            "degree_int": int(degree) if float(degree) in (2.0, 3.0) else 0}


def _transposed(sv, v: int, f: int) -> str:
    """Support vectors feature-major ([F][V]): the kernel loop then runs over vectors, contiguous
    and vectorisable, while each vector's sum still adds its features in order (same floats)."""
    return c_array(sv.reshape(v, f).T if v else sv, "float")


def _features(node, x):
    n, f = rows_features(node, x)
    if not isinstance(f, int):
        raise fail(node, "the feature dimension of the input must be known")
    return n, f


@register
class SVMClassifier(OpSpec):
    op_type = "SVMClassifier"
    domain = ML
    template = "ml_svm_classifier.c.j2"
    headers = HEADERS + ("onnxc_vmath.h",)

    def _model(self, node):
        x = numeric_input(node)
        n, f = _features(node, x)
        labels = Labels(node, "classlabels_ints", "classlabels_strings")
        c = labels.n
        vpc = ints(node, "vectors_per_class")
        vpc = np.zeros(0, np.int64) if vpc is None else vpc
        v = int(vpc.sum()) if len(vpc) else 0
        coef = floats(node, "coefficients", True).astype(np.float32)
        rho = floats(node, "rho", True).astype(np.float32)
        sv = floats(node, "support_vectors")
        sv = np.zeros(0, np.float32) if sv is None else sv.astype(np.float32)
        pa, pb = floats(node, "prob_a"), floats(node, "prob_b")
        pa = np.zeros(0, np.float32) if pa is None else pa.astype(np.float32)
        pb = np.zeros(0, np.float32) if pb is None else pb.astype(np.float32)
        if len(pa) != len(pb):
            raise fail(node, "prob_a and prob_b differ in length")
        if c < 2:
            raise OrtNotImplemented(f"{node.describe()}: an SVM classifier with {c} class label(s)")
        ncl = c * (c - 1) // 2
        svc = v > 0
        if svc:
            if (vpc < 0).any() or len(vpc) != c:
                raise fail(node, f"vectors_per_class has {len(vpc)} entries for {c} classes")
            if v > MAX_VECTORS:
                raise OrtNotImplemented(f"{node.describe()}: {v} support vectors (at most {MAX_VECTORS})")
            check_len(node, "support_vectors", len(sv), v * f)
            if len(coef) < (c - 1) * v or len(rho) < ncl or (len(pa) and len(pa) < ncl):
                raise fail(node, "coefficients, rho or prob_a/prob_b are shorter than the classes need")
        else:
            check_len(node, "coefficients", len(coef), c * f)
            if len(rho) < 1:
                raise fail(node, "rho is empty")
        proba = len(pa) > 0 and svc
        zc = c if (not svc or proba) else (ncl if c > 2 else 2)
        return x, n, f, labels, c, v, vpc, coef, rho, sv, pa, pb, svc, proba, zc, ncl

    def infer(self, node):
        m = self._model(node)
        return [(m[3].etype, (m[1],)), (dtypes.FLOAT, (m[1], m[14]))]

    def params(self, node):
        x, n, f, labels, c, v, vpc, coef, rho, sv, pa, pb, svc, proba, zc, ncl = self._model(node)
        start = np.concatenate([[0], np.cumsum(vpc)]) if svc else np.zeros(1, np.int64)
        p = _kernel(node, not svc)
        p.update({"n": n, "f": f, "c": c, "v": v, "svc": svc, "proba": proba, "zc": zc, "ncl": ncl,
                  "coef": c_array(coef, "float"), "rho": c_array(rho, "float"), "svt": _transposed(sv, v, f),
                  "start": c_array(start, "int32_t"), "pa": c_array(pa, "float"), "pb": c_array(pb, "float"),
                  "all_pos": bool((coef >= 0).all()), "post": post_transform(node),
                  "labels_str": labels.is_str, "labels": labels.c_init(),
                  "work": product((n, max(v, c), f))})
        return p


@register
class SVMRegressor(OpSpec):
    op_type = "SVMRegressor"
    domain = ML
    template = "ml_svm_regressor.c.j2"
    headers = HEADERS + ("onnxc_vmath.h",)

    def _model(self, node):
        x = numeric_input(node)
        n, f = _features(node, x)
        v = int(node.attr("n_supports", 0) or 0)
        coef = floats(node, "coefficients", True).astype(np.float32)
        rho = floats(node, "rho", True).astype(np.float32)
        sv = floats(node, "support_vectors")
        sv = np.zeros(0, np.float32) if sv is None else sv.astype(np.float32)
        if len(rho) < 1:
            raise fail(node, "rho is empty")
        if v < 0:
            raise fail(node, f"n_supports={v}")
        if v > 0:
            if v > MAX_VECTORS:
                raise OrtNotImplemented(f"{node.describe()}: {v} support vectors (at most {MAX_VECTORS})")
            check_len(node, "support_vectors", len(sv), v * f)
            check_len(node, "coefficients", len(coef), v)
        else:
            check_len(node, "coefficients", len(coef), f)
        return x, n, f, v, coef, rho, sv

    def infer(self, node):
        m = self._model(node)
        return [(dtypes.FLOAT, (m[1], 1))]

    def params(self, node):
        x, n, f, v, coef, rho, sv = self._model(node)
        p = _kernel(node, v == 0)
        p.update({"n": n, "f": f, "v": v, "coef": c_array(coef, "float"), "rho": c_number(rho[0], "float"),
                  "svt": _transposed(sv, v, f), "one_class": bool(int(node.attr("one_class", 0) or 0)),
                  "work": product((n, max(v, 1), f))})
        return p
