"""Operators onnxc has no kernel for but onnx defines as a function (a FunctionProto body, fixed or
built for the node's input types, e.g. SequenceMap): replaced by that body, inlined.

Semantics, not optimisation (runs at every level): the body is onnx's own definition of the
operator. Names inside it, nested subgraphs included, get a prefix unique to the node, so they
never meet the model's; the body's inputs and outputs become the node's.
"""
from __future__ import annotations

import onnx
from onnx import defs, shape_inference

from ..ops.registry import _REGISTRY

MAX_ROUNDS = 8      # a body may use other function operators: expand again, this deep at most


def registered(domain: str, op_type: str, opset: int) -> bool:
    dom = "" if domain in ("", "ai.onnx") else domain
    return any(s.since <= opset and (s.until is None or opset <= s.until) for s in _REGISTRY.get((dom, op_type), []))


def _schema(domain: str, op_type: str, opset: int):
    try:
        return defs.get_schema(op_type, opset, domain)
    except Exception:  # noqa: BLE001 - unknown to onnx: not ours to expand
        return None


def expandable(domain: str, op_type: str, opset: int) -> bool:
    """onnxc has no kernel for it, and onnx defines it by a function at this opset."""
    if registered(domain, op_type, opset):
        return False
    s = _schema(domain, op_type, opset)
    return s is not None and (s.has_function or s.has_context_dependent_function)


def expand_functions(model: onnx.ModelProto) -> onnx.ModelProto:
    opsets = {o.domain or "": o.version for o in model.opset_import}

    def version(n):
        return opsets.get(n.domain or "", opsets.get("", 1))

    for _ in range(MAX_ROUNDS):
        todo = [n for n in model.graph.node if expandable(n.domain, n.op_type, version(n))]
        if not todo:
            return model
        model = _expand_round(model, set(id(n) for n in todo), version)
    return model


def _expand_round(model, todo_ids, version) -> onnx.ModelProto:
    types = _value_types(model)
    out = onnx.ModelProto()
    out.CopyFrom(model)
    del out.graph.node[:]
    for k, n in enumerate(model.graph.node):
        if id(n) not in todo_ids:
            out.graph.node.append(n)
            continue
        fn = _body(n, version(n), types)
        if fn is None:
            out.graph.node.append(n)
            continue
        out.graph.node.extend(_inline(n, fn, f"{n.op_type}__{k}__"))
        for o in fn.opset_import:    # the body's operators at the model's opsets
            if o.domain not in {x.domain for x in out.opset_import}:
                out.opset_import.append(o)
    return out


def _value_types(model) -> dict:
    try:
        inferred = shape_inference.infer_shapes(model)
    except Exception:  # noqa: BLE001 - then only what the model declares
        inferred = model
    g = inferred.graph
    types = {vi.name: vi.type for vi in list(g.input) + list(g.value_info) + list(g.output)}
    for t in g.initializer:
        types.setdefault(t.name, onnx.helper.make_tensor_type_proto(t.data_type, list(t.dims)))
    return types


def _body(node, opset: int, types: dict) -> onnx.FunctionProto | None:
    s = _schema(node.domain, node.op_type, opset)
    if s.has_function:
        return s.function_body
    tps = []
    for name in node.input:
        if name and name not in types:
            return None         # a type onnx could not infer: leave the node (reported later)
        tps.append(types[name].SerializeToString() if name else onnx.TypeProto().SerializeToString())
    fb = s.get_context_dependent_function(node.SerializeToString(), tps)
    fn = onnx.FunctionProto()
    fn.ParseFromString(fb)
    return fn


def _inline(node, fn: onnx.FunctionProto, prefix: str) -> list:
    outer = {}
    for i, name in enumerate(fn.input):
        outer[name] = node.input[i] if i < len(node.input) else ""
    for i, name in enumerate(fn.output):
        outer[name] = node.output[i] if i < len(node.output) else ""
    attrs = {a.name: a for a in node.attribute}
    return _nodes(list(fn.node), [outer], prefix, attrs)


def _nodes(nodes, scopes: list, prefix: str, attrs: dict) -> list:
    """Copies of nodes with every name resolved through scopes (innermost last); names a node
    defines get the prefix."""
    local = scopes[-1]
    for n in nodes:
        for o in n.output:
            if o and o not in local:
                local[o] = prefix + o

    def look(name):
        if not name:
            return ""
        for sc in reversed(scopes):
            if name in sc:
                return sc[name]
        return name       # an outer name of the model itself

    out = []
    for n in nodes:
        c = onnx.NodeProto()
        c.CopyFrom(n)
        c.name = prefix + n.name if n.name else ""
        c.input[:] = [look(x) for x in n.input]
        c.output[:] = [look(x) for x in n.output]
        del c.attribute[:]
        for a in n.attribute:
            if a.ref_attr_name:
                if a.ref_attr_name not in attrs:
                    continue          # not given: the operator's default applies
                a2 = onnx.AttributeProto()
                a2.CopyFrom(attrs[a.ref_attr_name])
                a2.name = a.name
                c.attribute.append(a2)
                continue
            a2 = onnx.AttributeProto()
            a2.CopyFrom(a)
            if a.HasField("g"):
                a2.g.CopyFrom(_graph(a.g, scopes, prefix, attrs))
            for j, gg in enumerate(a.graphs):
                a2.graphs[j].CopyFrom(_graph(gg, scopes, prefix, attrs))
            c.attribute.append(a2)
        out.append(c)
    return out


def _graph(g: onnx.GraphProto, scopes: list, prefix: str, attrs: dict) -> onnx.GraphProto:
    inner = {}
    for vi in list(g.input):
        inner[vi.name] = prefix + vi.name
    for t in g.initializer:
        inner[t.name] = prefix + t.name
    r = onnx.GraphProto()
    r.CopyFrom(g)
    nodes = _nodes(list(g.node), scopes + [inner], prefix, attrs)
    del r.node[:]
    r.node.extend(nodes)
    for vi in list(r.input) + list(r.output) + list(r.value_info):
        vi.name = inner.get(vi.name, _lookup(scopes + [inner], vi.name))
    for t in r.initializer:
        t.name = inner[t.name]
    return r


def _lookup(scopes, name):
    for sc in reversed(scopes):
        if name in sc:
            return sc[name]
    return name
