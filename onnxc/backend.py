"""The ONNX backend API (onnx.backend.base) over onnxc: every number computed by generated C.

    import onnxc.backend as backend
    rep = backend.prepare(model, "CPU")
    outputs = rep.run(inputs)
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import onnx
from onnx import helper
from onnx.backend.base import Backend, BackendRep, Device, DeviceType

from . import loader
from .errors import NotImplemented as OrtNotImplemented
from .ir import from_model
from .ops import lookup
from .passes.constants import fold_constant_nodes
from .passes.expand_functions import expand_functions
from .passes.gradient import expand_gradients
from .session import InferenceSession


class OnnxcRep(BackendRep):
    def __init__(self, model: onnx.ModelProto, session: InferenceSession):
        inits = {t.name for t in model.graph.initializer}
        self._positional = [i.name for i in model.graph.input if i.name not in inits]
        self.session = session

    def run(self, inputs: Any, **kwargs: Any) -> tuple:
        if isinstance(inputs, dict):
            feed = dict(inputs)
        else:
            if isinstance(inputs, np.ndarray) or not isinstance(inputs, (list, tuple)):
                inputs = [inputs]
            if len(inputs) > len(self._positional):
                raise ValueError(f"{len(inputs)} inputs given, the model takes {len(self._positional)}")
            feed = dict(zip(self._positional, inputs))
        feed = {k: v for k, v in feed.items() if v is not None}
        return tuple(self.session.run(None, feed))


class OnnxcBackend(Backend):
    @classmethod
    def is_compatible(cls, model, device: str = "CPU", **kwargs: Any) -> bool:
        if not cls.supports_device(device):
            return False
        try:
            graph = from_model(expand_gradients(fold_constant_nodes(expand_functions(loader.load(model)))))
            for node in graph.nodes:
                lookup(node)
        except Exception:  # noqa: BLE001 - any failure means "not compatible"
            return False
        return True

    @classmethod
    def is_opset_supported(cls, model) -> tuple[bool, str]:
        for o in model.opset_import:
            if o.domain in ("", "ai.onnx") and not 1 <= o.version <= loader.MAX_OPSET:
                return False, f"opset {o.version} is outside 1..{loader.MAX_OPSET}"
        return True, ""

    @classmethod
    def prepare(cls, model, device: str = "CPU", **kwargs: Any) -> OnnxcRep:
        if not cls.supports_device(device):
            raise OrtNotImplemented(f"device {device!r} is not supported by onnxc")
        proto = loader.load(model)
        return OnnxcRep(proto, InferenceSession(proto, **kwargs))

    @classmethod
    def run_model(cls, model, inputs: Any, device: str = "CPU", **kwargs: Any) -> tuple:
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(cls, node: onnx.NodeProto, inputs: Any, device: str = "CPU",
                 outputs_info: Sequence[tuple] | None = None, **kwargs: Any) -> tuple:
        """Run one node: a one-node model is built around it and compiled like any other."""
        if isinstance(inputs, dict):
            arrays = [inputs.get(n) for n in node.input]
        else:
            arrays = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
        names = [n for n in node.input if n]
        ins = []
        feed = {}
        for name, a in zip(names, arrays):
            a = np.asarray(a)
            ins.append(helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape))
            feed[name] = a
        opset = kwargs.pop("opset_version", None) or onnx.defs.onnx_opset_version()
        domain = node.domain or ""
        imports = [helper.make_opsetid("", opset)]
        if domain not in ("", "ai.onnx"):
            imports.append(helper.make_opsetid(domain, onnx.defs.get_schema(node.op_type, domain=domain).since_version))
        outs = [onnx.ValueInfoProto(name=o) for o in node.output if o]
        model = helper.make_model(helper.make_graph([node], "run_node", ins, outs), opset_imports=imports)
        inferred = onnx.shape_inference.infer_shapes(model)
        known = {vi.name: vi for vi in inferred.graph.output if vi.type.HasField("tensor_type")}
        for k, o in enumerate(model.graph.output):
            if o.name in known:
                o.CopyFrom(known[o.name])
            elif outputs_info and k < len(outputs_info):
                dt, shape = outputs_info[k]
                o.CopyFrom(helper.make_tensor_value_info(o.name, helper.np_dtype_to_tensor_dtype(np.dtype(dt)),
                                                         shape))
            if not o.type.tensor_type.HasField("shape"):
                o.type.tensor_type.shape.SetInParent()
        return cls.prepare(model, device, **kwargs).run(feed)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return Device(device).type == DeviceType.CPU


prepare = OnnxcBackend.prepare
run_model = OnnxcBackend.run_model
run_node = OnnxcBackend.run_node
supports_device = OnnxcBackend.supports_device
is_compatible = OnnxcBackend.is_compatible
is_opset_supported = OnnxcBackend.is_opset_supported
