"""If with a compile-time condition (GraphOptimizationLevel >= BASIC): the main graph's If node
whose cond is a constant initializer is replaced by the nodes of the branch it takes.

Functions expanded by exporters test facts the compiler knows (``Equal(Size(size), 4)`` where
``size`` has a static shape, an attribute turned into a Constant): after constant folding
(fold_constants, Shape/Size of static shapes included) the branch is known, and inlining it
keeps the data flow visible to shape inference instead of hiding it in a subgraph.

The taken branch's own names (node outputs, initializers, Constant nodes -> initializers) get
fresh names in the main graph, inside nested subgraphs too (they may read them as outer
values); outer names the branch reads stay. Each branch output becomes the If's output: the
node computing it writes that name directly, else (an outer value, a constant, an output listed
twice) an Identity copies it. Folding and If-inlining repeat until neither changes anything: an
inlined branch may make more conditions constant (a nested If over a folded value).
"""
from __future__ import annotations

import onnx
from onnx import helper, numpy_helper

from .constants import constant_value
from .fold_constants import fold_constants
from .protoutil import STD, constants, copy, fresh_name, subgraphs

MAX_ROUNDS = 64     # each round inlines at least one If; a model nests only so deep


def fold_if(model: onnx.ModelProto) -> onnx.ModelProto:
    for _ in range(MAX_ROUNDS):
        model = fold_constants(model)
        folded = _inline_constant_ifs(model)
        if folded is None:
            return model
        model = folded
    return model


def _condition(n: onnx.NodeProto, consts: dict) -> bool | None:
    if n.op_type != "If" or n.domain not in STD or not n.input or n.input[0] not in consts:
        return None
    t = consts[n.input[0]]
    if t.data_type == onnx.TensorProto.STRING:
        return None
    cond = numpy_helper.to_array(t)
    if cond.size != 1:
        return None          # If rejects it at run time, with its own error
    return bool(cond.reshape(-1)[0])


def _branch(n: onnx.NodeProto, cond: bool) -> onnx.GraphProto | None:
    name = "then_branch" if cond else "else_branch"
    g = next((a.g for a in n.attribute if a.name == name and a.type == onnx.AttributeProto.GRAPH), None)
    if g is None or len(g.input) or len(g.sparse_initializer) or len(g.output) != len(n.output):
        return None
    return g


def _inline_constant_ifs(model: onnx.ModelProto) -> onnx.ModelProto | None:
    """A copy with every main-graph If whose cond is constant inlined, or None when there is none."""
    g = model.graph
    consts = constants(g)
    if not any(_condition(n, consts) is not None for n in g.node):
        return None
    taken = _every_name(g)
    nodes: list[onnx.NodeProto] = []
    inits: list[onnx.TensorProto] = []
    value_info: list[onnx.ValueInfoProto] = []
    changed = False
    for n in g.node:
        cond = _condition(n, consts)
        branch = _branch(n, cond) if cond is not None else None
        parts = _inline(n, branch, cond, taken) if branch is not None else None
        if parts is None:
            nodes.append(n)
            continue
        nodes.extend(parts[0])
        inits.extend(parts[1])
        value_info.extend(parts[2])
        changed = True
    if not changed:
        return None
    out = copy(model)
    del out.graph.node[:]
    out.graph.node.extend(nodes)
    out.graph.initializer.extend(inits)
    known = {v.name for v in out.graph.value_info} | {v.name for v in out.graph.input} | \
        {v.name for v in out.graph.output}
    out.graph.value_info.extend(v for v in value_info if v.name not in known)
    return out


def _inline(n: onnx.NodeProto, branch: onnx.GraphProto, cond: bool, taken: set[str]):
    """(nodes, initializers, value_info) replacing If node n by `branch`, or None."""
    try:
        consts = [constant_value(b, i) for i, b in enumerate(branch.node)
                  if b.op_type == "Constant" and b.domain in STD]
    except Exception:    # noqa: BLE001 - a Constant onnxc cannot read: leave the If to run
        return None
    local = [t.name for t in branch.initializer] + [t.name for t in consts]
    local += [o for b in branch.node if not (b.op_type == "Constant" and b.domain in STD) for o in b.output if o]
    # branch outputs a branch node (or constant) defines once take the If's output name
    rename: dict[str, str] = {}
    seen: dict[str, int] = {}
    for o in branch.output:
        seen[o.name] = seen.get(o.name, 0) + 1
    for o, y in zip(branch.output, n.output):
        if y and o.name in local and seen[o.name] == 1:
            rename[o.name] = y
    prefix = f"{n.name or 'If'}_{'then' if cond else 'else'}/"
    for name in local:
        if name not in rename:
            rename[name] = fresh_name(taken, prefix + name)

    nodes: list[onnx.NodeProto] = []
    for b in branch.node:
        if b.op_type == "Constant" and b.domain in STD:
            continue
        c = onnx.NodeProto()
        c.CopyFrom(b)
        if c.name:
            c.name = fresh_name(taken, prefix + c.name)
        _rename_node(c, rename)
        nodes.append(c)
    inits = []
    for t in list(branch.initializer) + consts:
        c = onnx.TensorProto()
        c.CopyFrom(t)
        c.name = rename[t.name]
        inits.append(c)
    for o, y in zip(branch.output, n.output):
        src = rename.get(o.name, o.name)
        if y and src != y:          # an outer value, a repeated output: copy it
            nodes.append(helper.make_node("Identity", [src], [y], name=fresh_name(taken, prefix + "output")))
    value_info = []
    for v in branch.value_info:
        if v.name in rename:
            c = onnx.ValueInfoProto()
            c.CopyFrom(v)
            c.name = rename[v.name]
            value_info.append(c)
    return nodes, inits, value_info


def _rename_node(n: onnx.NodeProto, rename: dict[str, str]) -> None:
    for k, x in enumerate(n.input):
        if x in rename:
            n.input[k] = rename[x]
    for k, x in enumerate(n.output):
        if x in rename:
            n.output[k] = rename[x]
    for g in subgraphs(n):
        _rename_outer(g, rename)


def _rename_outer(g: onnx.GraphProto, rename: dict[str, str]) -> None:
    """Rename the outer-scope names a nested subgraph reads; its own names stay (a local name
    hides an outer one of the same name)."""
    own = {v.name for v in g.input} | {t.name for t in g.initializer}
    own |= {o for b in g.node for o in b.output if o}
    inner = {k: v for k, v in rename.items() if k not in own}
    if not inner:
        return
    for b in g.node:
        for k, x in enumerate(b.input):
            if x in inner:
                b.input[k] = inner[x]
        for s in subgraphs(b):
            _rename_outer(s, inner)
    for o in g.output:
        if o.name in inner:
            o.name = inner[o.name]


def _every_name(g: onnx.GraphProto) -> set[str]:
    """Every value and node name in g and its subgraphs (fresh names must not meet any)."""
    out: set[str] = set()
    stack = [g]
    while stack:
        s = stack.pop()
        out |= {v.name for v in s.input} | {v.name for v in s.output} | {v.name for v in s.value_info}
        out |= {t.name for t in s.initializer}
        for b in s.node:
            out.update(b.input)
            out.update(b.output)
            out.add(b.name)
            stack.extend(subgraphs(b))
    out.discard("")
    return out

