"""onnxc: an ahead-of-time ONNX compiler with onnxruntime's Python API (``import onnxc as rt``)."""
from . import errors
from .errors import (BindingError, BuildError, DeviceReset, EngineError, EPFail, Error, Fail, InvalidArgument, InvalidGraph,
                     InvalidProtobuf, ModelLoadCanceled, ModelLoaded, ModelRequiresCompilation, NoModel,
                     NoSuchFile, NotFound, NotImplemented, RuntimeException)
from .iobinding import IOBinding
from .options import ExecutionMode, ExecutionOrder, GraphOptimizationLevel, RunOptions, SessionOptions
from .ortvalue import OrtDevice, OrtDeviceVendorId, OrtValue
from .session import (InferenceSession, ModelMetadata, NodeArg, get_all_providers, get_available_providers,
                      get_device)
from .version import __version__

version = __version__

__all__ = [
    "InferenceSession", "SessionOptions", "RunOptions", "NodeArg", "ModelMetadata", "IOBinding",
    "OrtValue", "OrtDevice", "OrtDeviceVendorId",
    "GraphOptimizationLevel", "ExecutionMode", "ExecutionOrder",
    "get_device", "get_available_providers", "get_all_providers", "get_version_string", "__version__",
    "errors", "Error", "Fail", "InvalidArgument", "InvalidGraph", "InvalidProtobuf", "NoModel", "NoSuchFile",
    "NotImplemented", "RuntimeException", "EPFail", "EngineError", "ModelLoaded", "ModelLoadCanceled",
    "ModelRequiresCompilation", "NotFound", "DeviceReset", "BindingError", "BuildError",
]


def get_version_string() -> str:
    return __version__
