"""BatchNormalization folded into the Conv or Gemm that feeds it (GraphOptimizationLevel >= BASIC).

    BN(Conv(X, W, B)) = Conv(X, W * s, (B - mean) * s + bias),  s = scale / sqrt(var + eps)

per output channel (Gemm: per output column). Applies only when the producer's output feeds the
BatchNormalization alone (and is not a graph output), every weight and statistic is a constant
initializer, BN runs in inference mode with per-channel statistics, and everything is float or
double. The new weights are computed in float64 and rounded once to the model's type; they get
fresh names, so initializers shared with other nodes are left as they were.
"""
from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from .protoutil import STD, all_names, constants, copy, fresh_name, readers, replace_nodes

FLOAT_TYPES = (onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE)


def _attr(n: onnx.NodeProto, name: str, default):
    for a in n.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def _inference_bn(bn: onnx.NodeProto, opset: int) -> bool:
    if len(bn.input) != 5 or any(not x for x in bn.input) or any(o for o in bn.output[1:]):
        return False
    if opset < 7 and not _attr(bn, "is_test", 0):
        return False
    if opset < 9 and not _attr(bn, "spatial", 1):
        return False
    return not (opset >= 14 and _attr(bn, "training_mode", 0))


def fold_batchnorm(model: onnx.ModelProto) -> onnx.ModelProto:
    g = model.graph
    opset = next((o.version for o in model.opset_import if o.domain in STD), 1)
    consts = constants(g)
    outputs = {o.name for o in g.output}
    users = readers(g)
    producer = {o: i for i, n in enumerate(g.node) for o in n.output if o}
    taken = all_names(g)
    out = None
    drop: set[int] = set()
    for bi, bn in enumerate(g.node):
        if bn.op_type != "BatchNormalization" or bn.domain not in STD or not _inference_bn(bn, opset):
            continue
        y = bn.input[0]
        pi = producer.get(y)
        if pi is None or pi in drop or y in outputs or users.get(y) != [bi]:
            continue
        p = g.node[pi]
        if p.domain not in STD or p.op_type not in ("Conv", "Gemm"):
            continue
        if not all(x in consts for x in bn.input[1:]) or len(p.input) < 2 or p.input[1] not in consts:
            continue
        bias = p.input[2] if len(p.input) > 2 and p.input[2] else None
        if bias is not None and bias not in consts:
            continue
        w_t = consts[p.input[1]]
        if w_t.data_type not in FLOAT_TYPES or any(consts[x].data_type not in FLOAT_TYPES
                                                   for x in bn.input[1:]):
            continue
        scale, beta, mean, var = (numpy_helper.to_array(consts[x]).astype(np.float64)
                                  for x in bn.input[1:])
        if not scale.ndim == beta.ndim == mean.ndim == var.ndim == 1:
            continue
        w = numpy_helper.to_array(w_t)
        s = scale / np.sqrt(var + float(_attr(bn, "epsilon", 1e-5)))
        b0 = numpy_helper.to_array(consts[bias]).astype(np.float64) if bias else np.zeros(1)
        if p.op_type == "Conv":
            if w.ndim < 3 or s.shape[0] != w.shape[0] or (bias and b0.shape != s.shape):
                continue
            w2 = w.astype(np.float64) * s.reshape((-1,) + (1,) * (w.ndim - 1))
            b2 = (b0 - mean) * s + beta
            attrs_update = {}
        else:
            alpha, beta_g = float(_attr(p, "alpha", 1.0)), float(_attr(p, "beta", 1.0))
            tb = int(_attr(p, "transB", 0))
            if w.ndim != 2 or w.shape[0 if tb else 1] != s.shape[0]:
                continue
            w2 = w.astype(np.float64) * (s[:, None] if tb else s[None, :])
            c = b0 * beta_g if bias else np.zeros(1)
            if c.ndim > 2 or (c.ndim >= 1 and c.shape[-1] not in (1, s.shape[0])):
                continue
            b2 = (c - mean) * s + beta
            attrs_update = {"beta": 1.0, "alpha": alpha}
        dt = w.dtype
        if out is None:
            out = copy(model)
        w_name = fresh_name(taken, f"{p.input[1]}_bnfold")
        b_name = fresh_name(taken, f"{bn.output[0]}_bnfold_bias")
        out.graph.initializer.extend([numpy_helper.from_array(w2.astype(dt), w_name),
                                      numpy_helper.from_array(np.asarray(b2, dt), b_name)])
        q = out.graph.node[pi]
        q.input[1] = w_name
        if len(q.input) > 2:
            q.input[2] = b_name
        else:
            q.input.append(b_name)
        for a in list(q.attribute):
            if a.name in attrs_update:
                q.attribute.remove(a)
        q.attribute.extend(helper.make_attribute(k, v) for k, v in attrs_update.items())
        q.output[0] = bn.output[0]
        drop.add(bi)
    if out is None:
        return model
    replace_nodes(out.graph, [n for i, n in enumerate(out.graph.node) if i not in drop])
    return out
