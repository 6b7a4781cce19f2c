"""A compiled model library loaded into this process: its C entry points and its metadata.

The library describes itself (``onnxc_meta_json``), so it loads with no .onnx beside it.
"""
from __future__ import annotations

import ctypes
import importlib.machinery
import importlib.util
import json
import os
from functools import lru_cache

from .errors import Fail, InvalidArgument, NoSuchFile

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
        self.meta, self.module = _load(path)
        self.ffi, self.lib = self.module.ffi, self.module.lib
        m = self.meta
        self.symbols: list[str] = m["symbols"]
        self.inputs: list[dict] = m["inputs"]
        self.overridable: list[dict] = m["overridable"]
        self.outputs: list[dict] = m["outputs"]


@lru_cache(maxsize=None)
def _load(path: str):
    """Load once per path and file identity; a library file is never rewritten in place."""
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
