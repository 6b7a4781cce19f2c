"""The pipeline in a few lines: load -> infer -> optimise -> plan -> emit -> build."""
from __future__ import annotations

import functools
import hashlib
from dataclasses import asdict, dataclass, field
from pathlib import Path

import onnx

from . import build, emit, ir, loader, planner, shapes, weights
from . import passes
from .passes.cleanup import eliminate_identity, remove_dead_nodes
from .passes.constants import fold_constant_nodes
from .passes.expand_functions import expand_functions
from .passes.fold_batchnorm import fold_batchnorm
from .passes.fold_constants import fold_constants
from .passes.fold_if import fold_if
from .passes.fuse_attention import fuse_attention
from .passes.fuse_epilogue import fuse_epilogues
from .passes.fuse_gelu import fuse_gelu
from .passes.fuse_silu import fuse_silu
from .passes.fuse_layernorm import fuse_layernorm
from .passes.gradient import expand_gradients
from .passes.prepack import (GEMV_MAX_M, GEMV_SW, gemv_max_rows, gemv_strip_width, prepack_recurrent, prepack_weights,
                             sgemm_block)
from .passes.prepack_gemm import prepack_gemm_panels
from .passes.transpose_reshape import eliminate_pairs
from .ops import lookup
from .planner import NodeFacts
from .resources import runtime_dir, templates_dir
from .version import __version__


@dataclass(frozen=True)
class Options:
    """Everything that changes the generated library (so: part of the cache key)."""
    free_dims: dict = field(default_factory=dict)   # symbol name -> fixed value
    portable: bool = False                          # no -march=native
    debug: bool = False
    optimization_level: int = 99                    # onnxruntime's GraphOptimizationLevel value
    profile: bool = False                           # time every node (SessionOptions.enable_profiling)

    def key(self) -> dict:
        return asdict(self)


@dataclass
class Compiled:
    graph: ir.Graph
    plan: planner.MemoryPlan
    sources: emit.Sources


def facts(node: ir.Node) -> NodeFacts:
    spec = lookup(node)
    return NodeFacts(view=spec.view, inplace=tuple(spec.inplace(node)), scratch=spec.scratch(node),
                     slices=tuple(spec.slices(node)), window=spec.window(node))


# (minimum optimization_level, pass): ModelProto -> ModelProto before the IR, Graph -> Graph after
# shape inference. Level 0 still turns Constant nodes into initializers (not an optimisation:
# every later stage sees one kind of constant).
PROTO_PASSES = [
    (0, expand_functions),        # operators onnx defines by a function body onnxc lacks a kernel for
    (0, fold_constant_nodes),
    (0, expand_gradients),        # training Gradient -> ordinary ops (semantics, not optimisation)
    (passes.BASIC, eliminate_identity),
    (passes.BASIC, fold_constants),
    (passes.BASIC, fold_if),
    (passes.BASIC, eliminate_pairs),
    (passes.BASIC, fold_batchnorm),
    (passes.BASIC, remove_dead_nodes),
]
GRAPH_PASSES = [
    (passes.EXTENDED, fuse_layernorm),       # decomposed LayerNorm (opsets < 17)
    (passes.EXTENDED, fuse_gelu),            # decomposed GELU (opsets < 20): then an epilogue
    (passes.EXTENDED, fuse_silu),            # x * Sigmoid(x) (opsets < 24): then an epilogue
    (passes.EXTENDED, fuse_attention),       # before fuse_epilogues: its MatMuls take no epilogue
    (passes.EXTENDED, fuse_epilogues),
]


def optimize_proto(proto: onnx.ModelProto, level: int) -> onnx.ModelProto:
    passes.check_private_domain(proto)
    for lvl, fn in PROTO_PASSES:
        if level >= lvl:
            proto = fn(proto)
    return proto


def compile_model(proto: onnx.ModelProto, options: Options = Options(), *, module: str = "",
                  weights_mode: str = "incbin", gemm_block: tuple[int, int] | None = None,
                  gemv_sw: int = GEMV_SW, gemv_rows: int = GEMV_MAX_M) -> Compiled:
    """gemm_block: the SGEMM register block (MR, NR) of the compiler that will build this C;
    known only when building here (build_library), it enables compile-time weight packing.
    gemv_sw: the column-strip width for batch-1 Gemm weights (that compiler's 1-row tile);
    gemv_rows: the Gemm rows up to which those strips are used (that compiler's kernels)."""
    graph = ir.from_model(optimize_proto(proto, options.optimization_level))
    graph.meta["source_ops"] = source_ops(proto)
    shapes.infer(graph, options.free_dims)
    for lvl, fn in GRAPH_PASSES:
        if options.optimization_level >= lvl:
            graph = fn(graph)
    if options.optimization_level >= passes.ALL and gemm_block is not None:
        graph = prepack_weights(graph, gemm_block, gemv_sw, gemv_rows)
        graph = prepack_gemm_panels(graph, gemm_block, gemv_rows)
    elif options.optimization_level >= passes.ALL:
        graph = prepack_recurrent(graph)      # firmware C: the layout every target shares
    plan = planner.plan(graph, facts)
    blob = weights.layout(graph)
    sources = emit.emit(graph, plan, blob, weights_mode=weights_mode, version=__version__, module=module,
                        profile=options.profile)
    return Compiled(graph, plan, sources)


def source_ops(proto: onnx.ModelProto) -> list:
    """[domain, op_type, count] of the model's main graph as written (Constant nodes aside)."""
    counts: dict = {}
    for n in proto.graph.node:
        dom = n.domain if n.domain not in ("", "ai.onnx") else "ai.onnx"
        if (dom, n.op_type) != ("ai.onnx", "Constant"):
            counts[(dom, n.op_type)] = counts.get((dom, n.op_type), 0) + 1
    return [[d, t, k] for (d, t), k in sorted(counts.items())]


@functools.lru_cache(maxsize=None)
def code_fingerprint() -> str:
    """Hash of the generator itself (Python, templates, C runtime): a changed onnxc never
    reuses a library built by another."""
    h = hashlib.sha256()
    roots = [Path(__file__).resolve().parent, templates_dir(), runtime_dir()]
    for root in roots:
        for p in sorted(root.rglob("*")):
            if p.suffix in (".py", ".j2", ".h", ".c") and p.is_file():
                h.update(str(p.relative_to(root)).encode())
                h.update(p.read_bytes())
    return h.hexdigest()[:16]


def build_library(model, options: Options = Options(), cache_dir: str | Path | None = None) -> Path:
    """Compile (or fetch from the cache) the library for a model; returns its published path."""
    tc = build.toolchain(options.portable, options.debug)   # a missing compiler fails here, first
    proto = loader.load(model)
    data = proto.SerializeToString(deterministic=True)
    key = build.cache_key(data, options.key(), f"{__version__}+{code_fingerprint()}", tc)
    cache = Path(cache_dir) if cache_dir else build.default_cache_dir()
    modname = build.module_name(key)

    def sources():
        return compile_model(proto, options, module=modname, gemm_block=sgemm_block(tc.cc, tc.flags),
                             gemv_sw=gemv_strip_width(tc.cc, tc.flags),
                             gemv_rows=gemv_max_rows(tc.cc, tc.flags)).sources

    return build.build_cached(key, sources, tc, cache)
