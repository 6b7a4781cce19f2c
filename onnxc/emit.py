"""Stage 5: render C from templates. The only loop over nodes; it never checks op types —
each node's OpSpec names its template and supplies its parameters."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import jinja2

from . import cstring, dtypes, dynamic, subgraph, symbolic, weights
from .errors import NotImplemented as OrtNotImplemented
from .ir import Graph, Value
from .ops import lookup
from .planner import MemoryPlan
from .resources import templates_dir
from .symbolic import Dim, Expr, product
from .weights import WeightBlob

_ENV: jinja2.Environment | None = None


def environment() -> jinja2.Environment:
    global _ENV
    if _ENV is None:
        _ENV = jinja2.Environment(loader=jinja2.FileSystemLoader(str(templates_dir() / "c")),
                                  undefined=jinja2.StrictUndefined, trim_blocks=True,
                                  lstrip_blocks=True, keep_trailing_newline=True, autoescape=False)
        _ENV.tests["c_constant"] = is_c_constant
    return _ENV


def is_c_constant(text) -> bool:
    """Whether C text (a dim's to_c, an int) names no variable: literals and operators only."""
    return re.search(r"[A-Za-z_]", re.sub(r"\bU?INT64_C\(", "(", str(text))) is None


@dataclass
class TensorRef:
    """What a template sees of a tensor: its C pointer variable, C type and dims as C text."""
    ptr: str
    ct: str
    shape: list[str]
    numel: str
    rank: int
    etype: str
    cc: str = ""           # compute type: float for float16/bfloat16, else ct


@dataclass
class Sources:
    c: str                 # the model translation unit (no Python in it)
    weights: bytes         # raw constant data, linked as onnxc_weights
    meta: dict[str, Any]   # what the library says about itself
    headers: list[str]


def symbol_order(graph: Graph) -> list[str]:
    """The C dims array: the input symbols, then the run-time dims (onnxc.dynamic) in node order,
    then the heap's capacity when the model uses one."""
    heap = [dynamic.HEAP_SYMBOL] if uses_heap(graph) else []
    return graph.input_symbols() + [d.name for d in dynamic.data_symbols(graph.nodes)] + heap


def uses_heap(graph: Graph) -> bool:
    """Whether a run may take memory from the heap (heap dims, or kernels that allocate)."""
    if any(isinstance(v.etype, dtypes.ContainerType) for v in graph.inputs + graph.outputs):
        return True    # the session reads containers only while it holds the arena (see session)
    return any(lookup(n).heap or any(d.heap for d in n.dyn) or any(uses_heap(b.graph) for b in n.bodies.values())
               for n in graph.nodes)


def _display_dim(d: Dim):
    if isinstance(d, int):
        return d
    if isinstance(d, Expr) and len(d.symbols()) == 1 and repr(d) == next(iter(d.symbols())):
        name = next(iter(d.symbols()))
        return None if name.startswith("unk__") else name
    return None


def _declared_display(vi, fallback):
    tt = vi.type.tensor_type
    if not tt.HasField("shape"):
        return fallback
    out = []
    for d in tt.shape.dim:
        if d.HasField("dim_value"):
            out.append(int(d.dim_value))
        elif d.HasField("dim_param") and d.dim_param:
            out.append(d.dim_param)
        else:
            out.append(None)
    return out


def _refs(graph: Graph, plan: MemoryPlan, offsets: dict, prefix: str, c, extra=()) -> tuple[dict, dict]:
    """Per value a C declaration of its pointer, and what templates see of it (TensorRef)."""
    n_in = len(graph.inputs)
    used = {v.id: v for n in graph.nodes for v in n.inputs + n.outputs if v is not None}
    used.update({v.id: v for v in graph.outputs})
    used.update({v.id: v for v in extra})
    decl_of: dict[int, str] = {}
    refs: dict[int, TensorRef] = {}
    for vid in sorted(used):
        v = used[vid]
        kind = plan.storage[v.id]
        ct = v.etype.c
        if kind[0] == "input":
            expr, const = f"inputs[{kind[1]}]", True
        elif kind[0] == "overridable":
            w = f"({prefix}weights + {offsets[kind[2]]})"
            expr, const = f"(inputs[{n_in + kind[1]}] ? inputs[{n_in + kind[1]}] : (const void *){w})", True
        elif kind[0] == "weight":
            expr, const = f"({prefix}weights + {offsets[kind[1]]})", True
        elif kind[0] == "output":
            expr, const = f"outputs[{kind[1]}]", False
        elif kind[0] == "heap":    # set when its first producer runs (_heap_lines)
            expr, const = None, False
        else:
            expr, const = f"(A + {c(kind[1])})", False
        q = "const " if const and not ct.startswith("const ") else ""   # strings: const char *
        if expr is None:
            decl_of[v.id] = f"{ct} *{v.cname} = NULL; (void){v.cname};"
        else:
            decl_of[v.id] = f"{q}{ct} *const {v.cname} = ({q}{ct} *)({expr});"
        refs[v.id] = TensorRef(v.cname, ct, [c(d) for d in v.shape], c(product(v.shape)), len(v.shape),
                               v.etype.name, v.etype.cc)
    return decl_of, refs


def _blocks(graph: Graph, plan: MemoryPlan, refs: dict, syms: list, c, headers: list, op_counts: dict) -> list:
    env = environment()
    blocks = []
    for node in graph.nodes:
        spec = lookup(node)
        key = (node.domain or "ai.onnx", spec.op_type)
        op_counts[key] = op_counts.get(key, 0) + 1
        for h in spec.headers:
            if h not in headers:
                headers.append(h)
        scratch = f"(A + {c(plan.scratch[node.index])})" if node.index in plan.scratch else "NULL"
        pre = _late_resolve(node, refs, syms)
        checks = [f"{c(a)} != {c(b)}" for a, b in node.checks]
        if checks:   # dims the kernel takes as equal (broadcasting): never read out of bounds
            pre.append(f"if ({' || '.join(checks)}) return ONNXC_ERR_SHAPE;")
        if node.index in plan.heap_scratch:
            scratch = "scr"
            pre += [f"void *const scr = onnxc_halloc(H, {c(plan.heap_scratch[node.index])});",
                    "if (!scr) return ONNXC_ERR_HEAP;"]
        pre += _heap_lines(node, plan, refs, c)
        ctx = {
            "idx": node.index,
            "op": spec.op_type,
            "ins": [refs[v.id] if v is not None else None for v in node.inputs],
            "outs": [refs[v.id] if v is not None else None for v in node.outputs],
            "p": spec.params(node),
            "aliased": node.index in plan.aliased_views,
            "scratch": scratch,
        }
        body = env.get_template(f"ops/{spec.template}").render(ctx)
        blocks.append({"idx": node.index, "op": spec.op_type, "body": body, "pre": pre,
                       "set_dims": [syms.index(d.name) for d in node.dyn if d.kind == "run" or d.late]})
    return blocks


def _late_resolve(node, refs: dict, syms: list) -> list[str]:
    """The node's run-time dims computed from data the model itself makes (dynamic.resolved,
    late): the resolve template's statements, run just before the node."""
    env = environment()
    lines: list[str] = []
    for b in dict.fromkeys(d.block for d in node.dyn if d.late):
        body = env.get_template(f"resolve/{b.template}").render(
            ins=[refs[x.id] for x in b.ins], v=[f"s{syms.index(d.name)}" for d in b.syms], p=b.params)
        lines += ["{"] + ["    " + ln for ln in body.splitlines()] + ["}"]
        lines += [f"if (s{syms.index(d.name)} < 0) return ONNXC_ERR_SHAPE;" for d in b.syms if d.kind == "resolve"]
    return lines


def _heap_lines(node, plan: MemoryPlan, refs: dict, c) -> list[str]:
    """Heap-planned outputs: the first value of a group is allocated here (unless the kernel
    allocates it: its size is known only inside), later ones (views, in place) share it."""
    lines: list[str] = []
    for y in node.outputs:
        if y is None or plan.storage[y.id][0] != "heap":
            continue
        first, r = plan.storage[y.id][1], refs[y.id]
        if first != y.id:
            lines.append(f"{r.ptr} = ({r.ct} *){refs[first].ptr};")
        elif not dynamic.kernel_allocated(y):
            lines += [f"{r.ptr} = ({r.ct} *)onnxc_halloc(H, {c(product(y.shape) * y.etype.itemsize)});",
                      f"if (!{r.ptr}) return ONNXC_ERR_HEAP;"]
    return lines


def _c_of(names: dict):
    return lambda d: symbolic.to_c(d, names)


def _prelude(graph: Graph, storage: dict, refs: dict, decl_of: dict, headers: list) -> tuple[list, dict, int]:
    """Nodes onnxc_resolve runs first (dynamic.prelude): their outputs (and scratch) live in a
    buffer on its stack. Returns the rendered blocks (with the declarations they need), the
    resolve-time declaration of each value they compute, and the buffer's size."""
    env = environment()
    nodes = dynamic.prelude_nodes(graph.nodes)
    if not nodes:
        return [], {}, 0
    pos, pre_decls = 0, {}
    blocks = []
    for node in nodes:
        spec = lookup(node)
        for h in spec.headers:
            if h not in headers:
                headers.append(h)
        for v in node.outputs:
            if v is None:
                continue
            ct = v.etype.c
            pre_decls[v.id] = f"{ct} *const {v.cname} = ({ct} *)(R + {pos});"
            pos += -(-(v.etype.itemsize * int(product(v.shape))) // 64) * 64
        scratch = spec.scratch(node)
        scr = "NULL"
        if scratch:
            scr = f"(R + {pos})"
            pos += -(-int(scratch) // 64) * 64
        ins = [x for x in node.inputs if x is not None]
        blocks.append({"idx": node.index, "op": spec.op_type,
                       "decls": [_resolve_decl(x, decl_of, storage) for x in dict.fromkeys(ins) if x.id not in pre_decls],
                       "out_decls": [pre_decls[v.id] for v in node.outputs if v is not None],
                       "body": env.get_template(f"ops/{spec.template}").render({
                           "idx": node.index, "op": spec.op_type,
                           "ins": [refs[x.id] if x is not None else None for x in node.inputs],
                           "outs": [refs[v.id] if v is not None else None for v in node.outputs],
                           "p": spec.params(node), "aliased": False, "scratch": scr})})
    return blocks, pre_decls, pos


def _resolve_decl(x: Value, decl_of: dict, storage: dict) -> str:
    """A value's declaration inside onnxc_resolve: caller data and weights as in the run; a
    computed one (only Shape/Size read it there, for its dims) gets no bytes."""
    if storage[x.id][0] in ("input", "overridable", "weight"):
        return decl_of[x.id]
    ct = x.etype.c
    q = "" if ct.startswith("const ") else "const "
    return f"{q}{ct} *const {x.cname} = NULL; (void){x.cname};"


def _body_functions(graph: Graph, data: bytearray, prefix: str, headers: list, op_counts: dict) -> list[str]:
    """Each control-flow body as a static C function (nested bodies first); their constants
    are appended to the weight blob."""
    env = environment()
    out = []
    for k, b in enumerate(subgraph.all_bodies(graph)):
        b.fname = f"{prefix}body{k}"
        bb = weights.layout(b.graph)
        data.extend(b"\0" * (-len(data) % weights.ALIGN))
        base = len(data)
        data.extend(bb.data)
        offsets = {vid: base + off for vid, off in bb.offsets.items()}
        n_in = len(b.graph.input_symbols())
        syms = b.symbols
        c = _c_of({s: f"s{i}" for i, s in enumerate(syms)})
        env.filters["c"] = c
        decl_of, refs = _refs(b.graph, b.plan, offsets, prefix, c)
        blocks = _blocks(b.graph, b.plan, refs, syms, c, headers, op_counts)
        copies, heap_outputs = _copies(b.plan, refs, c)
        for h in list(heap_outputs):     # the node gave a buffer: check the dims, copy into it
            v = b.graph.outputs[h["dst"]]
            shape = b.expect.get(h["dst"])
            if h["dst"] in b.handover:
                continue
            if shape is None:
                raise OrtNotImplemented(f"{v.describe()}, an output of a subgraph, has dims known only "
                                        "while it runs where its node needs them before")
            heap_outputs.remove(h)
            copies.append({"dst": h["dst"], "src": h["src"], "bytes": c(product(shape) * v.etype.itemsize),
                           "check": " || ".join(f"{c(a)} != {c(e)}" for a, e in zip(v.shape, shape) if a != e)})
        out.append(env.get_template("function.c.j2").render(
            fname=b.fname, what=f"body {k}", syms=syms, run_ks=list(range(n_in, len(syms))), prefix=prefix,
            decls=[decl_of[i] for i in sorted(decl_of)], blocks=blocks, copies=copies,
            heap_outputs=heap_outputs, profile=False))
    return out


def _copies(plan: MemoryPlan, refs: dict, c) -> tuple[list, list]:
    """The end of a run: outputs that are other values' bytes are copied into the caller's
    buffer; outputs on the heap are handed over as pointers."""
    copies = [{"dst": j, "src": refs[v.id].ptr, "bytes": c(product(v.shape) * v.etype.itemsize)}
              for v, j in plan.copies]
    return copies, [{"dst": j, "src": refs[v.id].ptr} for v, j in plan.heap_outputs]


def emit(graph: Graph, plan: MemoryPlan, blob: WeightBlob, *, prefix: str = "onnxc_",
         weights_mode: str = "incbin", version: str = "", module: str = "", profile: bool = False) -> Sources:
    env = environment()
    headers: list[str] = []
    op_counts: dict = {}
    data = bytearray(blob.data)
    functions = _body_functions(graph, data, prefix, headers, op_counts)
    syms = symbol_order(graph)
    names = {s: f"s{k}" for k, s in enumerate(syms)}
    c = _c_of(names)
    env.filters["c"] = c
    n_in = len(graph.inputs)
    dsyms = dynamic.data_symbols(graph.nodes)
    extra = [x for d in dsyms if d.block is not None and not d.late for x in d.block.ins]   # what onnxc_resolve reads
    decl_of, refs = _refs(graph, plan, blob.offsets, prefix, c, extra)
    decls = [decl_of[i] for i in sorted(decl_of)]
    blocks = _blocks(graph, plan, refs, syms, c, headers, op_counts)

    prelude, pre_decls, pre_size = _prelude(graph, plan.storage, refs, decl_of, headers)
    resolve = []
    for b in dict.fromkeys(d.block for d in dsyms if d.block is not None and not d.late):
        for x in b.ins:
            if plan.storage[x.id][0] not in ("input", "overridable", "weight") and x.id not in pre_decls:
                raise AssertionError(f"onnxc_resolve cannot read {x.describe()}")
        body = env.get_template(f"resolve/{b.template}").render(
            ins=[refs[x.id] for x in b.ins], v=[names[d.name] for d in b.syms], p=b.params)
        resolve.append({"idx": b.syms[0].node.index, "op": b.syms[0].node.op_type,
                        "decls": [decl_of[x.id] for x in dict.fromkeys(b.ins) if x.id not in pre_decls],
                        "body": body,
                        "syms": [syms.index(d.name) for d in b.syms],
                        "dims": [syms.index(d.name) for d in b.syms if d.kind == "resolve"]})
    run_syms = [{"k": syms.index(d.name), "bound": c(d.bound), "idx": d.node.index}
                for d in dsyms if d.kind == "run" and not d.heap]
    copies, heap_outputs = _copies(plan, refs, c)
    heap_k = syms.index(dynamic.HEAP_SYMBOL) if dynamic.HEAP_SYMBOL in syms else None
    meta = _meta(graph, plan, syms, op_counts, version)
    meta["module"] = module
    meta["profiled"] = profile
    meta["nodes"] = [[b["op"], graph.nodes[k].name] for k, b in enumerate(blocks)]
    for _, j in plan.heap_outputs:    # the run hands over a pointer into the arena's heap
        meta["outputs"][j]["heap"] = True
    data = bytes(data)
    ctx = {
        "prefix": prefix,
        "profile": profile,
        "version": version,
        "headers": headers,
        "syms": syms,
        "n_input_syms": len(graph.input_symbols()),
        "resolve": resolve,
        "prelude": prelude,
        "prelude_bytes": pre_size,
        "run_syms": run_syms,
        "functions": functions,
        "decls": decls,
        "blocks": blocks,
        "copies": copies,
        "heap_outputs": heap_outputs,
        "heap_k": heap_k,
        "static_bytes": c(plan.arena_bytes),
        "run_ks": [syms.index(d.name) for d in dsyms if d.kind == "run" or d.late],
        "arena_bytes": c(plan.arena_bytes),
        "out_shapes": [[c(d) for d in v.shape] for v in graph.outputs],
        "meta_literal": cstring.literal(json.dumps(meta, sort_keys=True)),
        "weights_mode": weights_mode,
        "weights_size": len(data),
        "weights_c": _weights_c(data) if weights_mode == "c" else "",
        "n_inputs": n_in,
        "n_overridable": len(graph.overridable),
        "n_outputs": len(graph.outputs),
    }
    text = env.get_template("model.c.j2").render(ctx)
    return Sources(text, data, meta, headers)


def _weights_c(data: bytes) -> str:
    """Weights as a C99 string literal (portable: for firmware); 16 bytes a line."""
    lines = []
    for i in range(0, len(data), 16):
        lines.append('"' + "".join(f"\\x{b:02x}" for b in data[i:i + 16]) + '"')
    return "\n".join(lines) if lines else '""'


def _meta(graph: Graph, plan: MemoryPlan, syms: list[str], op_counts, version: str) -> dict:
    def io(v: Value, vi=None) -> dict:
        disp = [_display_dim(d) for d in v.shape]
        zm = getattr(v, "zipmap", None)     # ZipMap output: a float tensor the session turns into dicts
        if zm is not None:
            return {"name": v.name, "type": zm["type"], "onnx_type": v.etype.onnx, "shape": [],
                    "dims": [d if isinstance(d, int) else {"sym": syms.index(repr(d))} if repr(d) in syms
                             else None for d in v.shape], "zipmap": zm}
        if getattr(v, "map_input", None) is not None:
            return _map_io(v, syms)
        if isinstance(v.etype, dtypes.ContainerType):   # one onnxc_seq header (the session converts)
            et = v.etype
            return {"name": v.name, "type": et.ort, "onnx_type": et.tensor.onnx, "shape": [], "dims": [],
                    "container": {"kind": et.kind, "inner": "sequence" if isinstance(et.elem, dtypes.ContainerType)
                                  else "tensor", "elem": et.tensor.onnx}}
        return {
            "name": v.name,
            "type": v.etype.ort,
            "onnx_type": v.etype.onnx,
            "shape": _declared_display(vi, disp) if vi is not None else disp,
            "dims": [d if isinstance(d, int) else {"sym": syms.index(repr(d))} if repr(d) in syms else None
                     for d in v.shape],
        }

    decl_in = {vi.name: vi for vi in graph.declared_inputs}
    hint = plan.hint
    m = dict(graph.meta)
    m.update({
        "onnxc_version": version,
        "symbols": syms,
        "input_symbols": len(graph.input_symbols()),
        # dims the run writes into dims (outputs are read again after it)
        "run_symbols": [syms.index(d.name) for d in dynamic.data_symbols(graph.nodes) if d.kind == "run" or d.late],
        "heap_symbol": syms.index(dynamic.HEAP_SYMBOL) if dynamic.HEAP_SYMBOL in syms else None,
        "inputs": [io(v, decl_in.get(v.name)) for v in graph.inputs],
        "overridable": [io(v, decl_in.get(v.name)) for v in graph.overridable],
        "outputs": [io(v, vi) for v, vi in zip(graph.outputs, graph.declared_outputs)],
        # the model's own operators (what its author knows), and what they compiled into
        "ops": graph.meta.get("source_ops") or [[d, t, n] for (d, t), n in sorted(op_counts.items())],
        "compiled_ops": [[d, t, n] for (d, t), n in sorted(op_counts.items())],
        "arena_symbolic": symbolic.dim_repr(plan.arena_bytes),
        "arena_hint": {"env": hint, "bytes": plan.arena_at(hint), "lower_bound": plan.lower_bound(hint)},
        "node_count": len(graph.nodes),
    })
    return m


def _map_io(v: Value, syms: list[str]) -> dict:
    """Metadata of one of the two C inputs a map graph input becomes (see shapes.map_input): the
    session shows the values one as the map and fills both from a dict."""
    return {"name": v.name, "type": v.map_input["type"], "onnx_type": v.etype.onnx, "shape": [],
            "dims": [d if isinstance(d, int) else {"sym": syms.index(repr(d))} for d in v.shape],
            "map": v.map_input}
