"""The `onnxc` command: build a model into a library, a Python package or firmware C; describe it; run it.

    onnxc build model.onnx -o libmodel.so         shared library (loads with onnxc.InferenceSession)
    onnxc build model.onnx --python-module mynet  importable package ./mynet/ (`import mynet; mynet.run(feed)`)
    onnxc build model.onnx --emit-c DIR           standalone C99 (weights as C data) for firmware
    onnxc info model.onnx | libmodel.so           inputs, outputs, op counts, arena bytes
    onnxc run model.onnx | libmodel.so [-i x.npz] run on given or random inputs, print the outputs

User errors print one line (`onnxc: error: ...`) and exit with status 1; no tracebacks.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from .version import __version__

EXIT_ERROR = 1
PACKAGE_MARKER = ".onnxc-package"   # marks a --python-module folder onnxc may replace


class UserError(Exception):
    """A problem with what the user asked for: reported in one line."""


# ---- small helpers -------------------------------------------------------------------------
def show(text) -> str:
    """Model-supplied text made safe for a terminal (no control or bidi characters)."""
    s = str(text)
    return "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in s)


def _parse_free_dims(items) -> dict:
    out = {}
    for item in items or ():
        name, sep, val = item.partition("=")
        if not sep or not name:
            raise UserError(f"--free-dim expects NAME=VALUE, got {item!r}")
        try:
            n = int(val)
        except ValueError:
            raise UserError(f"--free-dim {name}: {val!r} is not an integer") from None
        if n < 0:
            raise UserError(f"--free-dim {name}: {n} is negative")
        out[name] = n
    return dict(sorted(out.items()))


def _options(args):
    from .compiler import Options
    return Options(free_dims=_parse_free_dims(args.free_dim), portable=args.portable, debug=args.debug)


def _fmt_bytes(n: int) -> str:
    for unit, k in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= k:
            return f"{n} bytes ({n / k:.2f} {unit})"
    return f"{n} bytes"


def _fmt_shape(shape) -> str:
    return "[" + ", ".join("?" if d is None else show(d) for d in shape) + "]"


def _is_library(path: str) -> bool:
    from .library import is_library
    return is_library(path)


def _library_meta(path: str) -> dict:
    from .library import Library
    return Library(path).meta


def _model_meta(path: str, options) -> dict:
    from . import compiler, loader
    return compiler.compile_model(loader.load(path), options).sources.meta


def _arena_line(meta: dict) -> str:
    hint = meta.get("arena_hint") or {}
    env = hint.get("env") or {}
    at = f" at {', '.join(f'{show(k)}={v}' for k, v in env.items())}" if env else ""
    got, low = hint.get("bytes", 0), hint.get("lower_bound", 0)
    ratio = f", {got / low:.3f}x" if low else ""
    return f"arena: {_fmt_bytes(got)}; liveness lower bound {_fmt_bytes(low)}{ratio}{at}"


# ---- atomic file publication ---------------------------------------------------------------
def _publish_file(src: Path, dest: Path) -> None:
    """Copy src to dest through a temp file in dest's folder and an atomic rename: a process
    that has the old dest loaded keeps its (unlinked) copy; dest is never rewritten in place."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)
    try:
        with os.fdopen(fd, "wb") as out, open(src, "rb") as inp:
            shutil.copyfileobj(inp, out, 1 << 20)
            out.flush()
            os.fsync(out.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o777 & ~umask)
        os.replace(tmp, dest)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _publish_dir(make, dest: Path) -> None:
    """Build a folder with make(tmp_folder) beside dest, then swap it into place. An existing
    dest is replaced only if onnxc made it (it holds PACKAGE_MARKER) or it is empty."""
    if dest.exists():
        if not dest.is_dir():
            raise UserError(f"{dest} exists and is not a folder")
        if any(dest.iterdir()) and not (dest / PACKAGE_MARKER).exists():
            raise UserError(f"{dest} exists and was not made by onnxc; remove it or choose another name")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o777 & ~umask)   # mkdtemp makes it private; the result should not be
    old = None
    try:
        make(tmp)
        (tmp / PACKAGE_MARKER).write_text(f"made by onnxc {__version__}\n")
        if dest.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{dest.name}.old.", dir=dest.parent))
            os.rename(dest, old / "x")
        os.rename(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if old is not None and not dest.exists():
            os.rename(old / "x", dest)
        raise
    finally:
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)


# ---- build ---------------------------------------------------------------------------------
_MODULE_INIT = '''\
"""A model compiled ahead of time by onnxc {version}.

    import {name}
    outputs = {name}.run({{"input_name": array}})     # list of numpy arrays, like session.run(None, feed)
    {name}.session.get_inputs()                       # the ready onnxc.InferenceSession
    sess = {name}.InferenceSession(sess_options)      # another session (e.g. other thread count)

The compiled library is {name}/model.so; it needs the onnxc package (not the .onnx file).
"""
import os as _os

import onnxc as _onnxc

LIBRARY = _os.path.join(_os.path.dirname(_os.path.abspath(__file__)), "model.so")


def InferenceSession(sess_options=None, **kwargs):
    """A new onnxc.InferenceSession over this package's library."""
    return _onnxc.InferenceSession(LIBRARY, sess_options, **kwargs)


session = InferenceSession()
get_inputs = session.get_inputs
get_outputs = session.get_outputs
get_modelmeta = session.get_modelmeta


def run(input_feed=None, output_names=None, **inputs):
    """Run the model: run({{name: array}}) or run(name=array); returns the outputs as a list."""
    feed = dict(input_feed or {{}})
    feed.update(inputs)
    return session.run(output_names, feed)
'''


def _module_target(spec: str) -> tuple[str, Path]:
    dest = Path(spec)
    name = dest.name
    if not name.isidentifier() or name.startswith("_onnxc"):
        raise UserError(f"--python-module: {name!r} is not a valid Python package name")
    return name, dest


def _emit_c(proto, options, out_dir: Path) -> dict:
    from . import compiler
    from .resources import runtime_dir
    comp = compiler.compile_model(proto, options, weights_mode="c")
    rt = runtime_dir()
    extra_c = sorted(p.name for p in rt.glob("*.c"))

    def make(tmp: Path) -> None:
        for f in sorted(rt.iterdir()):
            if f.suffix in (".h", ".c") and f.is_file():
                shutil.copyfile(f, tmp / f.name)
        (tmp / "model.c").write_text(_firmware_prelude(comp, extra_c) + comp.sources.c)
        (tmp / "model.h").write_text(_FIRMWARE_HEADER)
    _publish_dir(make, out_dir)
    return comp.sources.meta


def _io_lines(items) -> list[str]:
    from . import dtypes
    out = []
    for k, d in enumerate(items):
        dims = ", ".join(str(x) if isinstance(x, int) else f"s{x['sym']}" if isinstance(x, dict) else "?"
                         for x in d["dims"])
        et = dtypes.from_onnx(d["onnx_type"], strings=True)
        kind = et.c if et.c == et.name else f"{et.c} ({et.name})"
        out.append(f" *   [{k}] {kind} [{dims}]")
    return out or [" *   (none)"]


def _firmware_prelude(comp, extra_c) -> str:
    """A comment telling a firmware engineer how to use the file. Model strings never appear in
    it: inputs and outputs are described by index, type and shape (symbols as s0, s1, ...)."""
    m = comp.sources.meta
    hint = m.get("arena_hint") or {}
    srcs = " ".join(["model.c", *extra_c])
    lines = [
        "/*",
        f" * Standalone C99 model made by `onnxc build --emit-c` (onnxc {__version__}).",
        " * No Python, no allocation, no globals written: constant weights are C data below.",
        " *",
        " * Build:   cc -std=c99 -O2 -c " + srcs + "          (add -fopenmp for threads)",
        " *          onnxc's own builds: -O3 -march=native -fno-math-errno -fno-trapping-math",
        " *          -ffp-contract=fast -fwrapv (NaN/inf kept; vectorises the NaN-preserving clamps)",
        " * Link:    your program + model.o + -lm",
        " * API:     see model.h. Per call: fill dims[] with the symbolic dimension values, get the",
        " *          scratch size with onnxc_arena_bytes(dims), pass a 64-byte aligned arena of that",
        " *          many bytes (one per concurrent call), input and output pointers in the order below.",
        f" * Symbols: {len(m['symbols'])} (names in onnxc_meta_json(), key \"symbols\")",
        " * Inputs (element type [shape]):",
        *_io_lines(m["inputs"]),
        " * Overridable initializers (pass NULL to use the built-in value):",
        *_io_lines(m["overridable"]),
        " * Outputs:",
        *_io_lines(m["outputs"]),
        f" * Arena: {hint.get('bytes', 0)} bytes at the planner's hint "
        f"(liveness lower bound {hint.get('lower_bound', 0)}).",
        " * Tensor names, shapes and model metadata: the JSON string from onnxc_meta_json().",
        " */",
        "#if defined(__GNUC__)",
        "#if defined(__clang__)",
        "#pragma clang diagnostic ignored \"-Wunknown-warning-option\"",
        "#endif",
        "/* The weights and the metadata are long string literals: C99 only promises 4095 characters;",
        " * gcc and clang take any length. */",
        "#pragma GCC diagnostic ignored \"-Woverlength-strings\"",
        "/* Generated code may declare a dimension it does not use (as onnxc's own build allows). */",
        "#pragma GCC diagnostic ignored \"-Wunused-variable\"",
        "#pragma GCC diagnostic ignored \"-Wunused-but-set-variable\"",
        "#if !defined(_OPENMP)",
        "#pragma GCC diagnostic ignored \"-Wunknown-pragmas\"  /* OpenMP pragmas are optional */",
        "#endif",
        "#endif",
        "",
    ]
    return "\n".join(lines) + "\n"


_FIRMWARE_HEADER = """\
/* onnxc model API (C99). See the comment at the top of model.c for this model's inputs and outputs. */
#ifndef ONNXC_MODEL_H
#define ONNXC_MODEL_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The model's self-description as JSON: input/output names, types, shapes, symbols, metadata. */
const char *onnxc_meta_json(void);
/* Bytes of 64-byte aligned scratch memory one call needs for these symbolic dimension values. */
int64_t onnxc_arena_bytes(const int64_t *dims);
/* The output shapes for these dimension values, all outputs' dims one after another. */
void onnxc_output_shapes(const int64_t *dims, int64_t *shapes);
/* Models whose dims follow from input data (meta_json "symbols" beyond "input_symbols"): call
 * before arena_bytes/output_shapes, with the input symbols set; completes dims. Returns 0 or an
 * error code (as onnxc_run). Dims listed in "run_symbols" are set to their upper bound: size the
 * outputs with it, and read output_shapes again after the run, which writes their values. */
int onnxc_resolve(void *const *inputs, int64_t *dims);
/* Run once. inputs: graph inputs then overridable initializers (NULL = built-in); outputs:
 * caller-allocated contiguous buffers; num_threads is used only when built with OpenMP.
 * Returns 0 on success. Models with values sized only while running (meta_json "heap_symbol"
 * is a dims index): dims[heap_symbol] is the bytes of heap at the arena's tail (part of
 * onnxc_arena_bytes); a run that needs more returns code % 256 == 4 with the bytes it needs in
 * dims[heap_symbol]: give a bigger arena and run again. Outputs marked "heap" in meta_json get a
 * pointer into the arena in their outputs[] slot. Sequence/optional inputs and outputs are
 * onnxc_seq headers (onnxc_runtime.h): {count (-1: empty optional), items}, each item a tensor
 * {data, rank, dims[8]}. */
int onnxc_run(void *const *inputs, void *const *outputs, int64_t *dims, void *arena,
              int num_threads);
/* onnxc_run, also writing each node's start and end time (ns) into node_ns[2 * node] when the
 * model was built with profiling (SessionOptions.enable_profiling); node_ns may be NULL. */
int onnxc_run_profiled(void *const *inputs, void *const *outputs, int64_t *dims, void *arena,
                       int num_threads, int64_t *node_ns);

#ifdef __cplusplus
}
#endif
#endif
"""


def cmd_build(args) -> int:
    from . import compiler, loader
    options = _options(args)
    if not os.path.isfile(args.model):
        raise UserError(f"model file not found: {args.model}")
    if _is_library(args.model):
        raise UserError(f"{args.model} is already a compiled library; `onnxc build` takes an .onnx model")
    outputs = []
    module = _module_target(args.python_module) if args.python_module else None
    lib_out = Path(args.output) if args.output else None
    if lib_out is None and module is None and args.emit_c is None:
        lib_out = Path(f"lib{Path(args.model).stem}.so")

    meta: dict = {}
    t0 = time.perf_counter()
    proto = loader.load(args.model)
    if args.emit_c is not None:
        meta = _emit_c(proto, options, Path(args.emit_c))
        outputs.append(f"C sources: {args.emit_c}/model.c, model.h and runtime headers")
    if lib_out is not None or module is not None:
        started = time.time()
        lib = compiler.build_library(proto, options, args.cache_dir)
        cached = lib.stat().st_mtime < started - 1
        if lib_out is not None:
            if lib_out.is_dir():
                raise UserError(f"-o {lib_out} is a folder; give the library's file name")
            _publish_file(lib, lib_out)
            outputs.append(f"library: {lib_out}" + (" (from the cache)" if cached else ""))
        if module is not None:
            name, dest = module

            def make(tmp: Path) -> None:
                shutil.copyfile(lib, tmp / "model.so")
                os.chmod(tmp / "model.so", 0o755)
                (tmp / "__init__.py").write_text(_MODULE_INIT.format(name=name, version=__version__))
            _publish_dir(make, dest)
            outputs.append(f"Python package: {dest}/ (import {name}; {name}.run(feed))")
        meta = _library_meta(str(lib))
    elapsed = time.perf_counter() - t0
    for line in outputs:
        print(line)
    print(_arena_line(meta))
    print(f"build time: {elapsed:.2f} s")
    return 0


# ---- info ----------------------------------------------------------------------------------
def cmd_info(args) -> int:
    path = args.model
    if not os.path.isfile(path):
        raise UserError(f"file not found: {path}")
    if _is_library(path):
        if args.free_dim:
            raise UserError("--free-dim applies to .onnx models; a library's dims are fixed at build time")
        meta, kind = _library_meta(path), "compiled library"
    else:
        from .compiler import Options
        meta, kind = _model_meta(path, Options(free_dims=_parse_free_dims(args.free_dim))), "ONNX model"
    if args.json:
        print(json.dumps(meta, indent=1, sort_keys=True))
        return 0
    print(f"{path}: {kind}")
    prod = " ".join(x for x in (meta.get("producer_name", ""), meta.get("producer_version", "")) if x)
    if prod:
        print(f"producer: {show(prod)}")
    opsets = meta.get("opsets") or {}
    if opsets:
        print("opsets: " + ", ".join(f"{show(d or 'ai.onnx')} {v}" for d, v in sorted(opsets.items())))
    if meta.get("symbols"):
        print("symbolic dims: " + ", ".join(show(s) for s in meta["symbols"]))
    for title, key in (("inputs", "inputs"), ("overridable initializers", "overridable"), ("outputs", "outputs")):
        items = meta.get(key) or []
        if not items and key == "overridable":
            continue
        print(f"{title}:")
        for d in items:
            print(f"  {show(d['name'])}: {d['type']} {_fmt_shape(d['shape'])}")
    ops = meta.get("ops") or []
    print(f"ops ({sum(n for _, _, n in ops)} nodes):")
    for dom, op, n in sorted(ops, key=lambda x: (-x[2], x[1])):
        print(f"  {show(op if dom in ('', 'ai.onnx') else dom + '.' + op)}: {n}")
    compiled = meta.get("compiled_ops")
    if compiled and sorted(compiled) != sorted(ops):
        print(f"compiled into {meta.get('node_count')} kernels: "
              + ", ".join(f"{show(op)} {n}" for _, op, n in sorted(compiled, key=lambda x: (-x[2], x[1]))))
    print(_arena_line(meta))
    if meta.get("symbols"):
        print(f"arena bytes (symbolic): {show(meta.get('arena_symbolic', '?'))}")
    return 0


# ---- run -----------------------------------------------------------------------------------
def _random_input(arg, free: dict, rng):
    import numpy as np
    from . import dtypes
    try:
        np_type = dtypes.from_name(arg.type).np
    except (KeyError, TypeError):
        raise UserError(f"input {show(arg.name)}: cannot make random values of type {arg.type}; "
                        "give it with -i") from None
    shape = []
    for d in arg.shape:
        if isinstance(d, int):
            shape.append(d)
        elif isinstance(d, str) and d in free:
            shape.append(free[d])
        else:
            shape.append(1)
    if np.dtype(np_type).kind == "f":
        return rng.standard_normal(shape).astype(np_type)
    if np.dtype(np_type).kind == "b":
        return rng.random(shape) < 0.5
    return rng.integers(0, 10, size=shape).astype(np_type)


def _read_inputs(files, inputs) -> dict:
    import numpy as np
    feed = {}
    for spec in files or ():
        name, sep, path = spec.rpartition("=")
        if not os.path.isfile(path):
            raise UserError(f"input file not found: {path}")
        try:
            data = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as e:
            raise UserError(f"cannot read {path}: {e}") from None
        if isinstance(data, np.ndarray):
            if not sep:
                if len(inputs) != 1:
                    raise UserError(f"{path} holds one array; name its input with NAME={path}")
                name = inputs[0].name
            feed[name] = data
        else:
            names = {i.name for i in inputs}
            with data:   # arrays named like an input, or in_<input> (what --save writes); others ignored
                picked = {k: k if k in names else k[3:] for k in data.files
                          if k in names or (k.startswith("in_") and k[3:] in names)}
                if not picked:
                    raise UserError(f"{path} holds no array named like an input ({', '.join(map(show, names))})")
                for k, name in picked.items():
                    feed[name] = data[k]
    return feed


def cmd_run(args) -> int:
    import numpy as np
    import onnxc
    if not os.path.isfile(args.model):
        raise UserError(f"file not found: {args.model}")
    so = onnxc.SessionOptions()
    free = _parse_free_dims(args.free_dim)
    if args.threads:
        so.intra_op_num_threads = args.threads
    if _is_library(args.model):
        sess = onnxc.InferenceSession(args.model, so)
    else:
        for k, v in free.items():
            so.add_free_dimension_override_by_name(k, v)
        sess = onnxc.InferenceSession(args.model, so, cache_dir=args.cache_dir)
    inputs = sess.get_inputs()
    feed = _read_inputs(args.input, inputs)
    rng = np.random.default_rng(args.seed)
    for arg in inputs:
        if arg.name not in feed:
            feed[arg.name] = _random_input(arg, free, rng)
    t0 = time.perf_counter()
    outs = sess.run(None, feed)
    dt = time.perf_counter() - t0
    np.set_printoptions(threshold=args.print_limit, edgeitems=3, linewidth=100)
    for arg, val in zip(sess.get_outputs(), outs):
        print(f"{show(arg.name)}: {val.dtype} {list(val.shape)}")
        print(np.array2string(val, separator=", "))
    print(f"run time: {dt * 1e3:.3f} ms")
    if args.save:
        np.savez(args.save, **{f"out_{o.name}": v for o, v in zip(sess.get_outputs(), outs)},
                 **{f"in_{k}": v for k, v in feed.items()})
        print(f"saved inputs and outputs to {args.save}")
    return 0


# ---- main ----------------------------------------------------------------------------------
def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="onnxc", description="Ahead-of-time ONNX compiler to C/OpenMP.")
    p.add_argument("--version", action="version", version=f"onnxc {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    def common(sp, build_opts: bool = True):
        sp.add_argument("--free-dim", action="append", metavar="NAME=VALUE",
                        help="fix a symbolic dimension (repeatable)")
        if build_opts:
            sp.add_argument("--cache-dir", metavar="DIR",
                            help="build cache folder (default: $ONNXC_CACHE_DIR or ~/.cache/onnxc)")

    b = sub.add_parser("build", help="compile a model to a shared library, Python package or C sources",
                       description="Compile an ONNX model. Prints arena bytes, the liveness lower bound "
                                   "and the build time.")
    b.add_argument("model", help="the .onnx model")
    b.add_argument("-o", "--output", metavar="LIB", help="library file to write (default: lib<model>.so "
                   "when neither --emit-c nor --python-module is given)")
    b.add_argument("--python-module", metavar="[DIR/]NAME",
                   help="write an importable package NAME/ (model.so + __init__.py with run() and session)")
    b.add_argument("--emit-c", metavar="DIR", help="write standalone C99 (weights as C data) and runtime "
                   "headers into DIR, for firmware")
    b.add_argument("--portable", action="store_true", help="no -march=native: runs on any CPU of this arch")
    b.add_argument("--debug", action="store_true", help="-O0 -g")
    common(b)
    b.set_defaults(func=cmd_build)

    i = sub.add_parser("info", help="describe an .onnx model or a compiled library")
    i.add_argument("model", help="an .onnx model or a library built by onnxc")
    i.add_argument("--json", action="store_true", help="print the full metadata as JSON")
    common(i, build_opts=False)
    i.set_defaults(func=cmd_info)

    r = sub.add_parser("run", help="run a model or library on given or random inputs and print outputs")
    r.add_argument("model", help="an .onnx model or a library built by onnxc")
    r.add_argument("-i", "--input", action="append", metavar="[NAME=]FILE",
                   help=".npy (one input) or .npz (arrays named by input, or in_<input>); repeatable. "
                        "Inputs not given are random")
    r.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
    r.add_argument("--threads", type=int, default=0, help="intra-op threads (default: all cores)")
    r.add_argument("--save", metavar="FILE.npz", help="save inputs (in_*) and outputs (out_*)")
    r.add_argument("--print-limit", type=int, default=100, help="print arrays up to this many elements whole")
    common(r)
    r.set_defaults(func=cmd_run)

    be = sub.add_parser("bench", help="time a model against onnxruntime, side by side in one process",
                        description="Times onnxc and (with --vs onnxruntime) onnxruntime alternately in one "
                                    "process; prints medians, p90 and the ratio (onnxruntime / onnxc). "
                                    "--suite DIR runs every model of shared/bench/make_models.py in DIR.")
    be.add_argument("model", nargs="?", help="the .onnx model (or use --suite)")
    be.add_argument("--vs", choices=["onnxruntime", "none"], default="onnxruntime",
                    help="compare with onnxruntime (default) or time onnxc alone")
    be.add_argument("--threads", type=int, action="append", help="intra-op threads (repeatable; default 1)")
    be.add_argument("--batch", type=int, help="value for symbolic batch dims of random inputs (default 1)")
    be.add_argument("--seconds", type=float, default=3.0, help="measuring time per case (default 3)")
    be.add_argument("--suite", metavar="DIR", help="run the benchmark suite of DIR (index.json from "
                    "make_models.py)")
    be.add_argument("--only", help="comma-separated model names of the suite")
    be.add_argument("--out", metavar="PREFIX", help="write PREFIX.md and PREFIX.json")
    be.set_defaults(func=cmd_bench)
    return p


def cmd_bench(args) -> int:
    from . import bench
    threads = args.threads or [1]
    if args.suite:
        results = bench.run_suite(args.suite, threads=threads, seconds=args.seconds,
                                  only=args.only.split(",") if args.only else None)
    elif args.model:
        results = [bench.bench_model(args.model, threads=nt, batch=args.batch, seconds=args.seconds,
                                     vs_onnxruntime=args.vs == "onnxruntime") for nt in threads]
    else:
        raise UserError("bench: give a model or --suite DIR")
    table = bench.markdown(results)
    print(table)
    if args.out:
        with open(args.out + ".md", "w") as f:
            f.write(table)
        with open(args.out + ".json", "w") as f:
            f.write(bench.to_json(results))
    return 0


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    from .errors import BuildError, Error
    try:
        return args.func(args)
    except UserError as e:
        return _fail(str(e))
    except BuildError as e:
        print(str(e), file=sys.stderr)   # the compiler's diagnostics are the useful part: keep them
        return EXIT_ERROR
    except (Error, OSError) as e:
        return _fail(f"{type(e).__name__}: {e}" if not isinstance(e, Error) else str(e))
    except KeyboardInterrupt:
        return 130


def _fail(msg: str) -> int:
    first = msg.strip().splitlines()[0] if msg.strip() else "failed"
    print(f"onnxc: error: {first}", file=sys.stderr)
    return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
