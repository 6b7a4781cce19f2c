"""Graph optimisations, one module each, switched by onnxruntime's GraphOptimizationLevel.

Two stages (see compiler.compile_model):
  * on the onnx ModelProto, before the IR exists (structural rewrites that need no shapes, and
    compile-time arithmetic on initializers): constants, cleanup, fold_constants,
    fold_batchnorm, transpose_reshape;
  * on the IR after shape inference (rewrites that need shapes and op specs): fuse_layernorm,
    fuse_gelu, fuse_silu, fuse_attention, fuse_epilogue.
Internal operators that fusion creates live in PRIVATE_DOMAIN; user models that name it are
rejected (check_private_domain), so the two never meet.
"""
from __future__ import annotations

from ..errors import InvalidGraph

PRIVATE_DOMAIN = "com.onnxc.internal"

# onnxruntime's GraphOptimizationLevel values
BASIC, EXTENDED, ALL = 1, 2, 99


def check_private_domain(model) -> None:
    """A user model may not import or use onnxc's private operator domain."""
    for o in model.opset_import:
        if o.domain == PRIVATE_DOMAIN:
            raise InvalidGraph(f"the model imports operator domain {PRIVATE_DOMAIN!r}, which onnxc "
                               "reserves for its own fused operators")
    stack = [model.graph]
    while stack:
        g = stack.pop()
        for n in g.node:
            if n.domain == PRIVATE_DOMAIN:
                raise InvalidGraph(f"node {n.name!r} ({n.op_type}) uses operator domain "
                                   f"{PRIVATE_DOMAIN!r}, which onnxc reserves for its own fused operators")
            for a in n.attribute:
                if a.HasField("g"):
                    stack.append(a.g)
                stack.extend(a.graphs)
