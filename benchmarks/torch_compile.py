"""torch.compile(model, backend="ember") against the direct ember.build path and Inductor,
on the full-size families of benchmarks/e2e.py (whose model definitions and timing loop are
imported, not copied).

    PYTHONPATH=python python3 benchmarks/torch_compile.py [--models resnet50,bert_s128]
        [--threads 1] [--rounds 5] [--seconds 1.0]
    PYTHONPATH=python python3 benchmarks/torch_compile.py --zoo [--threads 1]

Engines, at the same thread count: "ember" is GraphModule.run() of the direct import
(from_pytorch + ember.build) with the inputs already set; "backend" is the compiled
model called under torch.inference_mode (so it includes Dynamo's guards, the DLPack input
and output crossings and the per-call output allocation); "inductor" is torch.compile's
default backend. Interleaved rounds, medians of all timed calls, outputs checked against
eager. The backend's target is to be within 10% of "ember". Nothing is asserted.

--zoo runs every family of the test zoo (tests/python/models.py, batch 1) through
torch.compile(backend="ember") instead: outputs against eager, the partitions Ember built and
the ops left to PyTorch, and eager and backend medians.

--dynamic times Dynamo's symbolic sizes (issue 44) on two small [batch, seq, 64] models (an
MLP with LayerNorm and softmax, a two-head transformer block): a loop over 20 random (batch,
seq) sizes with dynamic=True and dynamic=False (builds made, wall time including them, Dynamo
graphs), then warm medians at fixed sizes of eager, a build per shape (dynamic=False) and one
build for ranges at several dynamic_max (each call copies its inputs into, and returns
outputs over, buffers of the range's maximum: the cost of a larger range).
"""
import random
import argparse
import os
import sys
import time

import torch

import ember

sys.path.insert(0, os.path.dirname(__file__))
import e2e  # noqa: E402  (model definitions, engines and the interleaved timing loop)


def backend_engine(model, inputs):
    """torch.compile(backend="ember"): compiled on the first call, done (and timed) here."""
    compiled = torch.compile(model, backend="ember")
    last = {}

    def call():
        with torch.inference_mode():
            last["out"] = compiled(*inputs)
    t0 = time.perf_counter()
    call()
    return e2e.Engine("backend", call, lambda: e2e._as_list(last["out"]),
                      time.perf_counter() - t0)


def inductor_engine(model, inputs):
    engine = e2e.compile_engine(model, inputs)
    call = engine.call

    def in_inference_mode():
        with torch.inference_mode():
            call()
    engine.call, engine.name = in_inference_mode, "inductor"
    return engine


def direct_engine(model, inputs):
    t0 = time.perf_counter()
    func, params = ember.frontend.from_pytorch(model, inputs)
    lib = ember.build(func, params=params)
    engine = e2e.ember_engine(lib, inputs)
    engine.setup_s = time.perf_counter() - t0
    return engine


def run_model(name, threads, rounds, seconds):
    model, inputs = e2e.make(name, 1)
    with torch.inference_mode():
        expected = e2e._as_list(model(*inputs))
    torch._dynamo.reset()
    engines = [inductor_engine(model, inputs)]  # (resets Dynamo itself, so it goes first)
    engines += [direct_engine(model, inputs), backend_engine(model, inputs)]
    for e in engines:
        e.call()
    times = e2e.measure(engines, rounds, None, seconds, warmup_s=2.0)
    direct = times["ember"][0]
    print(f"| {e2e.MODELS[name][0]} | {threads} | " + " | ".join(
        f"{e2e.fmt_ms(times[e.name][0])}" for e in engines) +
        f" | {times['backend'][0] / direct:.3f} | " +
        ", ".join(f"{e.setup_s:.1f}" for e in engines) + " | " +
        " ".join(f"{e.name}:{'ok' if e2e.check(e.outputs(), expected)[2] else 'MISMATCH'}"
                 for e in engines) + " |")
    sys.stdout.flush()


def run_zoo(rounds, seconds):
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "python"))
    import models  # noqa: E402  (the test zoo)
    print("| family | partitions | ops left to PyTorch | eager ms | backend ms | "
          "backend / eager | max error (abs/rel) | outputs |")
    print("|---|---:|---:|---:|---:|---:|---|---|")
    for family in models.FAMILIES:
        model, inputs = models.make(family, 1)
        model.eval()
        with torch.inference_mode():
            expected = e2e._as_list(model(*inputs))
        torch._dynamo.reset()
        backend = backend_engine(model, inputs)
        report = ember.last_compile_report()
        eager = e2e.Engine("eager", lambda: model(*inputs), lambda: expected, 0.0)

        def eager_call(model=model, inputs=inputs):
            with torch.inference_mode():
                model(*inputs)
        eager.call = eager_call
        times = e2e.measure([eager, backend], rounds, None, seconds, warmup_s=0.5)
        err, rel, ok = e2e.check(backend.outputs(), expected)
        print(f"| {family} | {len(report.partitions)} | {len(report.fallbacks)} | "
              f"{e2e.fmt_ms(times['eager'][0])} | {e2e.fmt_ms(times['backend'][0])} | "
              f"{times['backend'][0] / times['eager'][0]:.2f} | {err:.1e}/{rel:.1e} | "
              f"{'ok' if ok else 'MISMATCH'} |")
        sys.stdout.flush()


class SeqMLP(torch.nn.Module):
    def __init__(self, hidden=64):
        super().__init__()
        self.fc1 = torch.nn.Linear(hidden, 4 * hidden)
        self.norm = torch.nn.LayerNorm(4 * hidden)
        self.fc2 = torch.nn.Linear(4 * hidden, hidden)

    def forward(self, x):
        return torch.softmax(self.fc2(torch.nn.functional.gelu(self.norm(self.fc1(x)))), -1)


class Block(torch.nn.Module):
    def __init__(self, hidden=64, heads=2):
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(hidden, 3 * hidden)
        self.proj = torch.nn.Linear(hidden, hidden)
        self.norm1, self.norm2 = torch.nn.LayerNorm(hidden), torch.nn.LayerNorm(hidden)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(hidden, 4 * hidden), torch.nn.GELU(),
                                       torch.nn.Linear(4 * hidden, hidden))

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).reshape(b, n, 3, self.heads, d // self.heads) \
            .permute(2, 0, 3, 1, 4).unbind(0)
        a = torch.softmax(q @ k.transpose(-1, -2) / (d // self.heads) ** 0.5, -1) @ v
        x = x + self.proj(a.transpose(1, 2).reshape(b, n, d))
        return x + self.mlp(self.norm2(x))


def dynamic_loop(model, dynamic, sizes):
    """20 calls at `sizes` through a fresh torch.compile: (seconds, builds, Dynamo graphs)."""
    torch._dynamo.reset()
    fast = torch.compile(model, backend="ember", dynamic=dynamic)
    reports, t0 = {}, time.perf_counter()
    with torch.inference_mode():
        for batch, seq in sizes:
            fast(torch.randn(batch, seq, 64))
            report = ember.last_compile_report()
            if report is not None:
                reports[report.graph_id] = report
    seconds = time.perf_counter() - t0
    return seconds, sum(len(r.builds) for r in reports.values()), len(reports)


def run_dynamic(rounds, seconds):
    rng = random.Random(0)
    sizes = [(rng.randint(2, 8), rng.randint(2, 128)) for _ in range(20)]
    print("| model | dynamic | 20 calls s | Ember builds | Dynamo graphs |")
    print("|---|---|---:|---:|---:|")
    models = {"mlp": SeqMLP().eval(), "block": Block().eval()}
    for name, model in models.items():
        for dynamic in (True, False):
            secs, builds, graphs = dynamic_loop(model, dynamic, sizes)
            print(f"| {name} | {dynamic} | {secs:.2f} | {builds} | {graphs} |")
            sys.stdout.flush()
    maxima = (64, 256, 512)
    print("\n| model | [batch, seq] | eager ms | per shape ms | " +
          " | ".join(f"ranged <= {m} ms" for m in maxima) + " |")
    print("|---|---|---:|---:|" + "---:|" * len(maxima))
    for name, model in models.items():
        for batch, seq in ((4, 37), (4, 128), (8, 250)):
            x = torch.randn(batch, seq, 64)
            torch._dynamo.reset()
            engines = [eager_engine(model, x), compiled_engine(model, x, "per shape", False)]
            engines += [compiled_engine(model, x, f"<= {m}", True, {"dynamic_max": m})
                        for m in maxima]
            times = e2e.measure(engines, rounds, None, seconds, warmup_s=0.5)
            print(f"| {name} | [{batch}, {seq}] | " +
                  " | ".join(e2e.fmt_ms(times[e.name][0]) for e in engines) + " |")
            sys.stdout.flush()


def eager_engine(model, x):
    def call():
        with torch.inference_mode():
            model(x)
    return e2e.Engine("eager", call, lambda: [])


def compiled_engine(model, x, name, dynamic, options=None):
    """A warm torch.compile(backend="ember"); a dynamic one is first called at another size
    so that the timed size runs on the build for ranges."""
    fast = torch.compile(model, backend="ember", dynamic=dynamic, options=options)
    with torch.inference_mode():
        if dynamic:
            fast(x[:, :2].contiguous())
        fast(x)

    def call():
        with torch.inference_mode():
            fast(x)
    return e2e.Engine(name, call, lambda: [])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--zoo", action="store_true", help="every family of the test zoo")
    parser.add_argument("--dynamic", action="store_true",
                        help="Dynamo's symbolic sizes: one build for ranges vs per shape")
    parser.add_argument("--models", default="resnet50,bert_s128")
    parser.add_argument("--threads", default="1")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=1.0)
    args = parser.parse_args()
    if args.dynamic:
        for threads in [int(t) for t in args.threads.split(",")]:
            ember.set_num_threads(threads)
            torch.set_num_threads(threads)
            print(f"\n### {threads} thread(s)\n")
            run_dynamic(args.rounds, args.seconds)
        return
    if args.zoo:
        for threads in [int(t) for t in args.threads.split(",")]:
            ember.set_num_threads(threads)
            torch.set_num_threads(threads)
            run_zoo(args.rounds, args.seconds)
        return
    print("| model | threads | inductor ms | ember ms | backend ms | backend / ember | "
          "setup s (inductor, ember, backend) | outputs |")
    print("|---|---|---|---|---|---|---|---|")
    for threads in [int(t) for t in args.threads.split(",")]:
        ember.set_num_threads(threads)
        torch.set_num_threads(threads)
        for name in args.models.split(","):
            run_model(name, threads, args.rounds, args.seconds)


if __name__ == "__main__":
    main()
