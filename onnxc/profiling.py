"""Per-node profiling like onnxruntime's: SessionOptions.enable_profiling builds the model with
node timers, and end_profiling() writes a Chrome-trace JSON (chrome://tracing, Perfetto)."""
from __future__ import annotations

import json
import os
import threading
import time


class Profiler:
    def __init__(self, lib, prefix: str):
        if not lib.meta.get("profiled"):
            raise ValueError("this library was built without profiling; build it from the model with "
                             "SessionOptions.enable_profiling = True")
        self._lib = lib
        self._prefix = prefix or "onnxc_profile_"
        self._nodes = lib.meta["nodes"]
        self._events: list[dict] = []
        self._lock = threading.Lock()
        self.start_ns = time.monotonic_ns()
        self._wall_start = time.time_ns()

    def wrap(self, run_fn):
        """A stand-in for onnxc_run that records the run and every node."""
        ffi, profiled = self._lib.ffi, self._lib.lib.onnxc_run_profiled
        n = max(1, 2 * len(self._nodes))

        def run(ins, outs, dims, arena, threads):
            buf = ffi.new("int64_t[]", n)
            t0 = time.monotonic_ns()
            rc = profiled(ins, outs, dims, arena, threads, buf)
            t1 = time.monotonic_ns()
            self._record(t0, t1, list(buf), threading.get_ident())
            return rc

        return run

    def _record(self, t0: int, t1: int, stamps: list, tid: int) -> None:
        pid = os.getpid()
        us = lambda ns: (ns - self.start_ns) / 1000.0   # noqa: E731
        ev = [{"cat": "Session", "pid": pid, "tid": tid, "ph": "X", "name": "model_run",
               "ts": us(t0), "dur": (t1 - t0) / 1000.0, "args": {}}]
        for k, (op, name) in enumerate(self._nodes):
            a, b = stamps[2 * k], stamps[2 * k + 1]
            if a and b:
                ev.append({"cat": "Node", "pid": pid, "tid": tid, "ph": "X",
                           "name": f"{name or op + '_' + str(k)}_kernel_time", "ts": us(a),
                           "dur": (b - a) / 1000.0,
                           "args": {"op_name": op, "node_index": str(k), "provider": "CPUExecutionProvider"}})
        with self._lock:
            self._events.extend(ev)

    def end(self) -> str:
        stamp = time.strftime("%Y-%m-%d_%H-%M-%S", time.localtime(self._wall_start / 1e9))
        path = os.path.abspath(f"{self._prefix}_{stamp}.json")
        with self._lock:
            events, self._events = self._events, []
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            json.dump(events, f)
        os.replace(tmp, path)
        return path
