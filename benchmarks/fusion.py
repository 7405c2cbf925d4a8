"""Fusion on and off, against PyTorch eager, in one run.

    PYTHONPATH=python python3 benchmarks/fusion.py [--repeat 200]

Builds the TVM forum example network (depthwise 64-channel 3x3 conv + BatchNorm + ReLU on
1x64x128x128) and a ResNet-18 style network three ways — all passes, FuseOps disabled,
FuseOps and FoldConstant disabled — prints each build's benchmark table, and a summary of
ratios: each build against the build with FuseOps and FoldConstant disabled, and against
PyTorch eager timed in the same run. Never part of the test pass/fail.
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
    with torch.no_grad():
        for _ in range(5):
            model(*inputs)
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            model(*inputs)
            times.append((time.perf_counter() - t0) * 1e3)
    return float(np.median(times))


def bench(name, model, inputs, repeat):
    print(f"\n=== {name}: input {tuple(inputs[0].shape)} ===")
    mod, params = ember.frontend.from_pytorch(model, inputs)
    with torch.no_grad():
        expected = model(*inputs).numpy()
    rows = []
    for label, cfg in CONFIGS:
        with PassContext(**cfg):
            lib = ember.build(mod, target="llvm", params=params)
        m = ember.GraphModule(lib)
        for i, x in enumerate(inputs):
            m.set_input(i, x.numpy())
        m.run()
        err = float(np.abs(np.asarray(m.get_output(0)) - expected).max())
        result = m.benchmark(number=1, repeat=repeat)
        print(f"--- {label}: {len(lib.fusion_report())} kernels, max abs error {err:.1e}")
        print(result)
        rows.append((label, result.median, len(lib.fusion_report())))
    t_torch = torch_median_ms(model, inputs, repeat)
    base = rows[-1][1]
    print(f"\n{name} summary (median ms; PyTorch eager {t_torch:.4f} ms in the same run)")
    print(f"{'build':32s} {'kernels':>7s} {'ms':>9s} {'vs no-fuse':>10s} {'vs torch':>9s}")
    for label, ms, kernels in rows:
        print(f"{label:32s} {kernels:7d} {ms:9.4f} {ms / base:10.2f} {ms / t_torch:9.2f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args()
    torch.manual_seed(0)
    forum = models.make("forum")[0]
    bench("forum example", forum, (torch.randn(1, 64, 128, 128),), args.repeat)
    resnet = models.make("resnet18")[0]
    bench("resnet18 style", resnet, (torch.randn(1, 3, 32, 32),), args.repeat)


if __name__ == "__main__":
    main()
