"""Concat and Slice without copies: the planner lets each Concat input's producer write straight
into its slice of the output (one output row: batch 1, or the first axis), and places a Slice of
whole rows inside its input, where that is safe; end to end against onnx.reference with poisoned
buffers, and the plans themselves."""
import numpy as np
import pytest
from onnx import TensorProto, helper

import onnxc
from onnxc import compiler, ir, planner, shapes
from util import assert_close, make_model_from_nodes, poisoned, run_both

rng = np.random.default_rng(7)


def plan_of(nodes, inputs, outputs, inits=(), dtype=TensorProto.FLOAT):
    m = helper.make_model(helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info(n, dtype, s) for n, s in inputs],
        [helper.make_tensor_value_info(n, dtype, None) for n in outputs], list(inits)),
        opset_imports=[helper.make_opsetid("", 17)])
    g = ir.from_model(m)
    shapes.infer(g)
    p = planner.plan(g, compiler.facts)
    return g, p, {v.name: p.storage[v.id] for v in g.values}


def concat_index(g):
    return next(n.index for n in g.nodes if n.op_type == "Concat")


def test_inputs_are_written_into_their_slices():
    g, p, st = plan_of([helper.make_node("Exp", ["x"], ["a"]), helper.make_node("Tanh", ["x"], ["b"]),
                        helper.make_node("Neg", ["x"], ["c"]),
                        helper.make_node("Concat", ["a", "b", "c"], ["y"], axis=1),
                        helper.make_node("Sigmoid", ["y"], ["z"])], [("x", [1, 16])], ["z"])
    assert concat_index(g) in p.aliased_views
    assert st["a"][0] == st["b"][0] == st["c"][0] == st["y"][0] == "arena"
    assert st["y"][1] == st["a"][1]
    assert (st["b"][1] - st["a"][1], st["c"][1] - st["a"][1]) == (64, 128)
    assert p.arena_at({}) == 192          # the output's bytes only: no separate input blocks


@pytest.mark.parametrize("case", ["twice", "graph_input", "weight", "also_output", "two_rows",
                                  "unaligned", "symbolic"])
def test_unsafe_or_impossible_slices_keep_the_copy(case):
    x_shape, axis, inits = [1, 16], 1, []
    nodes = [helper.make_node("Exp", ["x"], ["a"]), helper.make_node("Tanh", ["x"], ["b"])]
    ins, outs = ["a", "b"], ["z"]
    if case == "twice":
        ins = ["a", "b", "a"]
    elif case == "graph_input":
        ins = ["a", "x"]
    elif case == "weight":
        inits = [helper.make_tensor("w", TensorProto.FLOAT, [1, 16], np.ones(16, np.float32))]
        ins = ["a", "w"]
    elif case == "also_output":
        outs = ["z", "b"]
    elif case == "two_rows":
        x_shape = [2, 16]
    elif case == "unaligned":
        x_shape = [1, 3]              # 12-byte slices: every planned offset stays 64-byte aligned
    elif case == "symbolic":
        x_shape, axis = ["N", 16], 0
    nodes += [helper.make_node("Concat", ins, ["y"], axis=axis), helper.make_node("Sigmoid", ["y"], ["z"])]
    g, p, st = plan_of(nodes, [("x", x_shape)], outs, inits)
    assert concat_index(g) not in p.aliased_views
    assert st["y"] != st["a"]             # the output has bytes of its own: the Concat copies


def test_first_axis_concat_is_one_row():
    g, p, st = plan_of([helper.make_node("Exp", ["x"], ["a"]), helper.make_node("Tanh", ["x"], ["b"]),
                        helper.make_node("Concat", ["a", "b"], ["y"], axis=0),
                        helper.make_node("Sigmoid", ["y"], ["z"])], [("x", [2, 8])], ["z"])
    assert concat_index(g) in p.aliased_views
    assert st["b"][1] - st["a"][1] == 64


def test_nested_concat_extends_the_inner_one():
    g, p, st = plan_of([helper.make_node("Exp", ["x"], ["a"]), helper.make_node("Tanh", ["x"], ["b"]),
                        helper.make_node("Concat", ["a", "b"], ["ab"], axis=1),
                        helper.make_node("Neg", ["x"], ["c"]),
                        helper.make_node("Concat", ["ab", "c"], ["y"], axis=1),
                        helper.make_node("Sigmoid", ["y"], ["z"])], [("x", [1, 16])], ["z"])
    assert {n.index for n in g.nodes if n.op_type == "Concat"} <= p.aliased_views
    base = st["a"][1]
    assert [st[n][1] - base for n in ("ab", "y", "b", "c")] == [0, 0, 64, 128]
    assert p.arena_at({}) == 192


def dense_block(layers):
    """DenseNet's block as torchvision exports it: layer k reads Concat(x0, y1, ..., yk), and the
    block's output is the Concat of all of them."""
    nodes, feats = [helper.make_node("Exp", ["x"], ["y0"])], ["y0"]
    for k in range(1, layers + 1):
        nodes.append(helper.make_node("Concat", list(feats), [f"c{k}"], axis=1))
        nodes.append(helper.make_node("ReduceMean", [f"c{k}"], [f"m{k}"], axes=[1], keepdims=1))
        nodes.append(helper.make_node("Tanh", [f"m{k}"], [f"y{k}"]))
        feats.append(f"y{k}")
    nodes.append(helper.make_node("Concat", list(feats), ["out0"], axis=1))
    nodes.append(helper.make_node("Sigmoid", ["out0"], ["out"]))
    return nodes


def test_dense_block_is_one_buffer():
    g, p, st = plan_of(dense_block(4), [("x", [1, 1, 16])], ["out"])
    assert {n.index for n in g.nodes if n.op_type == "Concat"} <= p.aliased_views
    base = st["y0"][1]
    assert [st[f"y{k}"][1] - base for k in range(5)] == [0, 64, 128, 192, 256]
    assert all(st[f"c{k}"][1] == base for k in range(1, 5)) and st["out0"][1] == base


@pytest.mark.parametrize("case", ["reordered", "claimed", "gap"])
def test_held_inputs_must_already_sit_where_the_concat_puts_them(case):
    nodes = [helper.make_node("Exp", ["x"], ["a"]), helper.make_node("Tanh", ["x"], ["b"]),
             helper.make_node("Concat", ["a", "b"], ["ab"], axis=1),
             helper.make_node("Neg", ["x"], ["c"]), helper.make_node("Abs", ["x"], ["d"])]
    if case == "reordered":        # b then a: they sit the other way round
        nodes.append(helper.make_node("Concat", ["b", "a", "c"], ["y"], axis=1))
    elif case == "claimed":        # ab + c took the bytes after b: ab + d cannot have them too
        nodes += [helper.make_node("Concat", ["ab", "c"], ["abc"], axis=1),
                  helper.make_node("Concat", ["ab", "d"], ["y"], axis=1),
                  helper.make_node("Sigmoid", ["abc"], ["w"])]
    else:                          # a and c, with b between them in a's group
        nodes.append(helper.make_node("Concat", ["a", "c"], ["y"], axis=1))
    nodes += [helper.make_node("Sigmoid", ["y"], ["z"]), helper.make_node("Sigmoid", ["ab"], ["v"])]
    g, p, st = plan_of(nodes, [("x", [1, 16])], ["z", "v"] + (["w"] if case == "claimed" else []))
    last = [n.index for n in g.nodes if n.op_type == "Concat"][-1]
    assert last not in p.aliased_views
    assert st["y"] != st["ab"]


# ---- end to end: the producers' real kernels writing into slices ------------------------------
def _check(model, feeds):
    ref, _ = run_both(model, feeds)       # types the outputs
    sess = onnxc.InferenceSession(model.SerializeToString())
    with poisoned():
        got = sess.run(None, feeds)
    assert_close(ref, got)
    return sess


def test_fire_module_convs_write_their_channels():
    """SqueezeNet's fire module: squeeze 1x1, then 1x1 and 3x3 expansions concatenated on the
    channels, both read again after the Concat (a residual Add, a pooled branch)."""
    x = rng.standard_normal((1, 24, 9, 9)).astype(np.float32)
    inits = {"ws": rng.standard_normal((16, 24, 1, 1)).astype(np.float32) * 0.2,
             "we1": rng.standard_normal((32, 16, 1, 1)).astype(np.float32) * 0.2,
             "we3": rng.standard_normal((32, 16, 3, 3)).astype(np.float32) * 0.1,
             "bs": rng.standard_normal(16).astype(np.float32)}
    nodes = [helper.make_node("Conv", ["x", "ws", "bs"], ["s0"]), helper.make_node("Relu", ["s0"], ["s"]),
             helper.make_node("Conv", ["s", "we1"], ["e1_0"]), helper.make_node("Relu", ["e1_0"], ["e1"]),
             helper.make_node("Conv", ["s", "we3"], ["e3_0"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["e3_0"], ["e3"]),
             helper.make_node("Concat", ["e1", "e3"], ["cat"], axis=1),
             helper.make_node("MaxPool", ["cat"], ["pool"], kernel_shape=[3, 3], strides=[2, 2]),
             helper.make_node("Add", ["e1", "e3"], ["sum"]),
             helper.make_node("ReduceMean", ["sum"], ["m"], keepdims=1)]
    model = make_model_from_nodes(nodes, {"x": x}, inits, ["pool", "m"])
    _check(model, {"x": x})
    c = compiler.compile_model(model)
    assert concat_index(c.graph) in c.plan.aliased_views   # the case this test is about


def test_slice_read_after_concat_and_overwritten_in_place_at_its_end():
    """a is read after the Concat by an in-place op that may write over a (a's whole group dies
    there), and b feeds a Reshape that is a graph output (a slice cannot be an output buffer)."""
    x = rng.standard_normal((1, 4, 4, 4)).astype(np.float32)
    x.flat[:3] = [np.nan, np.inf, -np.inf]
    nodes = [helper.make_node("Exp", ["x"], ["a"]), helper.make_node("Tanh", ["x"], ["b"]),
             helper.make_node("Sigmoid", ["x"], ["c"]),
             helper.make_node("Concat", ["a", "b", "c"], ["y"], axis=1),
             helper.make_node("Relu", ["y"], ["r"]),
             helper.make_node("ReduceSum", ["r"], ["rs"], keepdims=1),
             helper.make_node("Neg", ["a"], ["na"]), helper.make_node("Abs", ["na"], ["out_a"]),
             helper.make_node("Reshape", ["b", "shape"], ["flat_b"])]
    model = make_model_from_nodes(nodes, {"x": x}, {"shape": np.array([-1], np.int64)},
                                  ["rs", "out_a", "flat_b"])
    _check(model, {"x": x})
    c = compiler.compile_model(model)
    assert concat_index(c.graph) in c.plan.aliased_views


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.uint8])
def test_dtypes_and_first_axis(dtype):
    x = (rng.standard_normal((2, 8, 8)) * 50).astype(dtype)
    nodes = [helper.make_node("Mul", ["x", "x"], ["a"]),
             helper.make_node("Abs", ["x"], ["b"]),
             helper.make_node("Concat", ["a", "b"], ["y"], axis=0),
             helper.make_node("Concat", ["b", "a"], ["y2"], axis=0),
             helper.make_node("Mul", ["y", "y2"], ["z"])]
    model = make_model_from_nodes(nodes, {"x": x}, {}, ["z"])
    _check(model, {"x": x})
    c = compiler.compile_model(model)
    first, second = [n.index for n in c.graph.nodes if n.op_type == "Concat"]
    assert first in c.plan.aliased_views        # a and b already sit in y: y2 copies them
    assert second not in c.plan.aliased_views


def test_threads_and_batch_two_still_copy():
    x = rng.standard_normal((2, 16, 8, 8)).astype(np.float32)
    w = rng.standard_normal((16, 16, 3, 3)).astype(np.float32) * 0.1
    nodes = [helper.make_node("Conv", ["x", "w"], ["a"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["x"], ["b"]),
             helper.make_node("Concat", ["a", "b"], ["y"], axis=1), helper.make_node("Sigmoid", ["y"], ["z"])]
    model = make_model_from_nodes(nodes, {"x": x}, {"w": w}, ["z"], input_shapes={"x": ["N", 16, 8, 8]})
    ref, _ = run_both(model, {"x": x})
    so = onnxc.SessionOptions()
    so.intra_op_num_threads = 2
    sess = onnxc.InferenceSession(model.SerializeToString(), so)
    for batch in (1, 2):
        with poisoned():
            got = sess.run(None, {"x": x[:batch]})
        assert_close([ref[0][:batch]], got, 1e-5, 1e-5)


def test_dense_block_end_to_end():
    x = rng.standard_normal((1, 3, 16)).astype(np.float32)
    x.flat[:2] = [np.nan, -np.inf]
    model = make_model_from_nodes(dense_block(5), {"x": x}, {}, ["out"])
    _check(model, {"x": x})
    c = compiler.compile_model(model)
    assert {n.index for n in c.graph.nodes if n.op_type == "Concat"} <= c.plan.aliased_views


# ---- Slice windows ----------------------------------------------------------------------------
def _slice(x, y, start, end, axis, step=None):
    ins = [f"{y}_s", f"{y}_e", f"{y}_a"] + ([f"{y}_t"] if step else [])
    consts = [helper.make_node("Constant", [], [n], value=helper.make_tensor(n, TensorProto.INT64, [1], [v]))
              for n, v in zip(ins, [start, end, axis] + ([step] if step else []))]
    return consts + [helper.make_node("Slice", [x] + ins, [y])]


def window_plan(shape, start, end, axis, step=None, src="a", outs=("z",)):
    nodes = [helper.make_node("Exp", ["x"], ["a"])] + _slice(src, "s", start, end, axis, step)
    nodes += [helper.make_node("Tanh", ["s"], ["t"]), helper.make_node("Add", ["a", "a"], ["aa"]),
              helper.make_node("ReduceSum", ["aa"], ["r"], keepdims=1),
              helper.make_node("ReduceSum", ["t"], ["r2"], keepdims=1),
              helper.make_node("Add", ["r", "r2"], ["z"])]
    m = helper.make_model(helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outs]),
        opset_imports=[helper.make_opsetid("", 17)])
    c = compiler.compile_model(m)
    idx = next(n.index for n in c.graph.nodes if n.op_type == "Slice")
    st = {v.name: c.plan.storage[v.id] for v in c.graph.values}
    return c, idx, st


def test_slice_of_whole_rows_is_a_window():
    c, idx, st = window_plan([1, 8, 16], 4, 8, 1)
    assert idx in c.plan.aliased_views
    assert st["s"][0] == st["a"][0] == "arena" and st["s"][1] - st["a"][1] == 4 * 16 * 4


@pytest.mark.parametrize("case", ["graph_input", "batch_two", "step_two", "unaligned", "output"])
def test_slice_windows_only_where_safe(case):
    kw = {"shape": [1, 8, 16], "start": 4, "end": 8, "axis": 1}
    if case == "graph_input":
        kw["src"] = "x"
    elif case == "batch_two":
        kw["shape"] = [2, 8, 16]
    elif case == "step_two":
        kw["step"] = 2
    elif case == "unaligned":
        kw.update(shape=[1, 8, 3], start=1)        # 12 bytes in
    else:
        kw["outs"] = ("z", "s")
    c, idx, st = window_plan(**kw)
    assert idx not in c.plan.aliased_views
    assert st["s"] != st["a"]


def test_shuffle_block_end_to_end():
    """ShuffleNetV2's unit as torchvision exports it: the channels cut in halves by Slice, one half
    through a branch, Concat with the other, the channel shuffle (Reshape, Transpose, Reshape); and
    a window read last by an op that may write over it in place."""
    x = rng.standard_normal((1, 32, 6, 6)).astype(np.float32)
    x.flat[:2] = [np.nan, np.inf]
    w = rng.standard_normal((16, 16, 1, 1)).astype(np.float32) * 0.3
    consts = {"sh1": np.array([1, 2, 16, 6, 6], np.int64), "sh2": np.array([1, 32, 6, 6], np.int64)}
    nodes = [helper.make_node("Relu", ["x"], ["a"])]
    nodes += _slice("a", "h1", 0, 16, 1) + _slice("a", "h2", 16, 32, 1)
    nodes += [helper.make_node("Conv", ["h2", "w"], ["b0"]), helper.make_node("Sigmoid", ["b0"], ["b"]),
              helper.make_node("Concat", ["h1", "b"], ["cat"], axis=1),
              helper.make_node("Reshape", ["cat", "sh1"], ["r1"]),
              helper.make_node("Transpose", ["r1"], ["tr"], perm=[0, 2, 1, 3, 4]),
              helper.make_node("Reshape", ["tr", "sh2"], ["shuf"]),
              helper.make_node("Neg", ["h1"], ["nh"]), helper.make_node("Abs", ["nh"], ["out2"])]
    model = make_model_from_nodes(nodes, {"x": x}, {"w": w, **consts}, ["shuf", "out2"])
    _check(model, {"x": x})
    c = compiler.compile_model(model)
    assert {n.index for n in c.graph.nodes if n.op_type == "Slice"} <= c.plan.aliased_views


def test_window_of_a_concat_slice_and_of_a_window():
    x = rng.standard_normal((1, 4, 32)).astype(np.float32)
    nodes = [helper.make_node("Exp", ["x"], ["a"]), helper.make_node("Tanh", ["x"], ["b"]),
             helper.make_node("Concat", ["a", "b"], ["ab"], axis=1)]
    nodes += _slice("ab", "mid", 2, 6, 1) + _slice("mid", "inner", 1, 3, 1)
    nodes += [helper.make_node("Sigmoid", ["inner"], ["y"]), helper.make_node("Neg", ["mid"], ["y2"])]
    model = make_model_from_nodes(nodes, {"x": x}, {}, ["y", "y2"])
    _check(model, {"x": x})
    c = compiler.compile_model(model)
    st = {v.name: c.plan.storage[v.id] for v in c.graph.values}
    assert st["inner"][1] - st["a"][1] == 3 * 32 * 4 and st["mid"][1] - st["a"][1] == 2 * 32 * 4


def test_view_of_a_window_at_offset_zero_as_graph_output_is_copied():
    """The window sits at its input's first byte but is smaller: a Reshape of it that is a graph
    output must not make the input's whole group that (smaller) output buffer."""
    x = rng.standard_normal((1, 8, 16)).astype(np.float32)
    nodes = [helper.make_node("Exp", ["x"], ["a"])] + _slice("a", "s", 0, 4, 1)
    nodes += [helper.make_node("Reshape", ["s", "flat"], ["out"]),
              helper.make_node("ReduceSum", ["a"], ["total"], keepdims=1)]
    model = make_model_from_nodes(nodes, {"x": x}, {"flat": np.array([-1], np.int64)}, ["out", "total"])
    _check(model, {"x": x})
    c = compiler.compile_model(model)
    st = {v.name: c.plan.storage[v.id] for v in c.graph.values}
    assert st["a"][0] == "arena" and st["out"][0] == "output"


def _shuffle_unit(late_read):
    """ShuffleNetV2's stride-1 unit at batch 1: a's channel halves h1, h2 (windows), a branch of two
    convs from h2, Concat(h1, branch). late_read: h2 is read again after the branch's last conv."""
    x = rng.standard_normal((1, 32, 6, 6)).astype(np.float32)
    x.flat[:2] = [np.nan, -np.inf]
    w1 = rng.standard_normal((16, 16, 1, 1)).astype(np.float32) * 0.3
    w2 = rng.standard_normal((16, 16, 1, 1)).astype(np.float32) * 0.3
    nodes = [helper.make_node("Relu", ["x"], ["a"])]
    nodes += _slice("a", "h1", 0, 16, 1) + _slice("a", "h2", 16, 32, 1)
    nodes += [helper.make_node("Conv", ["h2", "w1"], ["c1"]), helper.make_node("Tanh", ["c1"], ["c2"]),
              helper.make_node("Conv", ["c2", "w2"], ["b0"]), helper.make_node("Sigmoid", ["b0"], ["b"]),
              helper.make_node("Concat", ["h1", "b"], ["cat"], axis=1),
              helper.make_node("Neg", ["cat"], ["y"])]
    outs = ["y"]
    if late_read:
        nodes += [helper.make_node("Abs", ["h2"], ["late"])]
        outs.append("late")
    model = make_model_from_nodes(nodes, {"x": x}, {"w1": w1, "w2": w2}, outs)
    return model, {"x": x}


def test_branch_output_takes_the_bytes_of_the_half_it_was_computed_from():
    """The branch's last group is first written after h2's last read: it goes where h2 was, so the
    Concat copies nothing (ShuffleNetV2: 12 of its 16 Concats, 2 when any member's bytes counted
    for its whole life; the other 4 have 7x7 planes, 64-byte offsets impossible)."""
    model, feeds = _shuffle_unit(late_read=False)
    _check(model, feeds)
    c = compiler.compile_model(model)
    st = {v.name: c.plan.storage[v.id] for v in c.graph.values}
    assert concat_index(c.graph) in c.plan.aliased_views
    assert st["b"] == st["h2"] and st["cat"] == st["h1"] == st["a"]


def test_half_read_after_the_branch_keeps_the_concat_copy():
    model, feeds = _shuffle_unit(late_read=True)
    _check(model, feeds)
    c = compiler.compile_model(model)
    st = {v.name: c.plan.storage[v.id] for v in c.graph.values}
    assert concat_index(c.graph) not in c.plan.aliased_views
    assert st["b"] != st["h2"]
