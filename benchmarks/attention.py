"""The nn.attention kernel alone at BERT-base sizes (12 heads, head dim 64, batch 1), with and
without an additive key-padding mask, against torch's scaled_dot_product_attention.

    PYTHONPATH=python python3 benchmarks/attention.py [--seqs 128,384,512] [--threads 1]
        [--repeat 5] [--save DIR] [--baseline DIR]

GFLOP/s counts the two products only: 4 * S * S * D * H per call. `--save DIR` exports each
built kernel as a model file; `--baseline DIR` loads such files (built by another version of
Ember) and times them interleaved with this build's kernels and torch, so an A/B comparison
of two kernels runs in one process on one loaded machine. Each number is the best of
--repeat rounds, each round the mean of enough calls to take about 0.2 s, timed at 1 thread by
the thread's CPU time (time.thread_time: a loaded machine's other processes do not count),
else by the wall clock. Never part of the test pass/fail.
"""
import argparse
import os
import time

import numpy as np
import torch
import torch.nn.functional as F

import ember
from ember import ir, op

HEADS, DIM = 12, 64


def build(seq, masked):
    shape = (1, HEADS, seq, DIM)
    args = [ir.var(n, shape=shape) for n in ("q", "k", "v")]
    mask = ir.var("mask", shape=(1, 1, 1, seq)) if masked else None
    out = op.nn.attention(*args, mask=mask, name="attn")
    return ember.build(ir.Function(args + ([mask] if masked else []), out), target="llvm")


def inputs(seq, masked):
    g = torch.Generator().manual_seed(seq)
    xs = [torch.randn(1, HEADS, seq, DIM, generator=g) for _ in range(3)]
    if masked:
        m = torch.zeros(1, 1, 1, seq)
        m[..., seq - seq // 8:] = -10000.0  # BERT's padding: the last eighth masked
        xs.append(m)
    return xs


def timer(fn, clock):
    fn()
    t0 = clock()
    n = 0
    while clock() - t0 < 0.05:
        fn()
        n += 1
    calls = max(1, int(n * 0.2 / 0.05))

    def one_round():
        t = clock()
        for _ in range(calls):
            fn()
        return (clock() - t) / calls

    return one_round


def module_runner(lib, xs):
    m = ember.GraphModule(lib)
    for i, x in enumerate(xs):
        m.set_input(i, x.numpy())
    return m


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seqs", default="128,384,512")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--save", help="export this build's kernels into DIR")
    ap.add_argument("--baseline", help="also time the kernels exported into DIR")
    args = ap.parse_args()
    # At 1 thread everything runs on this thread: its CPU time does not count the time other
    # processes on a loaded machine take the core.
    clock = time.thread_time if args.threads == 1 else time.perf_counter
    ember.set_num_threads(args.threads)
    torch.set_num_threads(args.threads)
    print(f"threads {args.threads}, heads {HEADS}, dim {DIM}; best of {args.repeat}; GFLOP/s "
          f"= 4*S*S*D*H / t")
    print("| seq | mask | engine | ms | GFLOP/s | max err vs torch |")
    print("|---|---|---|---|---|---|")
    for seq in (int(s) for s in args.seqs.split(",")):
        for masked in (False, True):
            xs = inputs(seq, masked)
            tag = f"s{seq}_{'mask' if masked else 'plain'}"
            with torch.no_grad():
                want = F.scaled_dot_product_attention(
                    *xs[:3], attn_mask=xs[3] if masked else None).numpy()
            engines = {}
            lib = build(seq, masked)
            if args.save:
                os.makedirs(args.save, exist_ok=True)
                lib.export(os.path.join(args.save, tag + ".ember"))
            engines["ember"] = module_runner(lib, xs)
            if args.baseline:
                path = os.path.join(args.baseline, tag + ".ember")
                if os.path.exists(path):
                    engines["baseline"] = module_runner(ember.load(path), xs)
            errs = {}
            rounds = {}
            for name, m in engines.items():
                m.run()
                errs[name] = float(np.abs(np.asarray(m.get_output(0)) - want).max())
                rounds[name] = timer(m.run, clock)
            with torch.no_grad():
                rounds["torch"] = timer(lambda: F.scaled_dot_product_attention(
                    *xs[:3], attn_mask=xs[3] if masked else None), clock)
            errs["torch"] = 0.0
            best = {name: float("inf") for name in rounds}
            for _ in range(args.repeat):  # interleaved
                for name, r in rounds.items():
                    best[name] = min(best[name], r())
            flops = 4 * seq * seq * DIM * HEADS
            for name, t in best.items():
                print(f"| {seq} | {'yes' if masked else 'no'} | {name} | {t * 1e3:.3f} | "
                      f"{flops / t / 1e9:.1f} | {errs[name]:.1e} |", flush=True)


if __name__ == "__main__":
    main()
