"""Whole models at their real size: Ember against PyTorch eager, torch.compile and ONNX Runtime,
in one run.

    PYTHONPATH=python python3 benchmarks/e2e.py [--models resnet18,bert_s128] [--batch 1,8]
        [--threads 1,2] [--engines ember,torch,compile,ort] [--rounds 5] [--repeat N]
        [--quick] [--target "llvm -vector-bits=256"] [--json out.json]

Models (plain torch.nn, no torchvision; weights random but fixed): ResNet-18 and ResNet-50
(tests/python/models.py at width 64, 1000 classes: torchvision's layout), MobileNetV2 (full
torchvision widths, defined here), the TVM forum net (1x64x128x128) and two variants
(96x100x100; 100x57x57, widths no vector divides), a net of channel counts
no vector block divides (33 and 100 at 56x56, defined here), a BERT-base encoder layer
(dim 768, 12 heads, FFN 3072) at sequence 128 and 384, an MLP 1024-2048-2048-10 and an LSTM
cell (input and hidden 128) unrolled for 16 steps. CNN inputs are Bx3x224x224, fp32.

What is timed, per engine: Ember `GraphModule.run()` with the inputs already set (as
GraphModule.benchmark does); PyTorch eager `model(*inputs)` under torch.inference_mode();
torch.compile (default inductor backend, compiled once per thread count); ONNX Runtime
`InferenceSession.run` (CPUExecutionProvider, exported with torch.onnx.export). Every engine
runs at the same thread count (ember.set_num_threads, torch.set_num_threads, ORT
intra_op_num_threads with inter_op 1). After warm-up calls, the engines take turns: in each
round each engine makes its calls back to back; calls per round are chosen from the warm-up
time (about --seconds per engine per round, at least 1) unless --repeat fixes them. The table
gives the median of all timed calls in ms and the ratios to PyTorch eager (below 1: faster
than eager), and each engine's largest error against eager's output (abs/rel to the output's
largest magnitude; MISMATCH when it is above 1e-3 + 1e-3 * that magnitude). Ember's import
and build times are printed per model. Never part of the test pass/fail; nothing is asserted
about timings.
"""
import argparse
import contextlib
import io
import json
import os
import platform
import statistics
import sys
import tempfile
import time
import warnings

import numpy as np
import torch
import torch.nn as nn

import ember

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "python"))
import models  # noqa: E402  (the model zoo shared with the tests)

ENGINES = ("ember", "torch", "compile", "ort")
ENGINE_LABEL = {"ember": "Ember", "torch": "PyTorch", "compile": "compile", "ort": "ORT"}
RTOL = ATOL = 1e-3


# --------------------------------------------------------------------------------- models

class MobileNetV2Full(nn.Module):
    """torchvision's MobileNetV2 (width multiplier 1.0): 32-channel stem, the seven inverted
    residual stages of the paper, a 1280-channel last conv, dropout + linear classifier.
    Built from the zoo's InvertedResidual block (plain torch.nn)."""

    CONFIG = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
              (6, 160, 3, 2), (6, 320, 1, 1)]  # expand, channels, repeats, first stride

    def __init__(self, classes=1000):
        super().__init__()
        layers = [nn.Conv2d(3, 32, 3, 2, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU6(True)]
        cin = 32
        for t, c, n, s in self.CONFIG:
            for i in range(n):
                layers.append(models.InvertedResidual(cin, c, s if i == 0 else 1, t))
                cin = c
        layers += [nn.Conv2d(cin, 1280, 1, bias=False), nn.BatchNorm2d(1280), nn.ReLU6(True)]
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(1280, classes))

    def forward(self, x):
        x = nn.functional.adaptive_avg_pool2d(self.features(x), (1, 1))
        return self.classifier(torch.flatten(x, 1))


class UnrolledLSTM(nn.Module):
    """The zoo's LSTMCellModel run over `steps` time steps of x [B, steps, inp]; returns the
    final (h, c)."""

    def __init__(self, inp=128, hidden=128, steps=16):
        super().__init__()
        self.steps = steps
        self.cell = models.LSTMCellModel(inp, hidden)

    def forward(self, x, h, c):
        for t in range(self.steps):
            h, c = self.cell(x[:, t], h, c)
        return h, c


class GPT2Block(nn.Module):
    """GPT-2's decoder block: pre-norm causal self-attention (one fused q/k/v projection,
    scaled_dot_product_attention with is_causal) and a GELU (tanh) MLP of 4x the width,
    each around a residual."""

    def __init__(self, dim=768, heads=12):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.fc, self.out = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (t.reshape(b, n, self.heads, d // self.heads).transpose(1, 2)
                   for t in (q, k, v))
        y = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, n, d))
        return x + self.out(nn.functional.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class AwkwardChannels(nn.Module):
    """Channel counts that no vector block divides (33 and 100, which the blocked layout pads
    to whole vectors) at 56x56: two residual stages of conv-BN-ReLU (3x3 at 33 channels; 1x1
    up to 100, 3x3, 1x1 back), global average pooling, a 10-class linear."""

    def __init__(self, c=33, wide=100, classes=10):
        super().__init__()

        def cbr(i, o, k):
            return [nn.Conv2d(i, o, k, padding=k // 2, bias=False), nn.BatchNorm2d(o),
                    nn.ReLU(True)]
        self.a = nn.Sequential(*cbr(c, c, 3), *cbr(c, c, 3))
        self.b = nn.Sequential(*cbr(c, wide, 1), *cbr(wide, wide, 3), *cbr(wide, c, 1))
        self.fc = nn.Linear(c, classes)

    def forward(self, x):
        x = x + self.a(x)
        x = x + self.b(x)
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, (1, 1)), 1))


def _image(batch):
    return (torch.randn(batch, 3, 224, 224),)


# name -> (description, make_model(), make_inputs(batch))
MODELS = {
    "resnet18": ("ResNet-18, 224x224", lambda: models._seeded(models.resnet18)(64, 1000), _image),
    "resnet50": ("ResNet-50, 224x224", lambda: models._seeded(models.resnet50)(64, 1000), _image),
    "mobilenet_v2": ("MobileNetV2 1.0, 224x224", lambda: models._seeded(MobileNetV2Full)(),
                     _image),
    "forum": ("forum net, 64x128x128", lambda: models._seeded(models.ForumNet)(64),
              lambda b: (torch.randn(b, 64, 128, 128),)),
    # Its variants: another channel count, and widths that no vector divides.
    "forum_96x100": ("forum net, 96x100x100", lambda: models._seeded(models.ForumNet)(96),
                     lambda b: (torch.randn(b, 96, 100, 100),)),
    "forum_100x57": ("forum net, 100x57x57", lambda: models._seeded(models.ForumNet)(100),
                     lambda b: (torch.randn(b, 100, 57, 57),)),
    "awkward": ("33/100 channels, 56x56", lambda: models._seeded(AwkwardChannels)(),
                lambda b: (torch.randn(b, 33, 56, 56),)),
    "bert_s128": ("BERT-base layer, seq 128",
                  lambda: models._seeded(models.EncoderLayer)(768, 12, 3072),
                  lambda b: (torch.randn(b, 128, 768),)),
    "bert_s384": ("BERT-base layer, seq 384",
                  lambda: models._seeded(models.EncoderLayer)(768, 12, 3072),
                  lambda b: (torch.randn(b, 384, 768),)),
    "gpt2_block": ("GPT-2 block, seq 128", lambda: models._seeded(GPT2Block)(),
                   lambda b: (torch.randn(b, 128, 768),)),
    "mlp": ("MLP 1024-2048-2048-10", lambda: models._seeded(models.MLP)((1024, 2048, 2048, 10)),
            lambda b: (torch.randn(b, 1024),)),
    "lstm": ("LSTM cell 128, 16 steps", lambda: models._seeded(UnrolledLSTM)(128, 128, 16),
             lambda b: (torch.randn(b, 16, 128), torch.randn(b, 128), torch.randn(b, 128))),
}


def make(name, batch):
    """(model in eval mode, example inputs) with fixed weights and inputs."""
    _, make_model, make_inputs = MODELS[name]
    model = make_model().eval()
    torch.manual_seed(1)
    return model, make_inputs(batch)


# -------------------------------------------------------------------------------- engines

class Engine:
    """One way of running a model: call() runs it once, outputs() returns its outputs as NumPy
    arrays (after a call), setup_s is the time spent preparing it."""

    def __init__(self, name, call, outputs, setup_s=0.0):
        self.name, self.call, self.outputs, self.setup_s = name, call, outputs, setup_s


def _as_list(out):
    if isinstance(out, torch.Tensor):
        return [out.detach().numpy().copy()]
    return [o.detach().numpy().copy() for o in out]


def ember_engine(lib, inputs, module=None):
    """module: a GraphModule of `lib` to reuse (a dynamic-shape build run at several input
    shapes keeps one module); a new one by default."""
    m = module if module is not None else ember.GraphModule(lib)
    for i, x in enumerate(inputs):
        m.set_input(i, x.numpy())
    n = m.get_num_outputs()
    return Engine("ember", m.run, lambda: [np.array(m.get_output(i)) for i in range(n)])


def torch_engine(model, inputs):
    last = {}

    def call():
        last["out"] = model(*inputs)
    return Engine("torch", call, lambda: _as_list(last["out"]))


def compile_engine(model, inputs):
    """torch.compile with the default (inductor) backend; the compile happens on the first
    call, so it is done (and timed) here. Raises whatever compiling raises."""
    torch._dynamo.reset()
    compiled = torch.compile(model)
    last = {}

    def call():
        last["out"] = compiled(*inputs)
    t0 = time.perf_counter()
    with torch.inference_mode():
        call()
    return Engine("compile", call, lambda: _as_list(last["out"]), time.perf_counter() - t0)


def export_onnx(model, inputs, path, input_names=None, dynamic_shapes=None):
    """torch.onnx.export to `path`: the TorchScript exporter (dynamo=False) first, the
    torch.export-based one if that fails. Returns the exporter used. input_names: the ONNX
    inputs' names (default in0, in1, ...). dynamic_shapes: {input name: {axis: torch.export
    Dim}} for one model over a range of shapes (symbolic dims): the TorchScript exporter gets
    them as dynamic_axes named after the Dims, the other one as they are (its keys are then
    the forward's argument names, so name the inputs after them)."""
    names = list(input_names) if input_names else [f"in{i}" for i in range(len(inputs))]
    errors = []
    for dynamo in (False, True):
        kwargs = {}
        if dynamic_shapes and dynamo:
            kwargs["dynamic_shapes"] = dynamic_shapes
        elif dynamic_shapes:
            kwargs["dynamic_axes"] = {name: {axis: dim.__name__ for axis, dim in axes.items()}
                                      for name, axes in dynamic_shapes.items()}
        try:
            with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
                warnings.simplefilter("ignore")
                torch.onnx.export(model, tuple(inputs), path, dynamo=dynamo, input_names=names,
                                  **kwargs)
            return "dynamo" if dynamo else "torchscript"
        except Exception as e:  # noqa: BLE001  (any exporter failure: try the other one)
            errors.append(f"dynamo={dynamo}: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
    raise RuntimeError("torch.onnx.export failed: " + "; ".join(errors))


def ort_session(path, threads, spinning=True):
    """An ONNX Runtime CPU session at `threads` intra-op threads (inter-op 1, sequential).
    spinning=False: ORT's intra-op threads block instead of spinning for work (its
    session.intra_op.allow_spinning; on by default)."""
    import onnxruntime as ort
    opts = ort.SessionOptions()
    if not spinning:
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    return ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])


def ort_engine(path, inputs, threads, spinning=True, session=None):
    """Runs the ONNX model at `path` in a new ort_session(path, threads, spinning), or in
    `session` (one session of a model with symbolic dims serves every input shape)."""
    t0 = time.perf_counter()
    sess = session if session is not None else ort_session(path, threads, spinning)
    feed = {i.name: x.numpy() for i, x in zip(sess.get_inputs(), inputs)}
    last = {}

    def call():
        last["out"] = sess.run(None, feed)
    return Engine("ort", call, lambda: [np.array(o) for o in last["out"]],
                  time.perf_counter() - t0)


# ------------------------------------------------------------------------------- measuring

def check(outputs, expected):
    """(max abs error, that error relative to the largest |expected|, ok) over all outputs."""
    if len(outputs) != len(expected):
        return float("inf"), float("inf"), False
    err, scale = 0.0, 0.0
    for y, e in zip(outputs, expected):
        y = np.asarray(y, dtype=np.float64).reshape(-1)
        e = np.asarray(e, dtype=np.float64).reshape(-1)
        if y.shape != e.shape:
            return float("inf"), float("inf"), False
        err = max(err, float(np.abs(y - e).max()) if e.size else 0.0)
        scale = max(scale, float(np.abs(e).max()) if e.size else 0.0)
    if not np.isfinite(err):
        return err, err, False
    return err, err / max(scale, 1e-30), err <= ATOL + RTOL * scale


def measure(engines, rounds, repeat, seconds, warmup_s, rotate=False):
    """Interleaved timing. Each engine gets warm-up calls (at least 2, up to warmup_s), then
    `rounds` rounds in which each engine makes its calls back to back. rotate: round r
    starts with engine r mod len(engines), so no engine always follows the same one.
    Returns {engine: (median ms, calls per round, all times)}."""
    per_round = {}
    for e in engines:
        times, t_start = [], time.perf_counter()
        while len(times) < 2 or (time.perf_counter() - t_start < warmup_s and len(times) < 20):
            t0 = time.perf_counter()
            e.call()
            times.append(time.perf_counter() - t0)
        typical = min(times[1:])
        per_round[e.name] = repeat if repeat else max(1, min(1000, int(seconds / typical)))
    samples = {e.name: [] for e in engines}
    for r in range(rounds):
        k = r % len(engines) if rotate else 0
        for e in engines[k:] + engines[:k]:
            n, out = per_round[e.name], samples[e.name]
            for _ in range(n):
                t0 = time.perf_counter()
                e.call()
                out.append((time.perf_counter() - t0) * 1e3)
    return {name: (statistics.median(t), per_round[name], t) for name, t in samples.items()}


# -------------------------------------------------------------------------------- reporting

def fmt_ms(ms):
    if ms is None:
        return "-"
    return f"{ms:.3f}" if ms < 10 else f"{ms:.1f}" if ms < 1000 else f"{ms:.0f}"


def ratio(a, b):
    return "-" if a is None or b is None else f"{a / b:.2f}"


def print_table(rows, threads, engines=ENGINES, labels=None, reference="torch",
                error_header="max error abs/rel vs eager"):
    """The rows at `threads` as a Markdown table: each engine's median ms (columns in
    `engines` order, headed by `labels`, default ENGINE_LABEL), each other engine's ratio to
    `reference`, and the errors in each row's "check"."""
    labels = labels or ENGINE_LABEL
    others = [e for e in engines if e != reference]
    print(f"\n### {threads} thread{'s' if threads > 1 else ''}\n")
    print("| model | batch | threads | " + " | ".join(f"{labels[e]} ms" for e in engines) + " | "
          + " | ".join(f"{labels[e]}/{labels[reference]}" for e in others)
          + f" | {error_header} |")
    print("|---|---:|---:|" + "---:|" * (len(engines) + len(others)) + "---|")
    for r in rows:
        if r["threads"] != threads:
            continue
        ms = r["ms"]
        errs = []
        for eng in others:
            if eng in r["check"]:
                c = r["check"][eng]
                errs.append(f"{labels[eng]} {c['abs']:.1e}/{c['rel']:.1e}"
                            + ("" if c["ok"] else " MISMATCH"))
        print(f"| {r['model']} | {r['batch']} | {r['threads']} | "
              + " | ".join(fmt_ms(ms.get(e)) for e in engines) + " | "
              + " | ".join(ratio(ms.get(e), ms.get(reference)) for e in others)
              + f" | {'; '.join(errs) or '-'} |")


def print_setup(setups):
    print("\n### Setup times (s)\n")
    print("| model | batch | Ember import | Ember build | Ember kernels | compile (1st call) "
          "| ONNX export | ORT session |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for s in setups:
        def f(key):
            v = s.get(key)
            return "-" if v is None else (", ".join(f"{x:.1f}" for x in v)
                                          if isinstance(v, list) else f"{v:.1f}")
        print(f"| {s['model']} | {s['batch']} | {f('ember_import_s')} | {f('ember_build_s')} "
              f"| {s.get('ember_kernels', '-')} | {f('compile_s')} | {f('onnx_export_s')} "
              f"| {f('ort_session_s')} |")


# ------------------------------------------------------------------------------------ main

def drop_ort_if_missing(engines, name):
    """Prints ONNX Runtime's version, or that it is skipped (removing `name` from `engines`)
    where it is not installed."""
    if name not in engines:
        return
    try:
        import onnxruntime
        print(f"# onnxruntime {onnxruntime.__version__}")
    except ImportError as e:
        print(f"ORT skipped: onnxruntime is not installed ({e}); scripts/setup.sh installs it")
        engines.remove(name)


def chosen(p, value, known, what):
    """The comma list `value`, every item one of `known`; else the parser's error, which names
    the unknown ones and the known."""
    items = [v for v in value.split(",") if v]
    bad = [v for v in items if v not in known]
    if bad:
        p.error(f"unknown {what}(s) {', '.join(bad)}; known: {', '.join(known)}")
    return items


def add_measuring_args(p, seconds, quick):
    """The options every interleaved benchmark takes (e2e.py, dynamic.py): rounds, calls
    per round, --quick, the target and the JSON output."""
    p.add_argument("--rounds", type=int, default=None, help="interleaved rounds (default 5)")
    p.add_argument("--repeat", type=int, default=0,
                   help="calls per engine per round (default: adaptive, see --seconds)")
    p.add_argument("--seconds", type=float, default=None,
                   help="adaptive calls per round aim at this many seconds per engine per "
                        f"round (default {seconds})")
    p.add_argument("--quick", action="store_true", help=quick)
    p.add_argument("--target", default="llvm", help='Ember target string (default "llvm")')
    p.add_argument("--json", metavar="PATH", help="also write the rows as JSON here")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default=",".join(MODELS),
                   help=f"comma list (default all): {', '.join(MODELS)}")
    p.add_argument("--batch", default="1", help="comma list of batch sizes (default 1)")
    p.add_argument("--threads", default="1,2", help="comma list of thread counts (default 1,2)")
    p.add_argument("--engines", default=",".join(ENGINES),
                   help="comma list of ember,torch,compile,ort (torch, the reference, always "
                        "runs)")
    add_measuring_args(p, seconds=0.5, quick="3 rounds of about 0.1 s per engine, short warm-up")
    args = p.parse_args()

    names = chosen(p, args.models, MODELS, "model")
    batches = [int(b) for b in args.batch.split(",") if b]
    thread_counts = [int(t) for t in args.threads.split(",") if t]
    engines = chosen(p, args.engines, ENGINES, "engine")
    if "torch" not in engines:
        engines.append("torch")  # the reference for the numerics and the ratios
    engines = [e for e in ENGINES if e in engines]
    rounds = args.rounds or (3 if args.quick else 5)
    seconds = args.seconds or (0.1 if args.quick else 0.5)
    warmup_s = 0.2 if args.quick else 1.0

    print(f"# Ember end-to-end: {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores, torch {torch.__version__}, target {args.target!r}, "
          f"engines {', '.join(engines)}, {rounds} rounds, "
          + (f"{args.repeat} calls per round" if args.repeat else
             f"about {seconds} s per engine per round")
          + ", load average %.1f at start" % os.getloadavg()[0])
    if os.getloadavg()[0] >= 1.0:
        print(f"# WARNING: load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores before "
              "this run: other processes compete for the cores, so timings (above all at more "
              "than 1 thread) are noisy")
    drop_ort_if_missing(engines, "ort")

    rows, setups, failed_reasons = [], [], set()
    t_total = time.perf_counter()

    def skip(engine, model, reason):
        key = (engine, reason)
        if key in failed_reasons:
            print(f"  {ENGINE_LABEL[engine]} skipped for {model} (same reason as above)")
        else:
            failed_reasons.add(key)
            print(f"  {ENGINE_LABEL[engine]} skipped for {model}: {reason}")

    for name in names:
        for batch in batches:
            t_model = time.perf_counter()
            model, inputs = make(name, batch)
            print(f"\n## {name} ({MODELS[name][0]}), batch {batch}, inputs "
                  f"{', '.join('x'.join(map(str, x.shape)) for x in inputs)}", flush=True)
            setup = {"model": name, "batch": batch}
            with torch.inference_mode():
                expected = _as_list(model(*inputs))

            lib = None
            if "ember" in engines:
                try:
                    t0 = time.perf_counter()
                    mod, params = ember.frontend.from_pytorch(model, inputs)
                    setup["ember_import_s"] = time.perf_counter() - t0
                    t0 = time.perf_counter()
                    lib = ember.build(mod, target=args.target, params=params)
                    setup["ember_build_s"] = time.perf_counter() - t0
                    setup["ember_kernels"] = len(lib.fusion_report())
                    print(f"  Ember: import {setup['ember_import_s']:.1f} s, build "
                          f"{setup['ember_build_s']:.1f} s, {setup['ember_kernels']} kernels",
                          flush=True)
                except Exception as e:  # noqa: BLE001
                    skip("ember", name, f"{type(e).__name__}: {str(e).splitlines()[0][:300]}")

            onnx_path = None
            tmpdir = tempfile.TemporaryDirectory(prefix="ember_e2e_")
            if "ort" in engines:
                try:
                    t0 = time.perf_counter()
                    path = os.path.join(tmpdir.name, f"{name}_b{batch}.onnx")
                    exporter = export_onnx(model, inputs, path)
                    setup["onnx_export_s"] = time.perf_counter() - t0
                    onnx_path = path
                    print(f"  ONNX: exported ({exporter} exporter) in "
                          f"{setup['onnx_export_s']:.1f} s", flush=True)
                except Exception as e:  # noqa: BLE001
                    skip("ort", name, str(e))

            for threads in thread_counts:
                ember.set_num_threads(threads)
                torch.set_num_threads(threads)
                built = []
                if lib is not None:
                    built.append(ember_engine(lib, inputs))
                built.append(torch_engine(model, inputs))
                if "compile" in engines:
                    try:
                        eng = compile_engine(model, inputs)
                        setup.setdefault("compile_s", []).append(eng.setup_s)
                        built.append(eng)
                    except Exception as e:  # noqa: BLE001
                        skip("compile", name,
                             f"{type(e).__name__}: {str(e).strip().splitlines()[0][:300]}"
                             if str(e).strip() else type(e).__name__)
                if onnx_path is not None:
                    try:
                        eng = ort_engine(onnx_path, inputs, threads)
                        setup.setdefault("ort_session_s", []).append(eng.setup_s)
                        built.append(eng)
                    except Exception as e:  # noqa: BLE001
                        skip("ort", name, f"{type(e).__name__}: {str(e).splitlines()[0][:300]}")

                with torch.inference_mode():
                    result = measure(built, rounds, args.repeat, seconds, warmup_s)
                    # Outputs of the last call of each engine (the inputs never change).
                    checks = {}
                    for eng in built:
                        if eng.name == "torch":
                            continue
                        a, r, ok = check(eng.outputs(), expected)
                        checks[eng.name] = {"abs": a, "rel": r, "ok": bool(ok)}
                        if not ok:
                            print(f"  !!! MISMATCH: {ENGINE_LABEL[eng.name]} on {name} batch "
                                  f"{batch} threads {threads}: max abs error {a:.3e}, "
                                  f"relative {r:.3e} (tolerance {ATOL} + {RTOL} x scale)")
                row = {"model": name, "batch": batch, "threads": threads,
                       "ms": {k: v[0] for k, v in result.items()},
                       "calls_per_round": {k: v[1] for k, v in result.items()},
                       "rounds": rounds, "check": checks}
                rows.append(row)
                line = ", ".join(f"{ENGINE_LABEL[k]} {fmt_ms(v[0])} ms (x{v[1]})"
                                 for k, v in result.items())
                print(f"  {threads} thread(s): {line}", flush=True)
            tmpdir.cleanup()
            setup["total_s"] = time.perf_counter() - t_model
            setups.append(setup)
            print(f"  ({setup['total_s']:.0f} s for this model)", flush=True)

    print_setup(setups)
    for threads in thread_counts:
        print_table(rows, threads)
    mismatches = [(r["model"], r["batch"], r["threads"], e) for r in rows
                  for e, c in r["check"].items() if not c["ok"]]
    if mismatches:
        print("\nMISMATCH against PyTorch eager: " + "; ".join(
            f"{ENGINE_LABEL[e]} on {m} batch {b} threads {t}" for m, b, t, e in mismatches))
    else:
        print(f"\nAll outputs match PyTorch eager (atol {ATOL}, rtol {RTOL} of the output scale).")
    print(f"Total time {time.perf_counter() - t_total:.0f} s")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"target": args.target, "torch": torch.__version__,
                       "load_average_at_end": os.getloadavg()[0],
                       "cores": os.cpu_count(), "rows": rows, "setup": setups}, fh, indent=1)
        print(f"Rows written to {args.json}")


if __name__ == "__main__":
    main()
