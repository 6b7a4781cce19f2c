"""Stage 1: read a model (path, bytes or ModelProto) and check it with onnx.checker."""
from __future__ import annotations

import os

import onnx

from .errors import InvalidGraph, InvalidProtobuf, NoSuchFile

MIN_IR_VERSION = 3
MAX_IR_VERSION = onnx.IR_VERSION
MAX_OPSET = onnx.defs.onnx_opset_version()


def load(model) -> onnx.ModelProto:
    if isinstance(model, onnx.ModelProto):
        proto = model
    elif isinstance(model, (bytes, bytearray, memoryview)):
        proto = _parse(bytes(model), "<bytes>")
    elif isinstance(model, (str, os.PathLike)):
        path = os.fspath(model)
        if not os.path.isfile(path):
            raise NoSuchFile(f"model file not found: {path!r}")
        with open(path, "rb") as f:
            proto = _parse(f.read(), path)
        # onnx resolves external data relative to the model's folder and rejects paths
        # that leave it (its own traversal checks).
        try:
            onnx.load_external_data_for_model(proto, os.path.dirname(os.path.abspath(path)))
        except Exception as e:  # noqa: BLE001 - onnx raises several kinds
            raise InvalidGraph(f"cannot load external data of {path!r}: {e}") from e
    else:
        raise TypeError(f"expected a path, bytes or onnx.ModelProto, got {type(model).__name__}")
    check(proto)
    return proto


def _parse(data: bytes, where: str) -> onnx.ModelProto:
    proto = onnx.ModelProto()
    try:
        proto.ParseFromString(data)
    except Exception as e:  # noqa: BLE001 - protobuf's DecodeError and friends
        raise InvalidProtobuf(f"{where} is not a valid ONNX protobuf: {e}") from e
    if not proto.HasField("graph"):
        raise InvalidProtobuf(f"{where} holds no graph: not an ONNX model")
    return proto


def check(proto: onnx.ModelProto) -> None:
    if not MIN_IR_VERSION <= proto.ir_version <= MAX_IR_VERSION:
        raise InvalidGraph(f"model IR version {proto.ir_version} is outside the supported range "
                           f"{MIN_IR_VERSION}..{MAX_IR_VERSION}")
    for o in proto.opset_import:
        if o.domain in ("", "ai.onnx") and not 1 <= o.version <= MAX_OPSET:
            raise InvalidGraph(f"model imports ai.onnx opset {o.version}; supported 1..{MAX_OPSET}")
    try:
        onnx.checker.check_model(_with_shape_fields(proto))
    except onnx.checker.ValidationError as e:
        raise InvalidGraph(f"onnx.checker rejected the model: {e}") from e


def _with_shape_fields(proto: onnx.ModelProto) -> onnx.ModelProto:
    """onnx.checker insists on a shape field for graph inputs/outputs, which onnxruntime does not:
    check a copy where a missing field is present but empty (unknown), never the model itself."""
    ios = list(proto.graph.input) + list(proto.graph.output)
    if all(not v.type.HasField("tensor_type") or v.type.tensor_type.HasField("shape") for v in ios):
        return proto
    copy = onnx.ModelProto()
    copy.CopyFrom(proto)
    for v in list(copy.graph.input) + list(copy.graph.output):
        if v.type.HasField("tensor_type") and not v.type.tensor_type.HasField("shape"):
            v.type.tensor_type.shape.SetInParent()
    return copy
