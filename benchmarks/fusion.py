"""Fusion on and off, against PyTorch eager, in one run.

    PYTHONPATH=python python3 benchmarks/fusion.py [--threads 1,2] [--rounds 7] [--repeat 30]

Builds the TVM forum example network (depthwise 64-channel 3x3 conv + BatchNorm + ReLU on
1x64x128x128) and a ResNet-18 style network three ways — all passes, FuseOps disabled,
FuseOps and FoldConstant disabled — and times them and PyTorch eager at each thread count in
interleaved rounds (medians), printing each build against the build with FuseOps disabled,
the build with FuseOps and FoldConstant disabled, and PyTorch eager. Never part of the test pass/fail.
"""
import argparse
import os
import sys
import time

import numpy as np
import torch

import ember
from ember.transform import PassContext

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "python"))
import models  # noqa: E402  (the model zoo shared with the tests)

CONFIGS = [
    ("all passes", {}),
    ("FuseOps disabled", {"disabled_passes": ["FuseOps"]}),
    ("FuseOps+FoldConstant disabled", {"disabled_passes": ["FuseOps", "FoldConstant"]}),
]


def torch_median_ms(model, inputs, repeat):
    with torch.inference_mode():  # as benchmarks/e2e.py times PyTorch eager
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            model(*inputs)
            times.append((time.perf_counter() - t0) * 1e3)
    return float(np.median(times))


def bench(name, model, inputs, threads, rounds, repeat):
    """Every build and PyTorch eager at each thread count, interleaved round by round."""
    print(f"\n=== {name}: input {tuple(inputs[0].shape)} ===")
    mod, params = ember.frontend.from_pytorch(model, inputs)
    with torch.no_grad():
        expected = model(*inputs).numpy()
    builds = []
    for label, cfg in CONFIGS:
        with PassContext(**cfg):
            lib = ember.build(mod, target="llvm", params=params)
        m = ember.GraphModule(lib)
        for i, x in enumerate(inputs):
            m.set_input(i, x.numpy())
        m.run()
        err = float(np.abs(np.asarray(m.get_output(0)) - expected).max())
        print(f"--- {label}: {len(lib.fusion_report())} kernels, max abs error {err:.1e}")
        builds.append((label, m, len(lib.fusion_report())))
    for n in threads:
        ember.set_num_threads(n)
        torch.set_num_threads(n)
        times = {label: [] for label, _, _ in builds}
        times["torch"] = []
        for _ in range(rounds):
            for label, m, _ in builds:
                times[label].append(m.benchmark(number=1, repeat=repeat).median)
            times["torch"].append(torch_median_ms(model, inputs, repeat))
        med = {k: float(np.median(v)) for k, v in times.items()}
        no_fuse, no_fold = med[CONFIGS[1][0]], med[CONFIGS[2][0]]
        print(f"\n{name}, {n} thread(s): medians of {rounds} interleaved rounds of {repeat} runs; "
              f"PyTorch eager {med['torch']:.4f} ms")
        print(f"{'build':32s} {'kernels':>7s} {'ms':>9s} {'vs FuseOps off':>14s} "
              f"{'vs FuseOps+FoldConstant off':>27s} {'vs torch':>9s}")
        for label, _, kernels in builds:
            ms = med[label]
            print(f"{label:32s} {kernels:7d} {ms:9.4f} {ms / no_fuse:14.2f} {ms / no_fold:27.2f} "
                  f"{ms / med['torch']:9.2f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--repeat", type=int, default=30, help="runs per build per round")
    args = parser.parse_args()
    threads = [int(t) for t in args.threads.split(",")]
    torch.manual_seed(0)
    forum = models.make("forum")[0]
    bench("forum example", forum, (torch.randn(1, 64, 128, 128),), threads, args.rounds,
          args.repeat)
    resnet = models.make("resnet18")[0]
    bench("resnet18 style", resnet, (torch.randn(1, 3, 32, 32),), threads, args.rounds,
          args.repeat)


if __name__ == "__main__":
    main()
