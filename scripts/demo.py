"""Ember demo: compile a small conv + batch_norm + relu network, check it against NumPy,
and time it. Run with `bash scripts/demo.sh` (or PYTHONPATH=python python3 scripts/demo.py).
Exits non-zero when the result differs from NumPy by more than 1e-4."""
import sys

import numpy as np

import ember
from ember import ir, op

TOLERANCE = 1e-4


def reference(x, weight, gamma, beta, mean, var, eps):
    """The same network in float64 NumPy."""
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1))).astype(np.float64)
    windows = np.lib.stride_tricks.sliding_window_view(xp, weight.shape[2:], axis=(2, 3))
    y = np.einsum("nchwij,ocij->nohw", windows, weight.astype(np.float64))
    c = (slice(None), None, None)
    y = (y - mean[c]) / np.sqrt(var[c] + eps) * gamma[c] + beta[c]
    return np.maximum(y, 0)


def main():
    rng = np.random.default_rng(0)
    weight = rng.standard_normal((16, 3, 3, 3)).astype(np.float32) * 0.2
    gamma = rng.uniform(0.5, 1.5, 16).astype(np.float32)
    beta = rng.standard_normal(16).astype(np.float32) * 0.1
    mean = rng.standard_normal(16).astype(np.float32) * 0.1
    var = rng.uniform(0.5, 2.0, 16).astype(np.float32)
    eps = 1e-5

    # The network: the weight is a parameter bound at build time, the rest are constants.
    x = ir.var("x", shape=(1, 3, 32, 32), dtype="float32")
    w = ir.var("conv1.weight", shape=weight.shape, dtype="float32")
    y = op.nn.conv2d(x, w, strides=(1, 1), padding=(1, 1), name="conv1")
    y = op.nn.batch_norm(y, ir.const(gamma, "bn1.weight"), ir.const(beta, "bn1.bias"),
                         ir.const(mean, "bn1.running_mean"), ir.const(var, "bn1.running_var"),
                         epsilon=eps, name="bn1")
    y = op.nn.relu(y, name="relu1")
    f = ir.Function([x, w], y)
    print(f)
    print()

    lib = ember.build(f, target="llvm", params={"conv1.weight": weight})
    m = ember.GraphModule(lib)
    data = rng.standard_normal((1, 3, 32, 32)).astype(np.float32)
    m.set_input("x", data)
    m.run()
    out = np.asarray(m.get_output(0))

    expected = reference(data, weight, gamma, beta, mean, var, eps)
    error = float(np.max(np.abs(out - expected)))
    print(f"output {out.shape} {out.dtype}; max abs error vs NumPy: {error:.3g}\n")
    print(m.benchmark(number=10, repeat=30))
    m.profile()
    if not error <= TOLERANCE:
        print(f"FAILED: error {error:.3g} is above {TOLERANCE}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
