"""Operator registry keyed by (domain, op_type) and opset range.

An operator is one small class: its shape rule (``infer``), the template it renders and the
parameters that template needs (``params``), plus what the memory planner may do with it
(``view``, ``inplace``, ``scratch``). Classes register themselves with ``@register``.
"""
from __future__ import annotations

from typing import ClassVar

from ..errors import NotImplemented as OrtNotImplemented
from ..ir import Node
from ..symbolic import Dim

_REGISTRY: dict[tuple[str, str], list["OpSpec"]] = {}


class OpSpec:
    op_type: ClassVar[str]
    domain: ClassVar[str] = ""
    since: ClassVar[int] = 1
    until: ClassVar[int | None] = None      # last opset this class covers (None: open-ended)
    template: ClassVar[str] = ""             # file under templates/c/ops/
    headers: ClassVar[tuple[str, ...]] = ()  # runtime_c headers the template needs
    view: ClassVar[bool] = False             # output 0 is input 0's bytes under another shape
    heap: ClassVar[bool] = False             # the kernel takes memory from the run's heap (H)

    def infer(self, node: Node) -> list[tuple]:
        """(ElemType, shape) for each output."""
        raise NotImplementedError

    def params(self, node: Node) -> dict:
        """Template parameters: every decision, so the template only lays out loops."""
        return {}

    def inplace(self, node: Node) -> list[tuple[int, int]]:
        """(output index, input index) pairs whose storage may be shared."""
        return []

    def scratch(self, node: Node) -> Dim:
        """Bytes of workspace the kernel needs during this node only."""
        return 0

    def window(self, node: Node) -> int | None:
        """Byte offset at which output 0 is a contiguous run of input 0's bytes: the planner may
        then give the output that storage and skip the node's copy (the template sees
        `aliased`). None: never."""
        return None

    def slices(self, node: Node) -> tuple[int, ...]:
        """Byte offsets at which output 0 holds each input's bytes unchanged (inputs laid end to
        end): the planner may then let the producers write there and skip the node's copies
        (the template sees `aliased`). Empty: never."""
        return ()


def register(cls):
    inst = cls()
    key = (cls.domain, cls.op_type)
    _REGISTRY.setdefault(key, []).append(inst)
    _REGISTRY[key].sort(key=lambda s: s.since)
    return cls


def lookup(node: Node) -> OpSpec:
    specs = _REGISTRY.get((node.domain, node.op_type), [])
    for s in reversed(specs):
        if s.since <= node.opset and (s.until is None or node.opset <= s.until):
            return s
    dom = node.domain or "ai.onnx"
    if specs:
        have = ", ".join(f"{s.since}..{s.until or 'latest'}" for s in specs)
        raise OrtNotImplemented(f"{node.describe()}: {dom} {node.op_type} at opset {node.opset} is not "
                                f"supported; onnxc implements opsets {have}")
    raise OrtNotImplemented(f"{node.describe()}: operator {dom}.{node.op_type} (opset {node.opset}) is "
                            f"not implemented by onnxc; {len(_REGISTRY)} operators are")


def supported() -> list[tuple[str, str, int, int | None]]:
    return sorted((d, t, s.since, s.until) for (d, t), ss in _REGISTRY.items() for s in ss)
