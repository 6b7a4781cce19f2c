"""SessionOptions, RunOptions and the enums, shaped like onnxruntime's."""
from __future__ import annotations

import enum


class GraphOptimizationLevel(enum.IntEnum):
    ORT_DISABLE_ALL = 0
    ORT_ENABLE_BASIC = 1
    ORT_ENABLE_EXTENDED = 2
    ORT_ENABLE_LAYOUT = 3
    ORT_ENABLE_ALL = 99


class ExecutionMode(enum.IntEnum):
    ORT_SEQUENTIAL = 0
    ORT_PARALLEL = 1


class ExecutionOrder(enum.IntEnum):
    DEFAULT = 0
    PRIORITY_BASED = 1
    MEMORY_EFFICIENT = 2


class SessionOptions:
    def __init__(self):
        self.intra_op_num_threads = 0          # 0: one thread per core
        self.inter_op_num_threads = 0
        self.graph_optimization_level = GraphOptimizationLevel.ORT_ENABLE_ALL
        self.execution_mode = ExecutionMode.ORT_SEQUENTIAL
        self.execution_order = ExecutionOrder.DEFAULT
        self.enable_profiling = False
        self.profile_file_prefix = "onnxruntime_profile_"
        self.log_severity_level = 2
        self.log_verbosity_level = 0
        self.logid = ""
        self.optimized_model_filepath = ""
        self.enable_cpu_mem_arena = True
        self.enable_mem_pattern = True
        self.enable_mem_reuse = True
        self.use_deterministic_compute = False
        self._free_dims: dict[str, int] = {}
        self._free_dims_by_denotation: dict[str, int] = {}
        self._config: dict[str, str] = {}

    def add_free_dimension_override_by_name(self, dim_name: str, dim_value: int) -> None:
        self._free_dims[str(dim_name)] = int(dim_value)

    def add_free_dimension_override_by_denotation(self, dim_denotation: str, dim_value: int) -> None:
        self._free_dims_by_denotation[str(dim_denotation)] = int(dim_value)

    def add_session_config_entry(self, key: str, value: str) -> None:
        self._config[str(key)] = str(value)

    def get_session_config_entry(self, key: str) -> str:
        if key not in self._config:
            from .errors import InvalidArgument
            raise InvalidArgument(f"SessionOptions does not have configuration with key: {key}")
        return self._config[key]

    def add_initializer(self, name: str, value) -> None:
        from .errors import NotImplemented as OrtNotImplemented
        raise OrtNotImplemented("SessionOptions.add_initializer: feed overridable initializers to run() instead")

    def register_custom_ops_library(self, path: str) -> None:
        from .errors import NotImplemented as OrtNotImplemented
        raise OrtNotImplemented("custom operator libraries cannot be compiled ahead of time")


class RunOptions:
    def __init__(self):
        self.log_severity_level = 2
        self.log_verbosity_level = 0
        self.logid = ""
        self.only_execute_path_to_fetches = False
        self.terminate = False
        self.synchronize_execution_providers = True
        self._config: dict[str, str] = {}

    def add_run_config_entry(self, key: str, value: str) -> None:
        self._config[str(key)] = str(value)

    def get_run_config_entry(self, key: str) -> str:
        return self._config[key]
