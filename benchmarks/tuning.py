"""Schedule tuning (ember.tune) on ResNet-50 and the BERT-base layer: per workload, the
default schedule vs the tuned one (timed again here, interleaved, after tuning) and their
share of the measured FMA peak; end to end, PyTorch eager vs Ember without and with the log.

    PYTHONPATH=python:tests/python python3 benchmarks/tuning.py [--models resnet50,bert_s128]
        [--trials 64] [--log-dir tuning_logs] [--threads 1] [--runner local|ray]

Logs are kept in --log-dir (one per model): a second run resumes and only re-times (use a
fresh --log-dir for a full run). Flops per kernel come from benchmarks/kernels.py's parser
of the graph text. The tuning time is printed per workload and in all, split into compiling
and measuring as the runner counts them, with the cost per trial (which, times the trials
of a longer run, estimates it). Never part of the test pass/fail.

    --spaces          only print the number of valid knob settings of each conv/dense
                      workload (no measuring; a few seconds)
    --compare-search  random vs model-guided search at equal trials, on the workloads of
                      --compare-workloads: each workload's space (a random sample of at most
                      --space-cap settings, the default included) is measured once, then
                      every strategy is replayed on those timings with the same seeds and
                      budgets (--budgets, --seeds), so that all see the same numbers. The
                      timings are kept in --log-dir (compare-*.json): a second run only
                      replays (about 3 minutes). The first takes about 15 minutes at one
                      thread on a 2-core AVX2 machine (4 x 160 candidates). Run it on a quiet
                      machine: under load the timings, hence the table, are mostly noise.
"""
import argparse
import os
import platform
import sys
import time

import numpy as np
import torch

import ember
from ember import _ember

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e  # noqa: E402  (the model definitions)
import kernels  # noqa: E402  (graph-text parser and flop counts)


def kernel_flops(lib):
    """{kernel name: useful flops} of the conv/dense/matmul kernels."""
    out = {}
    for k in kernels.parse_graph(lib.get_source("graph")):
        works = [kernels.workload(o) for o in k["ops"] if kernels.is_product(o["op"])]
        if works and all(works):
            out.setdefault(k["name"], sum(w[0] for w in works))
    return out


def time_alternating(modules, rounds=5, min_ms=20.0):
    """Median ms of each callable-free GraphModule in `modules`, measured in alternating
    rounds so that both see the same machine."""
    numbers = []
    for m in modules:
        once = max(m.benchmark(number=1, repeat=1, warmup=1).median, 1e-4)
        numbers.append(max(1, int(min_ms / once)))
    samples = [[] for _ in modules]
    for _ in range(rounds):
        for i, m in enumerate(modules):
            samples[i].append(m.benchmark(number=numbers[i], repeat=1, warmup=0).median)
    return [float(np.median(s)) for s in samples]


def kernel_module(group, knobs, target):
    m = ember.GraphModule(_ember._build_kernel(group, target, knobs))
    rng = np.random.default_rng(0)
    for i, p in enumerate(group.params):
        m.set_input(i, rng.standard_normal(p.shape).astype(p.dtype))
    return m


def e2e_times(model, inputs, libs, rounds=7):
    """Median ms of PyTorch eager and of each Ember library, in alternating rounds."""
    mods = []
    for lib in libs:
        m = ember.GraphModule(lib)
        for i, x in enumerate(inputs):
            m.set_input(i, x.numpy())
        mods.append(m)
    runs = [lambda: model(*inputs)] + [m.run for m in mods]
    samples = [[] for _ in runs]
    with torch.no_grad():
        for f in runs:
            f()
        for _ in range(rounds):
            for i, f in enumerate(runs):
                t = time.perf_counter()
                f()
                samples[i].append((time.perf_counter() - t) * 1e3)
    return [float(np.median(s)) for s in samples]


ANCHORS = ("conv", "dense", "matmul")


def model_workloads(name, target):
    """[(workload dict, knob space)] of the conv/dense/matmul kernels of model `name`."""
    model, inputs = e2e.make(name, 1)
    mod, params = ember.frontend.from_pytorch(model, inputs)
    lib = ember.build(mod, target=target, params=params)
    return [(w, _ember._knob_space(w["group"], target))
            for w in _ember._extract_workloads(lib) if any(a in w["anchor"] for a in ANCHORS)]


def print_spaces(models, target):
    print("| model | workload | anchor | kernels | valid knob settings |")
    print("|---|---|---|---:|---:|")
    for name in models:
        sizes = []
        for w, space in model_workloads(name, target):
            sizes.append(len(space))
            print(f"| {name} | {w['name'][:48]} | {w['anchor']} | {w['count']} | {len(space)} |")
        print(f"| {name} | (min / median / max) | | | {min(sizes)} / "
              f"{int(np.median(sizes))} / {max(sizes)} |")


# The workloads of --compare-search: a 3x3 and a 1x1 conv of ResNet-50, two BERT denses.
COMPARE = "resnet50:layer1.0.conv2,resnet50:layer3.1.conv1,bert_s128:attn.q,bert_s128:fc1"


def measured_space(name, w, space, args):
    """{knob tuple: ms or None (failed)} for a sample of `space`, cached in --log-dir."""
    from ember.tuning import LocalRunner, cpu_model
    from ember.tuning._log import knob_tuple
    import json
    import random
    sample = space[:1] + random.Random(0).sample(space[1:], min(len(space) - 1,
                                                                args.space_cap - 1))
    safe = "".join(c if c.isalnum() else "_" for c in w["name"])[:40]
    path = os.path.join(args.log_dir, f"compare-{name}-{safe}.json")
    where = {"key": w["key"], "cpu": cpu_model(), "threads": args.threads,
             "template": _ember._schedule_template_version}
    table = {}
    if os.path.exists(path):
        with open(path) as fh:
            saved = json.load(fh)
        if all(saved.get(k) == v for k, v in where.items()):
            table = {tuple(t): ms for t, ms in saved["results"]}
            if any(len(t) != len(_knob_names()) for t in table):  # written before a new knob
                table = {}
    todo = [k for k in sample if knob_tuple(k) not in table]
    if todo:
        runner = LocalRunner(timeout_s=30)
        runner.start([w], args.target, args.threads)
        t0 = time.perf_counter()
        try:
            for i in range(0, len(todo), 8):
                batch = todo[i:i + 8]
                for k, r in zip(batch, runner.measure(0, batch, args.min_repeat_ms, 5)):
                    table[knob_tuple(k)] = r[1] if r[0] == "ok" else None
                print(f"#   {w['name'][:40]}: measured {min(i + 8, len(todo))}/{len(todo)} "
                      f"({time.perf_counter() - t0:.0f} s)", flush=True)
        finally:
            runner.close()
        with open(path, "w") as fh:
            json.dump({**where, "results": [[list(t), ms] for t, ms in table.items()]}, fh)
    return sample, table


def replay(space, table, strategy, seed, budget, batch=8):
    """Best ms found by `strategy` after `budget` trials on the measured `table`."""
    from ember.tuning._search import Search
    from ember.tuning._log import knob_tuple
    search = Search(space, set(), seed, strategy=strategy)
    best, trials = float("inf"), 0
    while trials < budget:
        cands = search.next_batch(min(batch, budget - trials))
        if not cands:
            break
        for k in cands:
            ms = table[knob_tuple(k)]
            search.observe(k, "ok" if ms else "failed", ms)
            if ms:
                best = min(best, ms)
        trials += len(cands)
    return best


def compare_search(args):
    budgets = [int(b) for b in args.budgets.split(",")]
    seeds = range(args.seeds)
    strategies = ["random", "evolution", "model"]
    print(f"# search strategies at equal trials: median over seeds 0..{args.seeds - 1} of the "
          f"best time found, as a ratio to the best of the measured sample (1.00 = found it)")
    cols = " | ".join(f"{s} @{b}" for b in budgets for s in strategies)
    rows, ratios = [], {(s, b): [] for s in strategies for b in budgets}
    models = {}
    for spec in args.compare_workloads.split(","):
        name, pattern = spec.split(":", 1)
        if name not in models:
            models[name] = model_workloads(name, args.target)
        found = [(w, sp) for w, sp in models[name] if w["name"].startswith(pattern)]
        if not found:
            print(f"# no workload of {name} starts with {pattern!r}")
            continue
        w, space = found[0]
        t0 = time.perf_counter()
        sample, table = measured_space(name, w, space, args)
        optimum = min(ms for ms in table.values() if ms)
        cells = []
        for b in budgets:
            for s in strategies:
                r = float(np.median([replay(sample, table, s, seed, b) for seed in seeds]))
                ratios[s, b].append(r / optimum)
                cells.append(f"{r / optimum:.3f}")
        default = table[tuple(int(sample[0].get(k, 0)) for k in _knob_names())]
        rows.append(f"| {name} {w['name'][:32]} | {len(sample)}/{len(space)} | "
                    f"{default or float('nan'):.3f} | {optimum:.3f} | " + " | ".join(cells) + " |")
        print(f"# {w['name'][:40]}: {time.perf_counter() - t0:.0f} s", flush=True)
    print(f"\n| workload | measured/space | default ms | best ms | {cols} |")
    print("|---|---:|---:|---:|" + "---:|" * len(budgets) * len(strategies))
    for r in rows:
        print(r)
    geo = [f"{float(np.exp(np.mean(np.log(ratios[s, b])))):.3f}" if ratios[s, b] else "n/a"
           for b in budgets for s in strategies]
    print("| geometric mean | | | | " + " | ".join(geo) + " |")


def _knob_names():
    from ember.tuning._log import KNOBS
    return KNOBS


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="resnet50,bert_s128")
    p.add_argument("--trials", type=int, default=64)
    p.add_argument("--log-dir", default="tuning_logs")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--target", default="llvm")
    p.add_argument("--runner", default="local")
    p.add_argument("--spaces", action="store_true")
    p.add_argument("--compare-search", action="store_true")
    p.add_argument("--compare-workloads", default=COMPARE)
    p.add_argument("--space-cap", type=int, default=160)
    p.add_argument("--budgets", default="16,32,64")
    p.add_argument("--seeds", type=int, default=9)
    p.add_argument("--min-repeat-ms", type=float, default=5.0)
    args = p.parse_args()
    ember.set_num_threads(args.threads)
    torch.set_num_threads(args.threads)
    os.makedirs(args.log_dir, exist_ok=True)
    if args.spaces:
        return print_spaces(args.models.split(","), args.target)
    if args.compare_search:
        print(f"# {platform.processor() or platform.machine()}, target {args.target!r}, "
              f"{args.threads} thread(s), load average {os.getloadavg()[0]:.1f} at start")
        return compare_search(args)
    print(f"# ember.tune: {platform.processor() or platform.machine()}, target {args.target!r}, "
          f"{args.threads} thread(s), {args.trials} trials per workload, load average "
          f"{os.getloadavg()[0]:.1f} at start")
    # The peak is measured before and after (the higher counts: less disturbed); the % peak
    # columns are printed at the end.
    peaks = [ember.measure_fma_peak(args.target, seconds=1.0)]
    summary, rows, all_records = [], [], []
    for name in args.models.split(","):
        model, inputs = e2e.make(name, 1)
        mod, params = ember.frontend.from_pytorch(model, inputs)
        log = os.path.join(args.log_dir, f"{name}.tune.json")
        t0 = time.perf_counter()
        records = ember.tune(mod, params, target=args.target, trials=args.trials, log=log,
                             runner=args.runner)
        tune_s = time.perf_counter() - t0
        all_records += records
        lib = ember.build(mod, target=args.target, params=params)
        flops = kernel_flops(lib)
        groups = {w["key"]: w["group"] for w in _ember._extract_workloads(lib)}
        print(f"# {name}: tuned in {tune_s / 60:.1f} min ({len(records)} workloads)", flush=True)
        for r in records:
            if r.knobs is None:
                continue
            ms = time_alternating([kernel_module(groups[r.key], {}, args.target),
                                   kernel_module(groups[r.key], r.knobs, args.target)])
            rows.append((name, r, ms, flops.get(r.name)))
        with ember.transform.PassContext(config={"tuning_log": log}):
            tuned = ember.build(mod, target=args.target, params=params)
        t_torch, t_default, t_tuned = e2e_times(model, inputs, [lib, tuned])
        summary.append((name, tune_s, t_torch, t_default, t_tuned,
                        sum(bool(k.tuned) for k in tuned.fusion_report())))
    peak = max(peaks + [ember.measure_fma_peak(args.target, seconds=1.0)])
    print(f"# single-thread FMA peak: {peak:.1f} GFLOP/s (the higher of before and after)\n")
    print("| model | workload | kernels | trials | default ms | tuned ms | speed-up "
          "| default % peak | tuned % peak | tuning s |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, r, ms, f in rows:
        pct = ["n/a" if not f else f"{100 * f / (t * 1e6) / peak:.1f}" for t in ms]
        print(f"| {name} | {r.name[:40]} | {r.count} | {r.trials}/{r.space_size} | {ms[0]:.3f} "
              f"| {ms[1]:.3f} | {ms[0] / ms[1]:.2f}x | {pct[0]} | {pct[1]} | {r.tune_s:.0f} |")
    total = sum(r.tune_s for r in all_records)
    compiling = sum(r.compile_s for r in all_records)
    measuring = sum(r.measure_s for r in all_records)
    print(f"\n# tuning wall time {total / 60:.1f} min for {len(all_records)} workloads: "
          f"compiling {compiling / 60:.1f} min, measuring {measuring / 60:.1f} min (final "
          f"rounds included), other {(total - compiling - measuring) / 60:.1f} min; "
          f"{total / max(1, sum(r.trials for r in all_records)):.2f} s per trial (a fresh log)")
    print("\n| model | tuning min | PyTorch ms | Ember ms | Ember tuned ms | PyTorch/Ember "
          "| PyTorch/tuned | tuned kernels |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, s, tt, td, tu, n in summary:
        print(f"| {name} | {s / 60:.1f} | {tt:.2f} | {td:.2f} | {tu:.2f} | {tt / td:.2f} "
              f"| {tt / tu:.2f} | {n} |")


if __name__ == "__main__":
    main()
