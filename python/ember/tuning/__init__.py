"""Schedule tuning (ember.tune): measure each kernel's schedule knobs on this machine and
keep the fastest in a JSON-lines log that builds apply.

    records = ember.tune(mod, params, trials=64, log="model.tune.json")
    with ember.transform.PassContext(config={"tuning_log": "model.tune.json"}):
        lib = ember.build(mod, params=params)

A workload is one distinct kernel (anchor op, shapes, dtypes, fused epilogue: the key of
passes/tuning.h); its knobs are the default CPU schedule's (register tile rows, vectors and
row axis, loop order, padded-input row tile, reduction unroll, row block of a GEMM under a
layer norm: schedule_knobs.h). The default schedule is always the first candidate, so
the best entry is never slower than the default as measured. See _runner.py for how trials
are isolated and _log.py for the log format.
"""
import inspect
import logging
import time

from .. import _ember, transform
from ..runtime import get_num_threads
from . import _log
from ._log import cpu_model
from ._runner import LocalRunner
from ._search import STRATEGIES, Search

__all__ = ["tune", "LocalRunner", "cpu_model", "TuneRecord"]

logger = logging.getLogger("ember")


class TuneRecord:
    """One workload's outcome: key, name, count (kernels with it), trials measured in all
    (this run and before), default_ms, best_ms and best knobs (None until measured); and
    the seconds this run spent on it: tune_s (wall), compile_s and measure_s (as the runner
    counts them; 0 for a runner that does not)."""

    def __init__(self, workload, space_size):
        self.key, self.name, self.count = workload["key"], workload["name"], workload["count"]
        self.space_size, self.trials = space_size, 0
        self.tune_s = self.compile_s = self.measure_s = 0.0
        self.default_ms = self.best_ms = self.knobs = None
        self.confirmed = False  # best_ms and default_ms come from the final round

    def add(self, entry):
        if entry.get("final"):
            if not self.confirmed:  # final entries replace the search's timings
                self.confirmed, self.best_ms = True, None
        else:
            self.trials += 1
        if entry["status"] != "ok" or (self.confirmed and not entry.get("final")):
            return
        if entry.get("default"):
            self.default_ms = entry["ms"]
        if self.best_ms is None or entry["ms"] < self.best_ms:
            self.best_ms, self.knobs = entry["ms"], entry["knobs"]

    def __repr__(self):
        return (f"TuneRecord({self.name!r}, trials={self.trials}/{self.space_size}, "
                f"default_ms={self.default_ms}, best_ms={self.best_ms})")


def _runner_for(runner, timeout_s):
    if runner in (None, "local"):
        return LocalRunner(timeout_s=timeout_s)
    if isinstance(runner, str) and (runner == "ray" or runner.startswith("ray://")):
        from ._ray import RayRunner
        return RayRunner(address=None if runner == "ray" else runner, timeout_s=timeout_s)
    if hasattr(runner, "measure"):
        return runner
    raise _ember.EmberError(f"ember.tune: runner must be 'local', 'ray', 'ray://HOST:PORT' or "
                            f"a runner object, got {runner!r}")


def tune(mod, params=None, target="llvm", trials=64, log="model.tune.json", runner="local",
         batch=8, repeat=5, min_repeat_ms=5.0, timeout_s=20.0, seed=0, progress=True,
         max_workloads=None, search="model", cutoff=2.0):
    """Tunes every distinct conv/dense/... kernel of `mod` (an ir.Function; `params` as for
    ember.build) for the CPU `target`: up to `trials` measured candidates per workload, in
    batches of `batch` (compiled in parallel, then measured one at a time: median of `repeat`
    timings of at least min_repeat_ms each; a candidate whose first run already takes
    `cutoff` times the best time so far is timed by that run alone, None times every
    candidate fully), appended to the JSON-lines `log`. Candidates
    already in the log (this CPU, vector width and thread count) are not measured again.
    Ctrl-C stops the search and keeps what was measured. `search` picks the candidates:
    "model" (a random start, then an xgboost cost model's ranking; evolutionary without
    xgboost), "evolution" or "random" (_search.py). Returns a TuneRecord per workload."""
    from ..build import build
    if not isinstance(trials, int) or trials < 1:
        raise _ember.EmberError(f"ember.tune: trials must be an int >= 1, got {trials!r}")
    if search not in STRATEGIES:
        raise _ember.EmberError(f"ember.tune: search must be one of {', '.join(STRATEGIES)}, "
                                f"got {search!r}")
    log = str(log)
    vector_bits = _ember._target_vector_bits(target)
    if not target.startswith("llvm"):
        raise _ember.EmberError(f"ember.tune: tuning is for CPU targets ('llvm ...'), got "
                                f"{target!r}")
    threads = get_num_threads()
    config = {k: v for k, v in transform.current().config.items() if k != "tuning_log"}
    with transform.PassContext(transform.current().opt_level, transform.current().disabled_passes,
                               transform.current().required_passes, config):
        lib = build(mod, target, params)
    workloads = []
    for w in _ember._extract_workloads(lib):
        space = _ember._knob_space(w["group"], target)
        if len(space) > 1:
            workloads.append((w, space))
    workloads = workloads[:max_workloads]
    cpu = cpu_model()
    seen = {}
    for e in _log.read(log, cpu, vector_bits):
        if e.get("threads") == threads:
            seen.setdefault(e["workload"], []).append(e)
    records = []
    runner = _runner_for(runner, timeout_s)
    runner.start([w for w, _ in workloads], target, threads)
    takes_cutoff = "cutoff_ms" in inspect.signature(runner.measure).parameters
    bar = _progress(progress, sum(min(trials, len(s)) for _, s in workloads))
    try:
        for index, (w, space) in enumerate(workloads):
            rec = TuneRecord(w, len(space))
            records.append(rec)
            started, before = time.perf_counter(), dict(getattr(runner, "stats", {}))
            done = seen.get(w["key"], [])
            picker = Search(space, {_log.knob_tuple(e["knobs"]) for e in done}, seed + index,
                            strategy=search)
            for e in done:
                rec.add(e)
                picker.observe(e["knobs"], e["status"], e.get("ms"))
            if bar is not None:
                bar.update(min(rec.trials, min(trials, len(space))))
            measured = False
            while rec.trials < trials:
                cands = picker.next_batch(min(batch, trials - rec.trials))
                if not cands:
                    break
                cut = {}
                if takes_cutoff and cutoff is not None and rec.best_ms is not None:
                    cut = {"cutoff_ms": cutoff * rec.best_ms}
                results = runner.measure(index, cands, min_repeat_ms, repeat, **cut)
                for knobs, result in zip(cands, results):
                    entry = _entry(w, cpu, vector_bits, threads, knobs, space, result)
                    _log.append(log, entry)
                    rec.add(entry)
                    picker.observe(knobs, entry["status"], entry["ms"])
                    if entry["status"] != "ok":
                        logger.info("tuning %s %s: %s: %s", w["name"], knobs, entry["status"],
                                    entry["error"])
                measured = True
                if bar is not None:
                    bar.update(len(cands))
                    bar.set_postfix_str(f"{index + 1}/{len(workloads)} {w['name'][:30]} "
                                        f"best {rec.best_ms or float('nan'):.4f} ms")
            if measured or not rec.confirmed:
                _confirm(runner, index, w, space, rec, log, (cpu, vector_bits, threads),
                         min_repeat_ms, repeat)
            rec.tune_s = time.perf_counter() - started
            after = getattr(runner, "stats", {})
            rec.compile_s = after.get("compile_s", 0.0) - before.get("compile_s", 0.0)
            rec.measure_s = after.get("measure_s", 0.0) - before.get("measure_s", 0.0)
    except KeyboardInterrupt:
        logger.warning("ember.tune interrupted: the log %s keeps the %d trial(s) measured", log,
                       sum(r.trials for r in records))
    finally:
        runner.close()
        if bar is not None:
            bar.close()
    return records


def _entry(w, cpu, vector_bits, threads, knobs, space, result, final=False):
    status, ms, error, *where = result  # a remote runner says which CPU measured it
    entry = {"workload": w["key"], "name": w["name"], "cpu": where[0] if where else cpu,
             "vector_bits": vector_bits, "threads": threads,
             "template": _ember._schedule_template_version, "knobs": knobs,
             "default": _log.knob_tuple(knobs) == _log.knob_tuple(space[0]), "status": status,
             "ms": ms, "error": error, "time": time.time()}
    if final:
        entry["final"] = True
    return entry


def _confirm(runner, index, w, space, rec, log, where, min_repeat_ms, repeat, top=3, rounds=2):
    """The final round: the default and the `top` fastest candidates measured again, in
    `rounds` alternating rounds (a single noisy timing in the search does not pick a
    slower schedule); their medians are logged as "final" entries, which builds prefer."""
    ok = {}  # this workload's measured candidates, from the log itself
    for e in _log.read(log, where[0], where[1], warn=False):
        if e["workload"] == w["key"] and e["status"] == "ok" and not e.get("final") \
                and e.get("threads") == where[2]:
            t = _log.knob_tuple(e["knobs"])
            ok[t] = min(ok.get(t, (float("inf"), None)), (e["ms"], e["knobs"]),
                        key=lambda x: x[0])
    default = _log.knob_tuple(space[0])
    ranked = [k for t, (_, k) in sorted(ok.items(), key=lambda x: x[1][0]) if t != default]
    cands = [space[0]] + ranked[:top]
    if len(cands) < 2:
        return
    results = runner.measure(index, cands * rounds, min_repeat_ms, repeat)
    for i, knobs in enumerate(cands):
        mine = [results[r * len(cands) + i] for r in range(rounds)]
        times = [m[1] for m in mine if m[0] == "ok"]
        if len(times) < rounds:
            continue
        result = ("ok", sorted(times)[len(times) // 2], None) + tuple(mine[0][3:])
        entry = _entry(w, where[0], where[1], where[2], knobs, space, result, final=True)
        _log.append(log, entry)
        rec.add(entry)


def _progress(enabled, total):
    if not enabled:
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=total, unit="trial", desc="ember.tune")
