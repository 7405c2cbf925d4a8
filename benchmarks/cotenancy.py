"""Ember next to other runtimes in one process: each model timed alone and interleaved with
PyTorch eager and ONNX Runtime, at 1 and 2 threads.

    PYTHONPATH=python python3 benchmarks/cotenancy.py [--models forum,mlp,bert_s128,resnet18]
        [--threads 1,2] [--seconds 3] [--threading pool,openmp] [--json out.json]

Users run Ember where PyTorch already runs: a torch.compile backend with graph breaks, a
service that pre-processes in PyTorch, an ensemble with ONNX Runtime. After each of their
calls PyTorch's OpenMP team and ONNX Runtime's pool keep spinning on the cores for a while,
so a parallel runtime that waits for every one of its threads slows down there, while alone
it looks fine. Per model (benchmarks/e2e.py's definitions, real sizes, batch 1) and thread
count (the same for the three engines), after warm-up:

- alone: Ember's calls back to back, then ONNX Runtime's;
- interleaved: rounds of one call each of PyTorch eager, ONNX Runtime and Ember, each timed.

The table gives medians in ms, Ember interleaved / Ember alone, and Ember interleaved at 2
threads / Ember alone at 1 (over 1: a second thread made it slower). `--threading pool,openmp`
runs the whole measurement once per Ember threading runtime (EMBER_THREADING, each in a
child process, so each starts fresh), to compare the runtime's pool with OpenMP. Nothing is
asserted; numbers are only printed.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e  # noqa: E402  (the model definitions and engines)

import ember  # noqa: E402


def timed_calls(call, seconds, at_least=20):
    """Times call() back to back for about `seconds`; returns the times in ms."""
    out, start = [], time.perf_counter()
    while len(out) < at_least or time.perf_counter() - start < seconds:
        t0 = time.perf_counter()
        call()
        out.append((time.perf_counter() - t0) * 1e3)
    return out


def interleaved(engines, seconds, at_least=20):
    """Rounds of one call of each engine in turn; returns {name: times in ms}."""
    out, start = {e.name: [] for e in engines}, time.perf_counter()
    while len(out[engines[0].name]) < at_least or time.perf_counter() - start < seconds:
        for e in engines:
            t0 = time.perf_counter()
            e.call()
            out[e.name].append((time.perf_counter() - t0) * 1e3)
    return out


def measure_model(name, thread_counts, seconds, ort_spinning=True):
    model, inputs = e2e.make(name, 1)
    with torch.inference_mode():
        expected = e2e._as_list(model(*inputs))
    mod, params = ember.frontend.from_pytorch(model, inputs)
    lib = ember.build(mod, params=params)
    tmp = tempfile.TemporaryDirectory(prefix="ember_cotenancy_")
    onnx_path = os.path.join(tmp.name, f"{name}.onnx")
    e2e.export_onnx(model, inputs, onnx_path)
    rows = []
    for threads in thread_counts:
        ember.set_num_threads(threads)
        torch.set_num_threads(threads)
        em = e2e.ember_engine(lib, inputs)
        pt = e2e.torch_engine(model, inputs)
        ort = e2e.ort_engine(onnx_path, inputs, threads, spinning=ort_spinning)
        with torch.inference_mode():
            for e in (em, pt, ort):  # warm up, and check Ember against eager
                timed_calls(e.call, 0.3, at_least=3)
            err, rel, ok = e2e.check(em.outputs(), expected)
            alone_ember = timed_calls(em.call, seconds)
            alone_ort = timed_calls(ort.call, seconds)
            mixed = interleaved([pt, ort, em], 2 * seconds)
        rows.append({
            "model": name, "threads": threads, "ok": ok, "rel_error": rel,
            "ember_alone": statistics.median(alone_ember),
            "ember_mixed": statistics.median(mixed["ember"]),
            "ember_mixed_p90": float(np.percentile(mixed["ember"], 90)),
            "ort_alone": statistics.median(alone_ort),
            "ort_mixed": statistics.median(mixed["ort"]),
            "torch_mixed": statistics.median(mixed["torch"]),
        })
        r = rows[-1]
        print(f"  {name} {threads} thr: Ember alone {r['ember_alone']:.3f} ms, interleaved "
              f"{r['ember_mixed']:.3f} (p90 {r['ember_mixed_p90']:.3f}); ORT alone "
              f"{r['ort_alone']:.3f}, interleaved {r['ort_mixed']:.3f}"
              + ("" if ok else f"  MISMATCH rel error {rel:.2e}"), flush=True)
    return rows


def print_table(rows, threading):
    print(f"\n### Ember threading: {threading}\n")
    print("| model | thr | Ember alone ms | Ember interleaved ms | interleaved / alone "
          "| interleaved / alone at 1 thr | ORT alone ms | ORT interleaved ms | PyTorch ms |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    one = {r["model"]: r["ember_alone"] for r in rows if r["threads"] == 1}
    for r in rows:
        vs_one = f"{r['ember_mixed'] / one[r['model']]:.2f}" if r["model"] in one else "-"
        print(f"| {r['model']} | {r['threads']} | {r['ember_alone']:.3f} | {r['ember_mixed']:.3f} "
              f"| {r['ember_mixed'] / r['ember_alone']:.2f} | {vs_one} | {r['ort_alone']:.3f} "
              f"| {r['ort_mixed']:.3f} | {r['torch_mixed']:.3f} |")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="forum,mlp,bert_s128,resnet18",
                   help=f"comma list; known: {', '.join(e2e.MODELS)}")
    p.add_argument("--threads", default="1,2", help="comma list of thread counts (default 1,2)")
    p.add_argument("--seconds", type=float, default=3.0,
                   help="seconds per engine alone; interleaved rounds take twice this")
    p.add_argument("--threading", default=None,
                   help="comma list of EMBER_THREADING values to compare (pool, openmp), each "
                        "in a child process; default: this process's own")
    p.add_argument("--ort-no-spin", action="store_true",
                   help="ONNX Runtime's threads block instead of spinning for work (its "
                        "session.intra_op.allow_spinning=0), to see what its spinning costs")
    p.add_argument("--json", metavar="PATH", help="also write the rows as JSON here")
    args = p.parse_args()
    names = e2e.chosen(p, args.models, e2e.MODELS, "model")

    if args.threading:
        results = {}
        for threading in args.threading.split(","):
            with tempfile.NamedTemporaryFile(suffix=".json") as f:
                cmd = [sys.executable, __file__, "--models", args.models, "--threads",
                       args.threads, "--seconds", str(args.seconds), "--json", f.name]
                cmd += ["--ort-no-spin"] if args.ort_no_spin else []
                env = dict(os.environ, EMBER_THREADING=threading)
                print(f"\n## EMBER_THREADING={threading}", flush=True)
                subprocess.run(cmd, env=env, check=True)
                results[threading] = json.load(open(f.name))
        for threading, rows in results.items():
            print_table(rows, threading)
        if args.json:
            json.dump(results, open(args.json, "w"), indent=1)
        return

    import onnxruntime
    threading = os.environ.get("EMBER_THREADING", "pool")
    print(f"# Ember co-tenancy: {os.cpu_count()} cores, torch {torch.__version__}, onnxruntime "
          f"{onnxruntime.__version__}, EMBER_THREADING={threading}, load average "
          f"{os.getloadavg()[0]:.1f} at start", flush=True)
    rows = []
    for name in names:
        rows += measure_model(name, [int(t) for t in args.threads.split(",")], args.seconds,
                              ort_spinning=not args.ort_no_spin)
    print_table(rows, threading)
    if args.json:
        json.dump(rows, open(args.json, "w"), indent=1)


if __name__ == "__main__":
    main()
