"""Exception hierarchy mirroring onnxruntime's class names, each also a matching builtin.

onnxruntime's own classes derive only from ``Exception``; ours also derive from the builtin a
Python caller would expect (``InvalidArgument`` is a ``ValueError``, ``NoSuchFile`` a
``FileNotFoundError``, ...), so both ``except onnxc.InvalidArgument`` and ``except ValueError``
work. ``code``/``status`` are onnxruntime's StatusCode number and name for the class.
"""
from __future__ import annotations


class Error(Exception):
    """Base of every onnxc error."""
    code = 1
    status = "FAIL"


class Fail(Error, RuntimeError):
    code, status = 1, "FAIL"


class InvalidArgument(Error, ValueError):
    code, status = 2, "INVALID_ARGUMENT"


class NoSuchFile(Error, FileNotFoundError):
    code, status = 3, "NO_SUCHFILE"


class NoModel(Error, RuntimeError):
    code, status = 4, "NO_MODEL"


class EngineError(Error, RuntimeError):
    code, status = 5, "ENGINE_ERROR"


class RuntimeException(Error, RuntimeError):
    code, status = 6, "RUNTIME_EXCEPTION"


class InvalidProtobuf(Error, ValueError):
    code, status = 7, "INVALID_PROTOBUF"


class ModelLoaded(Error, RuntimeError):
    code, status = 8, "MODEL_LOADED"


class NotImplemented(Error, NotImplementedError):  # noqa: A001 - onnxruntime's name
    code, status = 9, "NOT_IMPLEMENTED"


class InvalidGraph(Error, ValueError):
    code, status = 10, "INVALID_GRAPH"


class EPFail(Error, RuntimeError):
    code, status = 11, "EP_FAIL"


class ModelLoadCanceled(Error, RuntimeError):
    code, status = 12, "MODEL_LOAD_CANCELED"


class ModelRequiresCompilation(Error, RuntimeError):
    code, status = 13, "MODEL_REQUIRES_COMPILATION"


class NotFound(Error, LookupError):
    code, status = 14, "NOT_FOUND"


class DeviceReset(Error, RuntimeError):
    code, status = 1, "FAIL"


class BindingError(InvalidArgument, RuntimeError):
    """A bad value where onnxruntime's Python binding raises a plain ``RuntimeError`` (a feed it
    cannot convert, a bad IOBinding, a run_with_iobinding failure): both an InvalidArgument and
    a RuntimeError, so code written for either catches it."""


class BuildError(Fail):
    """The C compiler rejected the generated source. ``diagnostics`` holds its output and
    ``source_dir`` the folder where the generated source was kept."""

    def __init__(self, message: str, diagnostics: str = "", source_dir: str | None = None):
        super().__init__(f"{message}\n--- compiler output ---\n{diagnostics}\n"
                         f"--- generated source kept in: {source_dir}")
        self.diagnostics = diagnostics
        self.source_dir = source_dir


class CompilerNotFound(Fail):
    pass
