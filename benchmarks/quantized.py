"""PT2E-quantized CNNs and BERT-base (issue 45): Ember on torchao's quantized graph against
Ember fp32, PyTorch eager and ONNX Runtime, with the accuracy of the quantized build.

    PYTHONPATH=python python3 benchmarks/quantized.py
        [--models resnet18,resnet50,mobilenet_v2,bert_base] [--threads 1,2] [--samples 100]
        [--calibration 4] [--engines ember,ember_q,ember_qf,torch,torch_q,ort_q]
        [--rounds 5]
        [--repeat N] [--quick] [--target "llvm"] [--reduce-range] [--fit-steps N]
        [--json out.json]

Models: e2e.py's ResNet-18, ResNet-50 and MobileNetV2 (e2e.make: full size, random but fixed
weights), batch 1, 1x3x224x224 fp32; bert_base: transformers' BertModel (BertConfig's
defaults: 12 layers, hidden 768, random weights, no pooler) on 128 random token ids, its
last hidden state the output (the accuracy pass has no top-1 for it). Each is quantized with torchao's PT2E flow
(models.pt2e_quantize: strict torch.export, prepare_pt2e with the default
X86InductorQuantizer config, --calibration random images, convert_pt2e; BatchNorm folded,
int8 per-channel weights, uint8 per-tensor activations). --reduce-range quantizes the
activations to [0, 127] (the config torchao recommends for CPUs without VNNI), which Ember's
int8 products take without VNNI too (vpmaddubsw): with --target "llvm -mcpu=znver3" this
host runs an AVX2 CPU's code (ORT's MLAS still picks the host's own kernels).

Engines (timed as e2e.py times them: warm-up, interleaved rounds, the engine order rotated
each round, medians of all calls; every engine at the same thread count):
  ember    Ember's build of the fp32 model
  ember_q  Ember's build of the converted GraphModule (from_pytorch takes it as it is); on
           CPUs with VNNI the convs (blocked, or whose rows hold a vector; depthwise ones
           too) and the classifier run as int8 products (Int8Products; without VNNI those
           of 7-bit activations, --reduce-range, where vpmaddubsw is fast), the rest computes
           in float32 between the quantize / dequantize nodes, which fuse into their
           neighbours' kernels
  ember_qf the same graph built with the int8 products off (config Int8Products.int8_dot
           off): every layer in float32 between the Q/DQ nodes
  torch    PyTorch eager, fp32 model (the reference of the ratios)
  torch_q  PyTorch eager running the converted module: the reference of the quantized
           numerics (fp32 ops between Q/DQ nodes, not an int8 runtime)
  ort_q    ONNX Runtime (CPU) on the converted module exported with torch.onnx (a QDQ model,
           which ORT runs with its int8 kernels); skipped, with the exporter's reason, when
           the export fails

--fit-steps N (CNNs) first trains the model for N SGD steps on a synthetic 10-class task
(its last linear layer replaced by a 10-class head; an image of class c: c's fixed pattern,
a random 3x8x8 image upsampled to 224x224, plus unit Gaussian noise), and draws the calibration and accuracy images from that task. With
random weights a CNN gives one class for almost every image and its image-dependent logits
are about as large as the quantization error, so top-1 agreement says nothing; a model that
separates classes with margins, as a trained one does, makes it a real test (no trained
weights can be downloaded here).

Accuracy of ember_q, over --samples random images (fresh ones, not the calibration's), at 1
thread (the engines called in turn at more threads wait for each other's spinning workers on
a small machine): the largest |ember_q - torch_q| over all logits, relative to the range of
torch_q's output and as a fraction of the quantization's own error (the largest
|torch_q - fp32 model| over the same images); X86InductorQuantizer leaves the classifier's
output in fp32 (no quantize after the last linear), so there is no output scale to count in.
Next to it, PyTorch's own sensitivity: the largest change of torch_q's output when its input
is scaled by 1 + 1e-7 noise (on up to 20 of the images): a value that lands within rounding
of a quantization step goes to the next integer when the sums change in their last bit, as
they do between Ember's and PyTorch's convolutions. Top-1 agreement: ember_q with torch_q,
ember_q with the fp32 model, torch_q with the fp32 model (what quantizing costs), and ORT's
with torch_q. The issue's table wants --samples 1000. Nothing is asserted.
"""
import argparse
import json
import os
import platform
import sys
import tempfile
import time

import numpy as np
import torch

import ember

sys.path.insert(0, os.path.dirname(__file__))
import e2e  # noqa: E402  (its models, engines, measuring and table; puts tests/python on the path)
import models  # noqa: E402

MODELS = ("resnet18", "resnet50", "mobilenet_v2", "bert_base")
BERT_TOKENS = 128
ENGINES = ("ember", "ember_q", "ember_qf", "torch", "torch_q", "ort_q")
LABELS = {"ember": "Ember fp32", "ember_q": "Ember PT2E", "ember_qf": "Ember PT2E float",
          "torch": "PyTorch fp32", "torch_q": "PyTorch PT2E", "ort_q": "ORT QDQ"}
INT8_OFF = {"Int8Products.int8_dot": "off"}  # ember_qf's build config
SENSITIVITY_SAMPLES = 20


class BertLastHidden(torch.nn.Module):
    """transformers' BertModel (no pooler: torchao's quantizer fails on its dead tanh) whose
    output is the last hidden state, a plain tensor."""

    def __init__(self):
        super().__init__()
        import transformers
        torch.manual_seed(0)
        self.bert = transformers.BertModel(transformers.BertConfig(), add_pooling_layer=False)

    def forward(self, ids):
        return self.bert(input_ids=ids).last_hidden_state


def make(name, fit_steps=0):
    """(model, example inputs, sample(i): the i-th random input tuple of the accuracy pass
    and the calibration); a CNN fitted to the synthetic task when fit_steps > 0."""
    if name == "bert_base":
        def sample(i):
            g = torch.Generator().manual_seed(i)
            return (torch.randint(0, 30522, (1, BERT_TOKENS), generator=g),)
        return BertLastHidden().eval(), sample(1), sample
    model, inputs = e2e.make(name, 1)
    if fit_steps:
        model, sample, top1 = models.fit_synthetic(model, inputs[0].shape, fit_steps)
        print(f"  fitted: {fit_steps} steps, training top-1 over the last 20 steps "
              f"{100 * top1:.0f}%", flush=True)
        return model, sample(1), sample
    return model, inputs, lambda i: (torch.randn(
        inputs[0].shape, generator=torch.Generator().manual_seed(i)),)


def _engine(engine, name):
    """`engine` (an e2e.Engine) under another name."""
    engine.name = name
    return engine


def _build(model, inputs, target, config=None):
    """Ember's library of `model` (built with the pass `config`), its import and build
    seconds."""
    t0 = time.perf_counter()
    mod, params = ember.frontend.from_pytorch(model, inputs)
    t1 = time.perf_counter()
    with ember.transform.PassContext(opt_level=3, config=config):
        lib = ember.build(mod, target=target, params=params)
    return lib, t1 - t0, time.perf_counter() - t1


def _quantized_check(outputs, reference, fp32):
    """e2e.check's (abs, rel) of an engine against the converted module, ok when the error
    is below the quantization's own (reference vs fp32 model) on this input."""
    a, r, _ = e2e.check(outputs, reference)
    quantization_error, _, _ = e2e.check(reference, fp32)
    return {"abs": a, "rel": r, "ok": bool(a <= quantization_error)}


def _top1(logits, reference, centred):
    """(share of rows whose argmax agrees with the reference's, number of distinct reference
    classes); centred: each on its logits less its own mean logits over the rows."""
    if centred:
        logits, reference = logits - logits.mean(0), reference - reference.mean(0)
    a, b = logits.argmax(1), reference.argmax(1)
    return float((a == b).mean()), len(set(b.tolist()))


def accuracy(model, converted, lib, ort_path, samples, threads, sample):
    """The accuracy figures of the module docstring over `samples` random inputs
    (sample(1000 + i)); top-1 only for classifiers (outputs [1, classes])."""
    ember.set_num_threads(threads)
    torch.set_num_threads(threads)
    m = ember.GraphModule(lib)
    # Not spinning: its idle threads would take the cores from the engines called next.
    sess = e2e.ort_session(ort_path, threads, spinning=False) if ort_path else None
    out = {"fp32": [], "torch_q": [], "ember_q": [], "ort_q": []}
    sensitivity = None  # token ids (BERT) cannot be nudged
    with torch.inference_mode():
        for i in range(samples):
            x = sample(1000 + i)[0]
            flat = lambda a: np.asarray(a).reshape(1, -1)  # noqa: E731
            y = model(x)
            classifier = y.ndim == 2  # [1, classes]
            out["fp32"].append(flat(y))
            out["torch_q"].append(flat(converted(x)))
            out["ember_q"].append(flat(m(x.numpy()).numpy()))
            if sess is not None:
                out["ort_q"].append(flat(sess.run(None, {sess.get_inputs()[0].name:
                                                         x.numpy()})[0]))
            if i < SENSITIVITY_SAMPLES and x.is_floating_point():
                noise = torch.randn(x.shape, generator=torch.Generator().manual_seed(i))
                nudged = flat(converted(x * (1 + 1e-7 * noise)))
                change = float(np.abs(nudged - out["torch_q"][-1]).max())
                sensitivity = max(sensitivity or 0.0, change)
    out = {k: np.concatenate(v).astype(np.float64) for k, v in out.items() if v}
    ref, fp32 = out["torch_q"], out["fp32"]
    err = np.abs(out["ember_q"] - ref).max(1)
    quantization_error = float(np.abs(ref - fp32).max())
    result = {"samples": samples, "threads": threads, "max_abs": float(err.max()),
              "max_rel_range": float((err / np.maximum(np.ptp(ref, 1), 1e-30)).max()),
              "quantization_error": quantization_error,
              "of_quantization_error": float(err.max()) / max(quantization_error, 1e-30),
              "torch_q_sensitivity": sensitivity, "top1": {}, "classes": {}}
    if "ort_q" in out:
        result["ort_q_max_abs"] = float(np.abs(out["ort_q"] - ref).max())
    pairs = [("ember_q", "torch_q"), ("ember_q", "fp32"), ("torch_q", "fp32")]
    if "ort_q" in out:
        pairs.append(("ort_q", "torch_q"))
    for how in ("plain", "centred") if classifier else ():
        for a, b in pairs:
            key = f"{how} {a}={b}"
            result["top1"][key], result["classes"][key] = _top1(out[a], out[b],
                                                                how == "centred")
    # How much the logits depend on the image: the mean over classes of their spread (std)
    # over the images.
    result["spread"] = {k: float(v.std(0).mean()) for k, v in out.items()}
    return result


def _e(v):
    return "-" if v is None else f"{v:.1e}"


def print_accuracy(rows):
    print("\n### Accuracy of the PT2E build (Ember PT2E vs PyTorch PT2E, the converted module "
          "in eager)\n")
    print("| model | samples | max abs error | / output range | / quantization error "
          "| PyTorch PT2E sensitivity | ORT QDQ max abs error | logit spread fp32 / PT2E |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for r in rows:
        a = r["accuracy"]
        ort = f"{a['ort_q_max_abs']:.1e}" if "ort_q_max_abs" in a else "-"
        print(f"| {r['model']} | {a['samples']} | {a['max_abs']:.1e} | {a['max_rel_range']:.1e} "
              f"| {a['of_quantization_error']:.2f} | {_e(a['torch_q_sensitivity'])} | {ort} "
              f"| {a['spread']['fp32']:.1e} / {a['spread']['torch_q']:.1e} |")
    print("\n(quantization error: the largest |PyTorch PT2E - fp32 model| over the same "
          "images; sensitivity: the largest change of PyTorch PT2E's output for its input "
          f"scaled by 1 + 1e-7 noise, on up to {SENSITIVITY_SAMPLES} images; logit spread: "
          "the mean over classes of each logit's std over the images, how much the output "
          "depends on the image)")
    print("\n### Top-1 agreement (distinct classes of the second model in brackets)\n")
    pairs = [("ember_q", "torch_q"), ("ember_q", "fp32"), ("torch_q", "fp32"),
             ("ort_q", "torch_q")]
    label = dict(LABELS, fp32="fp32")
    print("| model | top-1 of | " + " | ".join(f"{label[a]} = {label[b]}" for a, b in pairs)
          + " |")
    print("|---|---|" + "---:|" * len(pairs))
    for r in rows:
        for how in ("plain", "centred"):
            t, n = r["accuracy"]["top1"], r["accuracy"]["classes"]
            cells = [f"{100 * t[k]:.1f}% ({n[k]})" if k in t else "-"
                     for k in (f"{how} {a}={b}" for a, b in pairs)]
            print(f"| {r['model']} | {how} logits | " + " | ".join(cells) + " |")
    print("\n(centred: each model's logits less its own mean logits over the images. With "
          "random weights a model gives one class for almost every random image, so plain "
          "top-1 agrees trivially; the centred logits keep the part that depends on the image, "
          "which is meaningful only where the logit spread is well above the errors)")


def print_setup(setups):
    print("\n### Setup times (s)\n")
    print("| model | quantize (export, prepare, calibrate, convert) | Ember fp32 import, build "
          "| Ember PT2E import, build | Ember PT2E float import, build | ONNX export "
          "| kernels fp32 / PT2E / PT2E float |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for s in setups:
        def pair(key):
            return "-" if key + "_import_s" not in s else (
                f"{s[key + '_import_s']:.1f}, {s[key + '_build_s']:.1f}")
        onnx = f"{s['onnx_export_s']:.1f}" if "onnx_export_s" in s else "-"
        kernels = " / ".join(str(s.get(k + "_kernels", "-"))
                             for k in ("ember", "ember_q", "ember_qf"))
        print(f"| {s['model']} | {s['quantize_s']:.1f} | {pair('ember')} | {pair('ember_q')} "
              f"| {pair('ember_qf')} | {onnx} | {kernels} |")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default=",".join(MODELS),
                   help=f"comma list (default all): {', '.join(MODELS)}")
    p.add_argument("--threads", default="1,2", help="comma list of thread counts (default 1,2)")
    p.add_argument("--engines", default=",".join(ENGINES),
                   help=f"comma list of {','.join(ENGINES)} to time (torch, the reference of "
                        "the ratios, always runs)")
    p.add_argument("--samples", type=int, default=None,
                   help="random images of the accuracy pass (default 100, 20 with --quick; 0 "
                        "skips it)")
    p.add_argument("--calibration", type=int, default=4,
                   help="random images that calibrate the quantizer (default 4)")
    p.add_argument("--fit-steps", type=int, default=0,
                   help="train each CNN this many steps on the synthetic task first (default 0)")
    p.add_argument("--reduce-range", action="store_true",
                   help="quantize the activations to [0, 127] (reduce_range=True)")
    e2e.add_measuring_args(p, seconds=0.5, quick="3 rounds of about 0.1 s per engine, short "
                           "warm-up, 20 accuracy samples unless --samples says otherwise")
    args = p.parse_args()

    names = e2e.chosen(p, args.models, MODELS, "model")
    thread_counts = [int(t) for t in args.threads.split(",") if t]
    engines = e2e.chosen(p, args.engines, ENGINES, "engine")
    engines = [e for e in ENGINES if e in engines or e == "torch"]
    rounds = args.rounds or (3 if args.quick else 5)
    seconds = args.seconds or (0.1 if args.quick else 0.5)
    warmup_s = 0.2 if args.quick else 1.0
    samples = args.samples if args.samples is not None else (20 if args.quick else 100)

    print(f"# Ember PT2E-quantized CNNs: {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores, torch {torch.__version__}, target {args.target!r}"
          f"{', reduce_range' if args.reduce_range else ''}, "
          f"engines {', '.join(engines)}, {rounds} rounds, "
          + (f"{args.repeat} calls per round" if args.repeat else
             f"about {seconds} s per engine per round")
          + f", {samples} accuracy samples, load average {os.getloadavg()[0]:.1f} at start")
    if os.getloadavg()[0] >= 1.0:
        print(f"# WARNING: load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores before "
              "this run: timings are noisy")
    try:
        import torchao
        print(f"# torchao {torchao.__version__}")
    except ImportError as e:
        sys.exit(f"torchao is not installed ({e}); scripts/setup.sh installs it")
    e2e.drop_ort_if_missing(engines, "ort_q")

    rows, setups, accuracy_rows = [], [], []
    t_total = time.perf_counter()
    for name in names:
        t_model = time.perf_counter()
        model, inputs, sample = make(name, args.fit_steps)
        title = (f"BERT-base, {BERT_TOKENS} tokens" if name == "bert_base" else
                 e2e.MODELS[name][0])
        print(f"\n## {name} ({title}), batch 1", flush=True)
        setup = {"model": name}
        calibration = [sample(2 + i) for i in range(args.calibration)]
        t0 = time.perf_counter()
        converted = models.pt2e_quantize(model, inputs, calibration, args.reduce_range)
        setup["quantize_s"] = time.perf_counter() - t0
        print(f"  PT2E: quantized in {setup['quantize_s']:.1f} s", flush=True)
        with torch.inference_mode():
            expected, reference = e2e._as_list(model(*inputs)), e2e._as_list(converted(*inputs))

        libs = {}
        for key, source, config in (("ember", model, None), ("ember_q", converted, None),
                                    ("ember_qf", converted, INT8_OFF)):
            if key not in engines and not (key == "ember_q" and samples):
                continue
            lib, setup[key + "_import_s"], setup[key + "_build_s"] = _build(
                source, inputs, args.target, config)
            setup[key + "_kernels"] = len(lib.fusion_report())
            libs[key] = lib
            print(f"  {LABELS[key]}: import {setup[key + '_import_s']:.1f} s, build "
                  f"{setup[key + '_build_s']:.1f} s, {setup[key + '_kernels']} kernels",
                  flush=True)

        tmpdir = tempfile.TemporaryDirectory(prefix="ember_quantized_")
        ort_path = None
        if "ort_q" in engines:
            path = os.path.join(tmpdir.name, f"{name}_qdq.onnx")
            try:
                t0 = time.perf_counter()
                exporter = e2e.export_onnx(converted, inputs, path)
                setup["onnx_export_s"] = time.perf_counter() - t0
                ort_path = path
                print(f"  ONNX: the converted module exported ({exporter} exporter) in "
                      f"{setup['onnx_export_s']:.1f} s", flush=True)
            except Exception as e:  # noqa: BLE001  (report why, time the others)
                print(f"  ORT skipped for {name}: {e}")

        for threads in thread_counts:
            ember.set_num_threads(threads)
            torch.set_num_threads(threads)
            built = []
            for key in ("ember", "ember_q", "ember_qf"):
                if key in engines:
                    built.append(_engine(e2e.ember_engine(libs[key], inputs), key))
            built.append(e2e.torch_engine(model, inputs))
            if "torch_q" in engines:
                built.append(_engine(e2e.torch_engine(converted, inputs), "torch_q"))
            if ort_path is not None:
                built.append(_engine(e2e.ort_engine(ort_path, inputs, threads), "ort_q"))
            with torch.inference_mode():
                result = e2e.measure(built, rounds, args.repeat, seconds, warmup_s, rotate=True)
            checks = {}
            for eng in built:
                if eng.name == "ember":
                    a, r, ok = e2e.check(eng.outputs(), expected)
                    checks["ember"] = {"abs": a, "rel": r, "ok": bool(ok)}
                elif eng.name in ("ember_q", "ember_qf", "ort_q"):
                    checks[eng.name] = _quantized_check(eng.outputs(), reference, expected)
            rows.append({"model": name, "batch": 1, "threads": threads, "rounds": rounds,
                         "ms": {k: v[0] for k, v in result.items()},
                         "calls_per_round": {k: v[1] for k, v in result.items()},
                         "check": checks})
            line = ", ".join(f"{LABELS[k]} {e2e.fmt_ms(v[0])} ms (x{v[1]})"
                             for k, v in result.items())
            print(f"  {threads} thread(s): {line}", flush=True)

        if samples:
            t0 = time.perf_counter()
            acc = accuracy(model, converted, libs["ember_q"], ort_path, samples, 1, sample)
            accuracy_rows.append({"model": name, "accuracy": acc})
            print(f"  accuracy over {samples} images in {time.perf_counter() - t0:.0f} s: "
                  f"max abs error {acc['max_abs']:.1e} ({acc['of_quantization_error']:.2f} of "
                  f"the quantization error), top-1 " + ", ".join(
                      f"{k} {100 * v:.1f}% ({acc['classes'][k]} classes)"
                      for k, v in acc["top1"].items()), flush=True)
        tmpdir.cleanup()
        setup["total_s"] = time.perf_counter() - t_model
        setups.append(setup)
        print(f"  ({setup['total_s']:.0f} s for this model)", flush=True)

    print_setup(setups)
    timed = [e for e in ENGINES if e in engines]
    for threads in thread_counts:
        e2e.print_table(rows, threads, engines=timed, labels=LABELS,
                        error_header="max error abs/rel (fp32 vs PyTorch fp32; PT2E vs "
                                     "PyTorch PT2E, MISMATCH above its quantization error)")
    if accuracy_rows:
        print_accuracy(accuracy_rows)
    print(f"\nTotal time {time.perf_counter() - t_total:.0f} s")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"target": args.target, "torch": torch.__version__,
                       "load_average_at_end": os.getloadavg()[0], "cores": os.cpu_count(),
                       "rows": rows, "accuracy": accuracy_rows, "setup": setups}, fh, indent=1)
        print(f"Rows written to {args.json}")


if __name__ == "__main__":
    main()
