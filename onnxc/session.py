"""InferenceSession: onnxruntime's API over a compiled model library."""
from __future__ import annotations

import os
import threading
import warnings
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from . import dtypes
from .errors import Fail, InvalidArgument
from .library import Library, is_library
from .options import RunOptions, SessionOptions

CPU = "CPUExecutionProvider"
ALL_PROVIDERS = [
    "TensorrtExecutionProvider", "CUDAExecutionProvider", "MIGraphXExecutionProvider",
    "ROCMExecutionProvider", "OpenVINOExecutionProvider", "DnnlExecutionProvider",
    "VitisAIExecutionProvider", "QNNExecutionProvider", "NnapiExecutionProvider",
    "CoreMLExecutionProvider", "ArmNNExecutionProvider", "ACLExecutionProvider",
    "DmlExecutionProvider", "RknpuExecutionProvider", "WebNNExecutionProvider",
    "WebGpuExecutionProvider", "XnnpackExecutionProvider", "CANNExecutionProvider",
    "AzureExecutionProvider", CPU,
]


def get_available_providers() -> list[str]:
    return [CPU]


def get_all_providers() -> list[str]:
    return list(ALL_PROVIDERS)


def get_device() -> str:
    return "CPU"


@dataclass(frozen=True)
class NodeArg:
    name: str
    type: str
    shape: list

    def __str__(self):
        return f"NodeArg(name={self.name!r}, type={self.type!r}, shape={self.shape})"

    __repr__ = __str__


@dataclass(frozen=True)
class ModelMetadata:
    producer_name: str
    graph_name: str
    domain: str
    description: str
    graph_description: str
    version: int
    custom_metadata_map: dict = field(default_factory=dict)


@dataclass
class _Binding:
    """One input as the C entry point wants it: a pointer and the array keeping it alive."""
    array: Any
    shape: tuple


class InferenceSession:
    def __init__(self, path_or_bytes, sess_options: SessionOptions | None = None,
                 providers: Sequence | None = None, provider_options: Sequence | None = None, **kwargs):
        self._sess_options = sess_options or SessionOptions()
        self._providers, self._provider_options = _resolve_providers(providers, provider_options)
        src = path_or_bytes
        if isinstance(src, (str, os.PathLike)) and is_library(src):
            lib_path = src
        else:
            from .compiler import Options, build_library
            o = self._sess_options
            opts = Options(free_dims=dict(sorted(o._free_dims.items())),
                           optimization_level=int(o.graph_optimization_level))
            lib_path = build_library(src, opts, kwargs.get("cache_dir"))
        self._model_path = os.fspath(src) if isinstance(src, (str, os.PathLike)) else None
        self._lib = Library(lib_path)
        self._init_from_library()

    # ---- metadata ------------------------------------------------------------------------
    def _init_from_library(self) -> None:
        lib = self._lib
        m = lib.meta
        self._inputs = [NodeArg(d["name"], d["type"], list(d["shape"])) for d in lib.inputs]
        self._overridable = [NodeArg(d["name"], d["type"], list(d["shape"])) for d in lib.overridable]
        self._outputs = [NodeArg(d["name"], d["type"], list(d["shape"])) for d in lib.outputs]
        self._in_specs = lib.inputs + lib.overridable
        self._in_index = {d["name"]: i for i, d in enumerate(self._in_specs)}
        self._in_np = [dtypes.from_onnx(d["onnx_type"]).np for d in self._in_specs]
        self._out_index = {d["name"]: i for i, d in enumerate(lib.outputs)}
        self._out_np = [dtypes.from_onnx(d["onnx_type"]).np for d in lib.outputs]
        self._out_ranks = [len(d["dims"]) for d in lib.outputs]
        self._n_required = len(lib.inputs)
        self._nsyms = len(lib.symbols)
        self._shape_cache: dict[tuple, tuple] = {}
        self._arena_pool: dict[int, list] = {}
        self._pool_lock = threading.Lock()
        self._meta = ModelMetadata(m.get("producer_name", ""), m.get("graph_name", ""), m.get("domain", ""),
                                   m.get("doc_string", ""), m.get("graph_description", ""),
                                   int(m.get("model_version", 0)), dict(m.get("custom_metadata_map", {})))
        n = self._sess_options.intra_op_num_threads
        self._threads = int(n) if n and n > 0 else (os.cpu_count() or 1)

    def get_inputs(self) -> list[NodeArg]:
        return list(self._inputs)

    def get_outputs(self) -> list[NodeArg]:
        return list(self._outputs)

    def get_overridable_initializers(self) -> list[NodeArg]:
        return list(self._overridable)

    def get_modelmeta(self) -> ModelMetadata:
        return self._meta

    def get_providers(self) -> list[str]:
        return list(self._providers)

    def get_provider_options(self) -> dict:
        return {p: dict(o) for p, o in zip(self._providers, self._provider_options)}

    def get_session_options(self) -> SessionOptions:
        return self._sess_options

    def set_providers(self, providers=None, provider_options=None) -> None:
        self._providers, self._provider_options = _resolve_providers(providers, provider_options)

    def disable_fallback(self) -> None:
        pass

    def enable_fallback(self) -> None:
        pass

    @property
    def library_path(self) -> str:
        return self._lib.path

    # ---- running -------------------------------------------------------------------------
    def run(self, output_names, input_feed: dict, run_options: RunOptions | None = None) -> list:
        out_idx = self._output_indices(output_names)
        arrays = self._convert_feed(input_feed)
        dims = self._bind_dims([None if a is None else a.shape for a in arrays])
        arena_bytes, out_shapes = self._shapes_for(dims)
        outs = [np.empty(out_shapes[j], self._out_np[j]) for j in range(len(out_shapes))]
        self._call([a for a in arrays], outs, dims, arena_bytes)
        return [outs[j] for j in out_idx]

    def _output_indices(self, output_names) -> list[int]:
        if not output_names:
            return list(range(len(self._outputs)))
        try:
            return [self._out_index[n] for n in output_names]
        except KeyError as e:
            raise InvalidArgument(f"Invalid Output Name:{e.args[0]}") from None

    def _convert_feed(self, feed: dict) -> list:
        if not isinstance(feed, dict):
            raise InvalidArgument(f"input_feed must be a dict of input name -> value, got {type(feed).__name__}")
        arrays: list = [None] * len(self._in_specs)
        for name, value in feed.items():
            i = self._in_index.get(name)
            if i is None:
                raise InvalidArgument(f"Invalid input name: {name}")
            arrays[i] = self._as_array(i, value)
        missing = [d["name"] for d, a in zip(self._in_specs[:self._n_required], arrays) if a is None]
        if missing:
            raise InvalidArgument(f"Required inputs ({missing}) are missing from input feed "
                                  f"({list(feed)}).")
        return arrays

    def _as_array(self, i: int, value) -> np.ndarray:
        want = self._in_np[i]
        spec = self._in_specs[i]
        if hasattr(value, "_onnxc_numpy"):          # an OrtValue
            value = value._onnxc_numpy()
        if not isinstance(value, np.ndarray):
            try:
                value = np.asarray(value, dtype=want)
            except (TypeError, ValueError) as e:
                raise InvalidArgument(f"input {spec['name']!r}: cannot convert {type(value).__name__} "
                                      f"to {spec['type']}: {e}") from None
        if value.dtype != want:
            got = dtypes.from_numpy(value.dtype)
            raise InvalidArgument(f"Unexpected input data type. Actual: ({got.ort if got else value.dtype}) , "
                                  f"expected: ({spec['type']}) (input {spec['name']!r})")
        if not value.flags.c_contiguous or not value.flags.aligned:
            value = np.ascontiguousarray(value)
        return value

    def _bind_dims(self, shapes: list) -> tuple:
        vals = [None] * self._nsyms
        where = [None] * self._nsyms
        for spec, shape in zip(self._in_specs, shapes):
            if shape is None:
                continue
            want = spec["dims"]
            if len(shape) != len(want):
                raise InvalidArgument(f"Invalid rank for input: {spec['name']} Got: {len(shape)} Expected: "
                                      f"{len(want)} Please fix either the inputs/outputs or the model.")
            for k, (got, w) in enumerate(zip(shape, want)):
                if isinstance(w, int):
                    if got != w:
                        raise InvalidArgument(
                            f"Got invalid dimensions for input: {spec['name']} for the following indices\n"
                            f" index: {k} Got: {got} Expected: {w}\n"
                            " Please fix either the inputs/outputs or the model.")
                elif isinstance(w, dict):
                    s = w["sym"]
                    if vals[s] is None:
                        vals[s], where[s] = got, (spec["name"], k)
                    elif vals[s] != got:
                        n0, k0 = where[s]
                        raise InvalidArgument(
                            f"inconsistent symbolic dimension {self._lib.symbols[s]!r}: input {spec['name']} "
                            f"index {k} has {got}, but input {n0} index {k0} has {vals[s]}")
        # symbols only an absent overridable initializer carries take their built-in size
        return tuple(1 if v is None else v for v in vals)

    def _shapes_for(self, dims: tuple):
        hit = self._shape_cache.get(dims)
        if hit is not None:
            return hit
        ffi, lib = self._lib.ffi, self._lib.lib
        d = ffi.new("int64_t[]", list(dims) or [0])
        n = sum(self._out_ranks)
        buf = ffi.new("int64_t[]", max(n, 1))
        lib.onnxc_output_shapes(d, buf)
        flat = list(buf)[:n]
        shapes, pos = [], 0
        for r in self._out_ranks:
            shapes.append(tuple(flat[pos:pos + r]))
            pos += r
        for j, s in enumerate(shapes):
            if any(x < 0 for x in s):
                raise InvalidArgument(f"output {self._outputs[j].name!r} would have negative dims {s} "
                                      f"for input dims {dict(zip(self._lib.symbols, dims))}")
        res = (int(lib.onnxc_arena_bytes(d)), shapes)
        if len(self._shape_cache) > 64:
            self._shape_cache.clear()
        self._shape_cache[dims] = res
        return res

    def _take_arena(self, nbytes: int) -> np.ndarray:
        with self._pool_lock:
            pool = self._arena_pool.get(nbytes)
            if pool:
                return pool.pop()
        raw = np.empty(nbytes + 64, np.uint8)
        off = -raw.ctypes.data % 64
        return raw[off:off + nbytes]

    def _give_arena(self, arena: np.ndarray) -> None:
        with self._pool_lock:
            self._arena_pool.setdefault(arena.nbytes, []).append(arena)

    def _call(self, inputs: list, outputs: list, dims: tuple, arena_bytes: int) -> None:
        """inputs/outputs: numpy arrays, or ints (raw addresses), or None (absent overridable)."""
        ffi, lib = self._lib.ffi, self._lib.lib
        ins = ffi.new("void *[]", max(len(inputs), 1))
        keep = []
        for i, a in enumerate(inputs):
            if a is None:
                continue
            p = ffi.cast("void *", a) if isinstance(a, int) else ffi.from_buffer(a)
            keep.append(p)
            ins[i] = p
        outs = ffi.new("void *[]", max(len(outputs), 1))
        for j, a in enumerate(outputs):
            p = ffi.cast("void *", a) if isinstance(a, int) else ffi.from_buffer(a)
            keep.append(p)
            outs[j] = p
        d = ffi.new("int64_t[]", list(dims) or [0])
        arena = self._take_arena(arena_bytes)
        try:
            rc = lib.onnxc_run(ins, outs, d, ffi.from_buffer(arena), self._threads)
        finally:
            self._give_arena(arena)
        if rc != 0:
            raise Fail(f"the compiled model reported error code {rc}")


def _resolve_providers(providers, provider_options):
    names, opts = [], []
    for i, p in enumerate(providers or [CPU]):
        name, o = (p[0], dict(p[1])) if isinstance(p, (tuple, list)) else (p, {})
        if provider_options and i < len(provider_options):
            o.update(provider_options[i] or {})
        if name not in ALL_PROVIDERS:
            raise ValueError(f"Unknown Provider Type: {name}")
        if name not in get_available_providers():
            warnings.warn(f"Specified provider '{name}' is not in available provider names."
                          f"Available providers: '{', '.join(get_available_providers())}'")
            continue
        names.append(name)
        opts.append(o)
    if CPU not in names:
        names.append(CPU)
        opts.append({})
    return names, opts
