"""run()'s hot path as a small CPython extension (runtime_c/python/onnxc_fastcall.c).

Compiled on first use, once per (source, Python, numpy, compiler), into the build cache and
published atomically like the model libraries. Purely an accelerator: when it cannot be built
or loaded (no compiler, no numpy headers, a read-only cache), sessions keep their Python fast
path, which does the same work. ONNXC_NO_FASTCALL=1 turns it off (to compare, or to debug).
"""
from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
from pathlib import Path

from .resources import runtime_dir

_NAME = "onnxc_fastcall"


_LOADED: list = []       # [module or None] once tried in this process
_LOCK = threading.Lock()


def module(cache_dir=None):
    """The extension module, or None when it cannot be had. Built in cache_dir (default: the
    build cache) the first time a process asks."""
    if os.environ.get("ONNXC_NO_FASTCALL"):
        return None
    if not _LOADED:
        with _LOCK:
            if not _LOADED:
                try:
                    _LOADED.append(_load(_built(cache_dir)))
                except Exception:   # an accelerator only: any failure leaves the Python path in charge
                    _LOADED.append(None)
    return _LOADED[0]


def _built(cache_dir) -> Path:
    import numpy as np

    from .build import _identity, _mkdir, default_cache_dir, find_compiler

    src = runtime_dir() / "python" / f"{_NAME}.c"
    cc = find_compiler()
    paths = sysconfig.get_paths()
    includes = sorted({paths["include"], paths["platinclude"], np.get_include()})
    h = hashlib.sha256("\0".join([src.read_text(), sys.version, np.__version__, _identity(cc), cc,
                                  *includes]).encode()).hexdigest()[:20]
    ext = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    # beside cffi's wrapper objects: Python glue, compiled once per Python
    out = _mkdir(Path(cache_dir or default_cache_dir()) / "wrappers") / f"{_NAME}-{h}{ext}"
    if out.is_file():
        return out
    tmp = Path(tempfile.mkdtemp(prefix="fastcall-", dir=out.parent))
    try:
        lib = tmp / out.name
        res = subprocess.run([cc, "-shared", "-fPIC", "-O2", *[f"-I{d}" for d in includes], str(src),
                              "-o", str(lib)], capture_output=True, text=True)
        if res.returncode != 0:
            raise RuntimeError(res.stderr)
        os.replace(lib, out)            # atomic: a reader sees the whole file or none
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def _load(path: Path):
    loader = importlib.machinery.ExtensionFileLoader(_NAME, str(path))
    spec = importlib.util.spec_from_file_location(_NAME, str(path), loader=loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod
