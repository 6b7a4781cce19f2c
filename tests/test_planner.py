"""The memory planner on tiny graphs, with the offsets it must produce."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from onnxc import compiler, ir, planner, shapes
from onnxc.planner import NodeFacts
from onnxc.symbolic import sym


def graph_of(nodes, inputs, outputs, opset=17):
    m = helper.make_model(helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs]),
        opset_imports=[helper.make_opsetid("", opset)])
    g = ir.from_model(m)
    shapes.infer(g)
    return g


def no_inplace(node):
    return NodeFacts()


def offsets(g, plan):
    return {v.name: plan.storage[v.id][1] for v in g.values if plan.storage[v.id][0] == "arena"}


def chain(shape):
    nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Exp", ["a"], ["b"]),
             helper.make_node("Tanh", ["b"], ["c"]), helper.make_node("Sigmoid", ["c"], ["y"])]
    return graph_of(nodes, [("x", shape)], ["y"])


def test_chain_reuses_two_slots():
    g = chain([1, 16])                      # 64 bytes per tensor
    p = planner.plan(g, no_inplace)
    assert offsets(g, p) == {"a": 0, "b": 64, "c": 0}
    assert p.storage[g.outputs[0].id] == ("output", 0)
    assert p.arena_at({}) == 128 == p.lower_bound({})


def test_chain_in_place_needs_no_arena():
    g = chain([1, 16])
    p = planner.plan(g, compiler.facts)
    assert offsets(g, p) == {}
    assert p.arena_at({}) == 0
    # everything was computed straight into the output buffer
    assert {p.storage[v.id] for v in g.values if v.producer is not None} == {("output", 0)}


def test_input_is_never_written_in_place():
    g = chain([1, 16])
    p = planner.plan(g, compiler.facts)
    assert p.storage[g.inputs[0].id] == ("input", 0)


def test_symbolic_chain_offsets_are_expressions():
    g = chain(["N", 16])
    p = planner.plan(g, no_inplace)
    n = sym("N")
    assert offsets(g, p) == {"a": 0, "b": 64 * n, "c": 0}
    for batch in (1, 7, 32):
        assert p.arena_at({"N": batch}) == 128 * batch == p.lower_bound({"N": batch})


def test_overlapping_lifetimes_get_disjoint_blocks():
    nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Exp", ["x"], ["b"]),
             helper.make_node("Add", ["a", "b"], ["c"]), helper.make_node("Tanh", ["c"], ["y"])]
    g = graph_of(nodes, [("x", [4, 4])], ["y"])
    p = planner.plan(g, no_inplace)
    o = offsets(g, p)
    assert sorted([o["a"], o["b"]]) == [0, 64]
    assert o["c"] in (0, 64, 128)
    # c is live with a and b at node 2: it cannot share with either
    assert o["c"] == 128
    assert p.arena_at({}) == p.lower_bound({}) == 192


def test_small_block_fills_gap_between_large_ones():
    # big1 (1024 B) lives 0..1, small (64 B) lives 1..2, big2 (1024 B) lives 2..3
    nodes = [helper.make_node("Relu", ["x"], ["big1"]),
             helper.make_node("Exp", ["small_in"], ["small"]),
             helper.make_node("Add", ["big1", "small"], ["big2"]),
             helper.make_node("Tanh", ["big2"], ["y"])]
    g = graph_of(nodes, [("x", [16, 16]), ("small_in", [16])], ["y"])
    p = planner.plan(g, no_inplace)
    o = offsets(g, p)
    assert o["big1"] == 0 and o["big2"] in (0, 1024)
    assert p.arena_at({}) <= 1.1 * p.lower_bound({})


def test_random_chains_stay_near_lower_bound():
    rng = np.random.default_rng(1)
    for trial in range(20):
        nodes, prev, inputs = [], "x", [("x", [1, 16])]
        for i in range(12):
            w = int(rng.integers(1, 64))
            inputs.append((f"w{i}", [1, w]))
            # broadcasting Add grows/shrinks tensors: x:[1,16] + w:[1,w] needs w==16 or 1
            nodes.append(helper.make_node("Relu", [prev], [f"t{i}"]))
            prev = f"t{i}"
        nodes.append(helper.make_node("Tanh", [prev], ["y"]))
        g = graph_of(nodes, [("x", [int(rng.integers(1, 50)), 16])], ["y"])
        p = planner.plan(g, no_inplace)
        assert p.arena_at({}) <= 1.1 * p.lower_bound({})


def test_scratch_is_planned_for_its_node_only():
    g = chain([1, 16])
    def facts(node):
        return NodeFacts(scratch=100 if node.index == 1 else 0)
    p = planner.plan(g, facts)
    assert set(p.scratch) == {1}
    o = offsets(g, p)
    s = p.scratch[1]
    # scratch at node 1 overlaps a (0..1) and b (1..2) in time, so it sits apart from both
    for name in ("a", "b"):
        assert s >= o[name] + 64 or s + 128 <= o[name]


def test_output_that_is_an_input_is_copied():
    nodes = [helper.make_node("Relu", ["x"], ["y"])]
    m = helper.make_model(helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("x", TensorProto.FLOAT, None)]),
        opset_imports=[helper.make_opsetid("", 17)])
    g = ir.from_model(m)
    shapes.infer(g)
    p = planner.plan(g, compiler.facts)
    assert [(v.name, j) for v, j in p.copies] == [("x", 1)]


def test_symbolic_cnn_plan_is_tight_at_every_batch():
    """Conv scratch grows with min(batch, block), or is fixed (the direct kernel's): placement must
    still prove its offsets for every batch with one plan. A fixed scratch fits below a
    batch-proportional block only from some batch on, which no single offset can prove, so mid
    batches may cost a little above the liveness bound (tiny_cnn: 1.13 at batch 16)."""
    import os
    from onnxc import loader
    path = os.path.join(os.path.dirname(__file__), "..", "examples", "tiny_cnn.onnx")
    c = compiler.compile_model(loader.load(path))
    for batch in (1, 3, 16, 1000):
        env = {"batch": batch}
        assert c.plan.arena_at(env) <= (1.01 if batch in (1, 1000) else 1.15) * c.plan.lower_bound(env)


def test_max_and_min_atoms_are_compared():
    from onnxc.symbolic import dmax, dmin, provably_le
    n = sym("N")
    assert provably_le(64 * n, dmax(64 * n, 1000))
    assert provably_le(1000, dmax(64 * n, 1000) + 5)
    assert provably_le(dmin(n, 1024), n)
    assert not provably_le(dmax(64 * n, 1000), 64 * n)


def _random_blocks(rng, n):
    out = []
    for i in range(n):
        start = int(rng.integers(0, 3 * n))
        size = int(rng.choice([0, 64, 128, 192, 256, 1024, 4096]) * rng.integers(1, 4))
        out.append(planner.Block(f"g{i}", size, start, start + int(rng.integers(0, n // 2 + 1))))
    return out


@pytest.mark.parametrize("seed", range(6))
def test_concrete_placement_equals_the_symbolic_one(seed):
    """Number-only sizes take a sweep (_place_concrete); it must choose exactly the offsets the general
    symbolic first-fit chooses (equal sizes, zero sizes, nested and touching lifetimes included)."""
    rng = np.random.default_rng(seed)
    a = _random_blocks(rng, 150)
    b = [planner.Block(x.key, x.size, x.start, x.end) for x in a]
    arena_a = planner._place_concrete(a)
    arena_b = planner._place_symbolic(b, {})
    assert [x.offset for x in a] == [x.offset for x in b]
    assert arena_a == arena_b
    for x in a:                         # and the plan is valid: live blocks never share a byte
        for y in a:
            if x is not y and x.start <= y.end and y.start <= x.end and x.size and y.size:
                assert x.offset + x.size <= y.offset or y.offset + y.size <= x.offset



def _reference_place(blocks, hint):
    """The placement rule spelled out: greedy by size, each block at the lowest candidate (0 or the
    end of a live block) provably clear of every live block."""
    from onnxc.symbolic import evaluate, provably_le
    placed, top = [], 0
    for b in sorted(blocks, key=lambda b: (-evaluate(b.size, hint), b.start, b.key)):
        live = [p for p in placed if p.start <= b.end and b.start <= p.end]
        cands = sorted({0, *[p.offset + p.size for p in live]}, key=lambda c: (evaluate(c, hint), repr(c)))
        b.offset = next((c for c in cands if all(provably_le(c + b.size, p.offset) or
                                                 provably_le(p.offset + p.size, c) for p in live)), None)
        if b.offset is None:
            b.offset = planner._above([p.offset + p.size for p in live], top)
        top = top + b.size
        placed.append(b)
    return planner._above([b.offset + b.size for b in placed], top)


@pytest.mark.parametrize("seed", range(4))
def test_symbolic_placement_follows_the_rule(seed):
    """Mixed number and batch-dim sizes (as a model with a batch dim whose tail is reshaped to fixed
    sizes has): the placement that skips candidates overlapping at the hint chooses what testing
    every candidate symbolically chooses."""
    rng = np.random.default_rng(seed)
    n = sym("N")
    a = _random_blocks(rng, 90)
    for i, x in enumerate(a):
        if i % 3 == 0:
            x.size = x.size * n
        elif i % 7 == 0:
            x.size = x.size * n + 64
    b = [planner.Block(x.key, x.size, x.start, x.end) for x in a]
    hint = {"N": 16}
    arena_a = planner._place_symbolic(a, hint)
    arena_b = _reference_place(b, hint)
    assert [repr(x.offset) for x in a] == [repr(x.offset) for x in b]
    assert repr(arena_a) == repr(arena_b)


def test_sample_refutation_keeps_the_algebra_answers():
    """provably_le first evaluates both sides at one sample (every symbol 1009) to refute cheaply.
    That may only refute where every atom is non-negative at the sample: the algebra treats atoms
    as non-negative values, and its answers must not change."""
    from onnxc.symbolic import floordiv, provably_le
    n = sym("N")
    assert provably_le(0, floordiv(n - 2000, 3))        # the atom is -331 at the sample: not refuted
    assert not provably_le(n, 5) and provably_le(n, n + 1) and not provably_le(2 * n, n + 1)
    assert provably_le(n * 64, n * 64 + 128) and not provably_le(n * 64 + 128, n * 64)


def _check_valid(blocks, arena, env):
    """At env: every block inside the arena, and blocks live at the same time share no byte."""
    from onnxc.symbolic import evaluate
    spans = [(evaluate(b.offset, env), evaluate(b.offset + b.size, env), b) for b in blocks]
    top = evaluate(arena, env)
    for lo, hi, b in spans:
        assert 0 <= lo <= hi <= top and lo % 64 == 0, (b.key, lo, hi, top)
        for lo2, hi2, b2 in spans:
            if b2 is not b and b.start <= b2.end and b2.start <= b.end and hi > lo and hi2 > lo2:
                assert hi <= lo2 or hi2 <= lo, (b.key, b2.key, env)


def _cnn_blocks(n):
    """A CNN exported with a batch dim N: each layer's output c * N lives to the next layer; each
    layer's scratch (per image, so a fixed size) lives during its layer and is the largest block
    at N = 1, as ResNet-18's Winograd scratch is (12 MB beside 3 MB per image)."""
    blocks = []
    for i in range(12):
        blocks.append(planner.Block(f"g{i}", 64 * (4096 >> (i // 3)) * n, i, i + 1))
        blocks.append(planner.Block(f"s{i}", 64 * (20000 + 1000 * (i % 5)), i, i))
    return blocks


def test_fixed_scratch_and_batch_blocks_are_planned_per_shape_class():
    """The fixed-size scratches share one region (they never live together) and the batch-sized
    values another, each as tight as with numbers. Placing both kinds together, every scratch sat
    above values of c * N, where only max() atoms could say how high: past their nesting limit the
    plan stacked everything (ResNet-18 with a batch dim: 125 MB at batch 1, 12 MB needed)."""
    n = sym("N")
    blocks = _cnn_blocks(n)
    arena = planner._place(blocks, {"N": 16})
    fixed = 64 * 24000                              # the largest scratch
    per_image = 64 * (4096 + 4096)                  # two live outputs at most
    for batch in (0, 1, 2, 5, 16, 1000):
        env = {"N": batch}
        _check_valid(blocks, arena, env)
        assert planner.evaluate(arena, env) == fixed + per_image * batch
    # the joint placement alone is far from that at batch 1 (what this plan replaced)
    mixed = planner._place_symbolic(_cnn_blocks(n), {"N": 16})
    assert planner.evaluate(mixed, {"N": 1}) > 3 * (fixed + per_image)


@pytest.mark.parametrize("seed", range(4))
def test_shape_class_plans_are_valid_for_every_symbol_value(seed):
    """Random lifetimes and sizes of several shape classes (numbers, c * N, c * N * S, c * N + d,
    c * (S - 1), an aligned floordiv): the plan kept must be valid at every value tried, and never
    larger at the hint than the joint placement."""
    from onnxc.symbolic import align_up, floordiv
    rng = np.random.default_rng(seed)
    n, s = sym("N"), sym("S")
    kinds = [lambda c: c, lambda c: c * n, lambda c: c * n * s, lambda c: c * n + 128,
             lambda c: c * (s - 1) + c, lambda c: align_up(floordiv(n * c + 3, 5), 64)]
    blocks = []
    for i in range(80):
        start = int(rng.integers(0, 120))
        c = 64 * int(rng.integers(1, 40))
        blocks.append(planner.Block(f"g{i}", kinds[i % len(kinds)](c), start, start + int(rng.integers(0, 12))))
    copy = [planner.Block(b.key, b.size, b.start, b.end) for b in blocks]
    hint = {"N": 16, "S": 16}
    arena = planner._place(blocks, hint)
    assert planner.evaluate(arena, hint) <= planner.evaluate(planner._place_symbolic(copy, hint), hint)
    for env in ({"N": 1, "S": 1}, {"N": 1, "S": 128}, {"N": 7, "S": 3}, {"N": 64, "S": 512}, {"N": 0, "S": 5}):
        _check_valid(blocks, arena, env)


def test_terms_of_splits_a_size_into_monomials():
    """What _place_by_class groups by: every monomial with its coefficient, the constant as 1, in
    one order whatever the construction order."""
    from onnxc.symbolic import dmin, evaluate, terms_of
    n, s = sym("N"), sym("S")
    size = 4096 * n * s + 64 + 1024 * dmin(n, 960)
    terms = terms_of(size)
    assert sum(m * c for m, c in terms) == size
    assert terms[0] == (1, 64) and sorted(c for _, c in terms[1:]) == [1024, 4096]
    assert terms_of(64 + 1024 * dmin(n, 960) + 4096 * s * n) == terms
    assert terms_of(192) == [(1, 192)]
    assert all(evaluate(m, {"N": 3, "S": 5}) > 0 for m, _ in terms)
