"""LayerNorm and GELU as exporters decompose them (passes/fuse_layernorm.py, fuse_gelu.py): which
graphs become one LayerNormalization / Gelu node (a Gelu after a MatMul then becomes its
epilogue), which stay, and every optimisation level computes what onnx.reference does."""
import math

import numpy as np
import pytest
from onnx import helper

from passutil import graph_ops, rand, run_levels
from util import make_model_from_nodes

rng = np.random.default_rng(41)
TOL = dict(rtol=1e-4, atol=1e-5)
LEVELS = (1, 99)   # unfused and fused (each level compiles the model: all four in one test)
N = helper.make_node


def layernorm_model(opset=14, gamma=True, beta=True, square="Pow", axes=(-1,), shape=(3, 5, 8), eps=1e-5,
                    swap=False, x_sym=True):
    """torch's LayerNorm below opset 17: ReduceMean, Sub, Pow 2, ReduceMean, Add eps, Sqrt, Div,
    [Mul gamma], [Add beta]; ReduceMean's axes an attribute before opset 18, an input from it."""
    x = rand(rng, shape)
    x[0, 1, :] += 100.0                       # a row far from 0: the mean matters
    ns = shape[len(shape) + min(axes):]
    inits = {"two": np.array(2.0, np.float32), "eps": np.array(eps, np.float32)}

    def rmean(i, o):
        if opset >= 18:
            inits["axes"] = np.array(axes, np.int64)
            return N("ReduceMean", [i, "axes"], [o])
        return N("ReduceMean", [i], [o], axes=list(axes))
    nodes = [rmean("x", "mean"), N("Sub", ["x", "mean"], ["d"]),
             N("Pow", ["d", "two"], ["sq"]) if square == "Pow" else N("Mul", ["d", "d"], ["sq"]),
             rmean("sq", "var"), N("Add", ["eps", "var"] if swap else ["var", "eps"], ["ve"]),
             N("Sqrt", ["ve"], ["sd"]), N("Div", ["d", "sd"], ["n"])]
    cur = "n"
    if gamma:
        inits["g"] = rand(rng, ns)
        nodes.append(N("Mul", ["g", cur] if swap else [cur, "g"], ["ng"]))
        cur = "ng"
    if beta:
        inits["b"] = rand(rng, ns)
        nodes.append(N("Add", ["b", cur] if swap else [cur, "b"], ["y"]))
    else:
        nodes.append(N("Identity", [cur], ["y"]))
    shapes = {"x": ["batch"] + list(shape[1:])} if x_sym else None
    return make_model_from_nodes(nodes, {"x": x}, inits, ["y"], opset=opset, input_shapes=shapes), {"x": x}


@pytest.mark.parametrize("opset", [13, 18])
@pytest.mark.parametrize("gamma,beta", [(True, True), (False, True), (True, False), (False, False)])
def test_layernorm_pattern(opset, gamma, beta):
    m, feeds = layernorm_model(opset=opset, gamma=gamma, beta=beta)
    ops = graph_ops(m)
    assert ops.get("LayerNormalization") == 1 and "ReduceMean" not in ops and "Sqrt" not in ops, ops
    assert graph_ops(m, 1).get("ReduceMean") == 2
    run_levels(m, feeds, levels=LEVELS, **TOL)


@pytest.mark.parametrize("square,swap,axes", [("Mul", False, (-1,)), ("Pow", True, (-1,)), ("Pow", False, (-2, -1)),
                                              ("Mul", True, (1, 2))])
def test_layernorm_variants(square, swap, axes):
    m, feeds = layernorm_model(square=square, swap=swap, axes=axes)
    feeds["x"][1, 2, 3] = np.nan
    feeds["x"][2, 0, 0] = np.inf
    assert graph_ops(m).get("LayerNormalization") == 1
    run_levels(m, feeds, levels=LEVELS, **TOL)


def _edit(m, fn):
    fn(m.graph)
    return m


@pytest.mark.parametrize("kind", ["axes_not_trailing", "eps_per_column", "eps_is_input", "d_is_output", "gamma_full_shape",
                                  "pow_3"])
def test_layernorm_near_misses_stay(kind):
    m, feeds = layernorm_model(opset=14)
    g = m.graph
    if kind == "axes_not_trailing":
        for n in g.node:
            if n.op_type == "ReduceMean":
                n.attribute[0].CopyFrom(helper.make_attribute("axes", [1]))
    elif kind == "eps_per_column":   # eps of shape (8,): var + eps is no longer one number per row
        g.initializer.remove(next(i for i in g.initializer if i.name == "eps"))
        g.initializer.append(helper.make_tensor("eps", 1, (8,), np.linspace(1e-5, 1.0, 8)))
    elif kind == "eps_is_input":
        g.initializer.remove(next(i for i in g.initializer if i.name == "eps"))
        g.input.append(helper.make_tensor_value_info("eps", 1, []))
        feeds["eps"] = np.array(1e-5, np.float32)
    elif kind == "d_is_output":
        g.output.append(helper.make_empty_tensor_value_info("d"))
    elif kind == "gamma_full_shape":
        g.initializer.remove(next(i for i in g.initializer if i.name == "g"))
        g.initializer.append(helper.make_tensor("g", 1, (3, 5, 8), rand(rng, (3, 5, 8)).reshape(-1)))
        g.input[0].CopyFrom(helper.make_tensor_value_info("x", 1, (3, 5, 8)))
    elif kind == "pow_3":
        g.initializer.remove(next(i for i in g.initializer if i.name == "two"))
        g.initializer.append(helper.make_tensor("two", 1, (), [3.0]))
    ops = graph_ops(m)
    if kind == "gamma_full_shape":   # the normalisation fuses; the full-shape scale stays a Mul
        assert ops.get("LayerNormalization") == 1 and ops.get("Mul") == 1, ops
    else:
        assert "LayerNormalization" not in ops, ops
    run_levels(m, feeds, levels=LEVELS, **TOL)


def gelu_model(form, after_matmul=True, opset=14, half=0.5, root=math.sqrt(2)):
    """0.5 x (1 + erf(x / sqrt 2)) in the orders exporters write it."""
    x = rand(rng, (4, 6)) * 3
    x[0, :3] = [np.nan, np.inf, -np.inf]
    inits = {"one": np.array(1.0, np.float32), "half": np.array(half, np.float32)}
    nodes = []
    src = "x"
    if after_matmul:
        inits["w"], inits["bias"] = rand(rng, (6, 6)), rand(rng, (6,))
        nodes += [N("MatMul", ["x", "w"], ["xw"]), N("Add", ["xw", "bias"], ["h"])]
        src = "h"
    if form.startswith("mul_rsqrt"):
        inits["c"] = np.array(1 / root, np.float32)
        nodes.append(N("Mul", ["c", src], ["t"]))
    else:
        inits["c"] = np.array(root, np.float32)
        nodes.append(N("Div", [src, "c"], ["t"]))
    nodes += [N("Erf", ["t"], ["e"]), N("Add", ["one", "e"], ["e1"])]
    if form in ("legacy", "mul_rsqrt"):      # (x * e1) * 0.5
        nodes += [N("Mul", [src, "e1"], ["m"]), N("Mul", ["m", "half"], ["y"])]
    elif form == "dynamo":                   # x * (0.5 * e1)
        nodes += [N("Mul", ["half", "e1"], ["m"]), N("Mul", [src, "m"], ["y"])]
    else:                                    # (x * 0.5) * e1
        nodes += [N("Mul", [src, "half"], ["m"]), N("Mul", ["e1", "m"], ["y"])]
    return make_model_from_nodes(nodes, {"x": x}, inits, ["y"], opset=opset), {"x": x}


@pytest.mark.parametrize("form", ["legacy", "dynamo", "python", "mul_rsqrt"])
def test_gelu_pattern_becomes_the_matmuls_epilogue(form):
    m, feeds = gelu_model(form)
    assert graph_ops(m) == {"FusedMatMul": 1}, graph_ops(m)
    run_levels(m, feeds, levels=LEVELS, **TOL)


def test_gelu_alone_at_an_old_opset():
    m, feeds = gelu_model("dynamo", after_matmul=False, opset=13)
    assert graph_ops(m) == {"Gelu": 1}
    run_levels(m, feeds, **TOL)


@pytest.mark.parametrize("kw", [dict(half=0.6), dict(root=1.5), dict(root=2.0)])
def test_gelu_near_misses_stay(kw):
    m, feeds = gelu_model("legacy", **kw)
    assert graph_ops(m).get("Erf") == 1
    run_levels(m, feeds, levels=LEVELS, **TOL)


def test_gelu_intermediate_read_elsewhere_stays():
    m, feeds = gelu_model("python")
    m.graph.output.append(helper.make_empty_tensor_value_info("e1"))
    assert graph_ops(m).get("Erf") == 1
    run_levels(m, feeds, levels=LEVELS, **TOL)


def gelu_tanh_model(form, cube="pow", kappa=0.044715):
    """0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) after a MatMul + bias, as exporters write
    GPT-2's gelu_new and gelu(approximate="tanh") below opset 20."""
    x = rand(rng, (4, 6)) * 3
    x[0, :3] = [np.nan, np.inf, -np.inf]
    inits = {"w": rand(rng, (6, 6)), "bias": rand(rng, (6,)), "one": np.array(1.0, np.float32),
             "half": np.array(0.5, np.float32), "k": np.array(kappa, np.float32),
             "c": np.array(math.sqrt(2 / math.pi), np.float32)}
    nodes = [N("MatMul", ["x", "w"], ["xw"]), N("Add", ["xw", "bias"], ["h"])]
    if cube == "pow":
        inits["three"] = np.array(3.0, np.float32)
        nodes.append(N("Pow", ["h", "three"], ["h3"]))
    elif cube == "mulmul":
        nodes += [N("Mul", ["h", "h"], ["h2"]), N("Mul", ["h2", "h"], ["h3"])]
    else:
        nodes += [N("Mul", ["h", "h"], ["h2"]), N("Mul", ["h", "h2"], ["h3"])]
    nodes += [N("Mul", ["k", "h3"], ["kh3"]), N("Add", ["h", "kh3"], ["inner"]), N("Mul", ["c", "inner"], ["ci"]),
              N("Tanh", ["ci"], ["t"]), N("Add", ["one", "t"], ["e1"])]
    if form == "hf":                         # (x * 0.5) * e1: HF's 0.5 * input * (1 + tanh(...))
        nodes += [N("Mul", ["half", "h"], ["m"]), N("Mul", ["m", "e1"], ["y"])]
    elif form == "legacy":                   # (x * e1) * 0.5
        nodes += [N("Mul", ["h", "e1"], ["m"]), N("Mul", ["m", "half"], ["y"])]
    else:                                    # x * (0.5 * e1)
        nodes += [N("Mul", ["half", "e1"], ["m"]), N("Mul", ["h", "m"], ["y"])]
    return make_model_from_nodes(nodes, {"x": x}, inits, ["y"], opset=14), {"x": x}


@pytest.mark.parametrize("form", ["hf", "legacy", "dynamo"])
@pytest.mark.parametrize("cube", ["pow", "mulmul", "mulmul_r"])
def test_gelu_tanh_pattern_becomes_the_matmuls_epilogue(form, cube):
    m, feeds = gelu_tanh_model(form, cube)
    assert graph_ops(m) == {"FusedMatMul": 1}, graph_ops(m)
    run_levels(m, feeds, levels=LEVELS, **TOL)


def test_gelu_tanh_near_miss_stays():
    m, feeds = gelu_tanh_model("hf", kappa=0.05)      # not GELU's constant
    ops = graph_ops(m)
    assert "Tanh" in ops and ops.get("FusedMatMul") == 1, ops
    run_levels(m, feeds, levels=LEVELS, **TOL)


def test_gelu_tanh_intermediate_read_elsewhere_stays():
    m, feeds = gelu_tanh_model("hf", "mulmul")
    m.graph.output.append(helper.make_empty_tensor_value_info("h2"))   # x^2 also a graph output
    ops = graph_ops(m)
    assert "Tanh" in ops and ops.get("FusedMatMul") == 1, ops
    run_levels(m, feeds, levels=LEVELS, **TOL)
