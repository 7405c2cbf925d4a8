"""Schedule tuning (ember.tune) on ResNet-50 and the BERT-base layer: per workload, the
default schedule vs the tuned one (timed again here, interleaved, after tuning) and their
share of the measured FMA peak; end to end, PyTorch eager vs Ember without and with the log.

    PYTHONPATH=python:tests/python python3 benchmarks/tuning.py [--models resnet50,bert_s128]
        [--trials 64] [--log-dir tuning_logs] [--threads 1] [--runner local|ray]

Logs are kept in --log-dir (one per model): a second run resumes and only re-times. Flops
per kernel come from benchmarks/kernels.py's parser of the graph text. Never part of the
test pass/fail.
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


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="resnet50,bert_s128")
    p.add_argument("--trials", type=int, default=64)
    p.add_argument("--log-dir", default="tuning_logs")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--target", default="llvm")
    p.add_argument("--runner", default="local")
    args = p.parse_args()
    ember.set_num_threads(args.threads)
    torch.set_num_threads(args.threads)
    os.makedirs(args.log_dir, exist_ok=True)
    print(f"# ember.tune: {platform.processor() or platform.machine()}, target {args.target!r}, "
          f"{args.threads} thread(s), {args.trials} trials per workload, load average "
          f"{os.getloadavg()[0]:.1f} at start")
    # The peak is measured before and after (the higher counts: less disturbed); the % peak
    # columns are printed at the end.
    peaks = [ember.measure_fma_peak(args.target, seconds=1.0)]
    summary, rows = [], []
    for name in args.models.split(","):
        model, inputs = e2e.make(name, 1)
        mod, params = ember.frontend.from_pytorch(model, inputs)
        log = os.path.join(args.log_dir, f"{name}.tune.json")
        t0 = time.perf_counter()
        records = ember.tune(mod, params, target=args.target, trials=args.trials, log=log,
                             runner=args.runner)
        tune_s = time.perf_counter() - t0
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
          "| default % peak | tuned % peak |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, r, ms, f in rows:
        pct = ["n/a" if not f else f"{100 * f / (t * 1e6) / peak:.1f}" for t in ms]
        print(f"| {name} | {r.name[:40]} | {r.count} | {r.trials}/{r.space_size} | {ms[0]:.3f} "
              f"| {ms[1]:.3f} | {ms[0] / ms[1]:.2f}x | {pct[0]} | {pct[1]} |")
    print("\n| model | tuning min | PyTorch ms | Ember ms | Ember tuned ms | PyTorch/Ember "
          "| PyTorch/tuned | tuned kernels |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, s, tt, td, tu, n in summary:
        print(f"| {name} | {s / 60:.1f} | {tt:.2f} | {td:.2f} | {tu:.2f} | {tt / td:.2f} "
              f"| {tt / tu:.2f} | {n} |")


if __name__ == "__main__":
    main()
