"""Run-time dimensions: dims that follow from tensor *contents*, not only from input shapes.

They are ordinary symbols of :mod:`onnxc.symbolic`, so shape rules, the memory plan and the
templates treat them like a batch dimension. Two kinds:

- ``resolve``: computed before the run from data the caller passes (a graph input, an
  overridable initializer) by the library's ``onnxc_resolve(inputs, dims)``: Reshape's shape or
  Tile's repeats fed as graph inputs. The arena and the output shapes are then exact.
- ``run``: assigned by the defining node's kernel while the model runs (NonZero's count). Memory
  is planned for ``bound``, an upper bound in the other symbols; ``onnxc_resolve`` first sets
  the dim to that bound (so output buffers can be sized), the run writes the actual value
  back into ``dims`` and the caller reads the output shapes again afterwards.

A symbol's name is ``<op>#<node>.<k>`` (``...@run`` for the second kind).

Dims with no upper bound -- a ``run`` dim assigned with ``bound=None``, or a ``resolve`` dim
whose data is computed by the model itself (inside a loop body, from an earlier node), which is
then computed just before its node, in the run ("late") -- are *heap* dims (``...@heap``):
values whose size involves one are not planned in the static arena but taken from the run's
heap (``onnxc_halloc``, a bump allocator at the end of the arena, see runtime_c). Its capacity
is the last entry of ``dims`` (HEAP_SYMBOL); a run that needs more returns ONNXC_ERR_HEAP with
the bytes it needs written there, and the caller grows the arena and runs again (runs are pure).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .ir import Node, Value
from .known_values import NONDETERMINISTIC
from .symbolic import Dim, Expr, product, substitute, sym


@dataclass(eq=False)
class DataSym:
    name: str
    node: Node
    kind: str                      # "resolve" | "value" (a parameter, not a dim) | "run"
    bound: Dim | None = None       # "run": upper bound in other symbols (None: a heap dim)
    block: "ResolveBlock | None" = None
    late: bool = False             # "resolve"/"value" computed in the run, just before its node

    @property
    def heap(self) -> bool:
        return self.name.endswith("@heap")


@dataclass(eq=False)
class ResolveBlock:
    """C statements run in onnxc_resolve, from templates/c/resolve/<template>: they read ``ins``
    (TensorRefs of caller-supplied data) and assign the C variables ``v[0..]`` (int64, must end
    >= 0); they may ``return ONNXC_ERR_SHAPE`` (or _INDEX/_VALUE) to reject the data, which names
    the node. ``p``: parameters (Dims render with the ``c`` filter)."""
    template: str
    ins: tuple[Value, ...]
    params: dict = field(default_factory=dict)
    syms: list[DataSym] = field(default_factory=list)


HEAP_SYMBOL = "heap@bytes"     # the heap's capacity in bytes (the last dims entry when used)


def _new(node: Node, kind: str, heap: bool = False) -> DataSym:
    suffix = "@heap" if heap else "@run" if kind == "run" else ""    # known only while running: see prelude
    d = DataSym(f"{node.op_type}#{node.index}.{len(node.dyn)}{suffix}", node, kind)
    node.dyn.append(d)
    return d


def is_heap_symbol(name: str) -> bool:
    return name.endswith("@heap")


def on_heap(d: Dim) -> bool:
    """Whether a size involves a heap dim (then its value lives on the run's heap)."""
    return isinstance(d, Expr) and any(is_heap_symbol(s) for s in d.symbols())


def resolved(node: Node, count: int, template: str, ins, params: dict | None = None,
             values: int = 0) -> list[Expr]:
    """``count`` new dims computed before the run by ``template`` from the data of ``ins``,
    then ``values`` more int64 run-time *parameters* (a Slice's start, a TopK's k, may be < 0):
    the kernel reads them (``{{ p.start|c }}``) but they must never enter a shape."""
    block = ResolveBlock(template, tuple(ins), dict(params or {}))
    late = not all(readable_before_run(x) for x in ins)   # then computed in the run, before the node
    for k in range(count + values):
        d = _new(node, "resolve" if k < count else "value", heap=late)
        d.block, d.late = block, late
        block.syms.append(d)
    return [sym(d.name) for d in block.syms]


def assigned(node: Node, bound: Dim | None) -> Expr:
    """A new dim the node's kernel assigns while it runs (``{{ p.x|c }} = n;``), at most ``bound``.
    ``bound=None``: no bound is known; the kernel then also allocates the outputs whose shape
    uses the dim (``{{ outs[k].ptr }} = onnxc_halloc(H, bytes)``, see the module doc)."""
    d = _new(node, "run", heap=bound is None or on_heap(bound))
    d.bound = bound
    return sym(d.name)


def kernel_allocated(v: Value) -> bool:
    """An output whose buffer its producer's kernel allocates (its shape uses a dim with no bound
    that the kernel assigns)."""
    n = v.producer
    if n is None:
        return False
    mine = {d.name for d in n.dyn if d.kind == "run" and d.bound is None}
    return any(s in mine for x in v.shape if isinstance(x, Expr) for s in x.symbols())


def readable_before_run(v: Value | None) -> bool:
    """Data the caller passes (or a weight), or a small value computed from those alone:
    onnxc_resolve may read it (it runs the nodes computing it first, see prelude)."""
    if v is None:
        return False
    if v.producer is None:
        return (v.is_input and not v.body_input) or v.const is not None
    return prelude(v)


PRELUDE_BYTES = 1 << 16       # the values onnxc_resolve computes live on its stack


def prelude(v: Value) -> bool:
    """Mark the nodes computing v for onnxc_resolve too, when v follows from caller data and
    weights alone through small, statically shaped values (e.g. a Range limit computed from a
    size input). Returns False (marking nothing) otherwise."""
    todo, seen, nodes = [v], set(), []
    total = 0
    while todo:
        x = todo.pop()
        if x.id in seen:
            continue
        seen.add(x.id)
        n = x.producer
        if n is None:
            if not ((x.is_input and not x.body_input) or x.const is not None):
                return False
            continue
        if getattr(n, "prelude", False):
            continue
        if n.op_type in ("Shape", "Size") and n.domain in ("", "ai.onnx"):
            # only the input's dims are read: fine unless one is known only while running
            x_in = n.inputs[0]
            if any("@" in name for d in x_in.shape for name in _symbols(d)):
                return False
            nodes.append(n)
            continue
        if n.dyn or n.bodies or n.op_type in NONDETERMINISTIC or n.domain not in ("", "ai.onnx"):
            return False
        for o in n.outputs:
            if o is None:
                continue
            if o.shape is None or not all(isinstance(d, int) for d in o.shape):
                return False
            total += (o.etype.itemsize * int(product(o.shape)) + 63) // 64 * 64
        if total > PRELUDE_BYTES:
            return False
        nodes.append(n)
        todo.extend(i for i in n.inputs if i is not None)
    for n in nodes:
        n.prelude = True
    return True


def _symbols(d) -> set:
    return d.symbols() if isinstance(d, Expr) else set()


def prelude_nodes(nodes) -> list[Node]:
    return [n for n in nodes if getattr(n, "prelude", False)]


def data_symbols(nodes) -> list[DataSym]:
    return [d for n in nodes for d in n.dyn]


def run_bounds(nodes) -> dict[str, Dim]:
    """Each "run" dim's bound in caller-known symbols only (a bound may use an earlier run dim)."""
    out: dict[str, Dim] = {}
    for d in data_symbols(nodes):
        if d.kind == "run" and d.bound is not None:
            out[d.name] = substitute(d.bound, out)
    return out
