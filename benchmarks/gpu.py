"""Time ops and a small network on the GPU: Ember (target="cuda") against PyTorch CUDA.

    PYTHONPATH=python python3 benchmarks/gpu.py [--repeat 50] [--arch sm_90]

Both sides are timed with CUDA events (Ember's GraphModule.benchmark; torch.cuda.Event),
median over `repeat` runs. Prints Ember's and PyTorch's time and their ratio (Ember /
PyTorch; below 1 means Ember is faster), and checks that the results agree. Without a GPU
it only says so. Never part of the test pass/fail.
"""
import argparse
import sys

import numpy as np
import torch
import torch.nn.functional as F

import ember
from ember import ir, op
from ember.runtime import cuda_available


def time_torch(fn, args, repeat):
    with torch.no_grad():
        fn(*args)
        times = []
        for _ in range(repeat):
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            out = fn(*args)
            stop.record()
            stop.synchronize()
            times.append(start.elapsed_time(stop))
    return float(np.median(times)), out


def time_ember(build_fn, arrays, repeat, target):
    vars_ = [ir.var(f"in{i}", shape=a.shape, dtype=str(a.dtype)) for i, a in enumerate(arrays)]
    m = ember.GraphModule(ember.build(ir.Function(vars_, build_fn(*vars_)), target=target))
    for i, a in enumerate(arrays):
        m.set_input(i, a)
    r = m.benchmark(number=10, repeat=repeat)
    m.run()
    return r.median, m.get_output(0).numpy()


def cases(rs):
    x = rs.randn(1, 64, 56, 56).astype("float32")
    w = rs.randn(64, 64, 3, 3).astype("float32") * 0.05
    a = rs.randn(1024, 1024).astype("float32")
    fc = rs.randn(1000, 2048).astype("float32") * 0.02
    v = rs.randn(1, 2048).astype("float32")
    s = rs.randn(32, 1000).astype("float32")
    return [
        ("relu 1024x1024", lambda x: op.nn.relu(x), lambda x: F.relu(x), [a]),
        ("add+tanh 1024x1024", lambda x: op.tanh(op.add(x, x)), lambda x: torch.tanh(x + x), [a]),
        ("conv3x3 64->64 56x56 + relu",
         lambda x, w: op.nn.relu(op.nn.conv2d(x, w, padding=(1, 1))),
         lambda x, w: F.relu(F.conv2d(x, w, padding=1)), [x, w]),
        ("dense 2048->1000", lambda v, w: op.nn.dense(v, w), lambda v, w: F.linear(v, w), [v, fc]),
        ("max_pool 3x3/2", lambda x: op.nn.max_pool2d(x, pool_size=(3, 3), strides=(2, 2),
                                                      padding=(1, 1)),
         lambda x: F.max_pool2d(x, 3, 2, 1), [x]),
        ("softmax 32x1000", lambda s: op.nn.softmax(s), lambda s: torch.softmax(s, -1), [s]),
    ]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument("--arch", default="sm_80", help="CUDA architecture, e.g. sm_90")
    args = parser.parse_args()
    if not cuda_available() or not torch.cuda.is_available():
        print("no CUDA GPU here (Ember or PyTorch sees none): nothing to time")
        return 0
    target = f"cuda -arch={args.arch}"
    print(f"{torch.cuda.get_device_name()}, Ember target \"{target}\"")
    print(f"{'case':32} {'ember ms':>10} {'torch ms':>10} {'ratio':>7}  max err")
    rs = np.random.RandomState(0)
    for name, ember_fn, torch_fn, arrays in cases(rs):
        ms_e, out = time_ember(ember_fn, arrays, args.repeat, target)
        ms_t, ref = time_torch(torch_fn, [torch.from_numpy(a).cuda() for a in arrays],
                               args.repeat)
        err = float(np.abs(out - ref.cpu().numpy()).max())
        print(f"{name:32} {ms_e:10.4f} {ms_t:10.4f} {ms_e / ms_t:7.2f}  {err:.1e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
