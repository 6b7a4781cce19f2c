"""Control flow: If, Loop, Scan. Each body is compiled as a graph of its own (onnxc.subgraph)
into a static C function; these templates call it once or once per iteration.

Body functions take (inputs, outputs, dims, arena): inputs are the declared body inputs, then
the outer values the body reads; dims are the values of the outer symbols the body's shapes
use; the arena is carved from this node's scratch. A body's error is reported as this node's.
"""
from __future__ import annotations

from .. import dtypes, dynamic, subgraph
from ..errors import NotImplemented as OrtNotImplemented
from ..ir import Value
from ..planner import ALIGN
from ..symbolic import Dim, align_up, dim_repr, dmax, product, sym
from .common import attr_ints, data_input, fail
from .registry import OpSpec, register


def _shape_str(shape) -> str:
    return "(" + ", ".join(dim_repr(d) for d in shape) + ")"


def _tensor_outputs(node, body, what):
    for v in body.outputs:
        if v.etype is None or v.shape is None:
            raise OrtNotImplemented(f"{node.describe()}: {what} output {v.name!r} is not a tensor")


def _same_kind(a: dtypes.ElemType, b: dtypes.ElemType) -> bool:
    """Equal types, or an optional and what it holds (one C representation: count -1 is empty)."""
    strip = lambda t: t.elem if isinstance(t, dtypes.ContainerType) and t.kind == "optional" else t  # noqa: E731
    return a == b or strip(a) == strip(b)


class _Layout:
    """Carves the node's scratch into 64-byte aligned pieces (sizes in Dims)."""
    def __init__(self):
        self.size: Dim = 0
        self.parts: dict[str, Dim] = {}

    def add(self, key: str, nbytes: Dim) -> None:
        self.parts[key] = self.size
        self.size = self.size + align_up(nbytes, ALIGN)


@register
class If(OpSpec):
    op_type = "If"
    since = 1
    template = "if.c.j2"

    def infer(self, node):
        cond = node.inputs[0]
        if cond is None or cond.etype is not dtypes.BOOL or (cond.rank > 1 and product(cond.shape) != 1):
            raise fail(node, "input 0 (cond) must be a one-element bool tensor")
        then_b = subgraph.compile_body(node, "then_branch", [])
        else_b = subgraph.compile_body(node, "else_branch", [])
        _tensor_outputs(node, then_b, "then_branch")
        _tensor_outputs(node, else_b, "else_branch")
        n_out = len(node.outputs)
        if len(then_b.outputs) != n_out or len(else_b.outputs) != n_out:
            raise fail(node, f"the branches give {len(then_b.outputs)} and {len(else_b.outputs)} outputs, "
                       f"the node has {n_out}")
        results, node.if_dims, node.if_heap = [], [], {}
        for j, (a, b) in enumerate(zip(then_b.outputs, else_b.outputs)):
            if a.etype != b.etype:
                raise fail(node, f"output {j}: then_branch gives {a.etype.name}, else_branch {b.etype.name}")
            if a.rank != b.rank:
                raise OrtNotImplemented(f"{node.describe()}: output {j} has rank {a.rank} in then_branch and "
                                        f"{b.rank} in else_branch")
            if any(dynamic.on_heap(d) for d in a.shape + b.shape):
                # a branch finds its dims while running: the node takes the output as the branch's
                # pointer (or gives a heap buffer to a branch of known dims) and copies the dims
                for body in (then_b, else_b):
                    if any(dynamic.on_heap(d) for d in body.outputs[j].shape):
                        body.handover.add(j)
                shape = [dynamic.assigned(node, None) for _ in a.shape]
                node.if_heap[j] = shape
                results.append((a.etype, tuple(shape)))
                continue
            shape = []
            for k, (da, db) in enumerate(zip(a.shape, b.shape)):
                if da == db:
                    shape.append(da)
                else:   # the taken branch decides: a dim assigned at run time
                    d = dynamic.assigned(node, dmax(da, db))
                    node.if_dims.append((d, j, k))
                    shape.append(d)
            results.append((a.etype, tuple(shape)))
        return results

    def params(self, node):
        then_b, else_b = node.bodies["then_branch"], node.bodies["else_branch"]
        return {"then": subgraph.call_params(then_b), "else": subgraph.call_params(else_b),
                "then_set": [(d, then_b.outputs[j].shape[k]) for d, j, k in node.if_dims],
                "else_set": [(d, else_b.outputs[j].shape[k]) for d, j, k in node.if_dims],
                "then_heap": self._heap_outputs(node, then_b), "else_heap": self._heap_outputs(node, else_b)}

    @staticmethod
    def _heap_outputs(node, body):
        """Outputs the node takes from the heap: per output, the branch hands a pointer over (its
        dims read after the call) or gets a heap buffer of its known size."""
        out = []
        for j, dims in node.if_heap.items():
            o = body.outputs[j]
            given = j in body.handover
            out.append({"j": j, "given": given, "ct": o.etype.c,
                        "bytes": None if given else product(o.shape) * o.etype.itemsize,
                        "dims": [(d, subgraph.after_call(body, od) if given else None, od)
                                 for d, od in zip(dims, o.shape)]})
        return out

    def scratch(self, node):
        return dmax(node.bodies["then_branch"].arena_bytes, node.bodies["else_branch"].arena_bytes)


def _slice_shape(shape, axis):
    return tuple(shape[:axis]) + tuple(shape[axis + 1:])


@register
class Scan(OpSpec):
    op_type = "Scan"
    since = 9
    template = "scan.c.j2"

    def infer(self, node):
        m = int(node.attr("num_scan_inputs", 0))
        ins = node.inputs[:node.n_formal]
        n = len(ins) - m
        if m < 1 or n < 0:
            raise fail(node, f"num_scan_inputs={m} does not fit its {len(ins)} inputs")
        states, scans = ins[:n], ins[n:]
        in_axes = attr_ints(node, "scan_input_axes") or [0] * m
        in_dirs = attr_ints(node, "scan_input_directions") or [0] * m
        if len(in_axes) != m or len(in_dirs) != m:
            raise fail(node, "scan_input_axes/scan_input_directions must have num_scan_inputs entries")
        axes = []
        for x, a in zip(scans, in_axes):
            if not -x.rank <= a < x.rank:
                raise fail(node, f"scan_input_axes value {a} is out of range for rank {x.rank}")
            axes.append(a % x.rank)
        T = scans[0].shape[axes[0]]
        for x, a in zip(scans, axes):
            if x.shape[a] != T and isinstance(x.shape[a], int) and isinstance(T, int):
                raise fail(node, f"scan inputs have different lengths {T} and {x.shape[a]}")
        formal = [(v.etype, v.shape) for v in states] + [(x.etype, _slice_shape(x.shape, a))
                                                        for x, a in zip(scans, axes)]
        body = subgraph.compile_body(node, "body", formal)
        _tensor_outputs(node, body, "body")
        k = len(body.outputs) - n
        if k < 0 or len(node.outputs) != n + k:
            raise fail(node, f"the body gives {len(body.outputs)} outputs, the node has {len(node.outputs)}")
        out_axes = attr_ints(node, "scan_output_axes") or [0] * k
        out_dirs = attr_ints(node, "scan_output_directions") or [0] * k
        if len(out_axes) != k or len(out_dirs) != k:
            raise fail(node, "scan_output_axes/scan_output_directions must have one entry per scan output")
        results = []
        for i, (s, o) in enumerate(zip(states, body.outputs[:n])):
            if s.shape != o.shape or s.etype != o.etype:
                raise OrtNotImplemented(f"{node.describe()}: state {i} changes from {_shape_str(s.shape)} to "
                                        f"{_shape_str(o.shape)} in the body")
            results.append((s.etype, s.shape))
        oaxes = []
        for o, a in zip(body.outputs[n:], out_axes):
            r = o.rank + 1
            if not -r <= a < r:
                raise fail(node, f"scan_output_axes value {a} is out of range for rank {r}")
            a %= r
            oaxes.append(a)
            results.append((o.etype, tuple(o.shape[:a]) + (T,) + tuple(o.shape[a:])))
        node.scan_info = (n, m, axes, in_dirs, oaxes, out_dirs, T)
        return results

    def _layout(self, node):
        n, m, axes, in_dirs, oaxes, out_dirs, T = node.scan_info
        body = node.bodies["body"]
        lay = _Layout()
        lay.add("arena", body.arena_bytes)
        for i, s in enumerate(node.inputs[:n]):
            nb = product(s.shape) * s.etype.itemsize
            lay.add(f"s{i}a", nb)
            lay.add(f"s{i}b", nb)
        for j in range(m):
            if axes[j] != 0:
                x = node.inputs[n + j]
                lay.add(f"x{j}", product(_slice_shape(x.shape, axes[j])) * x.etype.itemsize)
        for j, o in enumerate(body.outputs[n:]):
            if oaxes[j] != 0:
                lay.add(f"y{j}", product(o.shape) * o.etype.itemsize)
        return lay

    def params(self, node):
        n, m, axes, in_dirs, oaxes, out_dirs, T = node.scan_info
        body = node.bodies["body"]
        lay = self._layout(node)
        scans = []
        for j in range(m):
            x = node.inputs[n + j]
            a = axes[j]
            scans.append({"outer": product(x.shape[:a]), "inner": product(x.shape[a + 1:]) * x.etype.itemsize,
                          "rev": bool(in_dirs[j]), "buf": lay.parts.get(f"x{j}"), "bstride": 0})
        outs = []
        for j, o in enumerate(body.outputs[n:]):
            a = oaxes[j]
            outs.append({"outer": product(o.shape[:a]), "inner": product(o.shape[a:]) * o.etype.itemsize,
                         "rev": bool(out_dirs[j]), "buf": lay.parts.get(f"y{j}"), "bstride": 0})
        states = [{"bytes": product(s.shape) * s.etype.itemsize, "a": lay.parts[f"s{i}a"],
                   "b": lay.parts[f"s{i}b"]} for i, s in enumerate(node.inputs[:n])]
        return {"call": subgraph.call_params(body), "n": n, "m": m, "T": T, "scans": scans, "outs": outs,
                "states": states, "arena": lay.parts["arena"], "batch": 1, "first_in": 0}

    def scratch(self, node):
        return self._layout(node).size


@register
class Scan8(OpSpec):
    """Scan-8: every input and output carries a leading batch dim; scan inputs are (batch, time,
    ...), scanned along time once per batch entry. sequence_lens is not supported (all full)."""
    op_type = "Scan"
    since = 8
    until = 8
    template = "scan.c.j2"

    def infer(self, node):
        m = int(node.attr("num_scan_inputs", 0))
        ins = node.inputs[:node.n_formal]
        if ins and ins[0] is not None:
            raise OrtNotImplemented(f"{node.describe()}: Scan-8 with sequence_lens is not supported")
        ins = ins[1:]
        n = len(ins) - m
        if m < 1 or n < 0:
            raise fail(node, f"num_scan_inputs={m} does not fit its {len(ins) + 1} inputs")
        dirs = attr_ints(node, "directions") or [0] * m
        if len(dirs) != m:
            raise fail(node, "directions must have num_scan_inputs entries")
        for v in ins:
            if v.rank < (1 if ins.index(v) < n else 2):
                raise fail(node, f"input {v.name!r} lacks the batch (and time) dims of Scan-8")
        B, T = ins[n].shape[0], ins[n].shape[1]
        formal = [(v.etype, v.shape[1:]) for v in ins[:n]] + [(x.etype, x.shape[2:]) for x in ins[n:]]
        body = subgraph.compile_body(node, "body", formal)
        _tensor_outputs(node, body, "body")
        k = len(body.outputs) - n
        if k < 0 or len(node.outputs) != n + k:
            raise fail(node, f"the body gives {len(body.outputs)} outputs, the node has {len(node.outputs)}")
        results = []
        for i, (s, o) in enumerate(zip(ins[:n], body.outputs[:n])):
            if tuple(s.shape[1:]) != tuple(o.shape) or s.etype is not o.etype:
                raise OrtNotImplemented(f"{node.describe()}: state {i} changes shape in the body")
            results.append((s.etype, s.shape))
        for o in body.outputs[n:]:
            results.append((o.etype, (B, T) + tuple(o.shape)))
        node.scan_info = (n, m, dirs, B, T)
        return results

    def _layout(self, node):
        n, m, dirs, B, T = node.scan_info
        lay = _Layout()
        lay.add("arena", node.bodies["body"].arena_bytes)
        for i, s in enumerate(node.inputs[1:1 + n]):
            nb = product(s.shape[1:]) * s.etype.itemsize
            lay.add(f"s{i}a", nb)
            lay.add(f"s{i}b", nb)
        return lay

    def params(self, node):
        n, m, dirs, B, T = node.scan_info
        body = node.bodies["body"]
        lay = self._layout(node)
        scans = []
        for j in range(m):
            x = node.inputs[1 + n + j]
            inner = product(x.shape[2:]) * x.etype.itemsize
            scans.append({"outer": 1, "inner": inner, "rev": bool(dirs[j]), "buf": None, "bstride": T * inner})
        outs = []
        for o in body.outputs[n:]:
            inner = product(o.shape) * o.etype.itemsize
            outs.append({"outer": 1, "inner": inner, "rev": False, "buf": None, "bstride": T * inner})
        states = [{"bytes": product(s.shape[1:]) * s.etype.itemsize, "a": lay.parts[f"s{i}a"],
                   "b": lay.parts[f"s{i}b"]} for i, s in enumerate(node.inputs[1:1 + n])]
        return {"call": subgraph.call_params(body), "n": n, "m": m, "T": T, "scans": scans, "outs": outs,
                "states": states, "arena": lay.parts["arena"], "batch": B, "first_in": 1}

    def scratch(self, node):
        return self._layout(node).size


@register
class Loop(OpSpec):
    op_type = "Loop"
    since = 1
    template = "loop.c.j2"

    def infer(self, node):
        ins = node.inputs[:node.n_formal]
        if len(ins) < 2:
            raise fail(node, "Loop needs inputs M and cond (either may be empty)")
        M, cond, carried = ins[0], ins[1], ins[2:]
        if M is not None and (M.etype is not dtypes.INT64 or product(M.shape) != 1):
            raise fail(node, "input 0 (M) must be a one-element int64 tensor")
        if cond is not None and (cond.etype is not dtypes.BOOL or product(cond.shape) != 1):
            raise fail(node, "input 1 (cond) must be a one-element bool tensor")
        gp = next(a.g for a in node.proto.attribute if a.name == "body")
        if len(gp.input) != 2 + len(carried):
            raise fail(node, f"the body has {len(gp.input)} inputs, expected {2 + len(carried)}")
        formal = [(dtypes.INT64, _declared_scalar_shape(gp.input[0])),
                  (dtypes.BOOL, _declared_scalar_shape(gp.input[1]))]
        formal += [(v.etype, v.shape) for v in carried]
        body = subgraph.compile_body(node, "body", formal)
        _tensor_outputs(node, body, "body")
        n = len(carried)
        k = len(body.outputs) - 1 - n
        if k < 0 or len(node.outputs) != n + k:
            raise fail(node, f"the body gives {len(body.outputs)} outputs, the node has {len(node.outputs)}")
        c_out = body.outputs[0]
        if c_out.etype is not dtypes.BOOL or product(c_out.shape) != 1:
            raise fail(node, "the body's first output (cond) must be a one-element bool tensor")
        results = []
        for i, (v, o) in enumerate(zip(carried, body.outputs[1:1 + n])):
            if not subgraph.expect_shape(body, 1 + i, v.shape) or not _same_kind(v.etype, o.etype):
                raise OrtNotImplemented(f"{node.describe()}: loop-carried value {i} changes from "
                                        f"{_shape_str(v.shape)} to {_shape_str(o.shape)} in the body")
            results.append((o.etype, v.shape))   # a sequence's element rank is known from the body
        trip = bound = None
        node.loop_heap = {}
        if k:
            bound = self._trip_bound(node, M)
            trip = dynamic.assigned(node, bound)
            for j, o in enumerate(body.outputs[1 + n:]):
                shape = tuple(o.shape)
                if any(dynamic.on_heap(d) for d in shape):
                    # dims found while the body runs: the first iteration fixes them (later ones
                    # must agree); the node collects the values on the heap
                    body.handover.add(1 + n + j)
                    node.loop_heap[j] = shape
                    shape = tuple(dynamic.assigned(node, None) if dynamic.on_heap(d) else d for d in shape)
                results.append((o.etype, (trip,) + shape))
        node.loop_info = (n, k, trip, bound)
        return results

    def _trip_bound(self, node, M):
        if M is None:
            raise OrtNotImplemented(f"{node.describe()}: scan outputs of a Loop without a trip count M")
        arr = data_input(node, 0, "M")
        if isinstance(arr, Value):     # the caller's data: read before the run
            return dynamic.resolved(node, 1, "loop_trip.c.j2", [arr])[0]
        return max(int(arr.reshape(-1)[0]), 0)

    def _layout(self, node):
        n, k, trip, bound = node.loop_info
        body = node.bodies["body"]
        lay = _Layout()
        lay.add("arena", body.arena_bytes)
        for i, v in enumerate(node.inputs[2:2 + n]):
            nb = product(v.shape) * v.etype.itemsize
            lay.add(f"c{i}a", nb)
            lay.add(f"c{i}b", nb)
        return lay

    def params(self, node):
        n, k, trip, bound = node.loop_info
        body = node.bodies["body"]
        lay = self._layout(node)
        carried = [{"bytes": product(v.shape) * v.etype.itemsize, "a": lay.parts[f"c{i}a"],
                    "b": lay.parts[f"c{i}b"]} for i, v in enumerate(node.inputs[2:2 + n])]
        scans = []
        for j, o in enumerate(body.outputs[1 + n:]):
            y = node.outputs[n + j]
            scan = {"bytes": product(o.shape) * o.etype.itemsize, "heap": j in node.loop_heap}
            if scan["heap"]:    # per iteration: the body's dims (C, after its call) and this node's
                scan["dims"] = [(d, subgraph.after_call(body, od)) for d, od in zip(y.shape[1:], o.shape)
                                if dynamic.on_heap(od)]
                scan["step"] = subgraph.after_call(body, product(o.shape) * o.etype.itemsize)
            scans.append(scan)
        return {"call": subgraph.call_params(body), "n": n, "k": k, "trip": trip, "carried": carried, "scans": scans,
                "bound": bound,
                "arena": lay.parts["arena"]}

    def scratch(self, node):
        return self._layout(node).size


def _declared_scalar_shape(vi) -> tuple:
    t = vi.type.tensor_type
    if vi.type.HasField("tensor_type") and t.HasField("shape") and all(d.HasField("dim_value") for d in t.shape.dim):
        if all(d.dim_value == 1 for d in t.shape.dim):
            return tuple(1 for _ in t.shape.dim)
    return ()
