"""Benchmarks: onnxc and onnxruntime timed side by side in one process, interleaved.

Absolute times drift by 15-50% on shared machines, so every figure that matters is a ratio
(onnxruntime median / onnxc median) of runs taken alternately in the same process. onnxruntime is
an optional dependency of this module only.
"""
from __future__ import annotations

import json
import os
import platform
import time
from dataclasses import asdict, dataclass, field

import numpy as np

from . import dtypes
from .session import InferenceSession
from .options import SessionOptions


@dataclass
class Timing:
    median_us: float
    p90_us: float
    runs: int


@dataclass
class Result:
    model: str
    threads: int
    batch: int | None
    onnxc: Timing
    onnxruntime: Timing | None = None
    ratio: float | None = None           # onnxruntime median / onnxc median (> 1: onnxc faster)
    gflops: float | None = None          # onnxc, from the model's FLOP count when known
    arena_bytes: int | None = None
    build_s: float | None = None
    max_abs_diff: float | None = None
    notes: list = field(default_factory=list)


def random_feed(sess, batch: int | None, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    feed = {}
    for arg in sess.get_inputs():
        shape = [d if isinstance(d, int) else (batch or 1) for d in arg.shape]
        et = dtypes.from_name(arg.type)
        if et.is_float:
            feed[arg.name] = rng.standard_normal(shape).astype(et.np)
        elif et.name == "bool":
            feed[arg.name] = rng.integers(0, 2, shape).astype(bool)
        else:
            feed[arg.name] = rng.integers(0, 10, shape).astype(et.np)
    return feed


def _stats(samples: list[float]) -> Timing:
    a = np.asarray(samples) * 1e6
    return Timing(float(np.median(a)), float(np.percentile(a, 90)), len(a))


def _calls_per_sample(fn, target_s: float = 0.002, tries: int = 7) -> int:
    """Calls per timed block: target_s over the median of `tries` calls (one slow call, a thread's
    wake-up or a page fault, must not shrink every block to a few cold calls)."""
    ts = []
    for _ in range(tries):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    dt = sorted(ts)[len(ts) // 2]
    return _calls_for(target_s, dt)


# onnxruntime's intra-op workers keep spinning for tens of milliseconds after a run (measured
# ~40 ms of CPU in the second after its last call), and OpenMP's for a while too: with more than
# one thread, a block that starts right after the other runtime's block would share its cores
# with those spinning threads. Each block waits this long first, so both start on quiet cores.
SETTLE_S = 0.06


def side_by_side(run_a, run_b, seconds: float = 3.0, warmup: int = 3, settle: float = 0.0):
    """Alternate blocks of calls of a and b until `seconds` pass; per-call times of each.
    settle: seconds of sleep before each block (see SETTLE_S)."""
    for _ in range(warmup):
        run_a()
        if run_b:
            run_b()
    block = 0.025 if settle else 0.002          # with pauses: longer blocks, at most 40 of them

    def calls_per_block(run):
        # measured as the blocks run: after the pause and a wake-up call (right after the warm-up,
        # the other runtime's workers still spin: 2-thread calls of a 40 us model took ~10 ms then,
        # and blocks of 2 cold calls each made onnxc look 2x slower than it is)
        if settle:
            time.sleep(settle)
            run()
        return _calls_per_sample(run, block)
    ka = calls_per_block(run_a)
    kb = calls_per_block(run_b) if run_b else 0
    ta, tb = [], []
    end = time.perf_counter() + seconds
    while (time.perf_counter() < end or len(ta) < 5) and not (settle and len(ta) >= 40):
        if settle:
            time.sleep(settle)
            end += settle * (2 if run_b else 1)      # measuring time excludes the pauses
            run_a()                                  # wakes its threads (not timed)
        t = time.perf_counter()
        for _ in range(ka):
            run_a()
        ta.append((time.perf_counter() - t) / ka)
        ka = _grown(ka, ta[-1], block)
        if run_b:
            if settle:
                time.sleep(settle)
                run_b()
            t = time.perf_counter()
            for _ in range(kb):
                run_b()
            tb.append((time.perf_counter() - t) / kb)
            kb = _grown(kb, tb[-1], block)
    return ta, tb


def _grown(k: int, per_call: float, block: float) -> int:
    """Calls per block after a block of per_call seconds each: up to `block` seconds at the
    fastest speed seen, never fewer. The first count is measured right after the other runtime's
    calls, whose workers may still spin on the cores (onnxruntime's for ~60 ms): 2-thread calls of
    a 40 us model then took ~1.3 ms each, so its blocks held 19 calls instead of ~600 and each
    block's mean was its first cold calls after the pause, while onnxruntime's blocks held 200."""
    return max(k, _calls_for(block, per_call))


def _calls_for(block: float, per_call: float) -> int:
    """Calls of per_call seconds that fill `block` seconds: 1 to 1000."""
    return max(1, min(1000, int(block / max(per_call, 1e-7))))


def bench_model(path: str, *, threads: int = 1, batch: int | None = None, feed: dict | None = None,
                vs_onnxruntime: bool = True, seconds: float = 3.0, mflops: float | None = None,
                name: str | None = None) -> Result:
    so = SessionOptions()
    so.intra_op_num_threads = threads
    t = time.perf_counter()
    sess = InferenceSession(path, so)
    build_s = time.perf_counter() - t
    feed = feed if feed is not None else random_feed(sess, batch)
    run_c = lambda: sess.run(None, feed)   # noqa: E731
    run_o, ort_sess, notes = None, None, []
    if vs_onnxruntime:
        try:
            import onnxruntime as ort
            oso = ort.SessionOptions()
            oso.intra_op_num_threads = threads
            oso.inter_op_num_threads = 1
            ort_sess = ort.InferenceSession(path, oso, providers=["CPUExecutionProvider"])
            run_o = lambda: ort_sess.run(None, feed)   # noqa: E731
        except ImportError:
            notes.append("onnxruntime not installed")
    diff = None
    if ort_sess is not None:
        diff = 0.0
        for a, b in zip(run_c(), run_o()):
            if isinstance(a, np.ndarray) and a.dtype.kind in "fc":
                diff = max(diff, float(np.max(np.abs(a - b))) if a.size else 0.0)
    ta, tb = side_by_side(run_c, run_o, seconds, settle=SETTLE_S if threads > 1 and run_o else 0.0)
    oc = _stats(ta)
    oo = _stats(tb) if tb else None
    arena = sess._lib.meta.get("arena_hint", {}).get("bytes")
    return Result(name or os.path.basename(path), threads, batch, oc, oo,
                  (oo.median_us / oc.median_us) if oo else None,
                  (mflops * 1e6 / (oc.median_us * 1e-6) / 1e9) if mflops else None,
                  arena, build_s, diff, notes)


def run_suite(models_dir: str, threads=(1, 2), seconds: float = 3.0, only: list | None = None) -> list[Result]:
    """Every model of shared/bench/make_models.py found in models_dir, at its bench batches."""
    index = json.load(open(os.path.join(models_dir, "index.json")))
    results = []
    for name in index:
        if only and name not in only:
            continue
        side = os.path.join(models_dir, f"{name}.json")
        meta = json.load(open(side)) if os.path.exists(side) else {}
        path = os.path.join(models_dir, meta.get("file", f"{name}.onnx"))
        if not os.path.exists(path):
            continue
        batches = meta.get("bench_batches") or [None]
        ref = os.path.join(models_dir, f"{name}.ref.npz")
        for b in batches:
            feed = None
            # the stored feed (real token ids, masks) fits a model without a batch parameter at
            # any listed batch, and a batched one at the batch it was made for
            if os.path.exists(ref) and (b is None or not meta.get("batch_param") or b == _ref_batch(meta)):
                z = np.load(ref, allow_pickle=False)
                feed = {k[3:]: z[k] for k in z.files if k.startswith("in_")} or None   # none stored: random
            mf = (meta.get("mflops") or {}).get(str(b if b is not None else 1))
            for nt in threads:
                try:
                    results.append(bench_model(path, threads=nt, batch=b, feed=feed, seconds=seconds,
                                               mflops=mf, name=name))
                except Exception as e:  # noqa: BLE001 - one broken model must not stop the table
                    r = Result(name, nt, b, Timing(float("nan"), float("nan"), 0))
                    r.notes.append(f"{type(e).__name__}: {str(e).splitlines()[0][:160]}")
                    results.append(r)
    return results


def _ref_batch(meta: dict):
    ins = meta.get("inputs") or [{}]
    shape = ins[0].get("bench_shape") or []
    return shape[0] if meta.get("batch_param") and shape else None


def markdown(results: list[Result]) -> str:
    head = (f"Measured {time.strftime('%Y-%m-%d')} on {platform.machine()} "
            f"{_cpu_name()} ({os.cpu_count()} cores), onnxruntime median / onnxc median = ratio.\n\n"
            "| model | batch | threads | onnxc median µs | onnxc p90 µs | onnxruntime median µs | ratio | "
            "GFLOP/s | arena bytes | build s | notes |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
    rows = []
    for r in results:
        f = lambda x, fmt: "" if x is None or x != x else format(x, fmt)   # noqa: E731
        rows.append(f"| {r.model} | {r.batch or ''} | {r.threads} | {f(r.onnxc.median_us, '.1f')} | "
                    f"{f(r.onnxc.p90_us, '.1f')} | {f(r.onnxruntime.median_us if r.onnxruntime else None, '.1f')} | "
                    f"{f(r.ratio, '.2f')} | {f(r.gflops, '.1f')} | {r.arena_bytes or ''} | "
                    f"{f(r.build_s, '.1f')} | {'; '.join(r.notes)} |")
    return head + "\n".join(rows) + "\n"


def to_json(results: list[Result]) -> str:
    return json.dumps([asdict(r) for r in results], indent=1)


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()
