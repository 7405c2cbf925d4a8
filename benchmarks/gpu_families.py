"""Compile the model zoo here, run it there: exported artifacts of every family of
tests/python/models.py, checked and timed on a machine that has only Ember's runtime.

    # here, with the full Ember (LLVM, frontend, PyTorch):
    PYTHONPATH=python python3 benchmarks/gpu_families.py export DIR [--target cuda]
        [--families vgg,mlp] [--batch 1]
    # there (a GPU machine with a runtime-only install and PyTorch), from the repo root:
    bash scripts/gpu_run.sh DIR          # builds the runtime-only module, then:
    python3 benchmarks/gpu_families.py run DIR [--repeat 50] [--number 10]

`export` writes, per family F: F.ember (graph, parameters, PTX or CPU code), F.in<i>.npy
(the inputs), F.pt (the PyTorch state_dict) and F.ref<i>.npy (PyTorch's CPU outputs), plus
manifest.json and include/nlohmann (the header the runtime's sources need, about 1 MiB); it prints each family's size and the total (the GPU machine takes at most
64 MiB of carried files).

`run` imports only NumPy, the runtime part of `ember` (ember.load, ember.GraphModule) and,
when present, PyTorch: no LLVM and no frontend. Each artifact runs where its code runs (on
the GPU for a cuda artifact, the CPU for an llvm one) and is compared with the saved CPU
reference and with PyTorch on the same device (the model rebuilt from models.py with the
saved state_dict; reference only when that import fails). Ember (GraphModule.benchmark) and
PyTorch (CUDA events on the GPU, perf_counter on the CPU) are timed in the same run, each
as the median of `repeat` measurements of `number` runs. Prints a markdown table headed by
the device. Exit status 1 when a family fails or disagrees with the reference.
"""
import argparse
import json
import os
import pathlib
import platform
import sys
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
MODELS_DIR = ROOT / "tests" / "python"

# Agreement with the saved reference: |ember - ref| <= ATOL + RTOL * max|ref| (float32
# kernels that reorder sums, and GPU math expansions, differ from PyTorch in the last bits).
ATOL, RTOL = 1e-4, 1e-3


def _models():
    """tests/python/models.py (needs PyTorch), or None."""
    sys.path.insert(0, str(MODELS_DIR))
    try:
        import models
    except ImportError:
        return None
    return models


def _flat(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _size(n):
    return f"{n / 2**20:.2f} MiB" if n >= 2**20 else f"{n / 2**10:.1f} KiB"


# ------------------------------------------------------------------------------ export
def export(args):
    import torch

    import ember
    from ember.frontend import from_pytorch
    models = _models()
    if models is None:
        sys.exit(f"export needs {MODELS_DIR / 'models.py'} and PyTorch")
    families = args.families.split(",") if args.families else sorted(models.FAMILIES)
    unknown = [f for f in families if f not in models.FAMILIES]
    if unknown:
        sys.exit(f"unknown families {unknown}; known: {', '.join(sorted(models.FAMILIES))}")
    out = pathlib.Path(args.dir)
    out.mkdir(parents=True, exist_ok=True)
    manifest = {"target": args.target, "batch": args.batch, "families": {}}
    total, failed = 0, []
    for family in families:
        model, inputs = models.make(family, batch=args.batch)
        try:
            with torch.no_grad():
                refs = [t.numpy() for t in _flat(model(*inputs))]
                mod, params = from_pytorch(model, inputs)
                lib = ember.build(mod, target=args.target, params=params)
            lib.export(out / f"{family}.ember")
        except Exception as e:  # one family that does not build must not stop the others
            failed.append(family)
            print(f"{family:18s} FAILED: {type(e).__name__}: {str(e)[:300]}")
            continue
        for i, t in enumerate(inputs):
            np.save(out / f"{family}.in{i}.npy", t.numpy())
        for i, r in enumerate(refs):
            np.save(out / f"{family}.ref{i}.npy", r)
        torch.save(model.state_dict(), out / f"{family}.pt")
        manifest["families"][family] = {"inputs": len(inputs), "outputs": len(refs),
                                        "kernels": len(lib.kernel_names)}
        size = sum(p.stat().st_size for p in out.glob(f"{family}.*"))
        total += size
        print(f"{family:18s} {len(lib.kernel_names):3d} kernels  {_size(size)}")
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1))
    # The GPU machine builds the runtime with no package manager: it gets nlohmann/json here.
    include = ember.deploy.ship_runtime_headers(out)
    print(f"runtime headers (nlohmann/json) for scripts/gpu_run.sh in {include}")
    print(f"exported {len(manifest['families'])} families for target {args.target!r} to "
          f"{out}: {_size(total)} in all")
    return 1 if failed else 0


# ------------------------------------------------------------------------------ run
def _torch_time(torch, model, inputs, on_gpu, number, repeat):
    """Median ms per run over `repeat` measurements of `number` runs."""
    with torch.no_grad():
        for _ in range(3):
            model(*inputs)
        times = []
        for _ in range(repeat):
            if on_gpu:
                start = torch.cuda.Event(enable_timing=True)
                stop = torch.cuda.Event(enable_timing=True)
                start.record()
                for _ in range(number):
                    model(*inputs)
                stop.record()
                stop.synchronize()
                times.append(start.elapsed_time(stop) / number)
            else:
                t0 = time.perf_counter()
                for _ in range(number):
                    model(*inputs)
                times.append((time.perf_counter() - t0) * 1e3 / number)
    return float(np.median(times))


def _max_err(got, want):
    if got.shape != want.shape:
        raise ValueError(f"output shape {got.shape}, expected {want.shape}")
    if got.size == 0:
        return 0.0
    return float(np.abs(got.astype(np.float64) - want.astype(np.float64)).max())


def _run_family(ember, torch, models, d, family, entry, args):
    """One table row: errors against the reference and PyTorch, and both times."""
    lib = ember.load(d / f"{family}.ember")
    on_gpu = lib.target.startswith("cuda")
    m = ember.GraphModule(lib)  # without a GPU, a cuda artifact fails here, clearly
    inputs = [np.load(d / f"{family}.in{i}.npy") for i in range(entry["inputs"])]
    for i, x in enumerate(inputs):
        m.set_input(i, x)
    m.run()
    outs = [m.get_output(i).numpy() for i in range(m.get_num_outputs())]
    refs = [np.load(d / f"{family}.ref{i}.npy") for i in range(entry["outputs"])]
    if len(outs) != len(refs):
        raise ValueError(f"{len(outs)} outputs, the reference has {len(refs)}")
    row = {"family": family, "err_ref": max(_max_err(o, r) for o, r in zip(outs, refs)),
           "scale": max(float(np.abs(r).max()) if r.size else 0.0 for r in refs),
           "ember_ms": m.benchmark(number=args.number, repeat=args.repeat).median}
    if torch is not None and models is not None and family in models.FAMILIES:
        device = "cuda" if on_gpu else "cpu"
        model = models.make(family, batch=1)[0]
        model.load_state_dict(torch.load(d / f"{family}.pt", map_location="cpu"))
        model = model.to(device).eval()
        tin = [torch.from_numpy(x).to(device) for x in inputs]
        with torch.no_grad():
            touts = [t.cpu().numpy() for t in _flat(model(*tin))]
        row["err_torch"] = max(_max_err(o, t) for o, t in zip(outs, touts))
        row["torch_ms"] = _torch_time(torch, model, tin, on_gpu, args.number, args.repeat)
    return row, on_gpu


def _device_name(torch, on_gpu):
    if on_gpu:
        if torch is not None and torch.cuda.is_available():
            return f"{torch.cuda.get_device_name(0)} (CUDA)"
        return "CUDA GPU"
    name = platform.processor()
    try:
        with open("/proc/cpuinfo") as fh:
            name = next((line.split(":", 1)[1].strip() for line in fh
                         if line.startswith("model name")), name)
    except OSError:
        pass
    return f"CPU: {name or platform.machine()}, {os.cpu_count()} cores"


def run(args):
    import ember
    try:
        import torch
    except ImportError:
        torch = None
    models = _models() if torch is not None else None
    d = pathlib.Path(args.dir)
    manifest = json.loads((d / "manifest.json").read_text())
    if manifest["target"].startswith("cuda") and not ember.cuda_available():
        print(f"error: {d} holds GPU code (target {manifest['target']!r}) and this machine has "
              "no CUDA GPU (ember.cuda_available() is False): run it on a GPU machine "
              "(scripts/gpu_run.sh), or export with --target llvm", file=sys.stderr)
        return 1
    rows, failures, on_gpu = [], [], False
    for family, entry in manifest["families"].items():
        try:
            row, gpu = _run_family(ember, torch, models, d, family, entry, args)
        except Exception as e:  # report it, run the others
            failures.append(family)
            rows.append({"family": family, "error": f"{type(e).__name__}: {str(e)[:200]}"})
            continue
        on_gpu |= gpu
        if row["err_ref"] > ATOL + RTOL * row["scale"]:
            failures.append(family)
        rows.append(row)

    fmt = lambda x, spec: "-" if x is None else format(x, spec)  # noqa: E731
    install = "runtime-only" if ember.RUNTIME_ONLY else "full"
    print(f"### {_device_name(torch, on_gpu)}: target {manifest['target']!r}, batch "
          f"{manifest['batch']}, median of {args.repeat} x {args.number} runs, Ember "
          f"{install} install"
          + ("" if models else " (no PyTorch model: reference only)"))
    print()
    print("| family | max abs err (ref) | max abs err (torch) | Ember ms | PyTorch ms | ratio |")
    print("|---|---:|---:|---:|---:|---:|")
    for r in rows:
        if "error" in r:
            print(f"| {r['family']} | error: {r['error']} | | | | |")
            continue
        ratio = r["ember_ms"] / r["torch_ms"] if r.get("torch_ms") else None
        print(f"| {r['family']} | {fmt(r['err_ref'], '.2e')} | {fmt(r.get('err_torch'), '.2e')} "
              f"| {fmt(r['ember_ms'], '.4f')} | {fmt(r.get('torch_ms'), '.4f')} "
              f"| {fmt(ratio, '.2f')} |")
    print()
    print("ratio: Ember ms / PyTorch ms (below 1: Ember is faster).")
    if failures:
        print(f"FAILED or disagreeing with the reference: {', '.join(failures)}")
    return 1 if failures else 0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    e = sub.add_parser("export", help="build and export every family (full Ember)")
    e.add_argument("dir")
    e.add_argument("--target", default="cuda", help='"cuda", "cuda -arch=sm_90" or "llvm"')
    e.add_argument("--families", help="comma-separated (default: all of models.FAMILIES)")
    e.add_argument("--batch", type=int, default=1)
    e.set_defaults(func=export)
    r = sub.add_parser("run", help="load, check and time the exported families (runtime only)")
    r.add_argument("dir")
    r.add_argument("--repeat", type=int, default=50, help="measurements (default 50)")
    r.add_argument("--number", type=int, default=10, help="runs per measurement (default 10)")
    r.set_defaults(func=run)
    args = p.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
