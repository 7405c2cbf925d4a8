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
"""
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


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--zoo", action="store_true", help="every family of the test zoo")
    parser.add_argument("--models", default="resnet50,bert_s128")
    parser.add_argument("--threads", default="1")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=1.0)
    args = parser.parse_args()
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
