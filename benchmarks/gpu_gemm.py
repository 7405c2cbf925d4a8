"""The tensor-core GEMM alone: Ember's dense kernels at each matmul precision against
PyTorch's cuBLAS at the same precision, compiled here and run on the GPU machine.

    # here (full Ember):
    PYTHONPATH=python python3 benchmarks/gpu_gemm.py export DIR [--shapes 4096x4096x4096,...]
    # there (runtime-only install; scripts/gpu_run.sh builds it), from the repo root:
    python3 benchmarks/gpu_gemm.py run DIR

Each entry is `y = x @ w.T` (nn.dense, both operands graph inputs, so nothing large
travels) built for "cuda -arch=sm_90" with PassContext config cuda.matmul_precision =
highest (float32 FMAs), tf32, bf16 or fp16. `run` draws seeded inputs on the GPU, checks
Ember against a float64 product of the operands rounded as the tensor cores round them
(max error relative to the output scale), and times Ember (GraphModule.benchmark) and
PyTorch (torch.matmul: float32 with TF32 off or on, or FP16/BF16 tensors, which is what
autocast runs) in alternating rounds, medians; TFLOP/s and the share of the GPU's dense peak
at that precision.
"""
import argparse
import json
import pathlib
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "gpu"))

PRECISIONS = ("highest", "tf32", "bf16", "fp16")
# M x N x K: the 4096 cube, BERT-base's FFN and attention projections at batch 32
# (4096 tokens) and at batch 1 (128 tokens).
DEFAULT_SHAPES = ("4096x4096x4096,4096x3072x768,4096x768x3072,128x768x768,128x3072x768,"
                  "128x768x3072")
# Dense peak TFLOP/s of the SXM H100/H200 (the same tensor cores): float32 FMA, TF32, FP16/BF16.
PEAKS = {"H100": {"highest": 66.9, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4},
         "H200": {"highest": 66.9, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4}}


def _shapes(text):
    return [tuple(int(v) for v in s.split("x")) for s in text.split(",") if s]


def export(args):
    import ember
    from ember import ir, op
    out = pathlib.Path(args.dir)
    out.mkdir(parents=True, exist_ok=True)
    entries = {}
    for m, n, k in _shapes(args.shapes):
        for p in args.precisions.split(","):
            x, w = ir.var("x", shape=(m, k)), ir.var("w", shape=(n, k))
            with ember.transform.PassContext(config={"cuda.matmul_precision": p}):
                lib = ember.build(ir.Function([x, w], op.nn.dense(x, w)), target=args.target)
            key = f"gemm_{m}x{n}x{k}_{p}"
            lib.export(out / f"{key}.ember")
            mma = lib.get_source("ptx").count("mma.sync")
            entries[key] = {"m": m, "n": n, "k": k, "precision": p, "mma": mma}
            print(f"{key:28s} {len(lib.kernel_names)} kernel(s), {mma} mma.sync in the PTX")
    (out / "manifest.json").write_text(json.dumps({"target": args.target, "entries": entries},
                                                  indent=1))
    return 0


def _peak(torch, precision):
    name = torch.cuda.get_device_name(0)
    for gpu, peaks in PEAKS.items():
        if gpu in name:
            return peaks[precision]
    return None


def _torch_operands(torch, x, w, precision):
    if precision in ("fp16", "bf16"):
        dtype = torch.float16 if precision == "fp16" else torch.bfloat16
        return x.to(dtype), w.to(dtype)
    return x, w


def _time(torch, fn, number):
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(number):
        fn()
    stop.record()
    stop.synchronize()
    return start.elapsed_time(stop) / number


def run(args):
    import torch

    import cases
    import ember
    d = pathlib.Path(args.dir)
    manifest = json.loads((d / "manifest.json").read_text())
    rows, failed = [], []
    for key, e in manifest["entries"].items():
        m, n, k, p = e["m"], e["n"], e["k"], e["precision"]
        g = torch.Generator(device="cuda").manual_seed(0)
        x = torch.randn(m, k, device="cuda", generator=g)
        w = torch.randn(n, k, device="cuda", generator=g)
        mod = ember.GraphModule(ember.load(d / f"{key}.ember"))
        mod.set_input("x", x)
        mod.set_input("w", w)
        mod.run()
        got = torch.from_dlpack(mod.get_output(0)).double()
        xr = torch.from_numpy(cases.round_operands(x.cpu().numpy(), p)).cuda().double()
        wr = torch.from_numpy(cases.round_operands(w.cpu().numpy(), p)).cuda().double()
        ref = xr @ wr.T
        err = float((got - ref).abs().max() / ref.abs().max())
        torch.backends.cuda.matmul.allow_tf32 = p == "tf32"
        tx, tw = _torch_operands(torch, x, w, p)
        ember_ms, torch_ms = [], []
        once = mod.benchmark(number=1, repeat=3).median
        number = max(1, int(20.0 / max(once, 1e-3)))
        for _ in range(args.rounds):  # alternating rounds
            ember_ms.append(mod.benchmark(number=number, repeat=1).median)
            torch_ms.append(_time(torch, lambda: torch.matmul(tx, tw.T), number))
        em, tm = float(np.median(ember_ms)), float(np.median(torch_ms))
        flops = 2.0 * m * n * k
        peak = _peak(torch, p)
        row = {"key": key, "err": err, "ember_ms": em, "torch_ms": tm,
               "ember_tflops": flops / em / 1e9, "torch_tflops": flops / tm / 1e9,
               "peak": peak, "mma": e["mma"]}
        ok = err <= (1e-4 if p != "highest" else 1e-5) and (p == "highest" or e["mma"] > 0)
        if not ok:
            failed.append(key)
        rows.append(row)
        print(json.dumps(row), flush=True)
        del mod
        torch.cuda.empty_cache()
    print(f"\n### {torch.cuda.get_device_name(0)}: dense y = x @ w.T, Ember vs PyTorch "
          f"{torch.__version__} (cuBLAS) at the same precision, medians of {args.rounds} "
          "alternating rounds\n")
    print("| M x N x K | precision | rel err | Ember ms | PyTorch ms | Ember / PyTorch | "
          "Ember TFLOP/s | PyTorch TFLOP/s | Ember % of peak |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        e = manifest["entries"][r["key"]]
        share = f"{100 * r['ember_tflops'] / r['peak']:.0f}%" if r["peak"] else "-"
        print(f"| {e['m']}x{e['n']}x{e['k']} | {e['precision']} | {r['err']:.1e} | "
              f"{r['ember_ms']:.4g} | {r['torch_ms']:.4g} | {r['ember_ms'] / r['torch_ms']:.2f} | "
              f"{r['ember_tflops']:.1f} | {r['torch_tflops']:.1f} | {share} |")
    if failed:
        print(f"FAILED (error past 1e-4 of the scale, or no mma.sync): {', '.join(failed)}")
    return 1 if failed else 0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("export", help="build the GEMMs here (full Ember)")
    e.add_argument("dir")
    e.add_argument("--target", default="cuda -arch=sm_90")
    e.add_argument("--shapes", default=DEFAULT_SHAPES, help="MxNxK,... ")
    e.add_argument("--precisions", default=",".join(PRECISIONS))
    r = sub.add_parser("run", help="check and time them on the GPU (runtime-only Ember)")
    r.add_argument("dir")
    r.add_argument("--rounds", type=int, default=7)
    args = p.parse_args(argv)
    return export(args) if args.cmd == "export" else run(args)


if __name__ == "__main__":
    sys.exit(main())
