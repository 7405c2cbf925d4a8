"""Dynamic shapes (issue 44): Ember's one build for a range of input shapes against an Ember
build for each exact shape, ONNX Runtime with symbolic dims and PyTorch eager.

    PYTHONPATH=python python3 benchmarks/dynamic.py [--models bert,gpt2,resnet50]
        [--shapes 1x7,1x128] [--threads 1,2] [--rounds 5] [--seconds 0.3] [--quick]
        [--json out.json]

Models (random weights, fixed seeds, eval mode):
- bert: transformers BertModel(BertConfig(attn_implementation="sdpa")), the BERT-base
  encoder (12 layers), inputs input_ids and attention_mask, output last_hidden_state;
  Dims batch in [1, 16], seq in [1, 512];
- gpt2: transformers GPT2Model(GPT2Config(n_layer=1, use_cache=False)), one GPT-2 block,
  the same inputs, output and Dims;
- resnet50: benchmarks/e2e.py's ResNet-50 (tests/python/models.py, torchvision's layout,
  no torchvision), a Bx3x224x224 image; Dim batch in [1, 32].
Shapes are BxS (tokens) for the text models and B (224x224 images) for resnet50. The text
models' attention_mask pads the last quarter of the last sequence (S >= 4).

Per model, once: Ember's dynamic build (from_pytorch with torch.export Dims, ember.build,
one GraphModule reused at every shape) and one ONNX export with symbolic dims
(benchmarks/e2e.py's export_onnx: TorchScript exporter with dynamic_axes, else the dynamo
one), one ORT session per thread count. Per shape, once: an Ember static build
(from_pytorch without dynamic_shapes), shared by the thread counts. Per shape and thread
count (ember.set_num_threads, torch.set_num_threads, ORT intra_op_num_threads, as in
e2e.py): e2e.py's interleaved rounds, the engine order rotated each round; calls per round
follow from the warm-up time (about --seconds per engine per round, at least 1 call), so a
big shape makes fewer calls. The table gives medians in ms, dynamic / static, dynamic /
ORT, dynamic / PyTorch, the 1-minute load average when the row started (this process's own
threads count in it; well above the thread count, other processes competed for the cores)
and each engine's largest error against eager (relative to the output's largest magnitude;
MISMATCH above e2e.py's tolerance). An Ember failure (import, build, run) is reported in the
table with its error, and the rest go on. Nothing is asserted.
"""
import argparse
import inspect
import json
import os
import platform
import sys
import tempfile
import time

import numpy as np
import torch
from torch.export import Dim

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e  # noqa: E402  (engines, ONNX export, interleaved measuring, checks)
from zoo import first_line  # noqa: E402

import ember  # noqa: E402

TEXT_SHAPES = [(1, 1), (1, 7), (1, 64), (1, 127), (1, 128), (1, 200), (1, 384), (1, 512),
               (3, 128), (16, 128)]
TEXT_AXES = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}}


class LastHidden(torch.nn.Module):
    """A transformers model called with input_ids and attention_mask, returning
    last_hidden_state."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask):
        return self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state


def _bert():
    import transformers
    torch.manual_seed(0)
    cfg = transformers.BertConfig(attn_implementation="sdpa")
    return LastHidden(transformers.BertModel(cfg)).eval(), cfg.vocab_size


def _gpt2():
    import transformers
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(n_layer=1, use_cache=False)
    return LastHidden(transformers.GPT2Model(cfg)).eval(), cfg.vocab_size


def _resnet50():
    return e2e.MODELS["resnet50"][1]().eval(), None


def _text_inputs(vocab, shape):
    b, s = shape
    g = torch.Generator().manual_seed(b * 1000 + s)
    ids = torch.randint(0, vocab, (b, s), generator=g)
    mask = torch.ones(b, s, dtype=torch.int64)
    if s >= 4:
        mask[-1, s - s // 4:] = 0
    return ids, mask


def _image_inputs(_, shape):
    g = torch.Generator().manual_seed(shape[0])
    return (torch.randn(shape[0], 3, 224, 224, generator=g),)


# name -> description, make() -> (model, vocab), Dim ranges, axes per input name (input
# names are the forward's arguments; resnet50's are read off it), inputs(vocab, shape),
# the example shape the dynamic export traces (no size 1: torch.export specializes those),
# the shapes, the --quick shapes.
MODELS = {
    "bert": dict(desc="BERT-base encoder, 12 layers", make=_bert,
                 dims={"batch": (1, 16), "seq": (1, 512)}, axes=TEXT_AXES,
                 inputs=_text_inputs, example=(2, 16), shapes=TEXT_SHAPES,
                 quick=[(1, 7), (1, 128)]),
    "gpt2": dict(desc="GPT-2 block (n_layer=1)", make=_gpt2,
                 dims={"batch": (1, 16), "seq": (1, 512)}, axes=TEXT_AXES,
                 inputs=_text_inputs, example=(2, 16), shapes=TEXT_SHAPES,
                 quick=[(1, 7), (1, 128)]),
    "resnet50": dict(desc="ResNet-50, 224x224", make=_resnet50, dims={"batch": (1, 32)},
                     axes={None: {0: "batch"}}, inputs=_image_inputs, example=(2,),
                     shapes=[(1,), (5,), (32,)], quick=[(1,), (5,)]),
}
ENGINES = ("dynamic", "static", "ort", "torch")
LABEL = {"dynamic": "Ember dynamic", "static": "Ember static", "ort": "ORT",
         "torch": "PyTorch"}


def shape_str(shape):
    return "x".join(map(str, shape))


def dynamic_shapes_of(spec, model):
    """(input names, {input name: {axis: Dim}}): the forward's argument names, and Dims
    made from the spec's ranges (one Dim object per name, shared by the inputs)."""
    names = list(inspect.signature(model.forward).parameters)
    dims = {n: Dim(n, min=lo, max=hi) for n, (lo, hi) in spec["dims"].items()}
    axes = spec["axes"]
    if None in axes:  # one input, named by the forward
        axes = {names[0]: axes[None]}
    return names, {name: {a: dims[d] for a, d in ax.items()} for name, ax in axes.items()}


def symbols_expected(spec, shape, names):
    """{Dim name: its size at this shape} read off the axes of the inputs."""
    axes = spec["axes"]
    ax = axes[None] if None in axes else axes[names[0]]
    return {d: shape[a] for a, d in ax.items()}


class Run:
    """Prints a line, times a step, records failures."""

    def __init__(self):
        self.errors = []  # (model, what, message): footnotes of the tables

    def note(self, model, what, e):
        msg = first_line(e)
        self.errors.append((model, what, msg))
        print(f"  {what} FAILED: {msg}", flush=True)
        return len(self.errors)


def build_dynamic(name, spec, model, args, run, setup):
    names, dyn = dynamic_shapes_of(spec, model)
    example = spec["inputs"](setup["vocab"], spec["example"])
    try:
        t0 = time.perf_counter()
        mod, params = ember.frontend.from_pytorch(model, example, dynamic_shapes=dyn)
        setup["dynamic_import_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        lib = ember.build(mod, target=args.target, params=params)
        setup["dynamic_build_s"] = time.perf_counter() - t0
        module = ember.GraphModule(lib)
        print(f"  Ember dynamic: import {setup['dynamic_import_s']:.1f} s, build "
              f"{setup['dynamic_build_s']:.1f} s, symbols {module.symbols}", flush=True)
        return lib, module, None
    except Exception as e:  # noqa: BLE001  (report it in the table, go on)
        return None, None, run.note(name, "Ember dynamic import/build", e)


def export_ort(name, spec, model, tmp, run, setup):
    names, dyn = dynamic_shapes_of(spec, model)
    example = spec["inputs"](setup["vocab"], spec["example"])
    path = os.path.join(tmp, f"{name}.onnx")
    try:
        t0 = time.perf_counter()
        exporter = e2e.export_onnx(model, example, path, input_names=names, dynamic_shapes=dyn)
        setup["onnx_export_s"] = time.perf_counter() - t0
        print(f"  ONNX: exported once with symbolic dims ({exporter} exporter) in "
              f"{setup['onnx_export_s']:.1f} s", flush=True)
        return path, None
    except Exception as e:  # noqa: BLE001
        return None, run.note(name, "ONNX export", e)


def build_static(name, shape, inputs, model, args, run, setup):
    try:
        t0 = time.perf_counter()
        mod, params = ember.frontend.from_pytorch(model, inputs)
        t_import = time.perf_counter() - t0
        t0 = time.perf_counter()
        lib = ember.build(mod, target=args.target, params=params)
        t_build = time.perf_counter() - t0
        setup.setdefault("static_s", {})[shape_str(shape)] = [t_import, t_build]
        print(f"  Ember static {shape_str(shape)}: import {t_import:.1f} s, build "
              f"{t_build:.1f} s", flush=True)
        return lib, None
    except Exception as e:  # noqa: BLE001
        return None, run.note(name, f"Ember static build at {shape_str(shape)}", e)


def make_engines(spec, shape, inputs, built, threads, sessions, run, name, row):
    """The engines that run at this shape; a failing one gets its footnote in row."""
    engines = []

    def add(key, make):
        if isinstance(built.get(key), int):  # a footnote number: it failed before
            row["fail"][key] = built[key]
            return
        try:
            eng = make()
            eng.name = key
            engines.append(eng)
        except Exception as e:  # noqa: BLE001  (set_input of a shape out of range, ...)
            row["fail"][key] = run.note(name, f"{LABEL[key]} at {shape_str(shape)}", e)

    if "dynamic" in built:
        add("dynamic", lambda: e2e.ember_engine(built["dynamic"][0], inputs,
                                                module=built["dynamic"][1]))
    if "static" in built:
        add("static", lambda: e2e.ember_engine(built["static"], inputs))
    if "ort" in built:
        def ort():
            if threads not in sessions:
                sessions[threads] = e2e.ort_session(built["ort"], threads)
            return e2e.ort_engine(None, inputs, threads, session=sessions[threads])
        add("ort", ort)
    add("torch", lambda: e2e.torch_engine(built["model"], inputs))
    return engines


def measure_shape(name, spec, shape, inputs, expected, built, threads, sessions, args, run):
    row = {"model": name, "shape": shape_str(shape), "threads": threads, "ms": {},
           "check": {}, "fail": {}, "load": os.getloadavg()[0]}
    engines = make_engines(spec, shape, inputs, built, threads, sessions, run, name, row)
    for eng in list(engines):  # one call each first: a run-time failure drops the engine
        try:
            with torch.inference_mode():
                eng.call()
        except Exception as e:  # noqa: BLE001
            row["fail"][eng.name] = run.note(name, f"{LABEL[eng.name]} run at "
                                             f"{shape_str(shape)}", e)
            engines.remove(eng)
    with torch.inference_mode():
        result = e2e.measure(engines, args.rounds, args.repeat, args.seconds, args.warmup_s,
                             rotate=True)
    for eng in engines:
        row["ms"][eng.name] = result[eng.name][0]
        row.setdefault("samples_ms", {})[eng.name] = result[eng.name][2]
        if eng.name != "torch":
            a, r, ok = e2e.check(eng.outputs(), expected)
            row["check"][eng.name] = {"abs": a, "rel": r, "ok": bool(ok)}
    if "dynamic" in row["ms"]:
        got = built["dynamic"][1].symbol_values
        want = symbols_expected(spec, shape, built["names"])
        if {k: got.get(k) for k in want} != want:
            row["symbols"] = f"symbol_values {got} != {want}"
    line = ", ".join(f"{LABEL[k]} {e2e.fmt_ms(v[0])} ms (x{v[1]})" for k, v in result.items())
    print(f"  {shape_str(shape)}, {threads} thread(s): {line}", flush=True)
    return row


def run_model(name, args, run, rows, setups):
    spec = MODELS[name]
    model, vocab = spec["make"]()
    setup = {"model": name, "vocab": vocab}
    setups.append(setup)
    print(f"\n## {name}: {spec['desc']}, dims "
          + ", ".join(f"{d} in [{lo}, {hi}]" for d, (lo, hi) in spec["dims"].items()), flush=True)
    built = {"model": model, "names": dynamic_shapes_of(spec, model)[0]}
    if "dynamic" in args.engines:
        lib, module, fail = build_dynamic(name, spec, model, args, run, setup)
        built["dynamic"] = (lib, module) if fail is None else fail
    tmp = tempfile.TemporaryDirectory(prefix="ember_dynamic_")
    if "ort" in args.engines:
        path, fail = export_ort(name, spec, model, tmp.name, run, setup)
        built["ort"] = path if fail is None else fail
    sessions = {}
    shapes = args.shapes or (spec["quick"] if args.quick else spec["shapes"])
    for shape in shapes:
        inputs = spec["inputs"](vocab, shape)
        with torch.inference_mode():
            expected = e2e._as_list(model(*inputs))
        built.pop("static", None)  # one static build per shape, shared by the thread counts
        if "static" in args.engines:
            lib, fail = build_static(name, shape, inputs, model, args, run, setup)
            built["static"] = lib if fail is None else fail
        for threads in args.thread_counts:
            ember.set_num_threads(threads)
            torch.set_num_threads(threads)
            rows.append(measure_shape(name, spec, shape, inputs, expected, built, threads,
                                      sessions, args, run))
    sessions.clear()
    tmp.cleanup()


def _cell(row, eng):
    if eng in row["fail"]:
        return f"error [{row['fail'][eng]}]"
    return e2e.fmt_ms(row["ms"].get(eng))


def print_table(rows, threads, errors):
    print(f"\n### {threads} thread{'s' if threads > 1 else ''}\n")
    print("| model | shape | Ember dynamic ms | Ember static ms | dynamic/static | ORT ms "
          "| PyTorch ms | dynamic/ORT | dynamic/PyTorch | load | max error rel vs eager |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    used = set()
    for r in rows:
        if r["threads"] != threads:
            continue
        used.update(r["fail"].values())
        ms = r["ms"]
        errs = [f"{LABEL[e].replace('Ember ', '')} {c['rel']:.0e}"
                + ("" if c["ok"] else " MISMATCH") for e, c in r["check"].items()]
        if "symbols" in r:
            errs.append(r["symbols"])
        print(f"| {r['model']} | {r['shape']} | {_cell(r, 'dynamic')} | {_cell(r, 'static')} "
              f"| {e2e.ratio(ms.get('dynamic'), ms.get('static'))} | {_cell(r, 'ort')} "
              f"| {_cell(r, 'torch')} | {e2e.ratio(ms.get('dynamic'), ms.get('ort'))} "
              f"| {e2e.ratio(ms.get('dynamic'), ms.get('torch'))} | {r['load']:.1f} "
              f"| {'; '.join(errs) or '-'} |")
    for i, (model, what, msg) in enumerate(errors, 1):
        if i in used:
            print(f"\n[{i}] {model}, {what}: {msg}")


def print_setup(setups):
    print("\n### Setup times (s)\n")
    print("| model | Ember dynamic import + build | ONNX export (once) "
          "| Ember static import + build per shape |")
    print("|---|---:|---:|---|")
    for s in setups:
        dyn = ("-" if "dynamic_build_s" not in s else
               f"{s['dynamic_import_s']:.1f} + {s['dynamic_build_s']:.1f}")
        onnx = f"{s['onnx_export_s']:.1f}" if "onnx_export_s" in s else "-"
        static = ", ".join(f"{k}: {a:.1f} + {b:.1f}" for k, (a, b) in
                           s.get("static_s", {}).items()) or "-"
        print(f"| {s['model']} | {dyn} | {onnx} | {static} |")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default=",".join(MODELS),
                   help=f"comma list (default all): {', '.join(MODELS)}")
    p.add_argument("--shapes", default=None,
                   help="comma list of shapes for every model given, BxS for bert/gpt2 "
                        "(1x128), B for resnet50 (default: the issue's shapes)")
    p.add_argument("--threads", default="1,2", help="comma list of thread counts (default 1,2)")
    p.add_argument("--engines", default=",".join(ENGINES),
                   help="comma list of dynamic,static,ort,torch (torch, the reference, "
                        "always runs)")
    e2e.add_measuring_args(p, seconds=0.3,
                           quick="two shapes per model, 3 rounds of about 0.05 s per engine")
    args = p.parse_args()
    args.models = e2e.chosen(p, args.models, MODELS, "model")
    args.engines = e2e.chosen(p, args.engines, ENGINES, "engine")
    if args.shapes:
        args.shapes = [tuple(int(x) for x in s.split("x")) for s in args.shapes.split(",") if s]
        for m in args.models:
            rank = len(MODELS[m]["example"])
            if any(len(s) != rank for s in args.shapes):
                p.error(f"--shapes: {m} takes shapes of {rank} number(s)")
    args.thread_counts = [int(t) for t in args.threads.split(",") if t]
    args.rounds = args.rounds or (3 if args.quick else 5)
    args.seconds = args.seconds or (0.05 if args.quick else 0.3)
    args.warmup_s = 0.1 if args.quick else 0.5
    return args


def main():
    args = parse_args()
    import onnxruntime
    print(f"# Ember dynamic shapes: {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores, torch {torch.__version__}, onnxruntime "
          f"{onnxruntime.__version__}, target {args.target!r}, {args.rounds} rounds (order "
          "rotated), " + (f"{args.repeat} calls per round" if args.repeat else
                          f"about {args.seconds} s per engine per round")
          + f", load average {os.getloadavg()[0]:.1f} at start", flush=True)
    if os.getloadavg()[0] >= 1.0:
        print(f"# WARNING: load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores "
              "before this run: other processes compete for the cores, so timings are noisy")
    run, rows, setups = Run(), [], []
    t_total = time.perf_counter()
    for name in args.models:
        run_model(name, args, run, rows, setups)
    print_setup(setups)
    for threads in args.thread_counts:
        print_table(rows, threads, run.errors)
    mismatches = [f"{LABEL[e]} on {r['model']} {r['shape']} at {r['threads']} thread(s)"
                  for r in rows for e, c in r["check"].items() if not c["ok"]]
    print("\nMISMATCH against PyTorch eager: " + "; ".join(mismatches) if mismatches else
          f"\nAll outputs match PyTorch eager (atol {e2e.ATOL}, rtol {e2e.RTOL} of the "
          "output scale).")
    print(f"Total time {time.perf_counter() - t_total:.0f} s, load average "
          f"{os.getloadavg()[0]:.1f} at the end")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"target": args.target, "torch": torch.__version__,
                       "cores": os.cpu_count(), "rows": rows, "setup": setups,
                       "errors": run.errors}, fh, indent=1)
        print(f"Rows written to {args.json}")


if __name__ == "__main__":
    main()
