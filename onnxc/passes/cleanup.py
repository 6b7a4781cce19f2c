"""Identity elimination and dead-node removal (GraphOptimizationLevel >= BASIC).

Identity (and inference-mode Dropout whose mask nobody reads) is removed by letting its readers
read its input directly. It stays when its output is a graph output (the name is visible) or is
read from inside a subgraph (outer-scope renaming is not worth the risk). Dead nodes are those
none of whose outputs reaches a graph output; ONNX operators have no side effects.
"""
from __future__ import annotations

import onnx

from .protoutil import STD, copy, readers, replace_nodes, subgraph_reads


def _passthrough(n: onnx.NodeProto, used: set[str]) -> bool:
    if n.domain not in STD or not n.input or not n.input[0]:
        return False
    if n.op_type == "Identity":
        return True
    if n.op_type == "Dropout":
        # opset 12+: training_mode is an input (absent -> inference); older opsets: is_test/ratio
        # attributes only matter in training, which the compiler never runs
        training = len(n.input) > 2 and n.input[2]
        mask_read = len(n.output) > 1 and n.output[1] and n.output[1] in used
        return not training and not mask_read
    return False


def eliminate_identity(model: onnx.ModelProto) -> onnx.ModelProto:
    g = model.graph
    outputs = {o.name for o in g.output}
    deep = set().union(*(subgraph_reads(n) for n in g.node)) if len(g.node) else set()
    used = set(readers(g)) | outputs
    alias: dict[str, str] = {}
    drop = []
    for i, n in enumerate(g.node):
        y = n.output[0] if n.output else ""
        if _passthrough(n, used) and y and y not in outputs and y not in deep:
            alias[y] = n.input[0]
            drop.append(i)
    if not drop:
        return model

    def resolve(name: str) -> str:
        seen = 0
        while name in alias and seen <= len(alias):
            name, seen = alias[name], seen + 1
        return name

    out = copy(model)
    keep = [n for i, n in enumerate(out.graph.node) if i not in set(drop)]
    for n in keep:
        for k, x in enumerate(n.input):
            if x in alias:
                n.input[k] = resolve(x)
    replace_nodes(out.graph, keep)
    return out


def remove_dead_nodes(model: onnx.ModelProto) -> onnx.ModelProto:
    g = model.graph
    live = {o.name for o in g.output}
    alive = [False] * len(g.node)
    changed = True
    while changed:          # backwards reachability from the graph outputs
        changed = False
        for i in range(len(g.node) - 1, -1, -1):
            n = g.node[i]
            if not alive[i] and any(o and o in live for o in n.output):
                alive[i] = changed = True
                live.update(x for x in n.input if x)
                live.update(subgraph_reads(n))
    if all(alive):
        return model
    out = copy(model)
    replace_nodes(out.graph, [n for n, a in zip(out.graph.node, alive) if a])
    return out
