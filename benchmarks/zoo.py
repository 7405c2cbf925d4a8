"""The models users bring: Hugging Face `transformers` architectures built from their configs
(random weights, nothing downloaded), imported, built, checked against eager and timed
against PyTorch eager and ONNX Runtime.

    PYTHONPATH=python python3 benchmarks/zoo.py [--models bert,gpt2,...] [--threads 1,2]
        [--layers 2] [--engines ember,torch,ort] [--rounds 3] [--seconds 0.3] [--json out.json]

Hidden sizes are the configs' defaults (real sizes); transformer stacks are cut to --layers
layers for time (CNNs keep their stages). Text models take 128 tokens, vision models a
224x224 image, audio models one second at 16 kHz (Whisper's encoder 30 s of 80 log-mel
bins), batch 1. Batch norms get trained-like statistics (fresh ones are identities). Each
model's first output (EfficientNet: its pooled output) is checked against eager (error
relative to the output's largest magnitude; MISMATCH above 1e-4) and timed with
benchmarks/e2e.py's interleaved rounds (medians). A model that fails to import or build is
listed with the reason and the rest go on. Nothing is asserted; `tests/python/
test_transformers.py` is the test suite's slice of this zoo.
"""
import argparse
import json
import os
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "python"))
import e2e  # noqa: E402  (engines and interleaved measuring)
from hf_zoo import ZOO, make  # noqa: E402  (the architectures, shared with the tests)

import ember  # noqa: E402


def first_line(e):
    """The error's first lines (an unsupported-operator error lists the ops after its first)."""
    lines = [line.strip() for line in str(e).strip().splitlines()[:4]]
    return f"{type(e).__name__}: {'; '.join(lines)[:400]}"


def run_model(name, args, engines):
    row = {"model": name}
    model, x = make(name, args.layers)
    with torch.no_grad():
        expected = e2e._as_list(model(x))
    lib = None
    try:
        t0 = time.perf_counter()
        mod, params = ember.frontend.from_pytorch(model, (x,))
        row["import_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        lib = ember.build(mod, params=params)
        row["build_s"] = time.perf_counter() - t0
    except Exception as e:  # noqa: BLE001  (report it, go on with the zoo)
        row["ember_error"] = first_line(e)
    onnx_path, tmp = None, tempfile.TemporaryDirectory(prefix="ember_zoo_")
    if "ort" in engines:
        try:
            onnx_path = os.path.join(tmp.name, f"{name}.onnx")
            e2e.export_onnx(model, (x,), onnx_path)
        except Exception as e:  # noqa: BLE001
            row["ort_error"], onnx_path = first_line(e), None
    row["ms"] = {}
    for threads in args.thread_counts:
        ember.set_num_threads(threads)
        torch.set_num_threads(threads)
        built = [e2e.torch_engine(model, (x,))]
        if lib is not None:
            built.append(e2e.ember_engine(lib, (x,)))
        if onnx_path is not None:
            built.append(e2e.ort_engine(onnx_path, (x,), threads))
        with torch.inference_mode():
            result = e2e.measure(built, args.rounds, 0, args.seconds, 0.3)
        row["ms"][threads] = {eng: r[0] for eng, r in result.items()}
        if lib is not None and "error" not in row:
            _, rel, _ = e2e.check(built[1].outputs(), expected)
            row["error"] = rel
    return row


def print_table(rows, thread_counts):
    cols = "".join(f" Ember/PyTorch {t}t | ORT/PyTorch {t}t |" for t in thread_counts)
    print(f"\n| model | import s | build s | error vs eager | PyTorch ms (1t) |{cols}")
    print("|---|---:|---:|---:|---:|" + "---:|---:|" * len(thread_counts))
    for r in rows:
        if "ember_error" in r:
            print(f"| {r['model']} | FAILED: {r['ember_error']} |")
            continue
        err = r.get("error", float("nan"))
        flag = "" if err <= 1e-4 else " MISMATCH"
        cells = ""
        for t in thread_counts:
            ms = r["ms"].get(t, {})
            torch_ms = ms.get("torch")
            cells += "".join(f" {ms[e] / torch_ms:.2f} |" if e in ms else " - |"
                             for e in ("ember", "ort"))
        first = r["ms"].get(thread_counts[0], {}).get("torch", float("nan"))
        print(f"| {r['model']} | {r['import_s']:.1f} | {r['build_s']:.1f} | {err:.1e}{flag} "
              f"| {first:.2f} |{cells}")
    for r in rows:
        if "ort_error" in r:
            print(f"- ORT skipped for {r['model']}: {r['ort_error']}")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default=",".join(ZOO), help=f"comma list; known: {', '.join(ZOO)}")
    p.add_argument("--threads", default="1,2", help="comma list of thread counts (default 1,2)")
    p.add_argument("--layers", type=int, default=2, help="transformer layers kept (default 2)")
    p.add_argument("--engines", default="ember,torch,ort", help="ember,torch,ort")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    p.add_argument("--seconds", type=float, default=0.3,
                   help="about this many seconds per engine per round (default 0.3)")
    p.add_argument("--json", metavar="PATH", help="also write the rows as JSON here")
    args = p.parse_args()
    names = e2e.chosen(p, args.models, ZOO, "model")
    args.thread_counts = [int(t) for t in args.threads.split(",") if t]
    engines = args.engines.split(",")
    import transformers
    print(f"# Ember zoo: transformers {transformers.__version__}, torch {torch.__version__}, "
          f"{os.cpu_count()} cores, {args.layers} layers per stack, batch 1", flush=True)
    rows = []
    for name in names:
        t0 = time.perf_counter()
        rows.append(run_model(name, args, engines))
        print(f"  {name}: {time.perf_counter() - t0:.0f} s"
              + (f", Ember failed: {rows[-1]['ember_error']}" if "ember_error" in rows[-1] else
                 f", error {rows[-1].get('error', float('nan')):.1e}"), flush=True)
    print_table(rows, args.thread_counts)
    if args.json:
        json.dump(rows, open(args.json, "w"), indent=1)


if __name__ == "__main__":
    main()
