"""Bodies of control-flow nodes (If branches, Loop and Scan bodies), compiled as graphs of their own.

A body becomes one static C function with the model's run signature, emitted before the model's
run function; its node calls it (once, or once per iteration). Its inputs are its declared
inputs, typed by the node's shape rule, then the outer values it reads; its arena is the node's
scratch. Body dims are the outer symbols of the same name, so sizes carry over unchanged.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from . import dynamic, ir, planner, shapes, symbolic
from .errors import NotImplemented as OrtNotImplemented
from .ir import Graph, Node, Value
from .symbolic import Dim, sym


@dataclass(eq=False)
class Body:
    graph: Graph
    plan: planner.MemoryPlan
    runtime_inputs: list[Value]     # outer values passed at run time (after the declared inputs)
    fname: str = ""                 # C function name, given at emit time
    expect: dict = field(default_factory=dict)   # output index -> the shape its node gives it
    handover: set = field(default_factory=set)   # outputs its node takes as pointers (heap dims)

    @property
    def symbols(self) -> list[str]:
        """The body's dims array: its input symbols, then the dims it computes while running."""
        return self.graph.input_symbols() + [d.name for d in dynamic.data_symbols(self.graph.nodes)]

    @property
    def arena_bytes(self) -> Dim:
        return self.plan.arena_bytes

    @property
    def outputs(self) -> list[Value]:
        return self.graph.outputs


def call_params(body: Body) -> dict:
    """What a template needs to call a body (templates/c/ops/_body.j2): its function, the outer
    dims its shapes use, the outer values it reads, its arena size."""
    dims = body.graph.input_symbols()
    n = len(body.symbols)
    return {"fn": body.fname, "dims": [sym(s) for s in dims], "n_syms": max(n, len(dims) + 1),
            "captured": [v.cname for v in body.runtime_inputs], "arena": body.arena_bytes}


def expect_shape(body: Body, j: int, shape) -> bool:
    """Whether output j of the body fits the buffer its node gives it (of ``shape``): the same
    shape, or one whose differing dims are known only while the body runs (the body then checks
    them and copies its result into the buffer; see emit)."""
    o = body.outputs[j]
    if tuple(o.shape) == tuple(shape):
        return True
    if len(o.shape) != len(shape) or not all(a == b or dynamic.on_heap(a) for a, b in zip(o.shape, shape)):
        return False
    body.expect[j] = tuple(shape)
    return True


def after_call(body: Body, d: Dim) -> str:
    """A dim of the body's outputs as C, right after a call (``bd``: the dims array it filled)."""
    return symbolic.to_c(d, {name: f"bd[{k}]" for k, name in enumerate(body.symbols)})


def compile_body(node: Node, attr: str, formal: list[tuple]) -> Body:
    """Build, infer and plan the body in attribute ``attr`` with declared inputs of the given
    (ElemType, shape); keeps it on the node for emit."""
    gp = next((a.g for a in node.proto.attribute if a.name == attr), None)
    if gp is None:
        raise OrtNotImplemented(f"{node.describe()}: attribute {attr} (a graph) is missing")
    captured = node.inputs[node.n_formal:] if node.n_formal >= 0 else []
    graph = ir.from_subgraph(gp, node.scope, formal, captured)
    shapes.infer(graph)
    bad = [d for d in dynamic.data_symbols(graph.nodes) if d.kind == "resolve" and not d.late]
    if bad:   # cannot happen: a body's inputs are not the caller's (onnxc_resolve cannot read them)
        raise AssertionError(f"{node.describe()}: {bad[0].name} resolved before the run in a body")
    from .compiler import facts   # the same planning facts as the main graph (import cycle)
    plan = planner.plan(graph, facts)
    by_name = {v.name: v for v in captured}
    runtime = [by_name[v.name] for v in graph.inputs[len(formal):]]
    body = Body(graph, plan, runtime)
    node.bodies[attr] = body
    return body


def all_bodies(graph: Graph) -> list[Body]:
    """Every body of every node, nested ones first (a body's function calls its nested ones)."""
    out: list[Body] = []
    for n in graph.nodes:
        for b in n.bodies.values():
            out += all_bodies(b.graph)
            out.append(b)
    return out
