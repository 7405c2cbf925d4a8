"""nn.grouped_matmul at the MoE sizes of a Mixtral layer with hidden size 1024 and expert
size 3584 (128 tokens x top-2 = 256 rows over 8 experts; gate_up K=1024, N=7168; down
K=3584, N=1024) against the dense formulation Ember's importer
used before (every row times every expert's matrix, each row keeping its own expert's
product) and transformers' grouped_mm_fallback (a loop of torch.mm over the experts);
"plain" is nn.grouped_matmul with the weight unpacked (AlterOpLayout off).

    PYTHONPATH=python python3 benchmarks/grouped_matmul.py [--threads 1,2] [--rounds 7]
        [--shapes 256x1024x7168,256x3584x1024] [--experts 8] [--no-dense]

GFLOP/s counts the grouped product only: 2 * S * K * N per call. The weights are constants
of the built model (as in an imported model); the offsets are an input (a router's counts).
Each number is the median of --rounds rounds, the three contenders interleaved in every
round, each round the mean of enough calls to take about 0.2 s of wall-clock time. Never
part of the test pass/fail.
"""
import argparse
import time

import numpy as np
import torch

import ember
from ember import ir, op


def build_grouped(w, S, packed=True):
    """packed=False: the weight as given, [G, K, N] (AlterOpLayout off)."""
    G, K, N = w.shape
    x, offs = ir.var("x", shape=(S, K)), ir.var("offs", shape=(G,), dtype="int32")
    out = op.nn.grouped_matmul(x, ir.const(w, name="w"), offs)
    with ember.transform.PassContext(disabled_passes=[] if packed else ["AlterOpLayout"]):
        return ember.GraphModule(ember.build(ir.Function([x, offs], out), target="llvm"))


def build_dense(w, S):
    """The importer's former formulation: [G, S, N] products, masked, summed over G."""
    G, K, N = w.shape
    x, offs = ir.var("x", shape=(S, K)), ir.var("offs", shape=(G,), dtype="int32")
    rows = ir.const(np.arange(S, dtype=np.int32)[None, :])
    ends = op.reshape(offs, [G, 1])
    starts = op.concatenate([ir.const(np.zeros((1, 1), np.int32)),
                             op.strided_slice(ends, [0, 0], [G - 1, 1])], axis=0)
    mine = op.logical_and(op.greater_equal(rows, starts), op.less(rows, ends))
    every = op.nn.batch_matmul(op.reshape(x, [1, S, K]), ir.const(w, name="w"))
    kept = op.where(op.reshape(mine, [G, S, 1]), every, ir.const(np.float32(0)))
    out = op.sum(kept, axis=[0])
    return ember.GraphModule(ember.build(ir.Function([x, offs], out), target="llvm"))


def runner(m, x, offs):
    m.set_input("x", x)
    m.set_input("offs", offs)

    def call():
        m.run()
    return call


def torch_fallback(x, w, offs):
    from transformers.integrations.moe import _grouped_mm_fallback

    xt, wt, ot = torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(offs)
    return lambda: _grouped_mm_fallback(xt, wt, ot)


def calls_for(fn):
    fn()
    t0, n = time.perf_counter(), 0
    while time.perf_counter() - t0 < 0.05:
        fn()
        n += 1
    return max(1, int(n * 0.2 / 0.05))


def timed(fn, calls):
    t = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - t) / calls


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--threads", default="1,2")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--shapes", default="256x1024x7168,256x3584x1024")
    p.add_argument("--experts", type=int, default=8)
    p.add_argument("--no-dense", action="store_true")
    args = p.parse_args()
    rng = np.random.default_rng(0)
    G = args.experts
    print(f"{'S x K x N':>18} {'thr':>3} {'contender':>10} {'ms':>9} {'GFLOP/s':>8}")
    for shape in args.shapes.split(","):
        S, K, N = (int(v) for v in shape.split("x"))
        x = rng.standard_normal((S, K), dtype=np.float32)
        w = rng.standard_normal((G, K, N), dtype=np.float32)
        # Top-2 routing of S / 2 tokens: uneven counts (as a router gives), summing to S.
        counts = rng.multinomial(S, rng.dirichlet(np.full(G, 4.0)))
        offs = np.cumsum(counts).astype(np.int32)
        contenders = {"grouped": runner(build_grouped(w, S), x, offs),
                      "plain": runner(build_grouped(w, S, packed=False), x, offs)}
        if not args.no_dense:
            contenders["dense"] = runner(build_dense(w, S), x, offs)
        contenders["torch"] = torch_fallback(x, w, offs)
        want = torch_fallback(x, w, offs)().numpy()
        flops = 2.0 * S * K * N
        for threads in (int(t) for t in args.threads.split(",")):
            ember.set_num_threads(threads)
            torch.set_num_threads(threads)
            calls = {name: calls_for(fn) for name, fn in contenders.items()}
            times = {name: [] for name in contenders}
            for _ in range(args.rounds):
                for name, fn in contenders.items():
                    times[name].append(timed(fn, calls[name]))
            for name, ts in times.items():
                t = float(np.median(ts))
                print(f"{shape:>18} {threads:>3} {name:>10} {t * 1e3:9.3f} {flops / t / 1e9:8.1f}")
        g = build_grouped(w, S)
        g.set_input("x", x)
        g.set_input("offs", offs)
        g.run()
        np.testing.assert_allclose(g.get_output(0).numpy(), want, rtol=1e-4, atol=1e-3)


if __name__ == "__main__":
    main()
