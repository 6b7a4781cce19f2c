"""SessionOptions, RunOptions and the enums, shaped like onnxruntime's.

Attributes are type-checked on assignment as onnxruntime's (pybind) properties are: a wrong type
raises TypeError at once instead of failing later inside the compiler.
"""
from __future__ import annotations

import enum
import numbers

from .errors import BindingError, InvalidArgument
from .errors import NotImplemented as OrtNotImplemented


class _OrtEnum(enum.IntEnum):
    def __str__(self):          # 'GraphOptimizationLevel.ORT_ENABLE_ALL', as onnxruntime prints it
        return f"{type(self).__name__}.{self.name}"


class GraphOptimizationLevel(_OrtEnum):
    ORT_DISABLE_ALL = 0
    ORT_ENABLE_BASIC = 1
    ORT_ENABLE_EXTENDED = 2
    ORT_ENABLE_LAYOUT = 3
    ORT_ENABLE_ALL = 99


class ExecutionMode(_OrtEnum):
    ORT_SEQUENTIAL = 0
    ORT_PARALLEL = 1


class ExecutionOrder(_OrtEnum):
    DEFAULT = 0
    PRIORITY_BASED = 1
    MEMORY_EFFICIENT = 2


class _Typed:
    """A checked attribute: ``kind`` is int, bool, str or an IntEnum class."""

    def __init__(self, kind, default):
        self.kind, self.default = kind, default

    def __set_name__(self, owner, name):
        self.name, self.slot = name, "_" + name

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        return obj.__dict__.get(self.slot, self.default)

    def __set__(self, obj, value):
        obj.__dict__[self.slot] = self.convert(value)

    def convert(self, value):
        k = self.kind
        if k is bool:
            if isinstance(value, (bool, numbers.Integral)):
                return bool(value)
        elif k is int:
            if isinstance(value, numbers.Integral) and not isinstance(value, bool):
                return int(value)
        elif k is str:
            if isinstance(value, str):
                return value
        elif isinstance(value, numbers.Integral) and not isinstance(value, bool):
            try:
                return k(int(value))
            except ValueError:
                raise TypeError(f"{self.name}: {value!r} is not a valid {k.__name__}") from None
        raise TypeError(f"{self.name} must be {getattr(k, '__name__', k)}, got {type(value).__name__} "
                        f"({value!r})")


class SessionOptions:
    intra_op_num_threads = _Typed(int, 0)        # 0: one thread per usable core; reaches OpenMP
    inter_op_num_threads = _Typed(int, 0)
    graph_optimization_level = _Typed(GraphOptimizationLevel, GraphOptimizationLevel.ORT_ENABLE_ALL)
    execution_mode = _Typed(ExecutionMode, ExecutionMode.ORT_SEQUENTIAL)
    execution_order = _Typed(ExecutionOrder, ExecutionOrder.DEFAULT)
    enable_profiling = _Typed(bool, False)
    profile_file_prefix = _Typed(str, "onnxruntime_profile_")
    log_severity_level = _Typed(int, -1)
    log_verbosity_level = _Typed(int, 0)
    logid = _Typed(str, "")
    optimized_model_filepath = _Typed(str, "")
    enable_cpu_mem_arena = _Typed(bool, True)
    enable_mem_pattern = _Typed(bool, True)
    enable_mem_reuse = _Typed(bool, True)
    use_deterministic_compute = _Typed(bool, False)
    use_per_session_threads = _Typed(bool, True)

    def __init__(self):
        self._free_dims: dict[str, int] = {}
        self._free_dims_by_denotation: dict[str, int] = {}
        self._config: dict[str, str] = {}

    def add_free_dimension_override_by_name(self, dim_name: str, dim_value: int) -> None:
        """Compile the model with the symbolic dimension ``dim_name`` fixed to ``dim_value``."""
        self._free_dims[str(dim_name)] = _dim_value(dim_name, dim_value)

    def add_free_dimension_override_by_denotation(self, dim_denotation: str, dim_value: int) -> None:
        """Fix every symbolic input dimension carrying this denotation (e.g. DATA_BATCH)."""
        self._free_dims_by_denotation[str(dim_denotation)] = _dim_value(dim_denotation, dim_value)

    def add_session_config_entry(self, key: str, value: str) -> None:
        self._config[str(key)] = str(value)

    def get_session_config_entry(self, key: str) -> str:
        if key not in self._config:
            raise BindingError(f"SessionOptions does not have configuration with key: {key}")
        return self._config[key]

    def add_initializer(self, name: str, value) -> None:
        raise OrtNotImplemented("SessionOptions.add_initializer: feed overridable initializers to run() "
                                "instead")

    def add_external_initializers(self, names, values) -> None:
        raise OrtNotImplemented("SessionOptions.add_external_initializers: weights are compiled into the "
                                "library; feed overridable initializers to run() instead")

    def register_custom_ops_library(self, path: str) -> None:
        raise OrtNotImplemented("custom operator libraries cannot be compiled ahead of time")

    def __repr__(self):
        return (f"SessionOptions(intra_op_num_threads={self.intra_op_num_threads}, "
                f"graph_optimization_level={self.graph_optimization_level.name}, "
                f"free_dims={self._free_dims})")


def _dim_value(name, value) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"free dimension {name!r}: value must be an int, got {type(value).__name__}")
    if value < 0:
        raise InvalidArgument(f"free dimension {name!r}: value must be >= 0, got {value}")
    return int(value)


class RunOptions:
    log_severity_level = _Typed(int, -1)
    log_verbosity_level = _Typed(int, 0)
    logid = _Typed(str, "")
    only_execute_path_to_fetches = _Typed(bool, False)
    terminate = _Typed(bool, False)              # checked at the start of run(), like onnxruntime
    synchronize_execution_providers = _Typed(bool, True)

    def __init__(self):
        self._config: dict[str, str] = {}

    def add_run_config_entry(self, key: str, value: str) -> None:
        self._config[str(key)] = str(value)

    def get_run_config_entry(self, key: str) -> str:
        if key not in self._config:
            raise BindingError(f"RunOptions does not have configuration with key: {key}")
        return self._config[key]
