"""ember.tune(..., runner="ray"): measure candidates on the machines of a Ray cluster.

The driver compiles each batch of candidates on a thread pool and exports each kernel as an
artifact (Library.export); one measuring actor per node of the cluster loads and measures
them one at a time, so no two measurements share a machine, and reports its own CPU model,
which keys the results in the log (written by the driver). The code is compiled for the
driver's target: give a target with -mcpu for a cluster of other CPUs. An actor that dies
or overruns the timeout is replaced and its candidate recorded as failed.
"""
import concurrent.futures
import multiprocessing
import os
import tempfile
import time

from .. import _ember
from ._log import cpu_model
from ._runner import Kernel, check, input_specs


def _export(group, target, knobs):
    """The kernel compiled with `knobs`, as the bytes of an artifact file."""
    lib = _ember._build_kernel(group, target, knobs)
    fd, path = tempfile.mkstemp(suffix=".ember")
    os.close(fd)
    try:
        lib.export(path)
        with open(path, "rb") as fh:
            return fh.read()
    finally:
        os.remove(path)


def _load(data):
    from ..deploy import load
    fd, path = tempfile.mkstemp(suffix=".ember")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        return load(path)
    finally:
        os.remove(path)


class _Measurer:
    """The Ray actor of one node: measures one candidate per call."""

    def __init__(self, threads):
        from ..runtime import set_num_threads
        set_num_threads(threads)
        self.kernels = {}

    def cpu(self):
        return cpu_model()

    def measure(self, index, specs, default, candidate, min_repeat_ms, repeat, cutoff_ms=None):
        kernel = self.kernels.get(index)
        if kernel is None:
            kernel = self.kernels[index] = Kernel(specs, _load(default))
        try:
            out, ms = kernel.run(_load(candidate), min_repeat_ms, repeat, cutoff_ms)
        except Exception as e:  # noqa: BLE001
            return "failed", None, f"run: {type(e).__name__}: {e}", cpu_model()
        error = check(out, kernel.reference)
        return ("ok" if error is None else "wrong"), ms, error, cpu_model()


class RayRunner:
    """Runs trials on a Ray cluster: `address` ("ray://HOST:PORT", "auto") or None to use
    the Ray instance this process already started or to start a local one."""

    def __init__(self, address=None, timeout_s=20.0, compile_threads=None):
        try:
            import ray
        except ImportError:
            raise _ember.EmberError("ember.tune(runner='ray') needs Ray: pip install "
                                    "'ember[ray]' (or bash scripts/setup.sh --ray)") from None
        self.ray, self.address, self.timeout_s = ray, address, float(timeout_s)
        self.compile_threads = compile_threads or multiprocessing.cpu_count()
        self.actors, self.defaults = [], {}
        self.stats = {"compile_s": 0.0, "measure_s": 0.0}

    def start(self, workloads, target, threads):
        ray = self.ray
        if not ray.is_initialized():
            ray.init(address=self.address, ignore_reinit_error=True, log_to_driver=False)
        self.workloads, self.target, self.threads = workloads, target, threads
        self.nodes = [n["NodeID"] for n in ray.nodes() if n.get("Alive")]
        self.actors = [self._actor(n) for n in self.nodes]

    def _actor(self, node):
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
        cls = self.ray.remote(num_cpus=0)(_Measurer)
        return cls.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False)
                           ).remote(self.threads)

    def close(self):
        for a in self.actors:
            self.ray.kill(a)
        self.actors = []

    def measure(self, index, candidates, min_repeat_ms, repeat, cutoff_ms=None):
        group = self.workloads[index]["group"]
        start = time.monotonic()
        if index not in self.defaults:
            self.defaults[index] = _export(group, self.target, {})

        def compile_one(knobs):
            try:
                return _export(group, self.target, knobs), None
            except Exception as e:  # noqa: BLE001
                return None, f"compile: {type(e).__name__}: {e}"

        with concurrent.futures.ThreadPoolExecutor(self.compile_threads) as pool:
            built = list(pool.map(compile_one, candidates))  # all before any measurement
        self.stats["compile_s"] += time.monotonic() - start
        start = time.monotonic()
        results = [None] * len(candidates)
        todo = []
        for i, (data, error) in enumerate(built):
            if data is None:
                results[i] = ("failed", None, error)
            else:
                todo.append(i)
        specs = input_specs(group)
        running = {}  # actor slot -> (candidate, ref, start)
        while todo or running:
            for slot in range(len(self.actors)):
                if slot not in running and todo:
                    i = todo.pop(0)
                    ref = self.actors[slot].measure.remote(index, specs, self.defaults[index],
                                                           built[i][0], min_repeat_ms, repeat,
                                                           cutoff_ms)
                    running[slot] = (i, ref, time.monotonic())
            refs = [r for _, r, _ in running.values()]
            ready, _ = self.ray.wait(refs, num_returns=1, timeout=0.5)
            for slot, (i, ref, start) in list(running.items()):
                if ref in ready:
                    try:
                        results[i] = tuple(self.ray.get(ref))
                    except self.ray.exceptions.RayError as e:
                        results[i] = ("failed", None, f"worker died: {type(e).__name__}")
                        self._replace(slot)
                    del running[slot]
                elif time.monotonic() - start > self.timeout_s:
                    results[i] = ("failed", None, f"timed out after {self.timeout_s:.1f} s")
                    self._replace(slot)
                    del running[slot]
        self.stats["measure_s"] += time.monotonic() - start
        return results

    def _replace(self, slot):
        self.ray.kill(self.actors[slot])
        self.actors[slot] = self._actor(self.nodes[slot])
