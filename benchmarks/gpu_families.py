"""Compile here, run there: the model zoo and the full-size models exported as artifacts,
checked and timed on a machine that has only Ember's runtime (the GPU machine).

    # here, with the full Ember (LLVM, frontend, PyTorch):
    PYTHONPATH=python python3 benchmarks/gpu_families.py export DIR [--target cuda]
        [--families vgg,mlp] [--full resnet50,bert_s128] [--batches 1,32]
    # there (a GPU machine with PyTorch, CMake and a compiler), from the repo root:
    bash scripts/gpu_run.sh DIR      # builds the runtime-only module, runs tests/gpu, then:
    python3 benchmarks/gpu_families.py run DIR [--budget-s 4]

`export` writes three kinds of entry, all listed in DIR/manifest.json:
- zoo families (tests/python/models.py, narrow): K.ember with the weights bound, K.in<i>.npy,
  K.ref<i>.npy (PyTorch's CPU outputs) and K.pt (the state_dict);
- full-size models (benchmarks/e2e.py: ResNet-50 at 224x224, BERT-base layers, ...) at each
  batch of --batches: K.ember built with the weights left as graph inputs (ResNet-50's 102 MB
  would not travel: the GPU machine takes 64 MiB), plus a fingerprint of the seeded weights
  and inputs. There, the runner rebuilds the same seeded model in PyTorch, checks the
  fingerprint, binds the weights by name and compares with PyTorch on the GPU;
- the small cases of tests/gpu/cases.py (DIR/cases), for the runtime-only GPU test suite.
It also ships include/nlohmann (the header the runtime's sources need) and prints sizes.

`run` imports NumPy, the runtime part of `ember` (ember.load, ember.GraphModule) and PyTorch:
no LLVM and no frontend. Each artifact runs where its code runs (the GPU for target cuda) and
is compared with PyTorch on that device, TF32 off, and for zoo entries with the saved CPU
reference. On the GPU the module is run again so that it replays its CUDA graph, which must
give the same outputs. Ember (GraphModule.benchmark) and PyTorch (CUDA events on the GPU,
perf_counter on the CPU) are timed in the same run, each the median of repeated measurements
sized to about --budget-s seconds per engine; on the GPU Ember is timed launching every
kernel ("Ember ms") and replaying the CUDA graph ("Ember graph ms"), as --cuda-graph
on|off|both (default both) says. Prints a markdown table per batch headed by the device; exit
status 1 when an entry fails or disagrees with its reference.
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
for _p in (ROOT / "tests" / "python", ROOT / "benchmarks", ROOT / "tests" / "gpu"):
    sys.path.insert(0, str(_p))

# Zoo entries against the saved CPU reference: |ember - ref| <= ATOL + RTOL * max|ref| (float32
# kernels that reorder sums, and GPU math expansions, differ from PyTorch in the last bits).
ATOL, RTOL = 1e-4, 1e-3
# Full-size entries against PyTorch on the same device (deep nets reorder longer sums): the
# tolerance benchmarks/e2e.py uses on the CPU.
FULL_ATOL, FULL_RTOL = 1e-3, 1e-3
DEFAULT_FULL = "resnet50,mobilenet_v2,bert_s128,bert_s384,gpt2_block,mlp,lstm"
# Builds whose GEMMs run on tensor cores (--precision) round their operands: the tolerance
# is relative to the output scale (TF32 and FP16 keep 10 mantissa bits, BF16 7).
PRECISION_RTOL = {"highest": None, "tf32": 1e-2, "fp16": 1e-2, "bf16": 5e-2}


def _flat(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _size(n):
    return f"{n / 2**20:.2f} MiB" if n >= 2**20 else f"{n / 2**10:.1f} KiB"


def _fingerprint(model, inputs):
    """Sums (float64) of every input and every state_dict tensor: the same seeded definition
    rebuilt by another PyTorch must give the same numbers."""
    sd = model.state_dict()
    return {"inputs": [float(t.double().sum()) for t in inputs],
            "weights": {k: float(v.double().sum()) for k, v in sd.items()
                        if v.is_floating_point()}}


def _fingerprint_mismatch(want, got):
    """The first input or weight whose sum differs, or None."""
    for i, (a, b) in enumerate(zip(want["inputs"], got["inputs"])):
        if not np.isclose(a, b, rtol=1e-9, atol=1e-9):
            return f"input {i} (sum {b!r}, exported {a!r})"
    for k, a in want["weights"].items():
        b = got["weights"].get(k)
        if b is None or not np.isclose(a, b, rtol=1e-9, atol=1e-9):
            return f"weight {k} (sum {b!r}, exported {a!r})"
    return None


# ------------------------------------------------------------------------------ export
def _pass_context(ember, args):
    """The build's PassContext: --disabled-passes (FuseOps, to time what fusion buys) and
    --precision (tensor cores for the GEMMs)."""
    return ember.transform.PassContext(disabled_passes=args.disabled_passes,
                                       config={"cuda.matmul_precision": args.precision})


def _export_zoo(ember, torch, models, out, family, args):
    model, inputs = models.make(family, batch=args.zoo_batch)
    with torch.no_grad():
        refs = [t.numpy() for t in _flat(model(*inputs))]
        mod, params = ember.frontend.from_pytorch(model, inputs)
        with _pass_context(ember, args):
            lib = ember.build(mod, target=args.target, params=params)
    key = family
    lib.export(out / f"{key}.ember")
    for i, t in enumerate(inputs):
        np.save(out / f"{key}.in{i}.npy", t.numpy())
    for i, r in enumerate(refs):
        np.save(out / f"{key}.ref{i}.npy", r)
    torch.save(model.state_dict(), out / f"{key}.pt")
    return key, {"source": "zoo", "model": family, "batch": args.zoo_batch,
                 "inputs": len(inputs), "outputs": len(refs), "kernels": len(lib.kernel_names)}


def _export_full(ember, torch, e2e, out, name, batch, args):
    model, inputs = e2e.make(name, batch)
    with torch.no_grad():
        outputs = len(_flat(model(*inputs)))
        mod, params = ember.frontend.from_pytorch(model, inputs)
        # No params: the weights stay graph inputs, bound by name where the model runs.
        with _pass_context(ember, args):
            lib = ember.build(mod, target=args.target)
    key = f"{name}_b{batch}"
    lib.export(out / f"{key}.ember")
    return key, {"source": "e2e", "model": name, "batch": batch, "inputs": len(inputs),
                 "outputs": outputs, "kernels": len(lib.kernel_names),
                 "weights": sorted(params), "fingerprint": _fingerprint(model, inputs)}


def export(args):
    import torch

    import cases
    import e2e
    import ember
    import models
    families = sorted(models.FAMILIES) if args.families is None else \
        [f for f in args.families.split(",") if f]
    full = [f for f in args.full.split(",") if f]
    batches = [int(b) for b in args.batches.split(",") if b]
    bad = [f for f in families if f not in models.FAMILIES] + \
        [f for f in full if f not in e2e.MODELS]
    if bad:
        sys.exit(f"unknown models {bad}; zoo: {', '.join(sorted(models.FAMILIES))}; "
                 f"full-size: {', '.join(e2e.MODELS)}")
    out = pathlib.Path(args.dir)
    out.mkdir(parents=True, exist_ok=True)
    manifest = {"target": args.target, "disabled_passes": args.disabled_passes,
                "precision": args.precision, "entries": {}}
    jobs = [(f, lambda f=f: _export_zoo(ember, torch, models, out, f, args)) for f in families]
    jobs += [(f"{n}_b{b}", lambda n=n, b=b: _export_full(ember, torch, e2e, out, n, b, args))
             for n in full for b in batches]
    failed = []
    for label, job in jobs:
        try:
            key, entry = job()
        except Exception as e:  # one model that does not build must not stop the others
            failed.append(label)
            print(f"{label:18s} FAILED: {type(e).__name__}: {str(e)[:300]}")
            continue
        manifest["entries"][key] = entry
        size = sum(p.stat().st_size for p in out.glob(f"{key}.*"))
        print(f"{key:18s} {entry['kernels']:3d} kernels  {_size(size)}")
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1))
    index = cases.export(out / "cases", target=args.target)
    print(f"tests/gpu cases: {', '.join(index)} in {out / 'cases'}")
    # The GPU machine builds the runtime with no package manager: it gets nlohmann/json here.
    include = ember.deploy.ship_runtime_headers(out)
    total = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    print(f"runtime headers (nlohmann/json) for scripts/gpu_run.sh in {include}")
    print(f"exported {len(manifest['entries'])} entries for target {args.target!r} to {out}: "
          f"{_size(total)} in all (the GPU machine takes 64 MiB)")
    return 1 if failed else 0


# ------------------------------------------------------------------------------ run
def torch_reference_mode(torch, precision="highest"):
    """PyTorch computes in float32 on the GPU (no TF32 in matmuls or convolutions), or with
    TF32 allowed when the build's precision is TF32."""
    torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
    torch.backends.cudnn.allow_tf32 = precision == "tf32"


def torch_autocast(torch, precision, on_gpu):
    """The context PyTorch runs in to match a build of `precision`: autocast to FP16/BF16 on
    the GPU (what PyTorch users do), else nothing."""
    import contextlib
    if on_gpu and precision in ("fp16", "bf16"):
        dtype = torch.float16 if precision == "fp16" else torch.bfloat16
        return torch.autocast("cuda", dtype=dtype)
    return contextlib.nullcontext()


def _max_err(got, want):
    if got.shape != want.shape:
        raise ValueError(f"output shape {got.shape}, expected {want.shape}")
    if got.size == 0:
        return 0.0
    return float(np.abs(got.astype(np.float64) - want.astype(np.float64)).max())


def _scale(arrays):
    return max((float(np.abs(a).max()) if a.size else 0.0) for a in arrays)


class Checked:
    """One entry run once and compared: row (errors, verdict) plus what timing needs."""

    def __init__(self, row, module, model, torch_inputs):
        self.row, self.module, self.model, self.torch_inputs = row, module, model, torch_inputs


def _torch_model(torch, d, key, entry):
    """(model, input tensors on the CPU) as the entry was exported."""
    if entry["source"] == "zoo":
        import models
        model = models.make(entry["model"], batch=entry["batch"])[0]
        model.load_state_dict(torch.load(d / f"{key}.pt", map_location="cpu"))
        inputs = [torch.from_numpy(np.load(d / f"{key}.in{i}.npy"))
                  for i in range(entry["inputs"])]
        return model.eval(), inputs
    import e2e
    model, inputs = e2e.make(entry["model"], entry["batch"])
    mismatch = _fingerprint_mismatch(entry["fingerprint"], _fingerprint(model, inputs))
    if mismatch:
        raise ValueError(f"PyTorch {torch.__version__} here rebuilds another {entry['model']}: "
                         f"{mismatch} differs from the export; export with the full weights "
                         "bound instead")
    return model.eval(), list(inputs)


def check_entry(ember, torch, d, key, entry, precision="highest", cuda_graph=True):
    """Loads and runs one entry, binds its weights if it left them as inputs, and compares
    its outputs with the saved reference (zoo) and with PyTorch on the same device. With a
    CUDA graph (a GPU module, cuda_graph=True) it runs twice more, recording and replaying
    the graph, and the replay must give the first run's outputs (err_graph)."""
    d = pathlib.Path(d)
    lib = ember.load(d / f"{key}.ember")
    on_gpu = lib.target.startswith("cuda")
    # Without a GPU, a cuda artifact fails here, clearly.
    m = ember.GraphModule(lib, cuda_graph=cuda_graph)
    model, tin = _torch_model(torch, d, key, entry)
    for i, x in enumerate(tin):
        m.set_input(i, x.numpy())
    state = model.state_dict()
    for name in entry.get("weights", []):
        m.set_input(name, state[name].numpy())
    m.run()
    outs = [m.get_output(i).numpy() for i in range(m.get_num_outputs())]
    if len(outs) != entry["outputs"]:
        raise ValueError(f"{len(outs)} outputs, the model has {entry['outputs']}")
    device = "cuda" if on_gpu else "cpu"
    model = model.to(device)
    tin = [t.to(device) for t in tin]
    with torch.no_grad():
        touts = [t.cpu().numpy() for t in _flat(model(*tin))]
    row = {"key": key, "model": entry["model"], "batch": entry["batch"],
           "device": device, "err_torch": max(_max_err(o, t) for o, t in zip(outs, touts)),
           "scale": _scale(touts), "kernels": entry["kernels"]}
    loose = PRECISION_RTOL.get(precision)  # tensor cores: relative to the output scale
    if entry["source"] == "zoo":
        refs = [np.load(d / f"{key}.ref{i}.npy") for i in range(entry["outputs"])]
        row["err_ref"] = max(_max_err(o, r) for o, r in zip(outs, refs))
        rtol = loose or RTOL
        row["ok"] = row["err_ref"] <= ATOL + rtol * _scale(refs) and \
            row["err_torch"] <= ATOL + rtol * row["scale"]
    else:
        row["ok"] = row["err_torch"] <= FULL_ATOL + (loose or FULL_RTOL) * row["scale"]
    if m.cuda_graph:
        row["err_graph"] = _replay_err(m, outs)
        row["ok"] = row["ok"] and row["err_graph"] == 0.0
    return Checked(row, m, model, tin)


def _replay_err(m, outs):
    """Max abs difference from `outs` of the outputs of the CUDA graph's replay (the second
    run records it, the third replays the recording)."""
    err = 0.0
    for _ in range(2):
        m.run()
        got = [m.get_output(i).numpy() for i in range(m.get_num_outputs())]
        err = max(err, max(_max_err(g, o) for g, o in zip(got, outs)))
    return err


def _module_like(ember, m, cuda_graph):
    """Another GraphModule of m's library with m's inputs (copied on the device)."""
    other = ember.GraphModule(m.lib, cuda_graph=cuda_graph)
    for i in range(m.get_num_inputs()):
        other.set_input(i, m.get_input(i))
    return other


def _plan(once_ms, budget_s, max_repeat):
    """(number, repeat): measurements of about 20 ms, about budget_s in all, 3 at least."""
    number = max(1, int(20.0 / max(once_ms, 1e-3)))
    repeat = int(budget_s * 1e3 / (number * max(once_ms, 1e-3)))
    return number, max(3, min(max_repeat, repeat))


def _torch_time(torch, model, inputs, on_gpu, budget_s, max_repeat):
    """Median ms per run."""
    def measure(number):
        if on_gpu:
            start = torch.cuda.Event(enable_timing=True)
            stop = torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(number):
                model(*inputs)
            stop.record()
            stop.synchronize()
            return start.elapsed_time(stop) / number
        t0 = time.perf_counter()
        for _ in range(number):
            model(*inputs)
        return (time.perf_counter() - t0) * 1e3 / number
    with torch.no_grad():
        for _ in range(3):
            once = measure(1)
        number, repeat = _plan(once, budget_s, max_repeat)
        return float(np.median([measure(number) for _ in range(repeat)]))


def _ember_time(m, budget_s, max_repeat):
    once = m.benchmark(number=1, repeat=3, warmup=1).median
    number, repeat = _plan(once, budget_s, max_repeat)
    return m.benchmark(number=number, repeat=repeat, warmup=1).median


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


def _ratio(row, key):
    """row[key] / PyTorch's ms, None where either is missing."""
    return row[key] / row["torch_ms"] if row.get(key) and row.get("torch_ms") else None


def _print_table(rows, title):
    fmt = lambda x, spec: "-" if x is None else format(x, spec)  # noqa: E731
    print(f"\n### {title}\n")
    print("| entry | batch | kernels | max abs err (torch) | max abs err (ref) | scale | Ember ms "
          "| Ember graph ms | PyTorch ms | Ember / PyTorch | graph / PyTorch | torch.compile ms "
          "| compiled / PyTorch |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        if "error" in r:
            print(f"| {r['key']} | | | error: {r['error']} | | | | | | | | | |")
            continue
        print(f"| {r['key']} | {r['batch']} | {r['kernels']} | {fmt(r['err_torch'], '.2e')} "
              f"| {fmt(r.get('err_ref'), '.2e')} | {fmt(r['scale'], '.3g')} "
              f"| {fmt(r.get('ember_ms'), '.4g')} | {fmt(r.get('graph_ms'), '.4g')} "
              f"| {fmt(r.get('torch_ms'), '.4g')} | {fmt(_ratio(r, 'ember_ms'), '.2f')} "
              f"| {fmt(_ratio(r, 'graph_ms'), '.2f')} | {fmt(r.get('compile_ms'), '.4g')} "
              f"| {fmt(_ratio(r, 'compile_ms'), '.2f')}{'' if r['ok'] else ' MISMATCH'} |")
    sys.stdout.flush()


def _torch_mode(precision):
    return {"tf32": "TF32 on", "fp16": "autocast FP16", "bf16": "autocast BF16"}.get(
        precision, "TF32 off")


def _time_entry(ember, torch, c, args, precision="highest"):
    """Ember launching each kernel (ember_ms) and replaying its CUDA graph (graph_ms, GPU
    only), as --cuda-graph asks, then PyTorch, into c.row."""
    row, m = c.row, c.module
    modes = {"off": [False], "on": [True], "both": [False, True]}[args.cuda_graph]
    if row["device"] != "cuda":
        modes = [False]  # the CPU has no CUDA graph
    for graph in modes:
        timed = m if m.cuda_graph == graph else _module_like(ember, m, graph)
        row["graph_ms" if graph else "ember_ms"] = _ember_time(timed, args.budget_s,
                                                               args.repeat)
        del timed
    with torch_autocast(torch, precision, row["device"] == "cuda"):
        row["torch_ms"] = _torch_time(torch, c.model, c.torch_inputs,
                                      row["device"] == "cuda", args.budget_s, args.repeat)
        if args.torch_compile != "off":
            row["compile_ms"] = _compiled_time(torch, c, args)


def _compiled_time(torch, c, args):
    """The same model through torch.compile (mode --torch-compile), compiled by its first
    call and then timed as eager PyTorch is; None, with the reason printed, where it does
    not compile there."""
    mode = None if args.torch_compile == "default" else args.torch_compile
    on_gpu = c.row["device"] == "cuda"
    try:
        # Dynamo keys its cache on the forward's code: without a reset, a second batch of the
        # same model would be compiled for a dynamic batch, not for its own.
        torch._dynamo.reset()
        compiled = torch.compile(c.model, mode=mode)
        with torch.no_grad():
            compiled(*c.torch_inputs)
        return _torch_time(torch, compiled, c.torch_inputs, on_gpu, args.budget_s, args.repeat)
    except Exception as e:  # report it; the other columns stand
        print(f"{c.row['key']}: torch.compile(mode={mode!r}) failed: {type(e).__name__}: "
              f"{str(e)[:200]}", flush=True)
        return None


def run(args):
    import torch

    import ember
    d = pathlib.Path(args.dir)
    manifest = json.loads((d / "manifest.json").read_text())
    precision = manifest.get("precision", "highest")
    torch_reference_mode(torch, precision)
    if "entries" not in manifest:
        print(f"error: {d / 'manifest.json'} was written by an older gpu_families.py (no "
              "'entries'); export it again", file=sys.stderr)
        return 2
    if manifest["target"].startswith("cuda") and not ember.cuda_available():
        print(f"error: {d} holds GPU code (target {manifest['target']!r}) and this machine has "
              "no CUDA GPU (ember.cuda_available() is False): run it on a GPU machine "
              "(scripts/gpu_run.sh), or export with --target llvm", file=sys.stderr)
        return 1
    only = set(args.only.split(",")) if args.only else None
    known = set(manifest["entries"]) | {e["model"] for e in manifest["entries"].values()}
    if only and only - known:
        print(f"error: --only names {', '.join(sorted(only - known))}, which {d} does not hold; "
              f"its entries: {', '.join(manifest['entries'])}", file=sys.stderr)
        return 2
    rows, failures, on_gpu = [], [], False
    for key, entry in manifest["entries"].items():
        if only and key not in only and entry["model"] not in only:
            continue
        try:
            c = check_entry(ember, torch, d, key, entry, precision,
                            cuda_graph=args.cuda_graph != "off")
            row = c.row
            if not args.no_time:
                _time_entry(ember, torch, c, args, precision)
            if args.profile:
                print(f"#### profile of {key}")
                c.module.profile(repeat=3)
            del c
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        except Exception as e:  # report it, run the others
            failures.append(key)
            rows.append({"key": key, "error": f"{type(e).__name__}: {str(e)[:300]}"})
            print(f"{key}: {rows[-1]['error']}", flush=True)
            continue
        on_gpu |= row["device"] == "cuda"
        if not row["ok"]:
            failures.append(key)
        rows.append(row)
        ms = lambda k: f"{row[k]:.4g} ms" if k in row else "-"  # noqa: E731
        graph = (f", graph replay err {row['err_graph']:.2e} {ms('graph_ms')}"
                 if "err_graph" in row else "")
        compiled = f", torch.compile {ms('compile_ms')}" if "compile_ms" in row else ""
        print(f"{key}: err {row['err_torch']:.2e} (scale {row['scale']:.3g}) Ember "
              f"{ms('ember_ms')}{graph} PyTorch {ms('torch_ms')}{compiled}",
              flush=True)

    install = "runtime-only" if ember.RUNTIME_ONLY else "full"
    off = manifest.get("disabled_passes")
    title = (f"{_device_name(torch, on_gpu)}: target {manifest['target']!r}"
             f"{', built without ' + ', '.join(off) if off else ''}, PyTorch "
             f"{torch.__version__} ({_torch_mode(precision)}), Ember {install} install, "
             f"GEMM precision {precision}, medians")
    _print_table([r for r in rows if "error" in r or r["batch"] == 1], title + ", batch 1")
    big = [r for r in rows if "error" not in r and r["batch"] != 1]
    if big:
        _print_table(big, title + ", batch > 1")
    print("\nEmber / PyTorch below 1: Ember is faster (PyTorch eager in both ratios; \"graph\": "
          "Ember replaying its CUDA graph, GPU only). The zoo is narrow (tests/python/"
          "models.py); the full-size rows are benchmarks/e2e.py's models.")
    if failures:
        print(f"FAILED or disagreeing with the reference: {', '.join(failures)}")
    return 1 if failures else 0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    e = sub.add_parser("export", help="build and export every entry (full Ember)")
    e.add_argument("dir")
    e.add_argument("--target", default="cuda", help='"cuda", "cuda -arch=sm_90" or "llvm"')
    e.add_argument("--families", help="zoo families, comma-separated (default: all of "
                   "tests/python/models.py; '' for none)")
    e.add_argument("--zoo-batch", type=int, default=1)
    e.add_argument("--full", default=DEFAULT_FULL,
                   help=f"full-size models of benchmarks/e2e.py (default {DEFAULT_FULL})")
    e.add_argument("--batches", default="1,32", help="batches of the full-size models")
    e.add_argument("--precision", default="highest", choices=sorted(PRECISION_RTOL),
                   help="PassContext cuda.matmul_precision: tensor cores for the GEMMs")
    e.add_argument("--disabled-passes", default=[], type=lambda s: [p for p in s.split(",") if p],
                   help="passes to build without, comma-separated (FuseOps: the unfused build)")
    e.set_defaults(func=export)
    r = sub.add_parser("run", help="load, check and time the exported entries (runtime only)")
    r.add_argument("dir")
    r.add_argument("--only", help="comma-separated entries or model names")
    r.add_argument("--budget-s", type=float, default=2.0,
                   help="about this many seconds of timed runs per engine and entry")
    r.add_argument("--repeat", type=int, default=50, help="at most this many measurements")
    r.add_argument("--no-time", action="store_true", help="check only")
    r.add_argument("--profile", action="store_true", help="print each entry's kernel times")
    r.add_argument("--torch-compile", default="off",
                   choices=("off", "default", "reduce-overhead", "max-autotune"),
                   help="also time torch.compile(model, mode=...) (compiling takes seconds "
                        "to minutes per model)")
    r.add_argument("--cuda-graph", choices=("on", "off", "both"), default="both",
                   help="time Ember on the GPU replaying its CUDA graph, launching every "
                   "kernel, or both (default); the CPU has no graph")
    r.set_defaults(func=run)
    args = p.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
