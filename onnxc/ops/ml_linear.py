"""ai.onnx.ml linear models and per-feature transforms: LinearClassifier, LinearRegressor,
Normalizer, Scaler, Binarizer, Imputer.

Semantics follow onnxruntime's CPU kernels: inputs are read as float, a 1-D input is one row,
LinearClassifier with one score column and two labels adds the complementary column.
"""
from __future__ import annotations

import numpy as np

from .. import dtypes
from ..symbolic import product
from .common import attr_enum, fail
from .ml_common import (HEADERS, ML, Labels, c_array, c_number, c_strings, check_len, floats, ints,
                        numeric_input, post_transform, rows_features)
from .registry import OpSpec, register

FLOAT = dtypes.FLOAT


@register
class LinearClassifier(OpSpec):
    op_type = "LinearClassifier"
    domain = ML
    template = "ml_linear_classifier.c.j2"
    headers = HEADERS

    def _model(self, node):
        x = numeric_input(node)
        n, f = rows_features(node, x)
        coef = floats(node, "coefficients", required=True).astype(np.float32)
        icpt = floats(node, "intercepts")
        labels = Labels(node, "classlabels_ints", "classlabels_strings")
        c = len(icpt) if icpt is not None else (len(coef) // f if isinstance(f, int) and f else 0)
        if icpt is None:
            icpt = np.zeros(c, np.float32)
        if not isinstance(f, int):
            raise fail(node, "the feature dimension of the input must be known")
        if len(coef) < c * f:
            raise fail(node, f"attribute coefficients has {len(coef)} values, {c} classes x {f} features "
                       "need more")
        coef = coef[:c * f]   # onnxruntime reads the first classes x features (onnxruntime's own
        #                       logreg_iris.onnx example has 4 features' worth for a 2-feature input)
        if c < 1:
            raise fail(node, "no classes (intercepts is empty)")
        if c > 1 and labels.n != c:
            raise fail(node, f"{labels.n} class labels for {c} score columns")
        add_second = c == 1 and labels.n == 2
        return x, n, f, coef, icpt.astype(np.float32), labels, c, add_second

    def infer(self, node):
        x, n, f, coef, icpt, labels, c, add_second = self._model(node)
        return [(labels.etype, (n,)), (FLOAT, (n, 2 if add_second else c))]

    def params(self, node):
        x, n, f, coef, icpt, labels, c, add_second = self._model(node)
        if c == 1:   # one score: labels by sign
            if labels.n == 2:
                bin_labels = labels.c_init()
            else:
                bin_labels = c_strings(["0", "1"]) if labels.is_str else "0, 1"
        else:
            bin_labels = ""
        return {"n": n, "f": f, "c": c, "coef": c_array(coef, "float"), "icpt": c_array(icpt, "float"),
                "labels_str": labels.is_str, "labels": labels.c_init() if c > 1 else bin_labels,
                "add_second": add_second, "post": post_transform(node), "work": product((n, f, c))}


@register
class LinearRegressor(OpSpec):
    op_type = "LinearRegressor"
    domain = ML
    template = "ml_linear_regressor.c.j2"
    headers = HEADERS

    def _model(self, node):
        x = numeric_input(node)
        n, f = rows_features(node, x)
        if not isinstance(f, int):
            raise fail(node, "the feature dimension of the input must be known")
        t = int(node.attr("targets", 1))
        if t < 1:
            raise fail(node, f"targets={t} must be >= 1")
        coef = floats(node, "coefficients", required=True).astype(np.float32)
        check_len(node, "coefficients", len(coef), t * f)
        icpt = floats(node, "intercepts")
        icpt = np.zeros(t, np.float32) if icpt is None or len(icpt) == 0 else icpt.astype(np.float32)
        check_len(node, "intercepts", len(icpt), t)
        return x, n, f, t, coef, icpt

    def infer(self, node):
        x, n, f, t, coef, icpt = self._model(node)
        return [(FLOAT, (n, t))]

    def params(self, node):
        x, n, f, t, coef, icpt = self._model(node)
        return {"n": n, "f": f, "t": t, "coef": c_array(coef, "float"), "icpt": c_array(icpt, "float"),
                "post": post_transform(node), "work": product((n, f, t))}


class _RowWise(OpSpec):
    """Ops mapping a numeric tensor to float, feature by feature (the last dim)."""
    domain = ML
    headers = HEADERS

    def infer(self, node):
        x = numeric_input(node)
        return [(FLOAT, x.shape)]

    def _rows(self, node):
        x = node.inputs[0]
        if x.rank == 0:
            return 1, 1
        return product(x.shape[:-1]), x.shape[-1]


@register
class Normalizer(_RowWise):
    op_type = "Normalizer"
    template = "ml_normalizer.c.j2"

    def infer(self, node):
        x = numeric_input(node)
        if x.rank not in (1, 2):
            raise fail(node, f"input must be 1-D or 2-D, got rank {x.rank}")
        attr_enum(node, "norm", ("MAX", "L1", "L2"))
        return [(FLOAT, x.shape)]

    def params(self, node):
        n, f = self._rows(node)
        return {"n": n, "f": f, "norm": attr_enum(node, "norm", ("MAX", "L1", "L2")),
                "work": product(node.inputs[0].shape)}


@register
class Scaler(_RowWise):
    op_type = "Scaler"
    template = "ml_scaler.c.j2"

    def params(self, node):
        n, f = self._rows(node)
        off = floats(node, "offset")
        sc = floats(node, "scale")
        off = np.zeros(1, np.float32) if off is None or not len(off) else off.astype(np.float32)
        sc = np.ones(1, np.float32) if sc is None or not len(sc) else sc.astype(np.float32)
        for name, a in (("offset", off), ("scale", sc)):
            if len(a) != 1 and len(a) != f:
                raise fail(node, f"attribute {name} has {len(a)} values for {f} features")
        return {"n": n, "f": f, "off": c_array(off, "float"), "sc": c_array(sc, "float"),
                "per_off": len(off) != 1, "per_sc": len(sc) != 1, "work": product(node.inputs[0].shape)}


@register
class Binarizer(OpSpec):
    op_type = "Binarizer"
    domain = ML
    template = "ml_binarizer.c.j2"
    headers = HEADERS

    def infer(self, node):
        x = numeric_input(node)
        return [(x.etype, x.shape)]

    def params(self, node):
        x = node.inputs[0]
        cc = "double" if x.etype.c == "double" else "float"
        return {"thr": c_number(np.float32(node.attr("threshold", 0.0)), cc), "work": product(x.shape),
                "floating": cc == x.etype.c}

    def inplace(self, node):
        return [(0, 0)]


@register
class Imputer(OpSpec):
    op_type = "Imputer"
    domain = ML
    template = "ml_imputer.c.j2"
    headers = HEADERS

    def infer(self, node):
        x = numeric_input(node)    # onnxruntime: float and int64; double and int32 as onnx.reference
        self.params(node)
        return [(x.etype, x.shape)]

    def params(self, node):
        x = node.inputs[0]
        f = x.shape[-1] if x.rank else 1
        ct = x.etype.c
        if ct in ("float", "double"):
            vals = floats(node, "imputed_value_floats")
            rep = float(np.float32(node.attr("replaced_value_float", 0.0)))
            rep_c = c_number(rep, ct)
        else:
            vals = ints(node, "imputed_value_int64s")
            rep = int(node.attr("replaced_value_int64", 0))
            rep_c = c_array([rep], "int64_t")
        if vals is None or not len(vals):
            raise fail(node, "imputed values are empty")
        if len(vals) != 1 and len(vals) != f:
            raise fail(node, f"{len(vals)} imputed values for {f} features")
        if ct == "int32_t" and not all(-2**31 <= int(v) < 2**31 for v in vals):
            raise fail(node, "attribute imputed_value_int64s holds values outside int32 for an int32 input")
        return {"f": f, "vals": c_array(vals, ct), "per": len(vals) != 1, "rep": rep_c,
                "rep_nan": rep != rep, "ct": ct, "n": product(x.shape[:-1]) if x.rank else 1,
                "work": product(x.shape)}

    def inplace(self, node):
        return [(0, 0)]
