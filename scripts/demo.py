"""Ember demo: import the TVM forum example network from PyTorch (a depthwise 64-channel 3x3
convolution + BatchNorm2d + ReLU on 1x64x128x128), compile it, check it against PyTorch,
and time Ember and PyTorch eager side by side in the same run.

Run with `bash scripts/demo.sh` (or PYTHONPATH=python python3 scripts/demo.py). Exits
non-zero when Ember's output differs from PyTorch's by more than rtol=1e-4 / atol=1e-5.
"""
import statistics
import sys
import time

import numpy as np
import torch

import ember

RTOL, ATOL = 1e-4, 1e-5
NUMBER, REPEAT = 10, 30  # each measurement is the mean of NUMBER runs; REPEAT measurements


class ForumNet(torch.nn.Module):
    def __init__(self, channels=64):
        super().__init__()
        self.conv = torch.nn.Conv2d(channels, channels, 3, padding=1, groups=channels)
        self.bn = torch.nn.BatchNorm2d(channels)
        self.relu = torch.nn.ReLU()

    def forward(self, x):
        return self.relu(self.bn(self.conv(x)))


def time_torch(model, x):
    """PyTorch eager, measured like GraphModule.benchmark: milliseconds per run."""
    results = []
    with torch.inference_mode():
        model(x)  # warm-up
        for _ in range(REPEAT):
            start = time.perf_counter()
            for _ in range(NUMBER):
                model(x)
            results.append((time.perf_counter() - start) * 1e3 / NUMBER)
    return results


def main():
    torch.manual_seed(0)
    model = ForumNet().eval()
    model.bn.running_mean.uniform_(-0.2, 0.2)  # non-trivial BatchNorm statistics
    model.bn.running_var.uniform_(0.5, 1.5)
    x = torch.randn(1, 64, 128, 128)

    start = time.perf_counter()
    mod, params = ember.frontend.from_pytorch(model, x)
    import_s = time.perf_counter() - start
    print(mod)
    start = time.perf_counter()
    lib = ember.build(mod, target="llvm", params=params)
    build_s = time.perf_counter() - start
    print(f"\nimport {import_s * 1e3:.0f} ms, build {build_s * 1e3:.0f} ms")

    m = ember.GraphModule(lib)
    m.set_input("x", x)
    m.run()
    out = np.asarray(m.get_output(0))
    with torch.no_grad():
        expected = model(x).numpy()
    error = float(np.max(np.abs(out - expected)))
    ok = np.allclose(out, expected, rtol=RTOL, atol=ATOL)
    print(f"output {out.shape} {out.dtype}; max abs error vs PyTorch: {error:.3g}\n")

    ember_ms = m.benchmark(number=NUMBER, repeat=REPEAT).results
    torch_ms = time_torch(model, x)
    print(f"{'time (ms)':10s} {'Ember':>10s} {'PyTorch':>10s}")
    for label, fn in (("mean", statistics.mean), ("median", statistics.median),
                      ("min", min), ("max", max), ("std", statistics.pstdev)):
        print(f"{label:10s} {fn(ember_ms):10.3f} {fn(torch_ms):10.3f}")
    speedup = statistics.median(torch_ms) / statistics.median(ember_ms)
    print(f"Ember / PyTorch eager speed-up (median): {speedup:.2f}x "
          f"({ember.get_num_threads()} Ember threads, {torch.get_num_threads()} torch threads)\n")
    m.profile()
    if not ok:
        print(f"FAILED: output differs from PyTorch beyond rtol={RTOL}, atol={ATOL} "
              f"(max abs error {error:.3g})", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
