"""The graph the compiler works on: Values, Nodes, Graph, built from an onnx ModelProto.

This is the one place where model names meet C identifiers: every Value gets ``cname``
(``t<N>``) from a counter; model names are kept as data only (``name``) and reach generated
source solely through ``cstring.literal``.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from . import dtypes
from .errors import InvalidGraph
from .symbolic import Dim


@dataclass(eq=False)
class Value:
    name: str
    id: int
    etype: dtypes.ElemType | None = None
    shape: tuple[Dim, ...] | None = None
    const: np.ndarray | None = None       # initializer / folded constant
    known: np.ndarray | None = None       # contents of a computed value known at compile time
    known_dims: np.ndarray | None = None  # contents as symbolic dims (object array): Shape arithmetic
    is_input: bool = False                # graph input (possibly with an initializer default)
    body_input: bool = False              # ... of a control-flow body: passed by its node, not the caller
    is_output: bool = False
    producer: "Node | None" = None
    consumers: list = field(default_factory=list)

    @property
    def cname(self) -> str:
        return f"t{self.id}"

    @property
    def rank(self) -> int:
        return len(self.shape)

    def describe(self) -> str:
        return f"tensor {self.name!r}"


@dataclass(eq=False)
class Node:
    index: int
    op_type: str
    domain: str
    opset: int
    name: str
    attrs: dict[str, Any]
    inputs: list[Value | None]
    outputs: list[Value | None]
    proto: onnx.NodeProto
    dyn: list = field(default_factory=list)   # run-time dims this node defines (dynamic.DataSym)
    n_formal: int = -1      # with subgraphs: inputs[n_formal:] are outer values the bodies read
    scope: dict | None = None   # with subgraphs: {"opsets", "ir_version"} to build the bodies with
    bodies: dict = field(default_factory=dict)  # attribute name -> compiled body (onnxc.subgraph)
    checks: list = field(default_factory=list)  # (Dim, Dim) pairs the run must find equal

    def describe(self) -> str:
        dom = f"{self.domain}." if self.domain else ""
        return f"node {self.index} ({dom}{self.op_type}, name {self.name!r})"

    def attr(self, name: str, default: Any = None) -> Any:
        return self.attrs.get(name, default)

    def input(self, i: int) -> Value | None:
        return self.inputs[i] if i < len(self.inputs) else None


@dataclass
class Graph:
    values: list[Value]
    nodes: list[Node]
    inputs: list[Value]            # graph inputs that have no initializer
    overridable: list[Value]       # graph inputs that do have one (onnxruntime's overridable initializers)
    outputs: list[Value]
    opsets: dict[str, int]
    meta: dict[str, Any]
    declared_outputs: list[onnx.ValueInfoProto]
    declared_inputs: list[onnx.ValueInfoProto]

    def new_value(self, name: str) -> Value:
        v = Value(name=name, id=len(self.values))
        self.values.append(v)
        return v

    def input_symbols(self) -> list[str]:
        """The symbols the caller supplies, in order of first appearance in the inputs."""
        out: list[str] = []
        for v in self.inputs + self.overridable:
            for d in v.shape:
                for s in sorted(d.symbols() if not isinstance(d, int) else ()):
                    if s not in out:
                        out.append(s)
        return out


def _attr_value(a: onnx.AttributeProto) -> Any:
    v = helper.get_attribute_value(a)
    if a.type == onnx.AttributeProto.STRING:
        return v.decode("utf-8", errors="replace")
    if a.type == onnx.AttributeProto.STRINGS:
        return [s.decode("utf-8", errors="replace") for s in v]
    if a.type == onnx.AttributeProto.TENSOR:
        return numpy_helper.to_array(v)
    if a.type in (onnx.AttributeProto.INTS, onnx.AttributeProto.FLOATS):
        return list(v)
    return v


def schema_defaults(op_type: str, domain: str, opset: int) -> dict[str, Any]:
    """Attribute defaults as onnx's schema states them (never re-typed by hand)."""
    try:
        schema = onnx.defs.get_schema(op_type, opset, domain)
    except onnx.defs.SchemaError:
        return {}
    out = {}
    for name, a in schema.attributes.items():
        if a.default_value is not None and a.default_value.type != 0:
            out[name] = _attr_value(a.default_value)
    return out


def from_model(model: onnx.ModelProto) -> Graph:
    g = model.graph
    opsets = {(o.domain if o.domain != "ai.onnx" else ""): o.version for o in model.opset_import}
    values: list[Value] = []
    by_name: dict[str, Value] = {}
    graph = Graph(values, [], [], [], [], opsets, {}, list(g.output), list(g.input))

    def value(name: str) -> Value:
        if name not in by_name:
            by_name[name] = graph.new_value(name)
        return by_name[name]

    inits = {t.name: t for t in g.initializer}
    for t in g.initializer:
        v = value(t.name)
        arr = numpy_helper.to_array(t)
        v.const = arr
        v.etype = dtypes.from_onnx(t.data_type, f" (initializer {t.name!r})")
        v.shape = tuple(int(d) for d in arr.shape)
    # Before IR 4 every initializer had to be listed as a graph input; like onnxruntime, only
    # from IR 4 on does that make it overridable -- earlier, it is simply a constant.
    if model.ir_version < 4:
        graph.declared_inputs = [vi for vi in g.input if vi.name not in inits]
    for vi in graph.declared_inputs:
        v = value(vi.name)
        v.is_input = True
        (graph.overridable if vi.name in inits else graph.inputs).append(v)

    _add_nodes(graph, g, by_name, value, {"opsets": opsets, "ir_version": model.ir_version})
    _add_outputs(graph, g, by_name, "graph")
    graph.meta = {
        "producer_name": model.producer_name,
        "producer_version": model.producer_version,
        "domain": model.domain,
        "model_version": model.model_version if model.HasField("model_version") else None,
        "doc_string": model.doc_string,
        "graph_name": g.name,
        "graph_description": g.doc_string,
        "custom_metadata_map": {p.key: p.value for p in model.metadata_props},
        "ir_version": model.ir_version,
        "opsets": opsets,
    }
    return graph


def _add_nodes(graph: Graph, g: onnx.GraphProto, by_name: dict, value, scope: dict) -> None:
    opsets = scope["opsets"]
    inits = {t.name for t in g.initializer}
    protos = list(g.node)
    produced: dict[str, int] = {}
    for i, n in enumerate(protos):
        for o in n.output:
            if o:
                if o in produced or o in inits or any(x.name == o for x in g.input):
                    raise InvalidGraph(f"tensor {o!r} is produced more than once (node {i}, {n.op_type})")
                produced[o] = i
    order = _topological_order(protos, produced)
    for idx, pi in enumerate(order):
        p = protos[pi]
        domain = "" if p.domain == "ai.onnx" else p.domain
        if domain not in opsets:
            raise InvalidGraph(f"node {pi} ({p.op_type}, name {p.name!r}) uses domain {domain!r} "
                               "that the model does not import")
        opset = opsets[domain]
        attrs = schema_defaults(p.op_type, domain, opset)
        attrs.update({a.name: _attr_value(a) for a in p.attribute})
        node = Node(idx, p.op_type, domain, opset, p.name, attrs, [], [], p)
        for name in p.input:
            if not name:
                node.inputs.append(None)
                continue
            _read(node, name, by_name, produced, value, "")
        bodies = _graph_attrs(p)
        if bodies:   # outer values the bodies read become inputs too: liveness and order see them
            node.n_formal = len(node.inputs)
            node.scope = scope
            for name in free_names(bodies):
                _read(node, name, by_name, produced, value, ": a subgraph")
        for name in p.output:
            if not name:
                node.outputs.append(None)
                continue
            v = value(name)
            v.producer = node
            node.outputs.append(v)
        graph.nodes.append(node)


def _read(node: Node, name: str, by_name: dict, produced: dict, value, who: str) -> None:
    if name not in by_name and name not in produced:
        raise InvalidGraph(f"{node.describe()}{who} reads tensor {name!r}, which no node, input or "
                           "initializer provides")
    v = value(name)
    v.consumers.append(node)
    node.inputs.append(v)


def _add_outputs(graph: Graph, g: onnx.GraphProto, by_name: dict, what: str) -> None:
    for vi in g.output:
        if vi.name not in by_name:
            raise InvalidGraph(f"{what} output {vi.name!r} is not produced by any node or input")
        v = by_name[vi.name]
        v.is_output = True
        graph.outputs.append(v)


def _graph_attrs(p: onnx.NodeProto) -> list:
    out = [a.g for a in p.attribute if a.type == onnx.AttributeProto.GRAPH]
    return out + [g for a in p.attribute if a.type == onnx.AttributeProto.GRAPHS for g in a.graphs]


def free_names(graphs) -> list[str]:
    """Names the graphs (and their nested subgraphs) read from an enclosing scope, in order."""
    out: dict[str, None] = {}
    for g in graphs:
        local = {x.name for x in g.input} | {t.name for t in g.initializer}
        local |= {t.values.name for t in g.sparse_initializer}
        for n in g.node:
            local |= set(n.output)
        reads = [x for n in g.node for x in n.input if x] + [vi.name for vi in g.output]
        for n in g.node:
            reads += free_names(_graph_attrs(n))
        for x in reads:
            if x not in local:
                out.setdefault(x, None)
    return list(out)


def from_subgraph(g: onnx.GraphProto, scope: dict, formal: list, captured: list) -> Graph:
    """A body (If branch, Loop/Scan body) as a Graph of its own: ``formal`` (etype, shape) for
    its declared inputs, then ``captured``: the outer Values it reads, as inputs of the same
    name -- or as constants when their contents are known at compile time."""
    from .passes.constants import constant_value
    graph = Graph([], [], [], [], [], scope["opsets"], {}, list(g.output), list(g.input))
    by_name: dict[str, Value] = {}

    def value(name: str) -> Value:
        if name not in by_name:
            by_name[name] = graph.new_value(name)
        return by_name[name]

    if len(formal) != len(g.input):
        raise InvalidGraph(f"subgraph {g.name!r} declares {len(g.input)} inputs, {len(formal)} are passed")
    for vi, (et, shape) in zip(g.input, formal):
        v = value(vi.name)
        v.etype, v.shape, v.is_input, v.body_input = et, tuple(shape), True, True
        graph.inputs.append(v)
    for ov in captured:
        if ov.name in by_name:
            continue
        v = value(ov.name)
        v.etype, v.shape = ov.etype, ov.shape
        c = ov.const if ov.const is not None and not ov.is_input else ov.known
        if c is not None:
            v.const = c
        else:
            v.is_input = v.body_input = True
            graph.inputs.append(v)
    consts = [t for t in g.initializer]
    nodes = []
    for i, n in enumerate(g.node):
        if n.op_type == "Constant" and n.domain in ("", "ai.onnx"):
            consts.append(constant_value(n, i))
        else:
            nodes.append(n)
    for t in consts:
        v = value(t.name)
        v.const = numpy_helper.to_array(t)
        v.etype = dtypes.from_onnx(t.data_type, f" (initializer {t.name!r})")
        v.shape = tuple(int(d) for d in v.const.shape)
    body = onnx.GraphProto()
    body.CopyFrom(g)
    del body.node[:]
    body.node.extend(nodes)
    _add_nodes(graph, body, by_name, value, scope)
    _add_outputs(graph, g, by_name, "subgraph")
    graph.meta = {"opsets": scope["opsets"], "ir_version": scope["ir_version"]}
    return graph


def _topological_order(protos: list, produced: dict[str, int]) -> list[int]:
    """Kahn's algorithm, iterative (deep graphs must not hit the recursion limit); keeps the
    file order among ready nodes so generated code reads like the model."""
    indeg = [0] * len(protos)
    users: list[list[int]] = [[] for _ in protos]
    for i, p in enumerate(protos):
        deps = {produced[n] for n in p.input if n in produced}
        deps |= _subgraph_deps(p, produced)
        indeg[i] = len(deps)
        for d in deps:
            users[d].append(i)
    ready = deque(i for i in range(len(protos)) if indeg[i] == 0)
    order = []
    import heapq
    heap = list(ready)
    heapq.heapify(heap)
    while heap:
        i = heapq.heappop(heap)
        order.append(i)
        for u in users[i]:
            indeg[u] -= 1
            if indeg[u] == 0:
                heapq.heappush(heap, u)
    if len(order) != len(protos):
        stuck = [i for i in range(len(protos)) if indeg[i] > 0][0]
        raise InvalidGraph(f"the graph has a cycle through node {stuck} ({protos[stuck].op_type}, "
                           f"name {protos[stuck].name!r})")
    return order


def _subgraph_deps(p: onnx.NodeProto, produced: dict[str, int]) -> set[int]:
    """Outer-scope names read by a node's subgraphs (If/Loop/Scan bodies)."""
    deps: set[int] = set()
    stack = [a.g for a in p.attribute if a.type == onnx.AttributeProto.GRAPH]
    stack += [g for a in p.attribute if a.type == onnx.AttributeProto.GRAPHS for g in a.graphs]
    while stack:
        sg = stack.pop()
        for n in sg.node:
            deps |= {produced[x] for x in n.input if x in produced}
            stack += [a.g for a in n.attribute if a.type == onnx.AttributeProto.GRAPH]
            stack += [g for a in n.attribute if a.type == onnx.AttributeProto.GRAPHS for g in a.graphs]
    return deps
