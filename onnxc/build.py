"""Stage 6: compile generated C into a shared library through cffi, with a content-addressed cache.

Publication is atomic: everything is built in a private temp folder, a manifest with the
library's size and sha256 is written, then the folder is renamed into place. A published
folder is never rewritten; a library is loaded only if it matches its manifest. A file lock
makes concurrent builders of one key wait for the first instead of repeating its work.
"""
from __future__ import annotations

import contextlib
import functools
import io
import hashlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from .emit import Sources
from .errors import BuildError, CompilerNotFound, Fail
from .resources import runtime_dir

CDEF = """
const char *{p}meta_json(void);
int64_t {p}arena_bytes(const int64_t *dims);
void {p}output_shapes(const int64_t *dims, int64_t *shapes);
int {p}resolve(void *const *inputs, int64_t *dims);
int {p}run(void *const *inputs, void *const *outputs, int64_t *dims, void *arena, int num_threads);
int {p}run_profiled(void *const *inputs, void *const *outputs, int64_t *dims, void *arena,
                    int num_threads, int64_t *node_ns);
"""

LIB_NAME = "model.so"
MANIFEST = "manifest.json"


@dataclass(frozen=True)
class Toolchain:
    cc: str
    identity: str       # `cc --version` first line: part of the cache key
    flags: tuple[str, ...]


def find_compiler() -> str:
    """The C compiler: $CC when set (it must exist: no silent fallback to another compiler),
    else Python's own compiler, cc or gcc. Only the command's first word counts."""
    env = os.environ.get("CC", "").strip()
    if env:
        cand = env.split()[0]
        path = shutil.which(cand)
        if not path:
            raise CompilerNotFound(f"the C compiler named by CC={env!r} was not found; install it, fix "
                                   "CC, or unset CC to use cc/gcc")
        return path
    cand = (sysconfig.get_config_var("CC") or "cc").split()[0]
    path = shutil.which(cand) or shutil.which("cc") or shutil.which("gcc")
    if not path:
        raise CompilerNotFound(f"no C compiler found (looked for {cand!r}, cc, gcc); install gcc or "
                               "set CC")
    return path


@functools.lru_cache(maxsize=None)
def _identity(cc: str) -> str:
    try:
        out = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=30)
    except OSError as e:
        raise CompilerNotFound(f"C compiler {cc!r} cannot run: {e}") from e
    return (out.stdout or out.stderr).splitlines()[0] if (out.stdout or out.stderr) else cc


def toolchain(portable: bool = False, debug: bool = False) -> Toolchain:
    cc = find_compiler()
    # -fno-trapping-math: no FP exception flags are observable (ONNX has none), and it lets GCC
    # if-convert NaN-preserving compares (x > 9 ? 9 : x) so such loops vectorize on AVX2 / SSE;
    # values are unchanged (no reassociation, no finite-math assumptions).
    flags = ["-std=c99", "-fPIC", "-fopenmp", "-fwrapv", "-fno-math-errno", "-fno-trapping-math",
             "-ffp-contract=fast",
             "-Wall", "-Wno-unused-variable", "-Wno-unused-but-set-variable",
             "-Werror=implicit-function-declaration"]
    flags += ["-O0", "-g"] if debug else ["-O3"]
    flags += ["-mtune=generic"] if portable else ["-march=native"]
    identity = _identity(cc)
    if "clang" not in identity.lower():
        # every loop on a 64-byte line: the SGEMM tile loop (120 bytes) then spans two op-cache
        # lines, not three as where it happened to land (an MLP at batch 32: 4-6 % faster on Zen 3)
        flags += ["-falign-loops=64"]
    return Toolchain(cc, identity, tuple(flags))


def default_cache_dir() -> Path:
    env = os.environ.get("ONNXC_CACHE_DIR")
    if env:
        return Path(env)
    return _user_cache_dir()


def _user_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "onnxc"


def cache_key(model_bytes: bytes, options: dict, version: str, tc: Toolchain) -> str:
    h = hashlib.sha256()
    for part in (model_bytes, json.dumps(options, sort_keys=True).encode(), version.encode(),
                 tc.identity.encode(), " ".join(tc.flags).encode(), sys.implementation.cache_tag.encode()):
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)
    return h.hexdigest()


# Every library's Python module has this one name: libraries are loaded by path (importlib's
# ExtensionFileLoader, never through sys.modules), so one compiled wrapper serves them all.
MODULE = "_onnxc_model"


def module_name(key: str) -> str:
    return MODULE


def published(cache: Path, key: str) -> Path | None:
    """The published library for key, if present and intact."""
    d = cache / key
    lib, man = d / LIB_NAME, d / MANIFEST
    if not man.is_file() or not lib.is_file():
        return None
    try:
        info = json.loads(man.read_text())
    except (OSError, ValueError):
        return None
    return lib if verify(lib, info) else None


def verify(lib: Path, info: dict) -> bool:
    try:
        if lib.stat().st_size != info["size"]:
            return False
        return sha256_file(lib) == info["sha256"]
    except (OSError, KeyError):
        return False


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


class _FileLock:
    def __init__(self, path: Path):
        self.path = path
        self.fd = None

    def __enter__(self):
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            import fcntl
            fcntl.flock(self.fd, fcntl.LOCK_EX)
        except ImportError:  # no fcntl (Windows): the atomic rename alone keeps us safe
            pass
        return self

    def __exit__(self, *exc):
        os.close(self.fd)


def build_cached(key: str, make_sources, tc: Toolchain, cache: Path) -> Path:
    """Return the published library for key, building it (make_sources() -> Sources) if needed."""
    lib = published(cache, key)
    if lib is not None:
        return lib
    with _FileLock(cache / "locks" / f"{key}.lock"):
        lib = published(cache, key)
        if lib is not None:
            return lib
        final = cache / key
        if final.exists():  # a damaged entry (failed verification): move it aside, never rewrite
            aside = _mkdir(cache / "tmp") / f"damaged-{key}-{time.time_ns()}"
            os.rename(final, aside)
            shutil.rmtree(aside, ignore_errors=True)   # processes that mapped it keep their copy
        sources = make_sources()
        tmp = Path(tempfile.mkdtemp(prefix=f"{key[:16]}-", dir=_mkdir(cache / "tmp")))
        compile_library(sources, module_name(key), tmp, tc, cache / "wrappers")
        try:
            os.rename(tmp, final)
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
        lib = published(cache, key)
        if lib is None:
            raise Fail(f"the library for {key} could not be published in {cache}")
        return lib


def _mkdir(p: Path) -> Path:
    p.mkdir(parents=True, exist_ok=True)
    return p


def compile_library(sources: Sources, modname: str, out_dir: Path, tc: Toolchain,
                    shared_dir: Path | None = None) -> Path:
    """Compile into out_dir: model.c -> model.o (our compiler call, diagnostics captured), then
    link it with cffi's Python wrapper and the shared kernels (each compiled once into shared_dir,
    see _wrapper_object and _kernels_object). Writes LIB_NAME and MANIFEST."""
    (out_dir / "model.c").write_text(sources.c)
    (out_dir / "weights.bin").write_bytes(sources.weights)
    shared_dir = shared_dir or out_dir.parent
    kernels = _kernels_object(tc, shared_dir)
    _run([tc.cc, *tc.flags, "-DONNXC_KERNELS_EXTERN", "-I", str(runtime_dir()), "-c", "model.c", "-o",
          "model.o"], out_dir, "the C compiler failed")
    wrapper = _wrapper_object(tc, shared_dir, modname)
    lib = out_dir / LIB_NAME
    _run([tc.cc, *_link_flags(), str(wrapper), "model.o", str(kernels), "-o", LIB_NAME, "-lm"], out_dir,
         "linking the library failed")
    (out_dir / "weights.bin").unlink()
    (out_dir / "model.o").unlink()
    (out_dir / MANIFEST).write_text(json.dumps({
        "module": modname, "size": lib.stat().st_size, "sha256": sha256_file(lib),
        "compiler": tc.identity, "flags": list(tc.flags)}, indent=1))
    return lib


def _run(cmd: list, cwd: Path, what: str) -> None:
    res = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if res.returncode != 0:
        raise BuildError(f"{what} (exit {res.returncode}): {' '.join(cmd)}", res.stderr + res.stdout, str(cwd))


def _link_flags() -> list[str]:
    if sys.platform == "darwin":
        return ["-bundle", "-undefined", "dynamic_lookup", "-fopenmp"]
    # -Bsymbolic: calls inside a library bind to its own entry points, whatever else is loaded;
    # --gc-sections: only the shared kernels a model calls stay in its library
    return ["-shared", "-fopenmp", "-Wl,-Bsymbolic", "-Wl,--gc-sections"]


# shared objects this process built or found, by file name: a cache folder that lacks one copies it
_SHARED_SEEN: dict[str, Path] = {}


def _shared_object(out_dir: Path, stem: str, identity: list, make) -> Path:
    """An object file that many libraries link: built once per identity (make(tmp) writes
    tmp/out.o), published atomically under out_dir; concurrent builders wait for the first. A new
    cache folder copies the same object from one this process used or from the default caches
    (read only) rather than compile it again (the kernels take ~10 s)."""
    name = f"{stem}-{hashlib.sha256(chr(0).join(identity).encode()).hexdigest()[:20]}.o"
    obj = _mkdir(out_dir) / name
    if not obj.is_file():
        with _FileLock(out_dir / (name[:-2] + ".lock")):
            if not obj.is_file():
                tmp = Path(tempfile.mkdtemp(prefix=f"{stem}-", dir=out_dir))
                try:
                    known = _known_copy(name, obj)
                    if known is not None:
                        shutil.copyfile(known, tmp / "out.o")
                    else:
                        make(tmp)
                    os.replace(tmp / "out.o", obj)
                finally:
                    shutil.rmtree(tmp, ignore_errors=True)
    _SHARED_SEEN[name] = obj
    return obj


def _known_copy(name: str, obj: Path) -> Path | None:
    for cand in (_SHARED_SEEN.get(name), default_cache_dir() / "wrappers" / name,
                 _user_cache_dir() / "wrappers" / name):
        if cand is not None and cand != obj and cand.is_file():
            return cand
    return None


def _wrapper_object(tc: Toolchain, wrapper_dir: Path, modname: str) -> Path:
    """cffi's Python wrapper around the four C entry points is the same for every model of one
    module name: generate it with cffi and compile it once per (cffi, Python, compiler), then
    link the object into each library."""
    import cffi

    ffi = cffi.FFI()
    ffi.cdef(CDEF.format(p="onnxc_"))
    ffi.set_source(modname, "#include <stdint.h>\n" + CDEF.format(p="onnxc_"))
    paths = sysconfig.get_paths()
    includes = sorted({paths["include"], paths["platinclude"]})

    def make(tmp: Path) -> None:
        with contextlib.redirect_stdout(io.StringIO()):   # cffi announces the file it writes
            ffi.emit_c_code(str(tmp / "wrapper.c"))
        _run([tc.cc, "-fPIC", "-O1", *[f"-I{d}" for d in includes], "-c", "wrapper.c", "-o", "out.o"],
             tmp, "compiling the cffi wrapper failed")
    return _shared_object(wrapper_dir, "cffi-wrapper", [cffi.__version__, sys.version, sys.implementation.cache_tag,
                                                        tc.identity, tc.cc, modname, CDEF, *includes], make)


def _kernels_object(tc: Toolchain, out_dir: Path) -> Path:
    """runtime_c/lib/onnxc_kernels.c: the GEMM, GEMV and convolution kernels that models declare
    with ONNXC_KERNELS_EXTERN (onnxc_gemm.h), compiled once per toolchain, flags and runtime
    source (a MatMul model then compiles in a tenth of the time), one function per section so
    a library keeps only those it calls."""
    rt = runtime_dir()
    src = rt / "lib" / "onnxc_kernels.c"
    digest = hashlib.sha256()
    for p in sorted(rt.glob("*.h")) + [src]:
        digest.update(p.name.encode() + b"\0" + p.read_bytes())

    def make(tmp: Path) -> None:
        _run([tc.cc, *tc.flags, "-ffunction-sections", "-I", str(rt), "-c", str(src), "-o", "out.o"], tmp,
             "compiling onnxc's shared kernels failed")
    return _shared_object(out_dir, "onnxc-kernels", [tc.cc, tc.identity, *tc.flags, digest.hexdigest()], make)
