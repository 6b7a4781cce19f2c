"""Exception hierarchy mirroring onnxruntime's class names, each also a matching builtin."""


class Error(Exception):
    """Base of every onnxc error."""


class Fail(Error, RuntimeError):
    pass


class InvalidArgument(Error, ValueError):
    pass


class NoSuchFile(Error, FileNotFoundError):
    pass


class NoModel(Error, RuntimeError):
    pass


class InvalidGraph(Error, ValueError):
    pass


class InvalidProtobuf(Error, ValueError):
    pass


class NotImplemented(Error, NotImplementedError):  # noqa: A001 - onnxruntime's name
    pass


class RuntimeException(Error, RuntimeError):
    pass


class EPFail(Error, RuntimeError):
    pass


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
