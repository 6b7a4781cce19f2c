"""A compiled model library loaded into this process: its C entry points and its metadata.

The library describes itself (``onnxc_meta_json``), so it loads with no .onnx beside it.
"""
from __future__ import annotations

import ctypes
import importlib.machinery
import importlib.util
import json
import os
import shutil
import tempfile
import threading
from functools import lru_cache

from .errors import Fail, InvalidArgument, NoSuchFile

# onnxc_run's non-zero returns: code + 256 * (node index + 1)
RUN_ERRORS = {
    1: "the run-time dimensions do not fit what the node needs",
    2: "an index input is out of range",
    3: "an input value cannot be mapped (unknown category or unparsable value)",
}

ELF_MAGIC = b"\x7fELF"


def is_library(path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(4) == ELF_MAGIC
    except OSError:
        return False


class Library:
    def __init__(self, path: str | os.PathLike):
        path = os.path.abspath(os.fspath(path))
        if not os.path.isfile(path):
            raise NoSuchFile(f"library not found: {path!r}")
        self.path = path
        self.meta, self.module = _load_current(path)
        self.ffi, self.lib = self.module.ffi, self.module.lib
        m = self.meta
        self.symbols: list[str] = m["symbols"]
        self.inputs: list[dict] = m["inputs"]
        self.overridable: list[dict] = m["overridable"]
        self.outputs: list[dict] = m["outputs"]

    def run_error(self, rc: int) -> Exception:
        """The exception for a non-zero return of onnxc_run, naming the failing node: bad
        dims or indices are the caller's (InvalidArgument), an unmappable value fails the run."""
        code, node = rc % 256, rc // 256 - 1
        what = RUN_ERRORS.get(code, f"error code {code}")
        cls = Fail if code == 3 else InvalidArgument
        nodes = self.meta.get("nodes") or []
        if 0 <= node < len(nodes):
            op, name = nodes[node]
            return cls(f"node {node} ({op}, name {name!r}): {what}")
        return cls(f"the compiled model failed: {what}")


_IDENTITY: dict[str, tuple] = {}   # path -> identity of the file first loaded from it
_ID_LOCK = threading.Lock()


def _load_current(path: str):
    """Load the file now at path. The dynamic loader knows a library by its path: once a path
    is loaded, dlopen returns that library again even if the file was since replaced (say by
    `onnxc build -o` with another model). A replaced file is therefore loaded through a
    private link of its own, so the caller gets what the path holds now."""
    st = os.stat(path)
    ident = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    with _ID_LOCK:
        first = _IDENTITY.setdefault(path, ident)
    if first == ident:
        return _load(path, ident)
    return _load_alias(path, ident)


@lru_cache(maxsize=None)
def _load_alias(path: str, ident: tuple):
    tmp = tempfile.mkdtemp(prefix="onnxc-lib-")
    alias = os.path.join(tmp, f"{ident[1]}-{ident[3]}-{os.path.basename(path)}")
    try:
        try:
            os.link(path, alias)
        except OSError:
            shutil.copyfile(path, alias)
        return _load(alias, ident)
    finally:   # the loaded mapping outlives the file name
        shutil.rmtree(tmp, ignore_errors=True)


@lru_cache(maxsize=None)
def _load(path: str, ident: tuple = ()):
    """Load once per path and file identity (ident is part of the cache key only)."""
    try:
        handle = ctypes.CDLL(path, mode=getattr(os, "RTLD_LOCAL", 0))
        fn = handle.onnxc_meta_json
    except (OSError, AttributeError) as e:
        raise InvalidArgument(f"{path!r} is not an onnxc model library: {e}") from e
    fn.restype = ctypes.c_char_p
    meta = json.loads(fn().decode("utf-8"))
    name = meta.get("module")
    if not name:
        raise Fail(f"{path!r} was built without a Python module name")
    loader = importlib.machinery.ExtensionFileLoader(name, path)
    spec = importlib.util.spec_from_file_location(name, path, loader=loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return meta, module
