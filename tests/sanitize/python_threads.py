"""Python threads on the runtime, for ThreadSanitizer (scripts/sanitize.sh tsan).

    python3 python_threads.py export DIR   # with the normal build: writes DIR/mlp.ember
    python3 python_threads.py run DIR      # with build-tsan's runtime-only module, under TSan

`run` loads the exported model with the runtime alone (no LLVM in the process, so only
Ember's runtime is instrumented) and drives it from Python threads the ways the runtime must
allow: one GraphModule shared by four threads (calls are serialized), a GraphModule per
thread (run in parallel on the one pool), and set_num_threads from another thread while
they run. It exits 1 on any wrong result; TSan ends it on the first race it reports.
"""
import os
import sys
import threading
from pathlib import Path

# NumPy's references without BLAS threads: OpenBLAS's own (uninstrumented) synchronisation is
# invisible to TSan, which then reports its buffers as races.
os.environ["OPENBLAS_NUM_THREADS"] = "1"
import numpy as np  # noqa: E402

import ember  # noqa: E402

SHAPE = (64, 256)  # big enough that the dense kernels run parallel loops on the pool


def _weights():
    rng = np.random.RandomState(0)
    return (rng.rand(128, 256).astype(np.float32) - 0.5,
            rng.rand(32, 128).astype(np.float32) - 0.5)


def _reference(x):
    w1, w2 = _weights()
    return np.maximum(x @ w1.T, 0) @ w2.T


def export(out):
    from ember import ir, op
    w1, w2 = _weights()
    x = ir.var("x", SHAPE)
    y = op.nn.dense(op.nn.relu(op.nn.dense(x, ir.const(w1, "w1"))), ir.const(w2, "w2"))
    ember.build(ir.Function([x], y)).export(Path(out) / "mlp.ember")


def _in_threads(worker, count):
    errors = []
    threads = [threading.Thread(target=worker, args=(t, errors)) for t in range(count)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return errors


def _calls(module_for, calls):
    def worker(t, errors):
        rng = np.random.RandomState(t)
        m = module_for(t)
        for _ in range(calls):
            x = rng.rand(*SHAPE).astype(np.float32)
            if not np.allclose(m(x=x).numpy(), _reference(x), rtol=1e-4, atol=1e-4):
                errors.append(t)
    return worker


def run(path):
    lib = ember.load(Path(path) / "mlp.ember")
    shared = ember.GraphModule(lib)
    failed = []
    failed += _in_threads(_calls(lambda t: shared, 25), 4)
    failed += _in_threads(_calls(lambda t: ember.GraphModule(lib), 25), 4)
    stop = threading.Event()

    def resize():
        n = 1
        while not stop.is_set():
            ember.set_num_threads(n)
            n = n % 3 + 1
    resizer = threading.Thread(target=resize)
    resizer.start()
    failed += _in_threads(_calls(lambda t: ember.GraphModule(lib), 25), 3)
    stop.set()
    resizer.join()
    if failed:
        print(f"python_threads: wrong results in threads {sorted(set(failed))}")
        return 1
    print("python_threads: all results right")
    return 0


if __name__ == "__main__":
    what, where = sys.argv[1], sys.argv[2]
    sys.exit(export(where) if what == "export" else run(where))
