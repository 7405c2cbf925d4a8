"""Compiling and measuring candidates in a worker process, so that a candidate that crashes
or hangs costs one trial, not the tuning run.

The worker is forked from the tuning process (it inherits the workloads' groups) and serves
one batch at a time: it compiles the batch's distinct candidates on a thread pool, then
measures them one after another (nothing compiles while a measurement runs), sending each
result as it comes. A candidate whose first timed run is already `cutoff_ms` or slower (a
clear loser: the tuner passes twice the best time so far) is not timed again: its one run
is its time. The runner adds up the seconds spent compiling and measuring (`stats`), which
benchmarks/tuning.py reports. The parent waits for each message with a timeout; when the worker dies or hangs it
is killed, the candidate it was measuring is recorded as failed, and a fresh worker takes
the rest. A worker that dies while compiling gets the batch again one candidate at a time,
so that the culprit is found.
"""
import concurrent.futures
import multiprocessing
import time

import numpy as np

from .. import _ember
from ..runtime import GraphModule, set_num_threads


def input_specs(group):
    """[(shape, dtype)] of a workload's inputs (what a remote worker needs to know)."""
    return [(tuple(p.shape), p.dtype) for p in group.params]


def _inputs(specs, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for shape, dtype in specs:
        dtype = np.dtype(dtype)
        if dtype.kind == "f":
            out.append(rng.standard_normal(shape).astype(dtype))
        else:
            out.append(rng.integers(0, 2, shape).astype(dtype))
    return out


class Kernel:
    """One workload where it is measured: its inputs and the default schedule's output
    (`default_lib`: a Library or LoadedLibrary of the kernel alone)."""

    def __init__(self, specs, default_lib):
        self.inputs = _inputs(specs)
        # Also warms the thread pool and caches up, so the first candidate is timed fairly.
        self.reference = self.run(default_lib, 20.0, 1)[0]

    def run(self, lib, min_repeat_ms=0.0, repeat=0, cutoff_ms=None):
        """(output, median ms of `repeat` timings, each the mean of enough runs to last
        min_repeat_ms; or the one timed run when that took cutoff_ms or more)."""
        m = GraphModule(lib)
        for i, a in enumerate(self.inputs):
            m.set_input(i, a)
        m.run()
        out = m.get_output(0).numpy()
        if not repeat:
            return out, None
        once = max(m.benchmark(number=1, repeat=1, warmup=1).median, 1e-4)
        if cutoff_ms is not None and once >= cutoff_ms:
            return out, once
        number = max(1, int(min_repeat_ms / once))
        return out, m.benchmark(number=number, repeat=repeat, warmup=0).median


def check(out, ref):
    if out.shape != ref.shape:
        return f"output shape {out.shape} differs from the default schedule's {ref.shape}"
    if out.dtype.kind != "f":
        return None if np.array_equal(out, ref) else "output differs from the default schedule's"
    tol = 1e-4 * max(1.0, float(np.max(np.abs(ref))) if ref.size else 1.0)
    err = float(np.max(np.abs(out - ref))) if ref.size else 0.0
    return None if err <= tol else f"max abs difference {err:.3g} from the default (> {tol:.3g})"


def _worker(conn, workloads, target, threads, compile_threads, before_measure):
    set_num_threads(threads)
    kernels = {}
    while True:
        task = conn.recv()
        if task is None:
            return
        index, candidates, min_repeat_ms, repeat, cutoff_ms = task
        group = workloads[index]["group"]
        kernel = kernels.get(index)
        if kernel is None:
            kernel = kernels[index] = Kernel(input_specs(group),
                                             _ember._build_kernel(group, target, {}))

        def compile_one(knobs):
            try:
                return _ember._build_kernel(group, target, knobs), None
            except Exception as e:  # noqa: BLE001 (recorded as a failed trial)
                return None, f"compile: {type(e).__name__}: {e}"

        # Each distinct setting is compiled once (the final round measures some twice).
        start = time.monotonic()
        distinct = list({tuple(sorted(k.items())): k for k in candidates}.values())
        if compile_threads > 1 and len(distinct) > 1:
            with concurrent.futures.ThreadPoolExecutor(compile_threads) as pool:
                libs = dict(zip([tuple(sorted(k.items())) for k in distinct],
                                pool.map(compile_one, distinct)))
        else:
            libs = {tuple(sorted(k.items())): compile_one(k) for k in distinct}
        built = [libs[tuple(sorted(k.items()))] for k in candidates]
        conn.send(("compiled", time.monotonic() - start))
        for i, (lib, error) in enumerate(built):
            conn.send(("measuring", i))
            start = time.monotonic()
            status, ms = "failed", None
            if lib is not None:
                try:
                    if before_measure is not None:
                        before_measure(workloads[index], candidates[i])
                    out, ms = kernel.run(lib, min_repeat_ms, repeat, cutoff_ms)
                    error = check(out, kernel.reference)
                    status = "ok" if error is None else "wrong"
                except Exception as e:  # noqa: BLE001
                    error = f"run: {type(e).__name__}: {e}"
            conn.send(("result", i, status, ms, error, time.monotonic() - start))


class LocalRunner:
    """Measures on this machine in a forked worker process.

    timeout_s bounds one measurement (and each candidate's compile); compile_threads
    compiles a batch in parallel (default: the CPUs); before_measure(workload, knobs), run
    in the worker before each measurement, is a hook for tests (fault injection)."""

    def __init__(self, timeout_s=20.0, compile_threads=None, before_measure=None):
        self.timeout_s = float(timeout_s)
        self.compile_threads = compile_threads or multiprocessing.cpu_count()
        self.before_measure = before_measure
        self._proc = self._conn = None
        self.stats = {"compile_s": 0.0, "measure_s": 0.0}

    def start(self, workloads, target, threads):
        self.workloads, self.target, self.threads = workloads, target, threads

    def _spawn(self):
        ctx = multiprocessing.get_context("fork")
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=_worker, daemon=True, args=(
            child, self.workloads, self.target, self.threads, self.compile_threads,
            self.before_measure))
        self._proc.start()
        child.close()

    def _kill(self):
        if self._proc is not None:
            self._proc.kill()
            self._proc.join()
            self._conn.close()
        self._proc = self._conn = None

    def close(self):
        if self._proc is not None and self._proc.is_alive():
            try:
                self._conn.send(None)
                self._proc.join(5)
            except (OSError, EOFError):
                pass
        self._kill()

    def measure(self, index, candidates, min_repeat_ms, repeat, cutoff_ms=None):
        """[(status, ms, error)] for each candidate of workload `index`, in order; a
        candidate whose first run takes cutoff_ms or more is timed by that run alone."""
        self.cutoff_ms = cutoff_ms
        results = [None] * len(candidates)
        pending = list(range(len(candidates)))
        while pending:
            batch = pending
            done, culprit, why = self._batch(index, [candidates[i] for i in batch], min_repeat_ms,
                                             repeat, results, batch)
            pending = [i for i in batch if results[i] is None]
            if culprit is not None:
                results[culprit] = ("failed", None, why)
                pending.remove(culprit)
            elif not done and pending:
                # It died while compiling: one candidate at a time finds which one.
                for i in pending:
                    _, culprit, why = self._batch(index, [candidates[i]], min_repeat_ms, repeat,
                                                  results, [i])
                    if culprit is not None or results[i] is None:
                        results[i] = ("failed", None, why)
                pending = []
        return results

    def _batch(self, index, knobs, min_repeat_ms, repeat, results, slots):
        """Runs one batch; returns (finished, failed slot or None, why)."""
        if self._proc is None or not self._proc.is_alive():
            self._kill()
            self._spawn()
        self._conn.send((index, knobs, min_repeat_ms, repeat, self.cutoff_ms))
        # Compiling a batch may take a while; each measurement gets timeout_s.
        timeout, current, received = self.timeout_s * (1 + len(knobs)), None, 0
        while received < len(knobs):
            start = time.monotonic()
            if not self._conn.poll(timeout):
                why = f"timed out after {time.monotonic() - start:.1f} s"
                self._kill()
                return False, None if current is None else slots[current], why
            try:
                msg = self._conn.recv()
            except (EOFError, OSError):
                self._proc.join(1)
                why = f"worker process died (exit code {self._proc.exitcode})"
                self._kill()
                return False, None if current is None else slots[current], why
            if msg[0] == "compiled":
                timeout = self.timeout_s
                self.stats["compile_s"] += msg[1]
            elif msg[0] == "measuring":
                current = msg[1]
            else:
                _, i, status, ms, error, seconds = msg
                self.stats["measure_s"] += seconds
                results[slots[i]] = (status, ms, error)
                current, received = None, received + 1
        return True, None, None
