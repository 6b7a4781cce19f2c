"""onnxc: an ahead-of-time ONNX compiler with onnxruntime's Python API."""
from . import errors
from .errors import (BuildError, EPFail, Error, Fail, InvalidArgument, InvalidGraph, InvalidProtobuf,
                     NoModel, NoSuchFile, NotImplemented, RuntimeException)
from .options import ExecutionMode, ExecutionOrder, GraphOptimizationLevel, RunOptions, SessionOptions
from .session import (InferenceSession, ModelMetadata, NodeArg, get_all_providers, get_available_providers,
                      get_device)
from .version import __version__

__all__ = [
    "InferenceSession", "SessionOptions", "RunOptions", "NodeArg", "ModelMetadata",
    "GraphOptimizationLevel", "ExecutionMode", "ExecutionOrder",
    "get_device", "get_available_providers", "get_all_providers", "__version__", "errors",
    "Error", "Fail", "InvalidArgument", "InvalidGraph", "InvalidProtobuf", "NoModel", "NoSuchFile",
    "NotImplemented", "RuntimeException", "EPFail", "BuildError",
]
