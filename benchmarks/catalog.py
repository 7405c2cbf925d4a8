"""The fusion catalog, fused against unfused, in one run.

    PYTHONPATH=python python3 benchmarks/catalog.py [--repeat 100] [--filter gelu]

For every case of every tests/python/catalog_cases_*.py module (see tests/python/
test_catalog.py), builds the model with every pass on ("fused") and with FuseOps and the
catalog passes disabled ("unfused"), times both with GraphModule.benchmark (median ms) and
PyTorch eager in the same run, and prints one table: kernels and median time of each build,
the speedup of fused over unfused, and the max abs difference between the two builds.
A case's optional "bench_inputs" (larger inputs) is used instead of its test inputs.
Never part of the test pass/fail.
"""
import argparse
import os
import sys
import time

import numpy as np
import torch

import ember

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "python"))
from test_catalog import all_cases, unfused_context  # noqa: E402


def torch_median_ms(model, inputs, repeat):
    with torch.no_grad():
        for _ in range(3):
            model(*inputs)
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            model(*inputs)
            times.append((time.perf_counter() - t0) * 1e3)
    return float(np.median(times))


def build_and_time(mod, params, inputs, fused, repeat):
    if fused:
        lib = ember.build(mod, target="llvm", params=params)
    else:
        with unfused_context():
            lib = ember.build(mod, target="llvm", params=params)
    m = ember.GraphModule(lib)
    for i, x in enumerate(inputs):
        m.set_input(i, x.numpy())
    m.run()
    out = np.asarray(m.get_output(0)).copy()
    return len(lib.fusion_report()), m.benchmark(number=1, repeat=repeat).median, out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=100)
    parser.add_argument("--filter", default="", help="only cases whose id contains this")
    args = parser.parse_args()

    rows = []
    for case_id, case in all_cases():
        if args.filter not in case_id:
            continue
        if isinstance(case, str):
            rows.append((case_id, "-", "-", "-", "-", "-", "-", case.splitlines()[0]))
            continue
        try:
            model = case["model"]()
            inputs = case.get("bench_inputs", case["inputs"])()
            mod, params = ember.frontend.from_pytorch(model, inputs)
            kf, tf, of = build_and_time(mod, params, inputs, True, args.repeat)
            ku, tu, ou = build_and_time(mod, params, inputs, False, args.repeat)
            tt = torch_median_ms(model, inputs, args.repeat)
            diff = float(np.nanmax(np.abs(of - ou))) if of.size else 0.0
            rows.append((case_id, str(kf), str(ku), f"{tf:.4f}", f"{tu:.4f}", f"{tu / tf:.2f}x",
                         f"{tt:.4f}", f"{diff:.1e}"))
        except Exception as e:  # one broken case must not hide the others' numbers
            rows.append((case_id, "-", "-", "-", "-", "-", "-", f"error: {e}"[:60]))
        print(f"done {case_id}", file=sys.stderr)

    head = ("case", "k fused", "k unfused", "fused ms", "unfused ms", "speedup", "torch ms",
            "max |f-u|")
    widths = [max(len(r[c]) for r in rows + [head]) for c in range(len(head))]
    fmt = "  ".join("{:<%d}" % w for w in widths)
    print(fmt.format(*head))
    print(fmt.format(*("-" * w for w in widths)))
    for r in rows:
        print(fmt.format(*r))


if __name__ == "__main__":
    main()
