"""InferenceSession: onnxruntime's API over a compiled model library.

What run() does per call is only what cannot be cached: check each feed against a spec built
once per session (a fully static input is one dtype and one shape comparison), bind the symbolic
dims, look up the output shapes and arena size cached for those dims, allocate the outputs and
call the C entry point. Arenas come from a pool (list.pop/append are atomic), so concurrent
calls on one session never share one.
"""
from __future__ import annotations

import os
import threading
import warnings
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from . import dtypes, fastcall
from .errors import BindingError, Error, Fail, InvalidArgument
from .errors import NotImplemented as OrtNotImplemented
from .iobinding import IOBinding
from .library import Library, is_library
from .options import RunOptions, SessionOptions
from .ortvalue import OrtValue

CPU = "CPUExecutionProvider"
ALL_PROVIDERS = [   # onnxruntime 1.31's get_all_providers(), in its order
    "NvTensorRTRTXExecutionProvider", "TensorrtExecutionProvider", "CUDAExecutionProvider",
    "MIGraphXExecutionProvider", "OpenVINOExecutionProvider", "DnnlExecutionProvider",
    "VitisAIExecutionProvider", "QNNExecutionProvider", "NnapiExecutionProvider", "VSINPUExecutionProvider",
    "JsExecutionProvider", "CoreMLExecutionProvider", "ACLExecutionProvider", "DmlExecutionProvider",
    "RknpuExecutionProvider", "WebNNExecutionProvider", "WebGpuExecutionProvider", "XnnpackExecutionProvider",
    "CANNExecutionProvider", "AzureExecutionProvider", CPU,
]
_PLAN_CACHE = 64          # output shapes / arena sizes kept for this many distinct dim bindings


def get_available_providers() -> list[str]:
    return [CPU]


def get_all_providers() -> list[str]:
    return list(ALL_PROVIDERS)


def get_device() -> str:
    return "CPU"


class NodeArg:
    """An input or output as onnxruntime describes it: name, 'tensor(float)', shape (ints, dim
    names, None)."""
    __slots__ = ("name", "type", "shape")

    def __init__(self, name: str, type: str, shape: list):  # noqa: A002 - onnxruntime's name
        self.name, self.type, self.shape = name, type, shape

    def __eq__(self, other):
        return isinstance(other, NodeArg) and (self.name, self.type, self.shape) == (
            other.name, other.type, other.shape)

    def __hash__(self):
        return hash((self.name, self.type, tuple(self.shape)))

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


class _In:
    """One input of the C entry point, with everything run() checks, computed once."""
    __slots__ = ("name", "index", "etype", "dtype", "rank", "shape", "fixed", "syms", "required")

    def __init__(self, d: dict, index: int, required: bool):
        self.name, self.index, self.required = d["name"], index, required
        self.etype = dtypes.from_onnx(d["onnx_type"], strings=True)
        self.dtype = self.etype.np if self.etype is not dtypes.STRING else np.dtype(np.uintp)  # pointers
        dims = d["dims"]
        if d.get("container"):    # a sequence/optional: its onnxc_seq header, 2 int64 (see _containers)
            self.dtype, dims = np.dtype(np.int64), [2]
        self.rank = len(dims)
        self.fixed = tuple((k, v) for k, v in enumerate(dims) if isinstance(v, int))
        self.syms = tuple((k, v["sym"]) for k, v in enumerate(dims) if isinstance(v, dict))
        self.shape = tuple(dims) if len(self.fixed) == self.rank else None   # fully static


class InferenceSession:
    def __init__(self, path_or_bytes, sess_options: SessionOptions | None = None,
                 providers: Sequence | None = None, provider_options: Sequence | None = None, **kwargs):
        self._sess_options = sess_options if sess_options is not None else SessionOptions()
        self._providers, self._provider_options = _resolve_providers(providers, provider_options)
        src = path_or_bytes
        o = self._sess_options
        if isinstance(src, (str, os.PathLike)) and is_library(src):
            lib_path = src
            if o._free_dims or o._free_dims_by_denotation:
                warnings.warn("free dimension overrides are ignored for an already compiled library "
                              f"({os.fspath(src)!r}); pass them to `onnxc build` instead", stacklevel=2)
        else:
            lib_path = _build(src, o, kwargs.get("cache_dir"))
        self._model_path = os.fspath(src) if isinstance(src, (str, os.PathLike)) else None
        self._cache_dir = kwargs.get("cache_dir")
        self._lib = Library(lib_path)
        self._init_from_library()

    # ---- metadata ------------------------------------------------------------------------
    def _init_from_library(self) -> None:
        lib = self._lib
        m, syms = lib.meta, lib.symbols
        self._inputs = [NodeArg(d["name"], d["type"], _display_shape(d, syms)) for d in lib.inputs]
        self._overridable = [NodeArg(d["name"], d["type"], _display_shape(d, syms)) for d in lib.overridable]
        self._outputs = [NodeArg(d["name"], d["type"], _display_shape(d, syms)) for d in lib.outputs]
        n_req = len(lib.inputs)
        self._specs = [_In(d, i, i < n_req) for i, d in enumerate(lib.inputs + lib.overridable)]
        self._in_by_name = {s.name: s for s in self._specs}
        self._n_required = n_req
        self._sym_specs = [s for s in self._specs if s.shape is None]
        self._nsyms = len(syms)
        self._n_input_syms = m.get("input_symbols", len(syms))
        self._dynamic = self._n_input_syms < len(syms)      # dims that follow from input data
        self._run_syms = tuple(m.get("run_symbols", ()))    # ... some only known after the run
        self._heap_k = m.get("heap_symbol")                  # the run's heap: grown on demand
        self._heap_out = [j for j, d in enumerate(lib.outputs) if d.get("heap")]
        self._heap_cap = _HEAP_START
        self._cont_in = [(s, d["container"]) for s, d in zip(self._specs, lib.inputs + lib.overridable)
                         if d.get("container")]
        self._cont_out = [(j, d["container"]) for j, d in enumerate(lib.outputs) if d.get("container")]
        self._cont_idx = {j for j, _ in self._cont_out}
        self._out_index = {d["name"]: j for j, d in enumerate(lib.outputs)}
        self._out_et = [dtypes.from_onnx(d["onnx_type"], strings=True) for d in lib.outputs]
        self._out_np = [et.np for et in self._out_et]
        self._init_ml_io()
        for j, _ in self._cont_out:
            self._out_np[j] = np.dtype(np.int64)
        self._out_ranks = [len(d["dims"]) for d in lib.outputs]
        self._ffi, self._clib = lib.ffi, lib.lib
        self._run_fn = lib.lib.onnxc_run
        self._fb, self._cast, self._null = lib.ffi.from_buffer, lib.ffi.cast, lib.ffi.NULL
        self._no_optional = not lib.overridable      # then no C input can be absent
        self._plans: dict[tuple, tuple] = {}
        self._arenas: list = []          # (pointer, bytes, owner); popped by one call at a time
        self._dummy = self._ffi.new("char[]", 64)   # the arena of a call that needs none
        self._static_plan = None if self._nsyms else self._plan(())
        self._meta = ModelMetadata(m.get("producer_name", ""), m.get("graph_name", ""), m.get("domain", ""),
                                   m.get("doc_string", ""), m.get("graph_description", ""),
                                   _model_version(m.get("model_version")),
                                   dict(m.get("custom_metadata_map", {})))
        n = self._sess_options.intra_op_num_threads
        self._threads = int(n) if n and n > 0 else _usable_cores()
        self._profiler = None
        if self._sess_options.enable_profiling:
            from .profiling import Profiler
            self._profiler = Profiler(lib, self._sess_options.profile_file_prefix)
            self._run_fn = self._profiler.wrap(self._run_fn)
        self._init_fast()

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

    def end_profiling(self) -> str:
        """Write the per-node timings gathered so far as a Chrome-trace JSON file; its path."""
        if self._profiler is None:
            return ""
        return self._profiler.end()

    def get_profiling_start_time_ns(self) -> int:
        return self._profiler.start_ns if self._profiler is not None else 0

    @property
    def library_path(self) -> str:
        return self._lib.path

    # ---- running -------------------------------------------------------------------------
    def run(self, output_names, input_feed, run_options: RunOptions | None = None) -> list:
        """Outputs as numpy arrays (all of them when output_names is None or empty)."""
        if run_options is not None and run_options.terminate:
            raise Fail("Exiting due to terminate flag being set to true.")
        if self._fast is not None and type(input_feed) is dict:
            if self._cstate is not None and self._run_fn is self._raw_run:
                outs = self._crun(self._cstate, input_feed)     # all in C: onnxc/fastcall.py
                if type(outs) is list:
                    if self._c_post:
                        outs = self._ml_outputs(outs)
                    return outs if not output_names else [outs[j] for j in self._selection(output_names)]
                if outs is not None:
                    raise self._lib.run_error(outs)
            sel = self._selection(output_names) if output_names else None
            outs = self._run_fast(input_feed)
            if outs is not None:
                return outs if sel is None else [outs[j] for j in sel]
        keep = None
        if self._map_in:
            input_feed = self._encode_maps(input_feed)
        if self._str_in:
            input_feed, keep = self._encode_strings(input_feed)
        if self._cont_in:
            input_feed, kept = self._encode_containers(input_feed)
            keep = (keep, kept)
        arrays = self._feed(input_feed)
        sel = self._selection(output_names) if output_names else None
        outs = self._execute(arrays)
        if self._ml_out and self._heap_k is None:    # (with a heap: done before the arena is reused)
            outs = self._ml_outputs(outs)
        del keep   # the input strings were needed until string outputs were decoded
        return outs if sel is None else [outs[j] for j in sel]

    def run_with_ort_values(self, output_names, input_dict_ort_values, run_options: RunOptions | None = None
                            ) -> list[OrtValue]:
        """Like run(), with OrtValues (or anything run() takes) in and OrtValues out."""
        outs = self.run(output_names, input_dict_ort_values, run_options)
        return [OrtValue._wrap(a) for a in outs]

    def run_async(self, output_names, input_feed, callback, user_data, run_options=None) -> None:
        """Run on another thread, then call ``callback(results, user_data, error_message)``."""
        def work():
            try:
                res, err = self.run(output_names, input_feed, run_options), ""
            except Exception as e:  # noqa: BLE001 - handed to the callback, as onnxruntime does
                res, err = [], str(e)
            callback(res, user_data, err)
        threading.Thread(target=work, name="onnxc-run-async", daemon=True).start()

    def io_binding(self) -> IOBinding:
        return IOBinding(self)

    def create_ortvalue_from_shape_and_type(self, shape, element_type, device_type: str = "cpu",
                                            device_id: int = 0, vendor_id: int = -1) -> OrtValue:
        return OrtValue.ortvalue_from_shape_and_type(shape, element_type, device_type, device_id, vendor_id)

    def run_with_iobinding(self, iobinding: IOBinding, run_options: RunOptions | None = None) -> None:
        """Run on the bound memory: bound addresses go to the library as they are (no copies)."""
        if getattr(iobinding, "_session", None) is not self:
            raise InvalidArgument("IOBinding must be used with the session that created it.")
        if run_options is not None and run_options.terminate:
            raise Fail("Exiting due to terminate flag being set to true.")
        try:
            self._run_bound(iobinding)
        except BindingError:
            raise
        except InvalidArgument as e:
            raise BindingError(f"Error in execution: {e}") from None

    # ---- strings and ZipMap (ai.onnx.ml) -------------------------------------------------
    def _init_ml_io(self) -> None:
        """String tensors cross the C boundary as arrays of ``const char *``; ZipMap outputs are
        float tensors turned into lists of dicts after the call."""
        self._str_in = [s for s in self._specs if s.etype is dtypes.STRING]
        self._ml_out = []
        for j, d in enumerate(self._lib.outputs):
            if d.get("zipmap"):
                self._ml_out.append((j, "zipmap", list(d["zipmap"]["keys"])))
                self._outputs[j] = NodeArg(d["name"], d["type"], [])   # as onnxruntime shows a sequence
            elif self._out_et[j] is dtypes.STRING:
                self._out_np[j] = np.dtype(np.uintp)
                self._ml_out.append((j, "string", None))
        self._init_map_inputs()

    def _encode_strings(self, feed) -> tuple:
        """A copy of the feed whose string inputs are arrays of pointers to NUL-terminated UTF-8,
        and what keeps those bytes alive."""
        try:
            feed = dict(feed.items())
        except AttributeError:
            return feed, None           # _feed reports the error
        keep = []
        for s in self._str_in:
            v = feed.get(s.name)
            if v is None:
                continue
            if isinstance(v, OrtValue):
                v = v._host_array()
            a = np.asarray(v, dtype=object) if isinstance(v, (list, tuple)) else v
            if not isinstance(a, np.ndarray) or a.dtype.kind not in "OUS":
                got = a.dtype if isinstance(a, np.ndarray) else type(v).__name__
                raise InvalidArgument(f"Unexpected input data type. Actual: ({got}) , expected: (tensor(string))")
            parts = []
            for item in a.reshape(-1).tolist():
                b = item.encode("utf-8") if isinstance(item, str) else item if isinstance(item, bytes) else None
                if b is None:
                    raise InvalidArgument(f"input {s.name!r}: a string tensor holds a {type(item).__name__}")
                if b"\0" in b:
                    raise InvalidArgument(f"input {s.name!r}: strings with NUL characters are not supported")
                parts.append(b)
            blob = b"\0".join(parts) + b"\0"
            cbuf = self._ffi.from_buffer(blob)
            base = int(self._ffi.cast("uintptr_t", cbuf))
            offs = np.zeros(len(parts), np.uintp)
            if parts:
                offs[1:] = np.cumsum([len(b) + 1 for b in parts[:-1]], dtype=np.uintp)
            feed[s.name] = (offs + np.uintp(base)).reshape(a.shape)
            keep.append((blob, cbuf))
        return feed, keep

    def _ml_outputs(self, outs: list) -> list:
        """Decode string outputs (pointers into the library's constants or the input strings, read
        before those go away) and turn ZipMap outputs into onnxruntime's list of dicts."""
        outs = list(outs)
        for j, kind, keys in self._ml_out:
            a = outs[j]
            if kind == "zipmap":
                outs[j] = [dict(zip(keys, row)) for row in (a if a.ndim == 2 else a.reshape(-1, len(keys))).tolist()]
                continue
            cache: dict = {}
            string, cast = self._ffi.string, self._ffi.cast
            res = np.empty(a.shape, dtype=object)
            flat = res.reshape(-1)
            for k, ptr in enumerate(a.reshape(-1).tolist()):
                txt = cache.get(ptr)
                if txt is None:
                    txt = string(cast("char *", ptr)).decode("utf-8", "replace") if ptr else ""
                    cache[ptr] = txt
                flat[k] = txt
            outs[j] = res
        return outs

    # ---- sequences and optionals ---------------------------------------------------------
    def _encode_containers(self, feed):
        """A copy of the feed where each sequence/optional input is its C header (count, items):
        items (data pointer, rank, dims) point into the arrays, which the copy keeps alive."""
        try:
            feed = dict(feed.items())
        except AttributeError:
            return feed, None           # _feed reports the error
        keep = []
        for s, c in self._cont_in:
            if s.name not in feed and c["kind"] != "optional":
                continue
            v = feed.get(s.name)     # an optional not fed is empty
            if isinstance(v, OrtValue):
                v = v._host_array()
            where = f"input {s.name!r} ({self._inputs[s.index].type if s.index < len(self._inputs) else c['kind']})"
            if c["kind"] == "optional" and v is None:
                feed[s.name] = np.array([-1, 0], np.int64)
                continue
            seq = c["kind"] == "sequence" or c["inner"] == "sequence"
            if seq and not isinstance(v, (list, tuple)):
                raise InvalidArgument(f"{where}: expected a list of arrays, got {type(v).__name__}")
            if not seq and isinstance(v, (list, tuple)):
                v = np.asarray(v)
            tensors = list(v) if seq else [v]
            et = dtypes.from_onnx(c["elem"], strings=True)
            if et is dtypes.STRING:
                raise OrtNotImplemented(f"{where}: sequences of strings are not supported yet")
            items = np.zeros((max(len(tensors), 1), 10), np.int64)
            for k, t in enumerate(tensors):
                a = np.asarray(t.numpy() if isinstance(t, OrtValue) else t)
                if not a.flags.c_contiguous:     # (np.ascontiguousarray would make a scalar 1-D)
                    a = a.copy(order="C")
                if a.dtype != et.np:
                    raise InvalidArgument(f"{where}: element {k} is {a.dtype}, expected {et.name}")
                if a.ndim > 8:
                    raise OrtNotImplemented(f"{where}: element {k} has rank {a.ndim} (at most 8)")
                keep.append(a)
                items[k, 0] = a.ctypes.data if a.size else 0
                items[k, 1] = a.ndim
                items[k, 2:2 + a.ndim] = a.shape
            keep.append(items)
            feed[s.name] = np.array([len(tensors) if seq else 1, items.ctypes.data], np.int64)
        return feed, keep

    def _read_container(self, header: np.ndarray, c: dict):
        """A sequence (list of arrays), an optional (None or the value) from its C header."""
        count, items = int(header[0]), int(header[1])
        if count < 0:
            return None
        ffi = self._ffi
        et = dtypes.from_onnx(c["elem"], strings=True)
        out = []
        if count:
            raw = np.frombuffer(ffi.buffer(ffi.cast("void *", items), count * 80), np.int64).reshape(count, 10)
            for k in range(count):
                data, rank = int(raw[k, 0]), int(raw[k, 1])
                shape = tuple(int(x) for x in raw[k, 2:2 + rank])
                n = int(np.prod(shape, dtype=np.int64)) * et.itemsize
                buf = np.frombuffer(ffi.buffer(ffi.cast("void *", data), n), np.uint8) if n else np.empty(0, np.uint8)
                out.append(buf.view(et.np).reshape(shape).copy())
        if c["kind"] == "sequence" or c["inner"] == "sequence":
            return out
        return out[0]

    # ---- map inputs (ai.onnx.ml DictVectorizer, CastMap) ----------------------------------
    def _init_map_inputs(self) -> None:
        """A map input is two C inputs (values, keys; see shapes.map_input): get_inputs() shows one
        map(K,tensor(V)) input, and run() takes a dict for it."""
        self._map_in = []
        keys_names = set()
        for d in self._lib.inputs:
            m = d.get("map")
            if m and m["role"] == "values":
                ks = self._in_by_name[m["keys_input"]]
                self._map_in.append((d["name"], self._in_by_name[d["name"]], ks, m["type"]))
                keys_names.add(ks.name)
        if self._map_in:
            self._inputs = [NodeArg(a.name, a.type, []) if a.name in {m[0] for m in self._map_in} else a
                            for a in self._inputs if a.name not in keys_names]

    def _encode_maps(self, feed):
        """A copy of the feed where each map input's dict is its values and keys arrays, in
        ascending key order (as onnxruntime's std::map holds them)."""
        try:
            feed = dict(feed.items())
        except AttributeError:
            return feed                 # _feed reports the error
        for name, vs, ks, type_str in self._map_in:
            d = feed.get(name)
            if d is None:
                continue
            if isinstance(d, OrtValue) or not isinstance(d, dict):
                raise InvalidArgument(f"input {name!r} is a {type_str}: pass a dict, not {type(d).__name__}")
            str_keys = ks.etype is dtypes.STRING
            for k in d:
                got = "string" if isinstance(k, str) else "int64" if isinstance(k, (int, np.integer)) else None
                if got != ks.etype.name:
                    raise InvalidArgument(f"Unexpected input data type. Actual: (map({got or type(k).__name__},"
                                          f"...)) , expected: ({type_str})")
            items = sorted(d.items(), key=(lambda kv: kv[0].encode("utf-8")) if str_keys else None)
            try:
                keys = np.array([k for k, _ in items], dtype=object if str_keys else np.int64)
                vals = np.array([v for _, v in items], dtype=object if vs.etype is dtypes.STRING else vs.dtype)
            except (TypeError, ValueError, OverflowError) as e:
                raise InvalidArgument(f"input {name!r}: cannot read this dict as a {type_str}: {e}") from None
            if vs.etype is dtypes.STRING and not all(isinstance(v, str) for v in vals.tolist()):
                raise InvalidArgument(f"input {name!r}: a {type_str} needs str values")
            feed[name] = vals
            feed[ks.name] = keys
        return feed

    # ---- the fast path ---------------------------------------------------------------------
    def _init_fast(self) -> None:
        """run()'s shortcut for plain tensor models fed exactly their required inputs as
        C-contiguous arrays of the right dtype: the checks, dims and output makers of a tuple of
        input shapes are done once and remembered; anything else takes the general path."""
        plain = not (self._map_in or self._str_in or self._cont_in or self._dynamic or self._run_syms
                     or self._heap_k is not None)
        self._fast = tuple((s.name, s.dtype) for s in self._specs[:self._n_required]) if plain else None
        self._fast1 = self._fast[0] if plain and len(self._fast) == 1 and not self._overridable else None
        self._fast_absent = [self._null] * (len(self._specs) - self._n_required)   # overridables not fed
        self._fast_plans: dict = {}
        zips = {j: keys for j, kind, keys in self._ml_out if kind == "zipmap" and self._out_ranks[j] == 2}
        # with only ZipMap outputs (rank 2: rows x classes) their floats go to a cffi buffer that
        # becomes dicts directly; others (strings) take _ml_outputs
        self._fast_zip = zips if self._ml_out and len(zips) == len(self._ml_out) else None
        self._run_fast = self._make_fast() if plain else None
        self._raw_run = self._run_fn if self._profiler is None else None
        self._cplans: dict = {}
        fc = fastcall.module(self._cache_dir) if plain and len(self._specs) <= 64 and len(self._outputs) <= 64 else None
        self._crun = fc.run if fc is not None else None
        self._c_post = bool(self._ml_out) and self._fast_zip is None
        self._cstate = None if fc is None else (
            tuple(n for n, _ in self._fast), tuple(np.dtype(dt) for _, dt in self._fast), self._cplans,
            int(self._ffi.cast("uintptr_t", self._ffi.addressof(self._clib, "onnxc_run"))), int(self._threads),
            len(self._fast_absent), self._arenas, int(self._ffi.cast("uintptr_t", self._dummy)))

    def _fast_plan(self, key, arrays):
        """(output makers, C dims, arena bytes, ZipMap outputs) for these input shapes; None when
        a static input's shape does not fit (the general path reports it)."""
        for s, a in zip(self._specs, arrays):
            if s.shape is not None and a.shape != s.shape:
                return None
        shapes, need, cd, pairs = self._plan(self._dims(arrays)) if self._nsyms else self._static_plan
        makers, zips = [], []
        for j, (shp, dt) in enumerate(pairs):
            keys = self._fast_zip.get(j) if self._fast_zip is not None else None
            if keys is None:
                makers.append((np.empty, shp, dt))
            else:       # rows x classes floats, read once into dicts: a cffi buffer, no numpy array
                makers.append((self._ffi.new, self._ffi.typeof("float[]"), max(shp[0] * shp[1], 1)))
                zips.append((j, keys, shp[0] * shp[1], len(keys)))
        if len(self._fast_plans) >= _PLAN_CACHE:
            self._fast_plans.clear()
            self._cplans.clear()
        plan = self._fast_plans[key] = (makers, cd, need, zips if self._fast_zip is not None else None)
        if self._cstate is not None:      # the same plan for onnxc_fastcall.run: see its source
            zip_keys = self._fast_zip or {}
            outs = tuple((1, tuple(zip_keys[j]), shp[0], shp[1]) if j in zip_keys else (0, tuple(shp), np.dtype(dt))
                         for j, (shp, dt) in enumerate(pairs))
            self._cplans[key] = (outs, int(self._ffi.cast("uintptr_t", cd)), int(need), cd)
        return plan

    def _make_fast(self):
        """run()'s fast path as a closure over everything a call reads (no attribute lookups):
        feed -> outputs, or None when this feed needs the general path (which reports errors)."""
        me = weakref.ref(self)       # (the session holds this closure: no reference cycle)
        fb, plans, pool, ffi = self._fb, self._fast_plans, self._arenas, self._ffi
        dummy, threads, run_error, unpack = self._dummy, self._threads, self._lib.run_error, self._ffi.unpack
        ml_out = bool(self._ml_out)
        specs, n_req, absent, ndarray = self._fast, self._n_required, self._fast_absent, np.ndarray
        one = self._fast1

        def fast_plan(key, arrays):
            return me()._fast_plan(key, arrays)

        def call(ins, plan):
            makers, cd, need, zips = plan
            run_fn = me()._run_fn     # looked up per call: it may be wrapped after the session starts
            outs = [make(a, b) for make, a, b in makers]
            ptrs = [fb(o) if type(o) is ndarray else o for o in outs]
            if need:        # as _invoke: an arena no other call holds meanwhile
                arena = pool.pop() if pool else None
                if arena is None or arena[1] < need:
                    arena = _new_arena(ffi, need)
                try:
                    rc = run_fn(ins, ptrs, cd, arena[0], threads)
                finally:
                    pool.append(arena)
            else:
                rc = run_fn(ins, ptrs, cd, dummy, threads)
            if rc:
                raise run_error(rc)
            if zips is None:
                return me()._ml_outputs(outs) if ml_out else outs
            for j, keys, n, nc in zips:       # lists of dicts, as onnxruntime gives ZipMap's output
                flat = unpack(outs[j], n)
                outs[j] = [dict(zip(keys, flat))] if n == nc else [dict(zip(keys, r)) for r in zip(*[iter(flat)] * nc)]
            return outs

        if one is not None:                   # one input: no lists to build for it
            name, dt = one

            def fast(feed):
                v = feed.get(name)
                if type(v) is not ndarray or v.dtype != dt or not v.flags.carray or len(feed) != 1:
                    return None
                plan = plans.get(v.shape) or fast_plan(v.shape, (v,))
                return None if plan is None else call([fb(v)], plan)
            return fast

        def fast_n(feed):
            if len(feed) != n_req:
                return None
            arrays = []
            for name, dt in specs:
                v = feed.get(name)
                if type(v) is not ndarray or v.dtype != dt or not v.flags.carray:
                    return None
                arrays.append(v)
            key = tuple(a.shape for a in arrays)
            plan = plans.get(key) or fast_plan(key, arrays)
            return None if plan is None else call([fb(a) for a in arrays] + absent, plan)
        return fast_n

    # ---- feeds ---------------------------------------------------------------------------
    def _feed(self, feed) -> list:
        """Feed values -> one array per C input (None: absent overridable initializer)."""
        try:
            items = feed.items()
        except AttributeError:
            raise InvalidArgument(f"input_feed must be a dict of input name -> value, got "
                                  f"{type(feed).__name__}") from None
        arrays = [None] * len(self._specs)
        by_name = self._in_by_name
        found, err = 0, None
        for name, v in items:
            s = by_name.get(name)
            if s is None:
                if err is None:
                    err = InvalidArgument(f"Invalid input name: {name}")
                continue
            if (type(v) is np.ndarray and v.dtype == s.dtype and (s.shape is None or v.shape == s.shape)
                    and v.flags.carray):
                arrays[s.index] = v                       # the common case: used as it is
            elif v is None:
                continue
            else:
                try:
                    arrays[s.index] = self._convert(s, v)
                except Error as e:
                    if err is None:
                        err = e
            if s.required:
                found += 1
        if found != self._n_required:
            missing = [s.name for s in self._specs[:self._n_required] if feed.get(s.name) is None]
            raise InvalidArgument(f"Required inputs ({missing}) are missing from input feed "
                                  f"({list(feed.keys())}).")
        if err is not None:
            raise err
        return arrays

    def _convert(self, s: _In, v) -> np.ndarray:
        """The slow path: lists, OrtValues, other dtypes or layouts; every check, exact errors."""
        if isinstance(v, OrtValue):
            if not v._device.is_cpu:
                raise OrtNotImplemented(f"input {s.name!r}: an OrtValue on {v.device_name()!r} "
                                        "(CPU only so far)")
            a = v._host_array()
        elif isinstance(v, np.ndarray):
            a = v
        elif isinstance(v, np.generic):
            a = np.asarray(v)     # a numpy scalar: a 0-d array of its own type
        elif isinstance(v, (list, bool, int, float)):
            # lists take the input's element type, as onnxruntime converts them; Python scalars
            # (which onnxruntime refuses) are accepted the same way, as 0-d arrays
            try:
                a = np.asarray(v, dtype=s.dtype)
            except (TypeError, ValueError, OverflowError):
                raise BindingError("Could not create tensor from given input list") from None
        elif isinstance(v, dict):
            raise BindingError(f"input '{s.name}': a dict (an onnx map) is not a tensor; expected "
                               f"({s.etype.ort})")
        elif hasattr(v, "__iter__") and not isinstance(v, memoryview):
            raise BindingError(f"Input must be a list of dictionaries or a single numpy array for input "
                               f"'{s.name}'.")
        else:
            raise BindingError(f"Unable to handle object of type {type(v)}")
        if a.dtype != s.dtype:
            if not a.dtype.isnative and a.dtype.newbyteorder("=") == s.dtype:
                a = a.astype(s.dtype)
            else:
                got = dtypes.from_numpy(a.dtype)
                raise InvalidArgument(f"Unexpected input data type. Actual: "
                                      f"({got.ort if got else f'tensor({a.dtype})'}) , expected: ({s.etype.ort})")
        if s.shape is not None and a.shape != s.shape:
            _check_shape(s, a.shape)
        if not (a.flags.c_contiguous and a.flags.aligned):
            a = a.copy(order="C")
        return a

    def _selection(self, output_names) -> list[int]:
        if isinstance(output_names, str):
            raise TypeError(f"output_names must be a list of names, got the str {output_names!r}")
        idx = self._out_index
        try:
            return [idx[n] for n in output_names]
        except (KeyError, TypeError):
            bad = next(n for n in output_names if n not in idx)
            raise InvalidArgument(f"Invalid output name:{bad}") from None

    def _dims(self, shapes: list) -> tuple:
        """Check the shapes of the symbolic inputs and bind the symbols. ``shapes``: per C input
        its shape tuple, or the array itself, or None."""
        vals = [None] * self._n_input_syms
        for s in self._sym_specs:
            shp = shapes[s.index]
            if shp is None:
                continue
            if type(shp) is not tuple:       # an array (the run() path passes arrays)
                shp = shp.shape
            if len(shp) != s.rank:
                _check_shape(s, shp)
            for k, v in s.fixed:
                if shp[k] != v:
                    _check_shape(s, shp)
            for k, j in s.syms:
                got, cur = shp[k], vals[j]
                if cur is None:
                    vals[j] = got
                elif cur != got:
                    self._inconsistent(shapes, j, s, k, got)
        if None in vals:   # a symbol only an absent overridable initializer carries: none so far
            return tuple(1 if v is None else v for v in vals)
        return tuple(vals)

    def _inconsistent(self, shapes, j, s, k, got):
        t, kk = next((t, kk) for t in self._sym_specs if shapes[t.index] is not None
                     for kk, jj in t.syms if jj == j)
        first = shapes[t.index] if type(shapes[t.index]) is tuple else shapes[t.index].shape
        raise InvalidArgument(
            f"Got inconsistent values for the symbolic dimension '{self._lib.symbols[j]}': input {s.name} "
            f"index {k} has {got}, but input {t.name} index {kk} has {first[kk]}\n"
            " Please fix either the inputs or the model.")

    # ---- executing -----------------------------------------------------------------------
    def _plan(self, dims: tuple) -> tuple:
        """(output shapes, arena bytes, C dims array) for one binding of the symbols; cached."""
        plan = self._plans.get(dims)
        if plan is not None:
            return plan
        ffi, lib = self._ffi, self._clib
        cd = ffi.new("int64_t[]", list(dims) or [0])
        shapes = self._output_shapes(cd)
        for j in self._heap_out:     # known after the run (the library hands them over)
            shapes[j] = (0,) * len(shapes[j])
        for j, _ in self._cont_out:  # a container's header
            shapes[j] = (2,)
        for j, shp in enumerate(shapes):
            if any(x < 0 for x in shp):
                raise InvalidArgument(f"output {self._outputs[j].name!r} would have negative dims {shp} "
                                      f"for input dims {dict(zip(self._lib.symbols, dims))}")
        arena = int(lib.onnxc_arena_bytes(cd))
        if arena < 0:
            raise InvalidArgument(f"negative arena size for input dims {dict(zip(self._lib.symbols, dims))}")
        plan = (tuple(shapes), arena, cd, tuple(zip(shapes, self._out_np)))
        if len(self._plans) >= _PLAN_CACHE:
            self._plans.clear()
        self._plans[dims] = plan
        return plan

    def _execute(self, arrays: list) -> list:
        """The run() path: arrays are C-contiguous numpy arrays (or None); returns new outputs."""
        fb = self._fb
        if self._no_optional:
            ins = list(map(fb, arrays))
        else:
            null = self._null
            ins = [null if a is None else fb(a) for a in arrays]
        if self._dynamic:
            return self._execute_dynamic(ins, self._dims(arrays))
        plan = self._static_plan
        if plan is None:
            plan = self._plan(self._dims(arrays))
        empty = np.empty
        outs = [empty(shp, dt) for shp, dt in plan[3]]
        self._invoke(ins, list(map(fb, outs)), plan[2], plan[1])
        return outs

    def _resolve(self, ins: list, input_dims: tuple):
        """The complete dims for this input data (onnxc.dynamic): a fresh C array."""
        cd = self._ffi.new("int64_t[]", list(input_dims) + [0] * (self._nsyms - len(input_dims)) or [0])
        rc = self._clib.onnxc_resolve(ins, cd)
        if rc != 0:
            raise self._lib.run_error(rc)
        return cd

    def _execute_heap(self, ins: list, input_dims: tuple) -> list:
        """Models with a heap (onnxc.dynamic): run, and when the heap was too small, grow it and run
        again; outputs on the heap (and strings pointing there) are copied out before the arena
        goes back to the pool."""
        ffi, hk = self._ffi, self._heap_k
        while True:
            cd = self._resolve(ins, input_dims)
            cd[hk] = self._heap_cap
            _, need, _, pairs = self._plan(tuple(cd[0:self._nsyms]))
            outs = [np.empty(shp, dt) for shp, dt in pairs]
            slots = ffi.new("void *[]", [self._fb(o) for o in outs] or [self._null])
            pool = self._arenas
            arena = pool.pop() if pool else None
            if arena is None or arena[1] < need:
                arena = self._new_arena(need)
            try:
                rc = self._run_fn(ins, slots, cd, arena[0], self._threads)
                if rc % 256 == 4 and rc > 0:      # ONNXC_ERR_HEAP: dims[heap] says how much it needs
                    want = max(2 * self._heap_cap, int(cd[hk]))
                    if want > _HEAP_MAX:
                        raise Fail(f"running this model needs more than {_HEAP_MAX} bytes of memory "
                                   f"for values sized while it runs ({int(cd[hk])} asked)")
                    self._heap_cap = want
                    continue
                if rc != 0:
                    raise self._lib.run_error(rc)
                shapes = self._output_shapes(cd)
                for j in self._heap_out:
                    n = int(np.prod(shapes[j], dtype=np.int64)) * outs[j].itemsize
                    raw = np.frombuffer(ffi.buffer(slots[j], n), np.uint8) if n else np.empty(0, np.uint8)
                    outs[j] = raw.view(outs[j].dtype).reshape(shapes[j]).copy()
                if self._run_syms:
                    outs = [o if j in self._heap_out or j in self._cont_idx else _prefix(o, shp)
                            for j, (o, shp) in enumerate(zip(outs, shapes))]
                for j, c in self._cont_out:
                    outs[j] = self._read_container(outs[j], c)
                if self._ml_out:
                    outs = self._ml_outputs(outs)
                return outs
            finally:
                pool.append(arena)

    def _execute_dynamic(self, ins: list, input_dims: tuple) -> list:
        if self._heap_k is not None:
            return self._execute_heap(ins, input_dims)
        cd = self._resolve(ins, input_dims)
        shapes, need, _, pairs = self._plan(tuple(cd[0:self._nsyms]))
        outs = [np.empty(shp, dt) for shp, dt in pairs]
        self._invoke(ins, [self._fb(o) for o in outs], cd, need)
        if self._run_syms:   # outputs were sized for the bounds: the run wrote the actual dims
            outs = [_prefix(o, shp) for o, shp in zip(outs, self._output_shapes(cd))]
        return outs

    def _output_shapes(self, cd) -> list[tuple]:
        n = sum(self._out_ranks)
        buf = self._ffi.new("int64_t[]", max(n, 1))
        self._clib.onnxc_output_shapes(cd, buf)
        flat = list(buf)[:n]
        shapes, pos = [], 0
        for r in self._out_ranks:
            shapes.append(tuple(flat[pos:pos + r]))
            pos += r
        return shapes

    def _call(self, inputs: list, outputs: list, cdims, need: int) -> None:
        """inputs/outputs: numpy arrays (C-contiguous), ints (raw addresses) or None (absent
        overridable initializer). ``cdims``: the plan's C dims array; ``need``: arena bytes."""
        self._invoke(self._pointers(inputs), self._pointers(outputs), cdims, need)

    def _pointers(self, items: list) -> list:
        fb, cast, null = self._fb, self._cast, self._null
        return [null if a is None else cast("void *", a) if type(a) is int else fb(a) for a in items]

    def _invoke(self, ins: list, outs: list, cdims, need: int) -> None:
        """Call the library with an arena of ``need`` bytes that no other call holds meanwhile."""
        if need:
            pool = self._arenas
            try:
                arena = pool.pop()
                if arena[1] < need:
                    arena = self._new_arena(need)     # the small one is dropped: the pool grows to fit
            except IndexError:
                arena = self._new_arena(need)
            try:
                rc = self._run_fn(ins, outs, cdims, arena[0], self._threads)
            finally:
                pool.append(arena)
        else:
            rc = self._run_fn(ins, outs, cdims, self._dummy, self._threads)
        if rc != 0:
            raise self._lib.run_error(rc)

    def _new_arena(self, nbytes: int) -> tuple:
        return _new_arena(self._ffi, nbytes)

    def _run_bound(self, b: IOBinding) -> None:
        prep = b._prepared
        if prep is not None and prep[0] is self:       # nothing rebound since the last run: no checks
            self._invoke(prep[1], prep[2], prep[3], prep[4])
            b._results = prep[5]
            return
        if not b._outputs:
            raise BindingError("Error in execution: At least one output should be requested.")
        n_in = len(self._specs)
        ins: list = [None] * n_in
        shapes: list = [None] * n_in
        for name, v in b._inputs.items():
            s = self._in_by_name[name]
            if not v._device.is_cpu:
                raise OrtNotImplemented(f"input {name!r} is bound on {v.device_name()!r} (CPU only so far)")
            if v._etype.onnx != s.etype.onnx:
                raise InvalidArgument(f"Unexpected input data type. Actual: ({v._etype.ort}) , expected: "
                                      f"({s.etype.ort})")
            if s.shape is not None and v._shape != s.shape:
                _check_shape(s, v._shape)
            ins[s.index] = v._array if v._array is not None else v._ptr
            shapes[s.index] = v._shape
        missing = [s.name for s in self._specs[:self._n_required] if ins[s.index] is None]
        if missing:
            raise InvalidArgument(f"Missing Input: {', '.join(missing)}")
        if self._heap_k is not None:   # sizes known only while running: new outputs every run
            results = {}
            outs = self._execute_heap(self._pointers(ins), self._dims(shapes))
            for name, bound in b._outputs.items():
                j = self._out_index.get(name)
                if j is None:
                    raise InvalidArgument(f"Invalid output name: {name}")
                if isinstance(bound, OrtValue):
                    raise OrtNotImplemented(f"output {name!r}: this model's output shapes are known only "
                                            "after the run; bind it to a device (bind_output) instead")
                results[name] = OrtValue._wrap(outs[j], self._out_et[j])
            b._results, b._prepared = results, None
            return
        if self._dynamic:   # dims follow from the bound data: resolved for every run, never cached
            cd = self._resolve(self._pointers(ins), self._dims(shapes))
            out_shapes, need, _, _ = self._plan(tuple(cd[0:self._nsyms]))
        else:
            out_shapes, need, cd, _ = self._plan(self._dims(shapes)) if self._nsyms else self._static_plan
        outs: list = [None] * len(out_shapes)
        results: dict[str, OrtValue] = {}
        for name, bound in b._outputs.items():
            j = self._out_index.get(name)
            if j is None:
                raise InvalidArgument(f"Invalid output name: {name}")
            shp, et = out_shapes[j], self._out_et[j]
            if isinstance(bound, OrtValue):
                if self._run_syms:
                    raise OrtNotImplemented(f"output {name!r}: this model's output shapes are known only "
                                            "after the run; bind it to a device (bind_output) instead")
                if bound._etype.onnx != et.onnx:
                    raise InvalidArgument(f"Unexpected output data type. Actual: ({bound._etype.ort}) , "
                                          f"expected: ({et.ort})")
                if tuple(bound._shape) != shp:
                    raise InvalidArgument(
                        f"The output OrtValue provided for output '{name}' has shape {_braces(bound._shape)} "
                        f"but the computed output shape for this run is {_braces(shp)}.")
                if not bound._device.is_cpu:
                    raise OrtNotImplemented(f"output {name!r} is bound on {bound.device_name()!r}")
                val = bound
            else:   # bound to a device only: reuse the buffer this binding got last time if it fits
                prev = b._results.get(name)
                if (prev is not None and prev._session is self and prev._shape == shp and prev._etype is et
                        and prev._device == bound):
                    val = prev
                else:
                    val = OrtValue._wrap(np.empty(shp, et.np), et)
                    val._session = self
            outs[j] = val._array if val._array is not None else val._ptr
            results[name] = val
        for j, shp in enumerate(out_shapes):
            if outs[j] is None:
                outs[j] = np.empty(shp, self._out_np[j])
        c_ins, c_outs = self._pointers(ins), self._pointers(outs)   # hold the buffers too
        self._invoke(c_ins, c_outs, cd, need)
        if self._run_syms:   # outputs were sized for the bounds: the run wrote the actual dims
            actual = self._output_shapes(cd)
            for name, val in list(results.items()):
                j = self._out_index[name]
                if tuple(val._shape) != actual[j]:
                    results[name] = OrtValue._wrap(_prefix(val._array, actual[j]), self._out_et[j])
        b._results = results
        b._prepared = None if self._dynamic else (self, c_ins, c_outs, cd, need, results)


_HEAP_START = 1 << 16       # bytes of heap a session first tries (it keeps the largest it needed)
_HEAP_MAX = 1 << 36       # 64 GiB: beyond that a run is refused (a size overflowed, or data asks too much)


def _new_arena(ffi, nbytes: int) -> tuple:
    """(64-byte aligned pointer, bytes, owner) of a fresh arena."""
    raw = np.empty(nbytes + 64, np.uint8)
    p = ffi.cast("char *", ffi.from_buffer(raw))
    addr = int(ffi.cast("uintptr_t", p))
    off = -addr % 64
    return (p + off, nbytes, raw, addr + off)


def _prefix(a: np.ndarray, shape: tuple) -> np.ndarray:
    """The leading elements of a (sized for an upper bound) as an array of the actual shape."""
    n = int(np.prod(shape, dtype=np.int64))
    return a.reshape(-1)[:n].reshape(shape) if a.shape != shape else a


def _check_shape(s: _In, shape) -> None:
    """Raise onnxruntime's error for a shape that does not fit input ``s``."""
    if len(shape) != s.rank:
        raise InvalidArgument(f"Invalid rank for input: {s.name} Got: {len(shape)} Expected: {s.rank} Please "
                              "fix either the inputs/outputs or the model.")
    bad = [(k, shape[k], v) for k, v in s.fixed if shape[k] != v]
    if bad:
        lines = "".join(f" index: {k} Got: {g} Expected: {w}\n" for k, g, w in bad)
        raise InvalidArgument(f"Got invalid dimensions for input: {s.name} for the following indices\n{lines}"
                              " Please fix either the inputs/outputs or the model.")


def _braces(shape) -> str:
    return "{" + ",".join(str(d) for d in shape) + "}"


def _display_shape(d: dict, symbols: list) -> list:
    """NodeArg.shape as onnxruntime shows it: a dim known as an int (declared, inferred or fixed
    by a free-dimension override) shows the int; otherwise the declared dim name; otherwise the
    inferred symbol's name; None for unknown dims."""
    dims, shown = d["dims"], list(d["shape"])
    if len(shown) != len(dims):
        shown = [None] * len(dims)
    out = []
    for dim, s in zip(dims, shown):
        if isinstance(dim, int):
            out.append(dim)
        elif s is not None:
            out.append(s)
        elif isinstance(dim, dict) and not symbols[dim["sym"]].startswith("unk__"):
            out.append(symbols[dim["sym"]])
        else:
            out.append(None)
    return out


def _usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _build(src, o: SessionOptions, cache_dir):
    from .compiler import Options, build_library
    if o._free_dims_by_denotation:
        from .loader import load
        src = _fix_denoted_dims(load(src), o._free_dims_by_denotation)
    opts = Options(free_dims=dict(sorted(o._free_dims.items())),
                   optimization_level=int(o.graph_optimization_level), profile=bool(o.enable_profiling))
    return build_library(src, opts, cache_dir)


def _fix_denoted_dims(proto, by_denotation: dict):
    """A copy of the model whose graph-input dims carrying an overridden denotation are fixed
    (per dimension, as onnxruntime applies add_free_dimension_override_by_denotation)."""
    import onnx
    m = onnx.ModelProto()
    m.CopyFrom(proto)
    for vi in m.graph.input:
        if not vi.type.HasField("tensor_type") or not vi.type.tensor_type.HasField("shape"):
            continue
        for dim in vi.type.tensor_type.shape.dim:
            if dim.denotation in by_denotation and not dim.HasField("dim_value"):
                dim.dim_value = by_denotation[dim.denotation]
    return m


def _resolve_providers(providers, provider_options):
    """onnxruntime's check_and_normalize_provider_args; unavailable providers warn and drop out,
    and the CPU provider is always last."""
    available = get_available_providers()
    if providers is None:
        return [CPU], [{}]
    if not isinstance(providers, Sequence) or isinstance(providers, str):
        raise ValueError("'providers' should be a sequence.")
    if provider_options is not None:
        if not isinstance(provider_options, Sequence):
            raise ValueError("'provider_options' should be a sequence.")
        if len(providers) != len(provider_options):
            raise ValueError("'providers' and 'provider_options' should be the same length if both are given.")
        if not all(isinstance(p, str) for p in providers):
            raise ValueError("Only string values for 'providers' are supported if 'provider_options' is given.")
        if not all(isinstance(o, dict) for o in provider_options):
            raise ValueError("'provider_options' values must be dicts.")
        pairs = list(zip(providers, provider_options))
    else:
        pairs = []
        for p in providers:
            if isinstance(p, str):
                pairs.append((p, {}))
            elif isinstance(p, tuple) and len(p) == 2 and isinstance(p[0], str) and isinstance(p[1], dict):
                pairs.append(p)
            else:
                raise ValueError("'providers' values must be either strings or (string, dict) tuples.")
    names, opts = [], []
    for name, o in pairs:
        if name not in available:
            warnings.warn(f"Specified provider '{name}' is not in available provider names."
                          f"Available providers: '{', '.join(available)}'", stacklevel=3)
            continue
        if name in names:
            warnings.warn(f"Duplicate provider '{name}' encountered, ignoring.", stacklevel=3)
            continue
        names.append(name)
        opts.append({} if name == CPU else {str(k): str(v) for k, v in o.items()})  # CPU takes none
    if CPU not in names:
        names.append(CPU)
        opts.append({})
    return names, opts


def _model_version(v) -> int:
    """onnxruntime shows an unset model_version as the largest int64."""
    return (1 << 63) - 1 if v is None else int(v)
