"""Import (from_pytorch) and build (ember.build) time of every model-zoo family, per entry
point, plus a full-width ResNet-50 import and build at opt level 3 (the target: import +
build under 5 s). Timing only; never part of the test pass/fail.

    PYTHONPATH=python python3 benchmarks/frontend_times.py [family ...]
"""
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "python"))
import models  # noqa: E402  (the zoo lives with the tests)

import ember  # noqa: E402


def entry_point(entry, model, inputs):
    with torch.no_grad():
        if entry == "trace":
            return torch.jit.trace(model, inputs)
        if entry == "export":
            return torch.export.export(model, inputs)
    return model


def seconds(fn):
    start = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - start


def main(families):
    # torch.export pays a one-time start-up (lazy imports) on its first call.
    _, warm = seconds(lambda: ember.frontend.from_pytorch(*models.make("forum")))
    print(f"first from_pytorch call in the process (torch.export start-up): {warm:.2f} s\n")
    print(f"{'family':17s} {'entry':7s} {'import ms':>10s} {'build ms':>10s} {'kernels':>8s}")
    for family in families:
        model, inputs = models.make(family, 1)
        for entry in ("module", "trace"):
            source = entry_point(entry, model, inputs)
            (mod, params), import_s = seconds(lambda: ember.frontend.from_pytorch(source,
                                                                                  inputs))
            lib, build_s = seconds(lambda: ember.build(mod, target="llvm", params=params))
            print(f"{family:17s} {entry:7s} {import_s * 1e3:10.0f} {build_s * 1e3:10.0f} "
                  f"{len(lib.fusion_report()):8d}")
    torch.manual_seed(0)
    model = models.resnet50(width=64, classes=1000).eval()
    x = torch.randn(1, 3, 224, 224)
    times = [seconds(lambda: ember.frontend.from_pytorch(model, x))[1] for _ in range(3)]
    print(f"\nResNet-50 (full width, 224x224) import: best {min(times):.2f} s of "
          f"{', '.join(f'{t:.2f}' for t in times)}")
    mod, params = ember.frontend.from_pytorch(model, x)
    builds = [seconds(lambda: ember.build(mod, target="llvm", params=params))[1]
              for _ in range(2)]
    print(f"ResNet-50 build (all passes, target 'llvm'): best {min(builds):.2f} s of "
          f"{', '.join(f'{t:.2f}' for t in builds)}; import + build "
          f"{min(times) + min(builds):.2f} s")


if __name__ == "__main__":
    main(sys.argv[1:] or list(models.FAMILIES))
