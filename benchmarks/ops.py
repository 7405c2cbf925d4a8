"""Time each op compiled by Ember against PyTorch eager, in the same run.

    PYTHONPATH=python python3 benchmarks/ops.py [--repeat 50] [--threads N]

Prints one row per op: Ember's and PyTorch's median time and their ratio (Ember / PyTorch;
below 1 means Ember is faster). Never part of the test pass/fail.
"""
import argparse
import time

import numpy as np
import torch
import torch.nn.functional as F

import ember
from ember import ir, op


def _time_torch(fn, args, repeat):
    with torch.no_grad():
        fn(*args)
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            fn(*args)
            times.append((time.perf_counter() - t0) * 1e3)
    return float(np.median(times))


def _time_ember(build_fn, arrays, repeat):
    vars_ = [ir.var(f"in{i}", shape=a.shape, dtype=str(a.dtype)) for i, a in enumerate(arrays)]
    f = ir.Function(vars_, build_fn(*vars_))
    m = ember.GraphModule(ember.build(f, target="llvm"))
    for i, a in enumerate(arrays):
        m.set_input(i, a)
    r = m.benchmark(number=1, repeat=repeat)
    return r.median


def cases():
    rs = np.random.RandomState(0)

    def r(*shape):
        return rs.randn(*shape).astype("float32")

    x = r(1, 64, 56, 56)
    w3 = r(64, 64, 3, 3)
    dw = r(64, 1, 3, 3)
    w1 = r(128, 64, 1, 1)
    w7 = r(64, 3, 7, 7)
    img = r(1, 3, 224, 224)
    bn = [np.abs(r(64)) + 0.5 for _ in range(4)]
    a, b = r(256, 512), r(512, 256)
    d = r(8, 1024)
    dwt = r(1000, 1024)
    t = r(4, 256, 64)
    yield ("conv2d 3x3 64->64 56x56", lambda p, q: op.nn.conv2d(p, q, padding=(1, 1)),
           lambda p, q: F.conv2d(p, q, padding=1), [x, w3])
    yield ("conv2d 7x7 s2 3->64 224", lambda p, q: op.nn.conv2d(p, q, strides=(2, 2), padding=(3, 3)),
           lambda p, q: F.conv2d(p, q, stride=2, padding=3), [img, w7])
    yield ("conv2d 1x1 64->128", lambda p, q: op.nn.conv2d(p, q),
           lambda p, q: F.conv2d(p, q), [x, w1])
    yield ("depthwise conv2d 3x3 64", lambda p, q: op.nn.conv2d(p, q, padding=(1, 1), groups=64),
           lambda p, q: F.conv2d(p, q, padding=1, groups=64), [x, dw])
    yield ("dense 8x1024 -> 1000", lambda p, q: op.nn.dense(p, q), F.linear, [d, dwt])
    yield ("matmul 256x512 @ 512x256", lambda p, q: op.nn.matmul(p, q), torch.matmul, [a, b])
    yield ("batch_matmul 4x256x64 @ 4x64x256",
           lambda p, q: op.nn.batch_matmul(p, q), torch.bmm, [t, np.ascontiguousarray(t.transpose(0, 2, 1))])
    yield ("batch_norm 64x56x56", lambda p, g, bb, m, v: op.nn.batch_norm(p, g, bb, m, v),
           lambda p, g, bb, m, v: F.batch_norm(p, m, v, g, bb, training=False), [x] + bn)
    yield ("relu 64x56x56", op.nn.relu, F.relu, [x])
    yield ("sigmoid 64x56x56", op.sigmoid, torch.sigmoid, [x])
    yield ("tanh 64x56x56", op.tanh, torch.tanh, [x])
    yield ("exp 64x56x56", op.exp, torch.exp, [x])
    yield ("add 64x56x56", op.add, torch.add, [x, x])
    yield ("max_pool2d 3x3 s2", lambda p: op.nn.max_pool2d(p, pool_size=(3, 3), strides=(2, 2), padding=(1, 1)),
           lambda p: F.max_pool2d(p, 3, 2, 1), [x])
    yield ("avg_pool2d 2x2", lambda p: op.nn.avg_pool2d(p, pool_size=(2, 2), strides=(2, 2)),
           lambda p: F.avg_pool2d(p, 2), [x])
    yield ("adaptive_avg_pool2d 1x1", lambda p: op.nn.adaptive_avg_pool2d(p, output_size=(1, 1)),
           lambda p: F.adaptive_avg_pool2d(p, 1), [x])
    yield ("softmax 8x1000", lambda p: op.nn.softmax(p, axis=-1), lambda p: torch.softmax(p, -1), [r(8, 1000)])
    yield ("transpose 64x56x56", lambda p: op.transpose(p, axes=(0, 2, 3, 1)),
           lambda p: p.permute(0, 2, 3, 1).contiguous(), [x])
    yield ("concatenate 2x 64x56x56", lambda p, q: op.concatenate([p, q], axis=1),
           lambda p, q: torch.cat([p, q], 1), [x, x])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument("--threads", type=int, default=0, help="0: the default")
    args = parser.parse_args()
    if args.threads:
        ember.set_num_threads(args.threads)
        torch.set_num_threads(args.threads)
    print(f"threads: torch {torch.get_num_threads()}")
    print(f"{'op':36s} {'ember ms':>10s} {'torch ms':>10s} {'ratio':>7s}")
    for name, ember_fn, torch_fn, arrays in cases():
        te = _time_ember(ember_fn, arrays, args.repeat)
        tt = _time_torch(torch_fn, [torch.from_numpy(a) for a in arrays], args.repeat)
        print(f"{name:36s} {te:10.4f} {tt:10.4f} {te / tt:7.2f}")


if __name__ == "__main__":
    main()
