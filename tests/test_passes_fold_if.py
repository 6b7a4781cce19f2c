"""If with a compile-time condition replaced by its taken branch (passes/fold_if), and Shape/Size
of statically shaped values folded (passes/fold_constants): structure after the passes, and
every optimisation level computing what onnx.reference does (level 0 runs the real If)."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import onnxc

from passutil import after, ops, run_levels
from util import make_model_from_nodes

F, I64 = TensorProto.FLOAT, TensorProto.INT64
rng = np.random.default_rng(11)


def _vi(name, et=F, shape=None):
    return helper.make_tensor_value_info(name, et, shape)


def _model(nodes, inputs, outputs, inits=(), opset=17, value_info=()):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits), value_info=list(value_info))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def _cond_nodes(x="x", n=6):
    """cond = Equal(Size(x), n): constant once Size(x) folds."""
    return [helper.make_node("Size", [x], ["sz"]),
            helper.make_node("Equal", ["sz", "n"], ["cond"])], helper.make_tensor("n", I64, [], [n])


def _branches():
    """then: x * w + 1 (reads outer x and w, a Constant inside); else: Neg(x)."""
    then_g = helper.make_graph([
        helper.make_node("Constant", [], ["one"], value=helper.make_tensor("one", F, [], [1.0])),
        helper.make_node("Mul", ["x", "w"], ["t"], name="mul"),
        helper.make_node("Add", ["t", "one"], ["y_then"], name="add"),
    ], "then", [], [_vi("y_then")])
    else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["y_else"])], "else", [], [_vi("y_else")])
    return then_g, else_g


@pytest.mark.parametrize("opset", [1, 11, 13, 16, 19, 21, 23, 24, 25])   # every If version
@pytest.mark.parametrize("n,taken", [(6, "then"), (5, "else")])
def test_if_with_constant_condition_inlined(n, taken, opset):
    cond, nt = _cond_nodes(n=n)
    then_g, else_g = _branches()
    m = _model(cond + [helper.make_node("If", ["cond"], ["y"], then_branch=then_g, else_branch=else_g),
                       helper.make_node("Relu", ["y"], ["z"])],
               [_vi("x", F, [2, 3])], [_vi("z", F, None)], [nt, helper.make_tensor("w", F, [3], [1, 2, 3])],
               opset=opset)
    out = after(m, 1)
    assert ops(out) == ({"Mul": 1, "Add": 1, "Relu": 1} if taken == "then" else {"Neg": 1, "Relu": 1})
    assert ops(after(m, 0))["If"] == 1
    x = rng.standard_normal((2, 3)).astype(np.float32)
    x[0, 0] = np.nan
    run_levels(m, {"x": x})


def test_branch_outputs_constants_and_repeats():
    """Outputs that are a branch Constant, a branch initializer, one value twice."""
    then_g = helper.make_graph([
        helper.make_node("Constant", [], ["k"], value_ints=[4, 5]),
        helper.make_node("Abs", ["x"], ["a"]),
    ], "then", [], [_vi("k", I64), _vi("init", F), _vi("a"), _vi("a")],
        [helper.make_tensor("init", F, [1, 3], [0.5, -0.5, np.inf])])
    else_g = helper.make_graph([helper.make_node("Constant", [], ["p"], value_ints=[7, 8]),
                                helper.make_node("Neg", ["x"], ["q"]), helper.make_node("Exp", ["x"], ["r"])],
                               "else", [], [_vi("p", I64), _vi("q"), _vi("r"), _vi("r")])
    cond, nt = _cond_nodes(n=6)
    for n in (5, 6):
        nt.int64_data[:] = [n]
        m = _model(cond + [helper.make_node("If", ["cond"], list("ABCD"), then_branch=then_g, else_branch=else_g)],
                   [_vi("x", F, [2, 3])], [onnx.ValueInfoProto(name=o) for o in "ABCD"], [nt])
        assert "If" not in ops(after(m, 1))
        run_levels(m, {"x": rng.standard_normal((2, 3)).astype(np.float32)})


def test_branch_output_is_an_outer_value():
    """A branch returning an outer value directly (onnx.checker refuses such a model, onnx.reference
    runs it): the inlined graph copies it with an Identity."""
    then_g = helper.make_graph([helper.make_node("Abs", ["x"], ["a"])], "then", [], [_vi("x"), _vi("a")])
    else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["b"])], "else", [], [_vi("b"), _vi("x")])
    cond, nt = _cond_nodes(n=6)
    m = _model(cond + [helper.make_node("If", ["cond"], ["A", "B"], then_branch=then_g, else_branch=else_g)],
               [_vi("x", F, [2, 3])], [_vi("A", F, [2, 3]), _vi("B", F, [2, 3])], [nt])
    out = after(m, 1)
    assert ops(out) == {"Abs": 1, "Identity": 1}
    x = rng.standard_normal((2, 3)).astype(np.float32)
    want = ReferenceEvaluator(m).run(None, {"x": x})
    got = onnxc.InferenceSession(out.SerializeToString()).run(None, {"x": x})
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_nested_if_folds_and_nested_real_if_reads_renamed_values():
    """The taken branch holds two Ifs: one whose cond the branch computes from constants (folds
    once inlined), one whose cond is data (stays a real If; its body reads a value of the
    inlined branch, which was renamed)."""
    inner_fold = helper.make_node(
        "If", ["c2"], ["u"],
        then_branch=helper.make_graph([helper.make_node("Sigmoid", ["v"], ["u1"])], "t2", [], [_vi("u1")]),
        else_branch=helper.make_graph([helper.make_node("Tanh", ["v"], ["u2"])], "e2", [], [_vi("u2")]))
    inner_real = helper.make_node(
        "If", ["flag"], ["r"],
        then_branch=helper.make_graph([helper.make_node("Add", ["u", "v"], ["r1"])], "t3", [], [_vi("r1")]),
        else_branch=helper.make_graph([helper.make_node("Sub", ["u", "v"], ["r2"])], "e3", [], [_vi("r2")]))
    then_g = helper.make_graph([
        helper.make_node("Exp", ["x"], ["v"]),
        helper.make_node("Constant", [], ["zero"], value_int=0),
        helper.make_node("Greater", ["sz", "zero"], ["c2"]),
        inner_fold, inner_real,
    ], "then", [], [_vi("r")])
    else_g = helper.make_graph([helper.make_node("Identity", ["x"], ["e"])], "else", [], [_vi("e")])
    cond, nt = _cond_nodes(n=6)
    m = _model(cond + [helper.make_node("If", ["cond"], ["y"], then_branch=then_g, else_branch=else_g)],
               [_vi("x", F, [2, 3]), _vi("flag", TensorProto.BOOL, [])], [_vi("y", F, None)], [nt])
    out = after(m, 1)
    assert ops(out) == {"Exp": 1, "Sigmoid": 1, "If": 1}
    names = [o for n in out.graph.node for o in n.output]
    assert len(names) == len(set(names))
    x = rng.standard_normal((2, 3)).astype(np.float32)
    for flag in (True, False):
        run_levels(m, {"x": x, "flag": np.array(flag)})


def test_two_ifs_with_the_same_branch_names_get_unique_names():
    def branch(op):
        return helper.make_graph([helper.make_node(op, ["x"], ["t"], name="n"),
                                  helper.make_node("Neg", ["t"], ["o"], name="n2")], op, [], [_vi("o")])
    cond, nt = _cond_nodes(n=6)
    m = _model(cond + [
        helper.make_node("If", ["cond"], ["a"], then_branch=branch("Abs"), else_branch=branch("Exp")),
        helper.make_node("If", ["cond"], ["b"], then_branch=branch("Sin"), else_branch=branch("Cos")),
        helper.make_node("Add", ["a", "b"], ["y"])], [_vi("x", F, [2, 3])], [_vi("y", F, None)], [nt])
    out = after(m, 1)
    assert ops(out) == {"Abs": 1, "Sin": 1, "Neg": 2, "Add": 1}
    outs = [o for n in out.graph.node for o in n.output]
    names = [n.name for n in out.graph.node if n.name]
    assert len(outs) == len(set(outs)) and len(names) == len(set(names))
    run_levels(m, {"x": rng.standard_normal((2, 3)).astype(np.float32)})


def test_data_condition_keeps_a_real_if():
    then_g, else_g = _branches()
    m = _model([helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)],
               [_vi("c", TensorProto.BOOL, [1]), _vi("x", F, [2, 3])], [_vi("y", F, None)],
               [helper.make_tensor("w", F, [3], [1, 2, 3])])
    assert ops(after(m, 99)) == {"If": 1}
    x = rng.standard_normal((2, 3)).astype(np.float32)
    for c in (True, False):
        run_levels(m, {"c": np.array([c]), "x": x})


def test_symbolic_dims_do_not_fold():
    """Shape/Size of an input with a named dim stay nodes (a free-dimension override comes later),
    and so does an If that tests them."""
    then_g, else_g = _branches()
    cond, nt = _cond_nodes(n=6)
    m = _model(cond + [helper.make_node("Shape", ["x"], ["s"]),
                       helper.make_node("If", ["cond"], ["y"], then_branch=then_g, else_branch=else_g)],
               [_vi("x", F, ["N", 3])], [_vi("y", F, None), _vi("s", I64, None)],
               [nt, helper.make_tensor("w", F, [3], [1, 2, 3])])
    m.graph.value_info.append(_vi("x_unknown", F, [None, 3]))
    out = after(m, 99)
    assert ops(out) == {"Size": 1, "Equal": 1, "Shape": 1, "If": 1}
    for rows in (2, 3):
        run_levels(m, {"x": rng.standard_normal((rows, 3)).astype(np.float32)})


@pytest.mark.parametrize("opset", [6, 13, 15, 19, 21, 23, 24, 25])
@pytest.mark.parametrize("start,end", [(None, None), (1, None), (-2, -1), (-9, 9), (2, 1)])
def test_shape_and_size_of_static_shapes_fold(opset, start, end):
    """Graph inputs and value_info entries with numeric dims; Shape-15's start/end clamping."""
    attrs = {} if opset < 15 else {k: v for k, v in (("start", start), ("end", end)) if v is not None}
    if opset < 15 and (start, end) != (None, None):
        pytest.skip("start/end exist from opset 15")
    m = _model([helper.make_node("Relu", ["x"], ["h"]),
                helper.make_node("Shape", ["h"], ["s"], **attrs),
                helper.make_node("Size", ["x"], ["n"]),
                helper.make_node("Cast", ["s"], ["sf"], to=F),
                helper.make_node("Mul", ["n", "k"], ["m"])],
               [_vi("x", F, [2, 3, 4])], [_vi("sf", F, None), _vi("m", I64, None)],
               [helper.make_tensor("k", I64, [], [3])], opset=opset,
               value_info=[_vi("h", F, [2, 3, 4])])
    assert ops(after(m, 1)) == {}
    run_levels(m, {"x": rng.standard_normal((2, 3, 4)).astype(np.float32)}, levels=(0, 1))


def test_affine_grid_expansion_folds_its_size_tests():
    """The pattern of AffineGrid's function body: If(Equal(Size(size), 4)) Splitting `size`."""
    then_g = helper.make_graph([
        helper.make_node("Split", ["size"], ["N_t", "C_t", "H_t", "W_t"], num_outputs=4),
        helper.make_node("Identity", ["one_1d"], ["D_t"])], "g1", [], [_vi(v, I64) for v in
                                                                         ("N_t", "C_t", "D_t", "H_t", "W_t")])
    else_g = helper.make_graph([
        helper.make_node("Split", ["size"], ["N_e", "C_e", "D_e", "H_e", "W_e"], num_outputs=5)],
        "g2", [], [_vi(v, I64) for v in ("N_e", "C_e", "D_e", "H_e", "W_e")])
    m = _model([helper.make_node("Size", ["size"], ["nd"]),
                helper.make_node("Equal", ["nd", "four"], ["is2d"]),
                helper.make_node("If", ["is2d"], ["N", "C", "D", "H", "W"], then_branch=then_g,
                                 else_branch=else_g),
                helper.make_node("Concat", ["N", "C", "D", "H", "W"], ["y"], axis=0)],
               [_vi("size", I64, [4])], [_vi("y", I64, None)],
               [helper.make_tensor("four", I64, [], [4]), helper.make_tensor("one_1d", I64, [1], [1])], opset=18)
    out = after(m, 1)
    assert ops(out) == {"Split": 1, "Concat": 1}
    run_levels(m, {"size": np.array([2, 3, 5, 7], np.int64)})


def test_non_scalar_condition_left_to_if():
    """A constant cond with two elements: not folded (If reports it at run time)."""
    then_g, else_g = _branches()
    m = _model([helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)],
               [_vi("x", F, [2, 3])], [_vi("y", F, None)],
               [helper.make_tensor("c", TensorProto.BOOL, [2], [True, False]),
                helper.make_tensor("w", F, [3], [1, 2, 3])])
    assert ops(after(m, 1)) == {"If": 1}


def test_planner_with_many_independent_run_time_dims_stays_fast_and_valid():
    """What the inlined AffineGrid expansion gives the planner: many blocks sized by several
    independent run-time dims. Offsets must stay small expressions (they nested max() atoms
    exponentially before) and never overlap, whatever the dims."""
    import time

    from onnxc.planner import Block, _place
    from onnxc.symbolic import evaluate, sym
    syms = [sym(s) for s in ("N", "D", "H", "W")]
    blocks = []
    for k in range(60):
        a, b = syms[k % 4], syms[(k * 7 + 1) % 4]
        size = 64 * (a * b if k % 3 else a) + 64 * (k % 5)
        blocks.append(Block(f"g{k}", size, k // 2, k // 2 + 1 + k % 4))
    t0 = time.perf_counter()
    arena = _place(blocks, {"N": 16, "D": 16, "H": 16, "W": 16})
    assert time.perf_counter() - t0 < 10
    for env in ({"N": 1, "D": 7, "H": 0, "W": 3}, {"N": 40, "D": 1, "H": 5, "W": 100}):
        spans = [(evaluate(b.offset, env), evaluate(b.offset + b.size, env), b) for b in blocks]
        for lo, hi, b in spans:
            assert 0 <= lo and hi <= evaluate(arena, env)
            for lo2, hi2, b2 in spans:
                if b2 is not b and b.start <= b2.end and b2.start <= b.end:
                    assert hi <= lo2 or hi2 <= lo
