"""Weight-only int8 and int4 (issue 45): batch-1 dense layers and a Llama-style decoder step
with torchao's Int8WeightOnlyConfig (int8, a scale per output) and IntxWeightOnlyConfig
(int4: torch.int4 weights with a scale per group of 32), Ember's build of the quantized model
against its float32 build, PyTorch eager (float32) and torchao's quantized model in eager.

    PYTHONPATH=python python3 benchmarks/weight_only.py [--models dense,llama]
        [--weights int8,int4] [--threads 1,2]

The quantized layers import as nn.dense with an int8 weight (RecognizePatterns' "8-bit weight
-> dense"): the kernel reads a quarter of the float32 build's weight bytes; on VNNI CPUs
(Int8Products) it multiplies them by the activations taken to 16 bits in two bytes, elsewhere
it converts them as it goes; the per-channel scale and the bias are its epilogue. The int4
layers run as nn.dense_int4 on VNNI CPUs (words of eight nibbles, the group scales summed in
float32); elsewhere FoldConstant dequantizes them to float32 weights. Rows:
- dense_NxK: one nn.Linear(K, N) at batch 1, with its GB/s of weights read (int8 bytes, or
  int4 nibbles and their float32 group scales, for the quantized build, float32 bytes for the float build) against an Ember-compiled
  streaming sum over the same bytes, measured in the same run (kernels.stream_gbps, warm:
  back-to-back runs, as the rows are timed), and cold: the quantized build and the streaming sum
  each run after evicting the caches, as a decoder reads each layer's weights from memory;
- llama: transformers' LlamaForCausalLM (hidden 2048, intermediate 5632, 4 layers, 16 heads,
  vocab 32000, random weights) on one token without a cache, every linear layer quantized
  (the lm_head too).
Each row's times are interleaved rounds (e2e.measure), medians; the outputs are compared with
torchao's quantized model in eager (the quantized build) and with the float model (the float
build). Never part of the test pass/fail.
"""
import argparse
import os
import platform
import sys
import time
import warnings

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(ROOT, "python"), os.path.join(ROOT, "benchmarks")]

import ember  # noqa: E402
import e2e  # noqa: E402
import kernels  # noqa: E402

DENSE = {"dense_4096x4096": (4096, 4096), "dense_11008x4096": (11008, 4096),
         "dense_4096x11008": (4096, 11008)}


GROUP = 32  # int4 values per scale


def quantized(model, scheme):
    from torchao.quantization import (Int8WeightOnlyConfig, IntxWeightOnlyConfig, PerGroup,
                                      quantize_)
    config = (Int8WeightOnlyConfig() if scheme == "int8" else
              IntxWeightOnlyConfig(weight_dtype=torch.int4, granularity=PerGroup(GROUP)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        quantize_(model, config)
    return model


def quantized_bytes(numel, scheme):
    return numel if scheme == "int8" else numel // 2 + 4 * numel // GROUP


def make(name, scheme):
    """(float model, quantized model, inputs, the linear layers' weights)."""
    torch.manual_seed(0)
    if name in DENSE:
        n, k = DENSE[name]
        fp = torch.nn.Linear(k, n).eval()
        inputs = (torch.randn(1, k),)
    else:
        import transformers
        cfg = transformers.LlamaConfig(hidden_size=2048, intermediate_size=5632,
                                       num_hidden_layers=4, num_attention_heads=16,
                                       num_key_value_heads=16, vocab_size=32000,
                                       use_cache=False)
        fp = transformers.LlamaForCausalLM(cfg).eval()
        inputs = (torch.randint(0, cfg.vocab_size, (1, 1)),)
    q = quantized(_copy(fp), scheme)
    weights = sum(m.weight.numel() for m in fp.modules() if isinstance(m, torch.nn.Linear))
    return fp, q, inputs, weights


def _copy(model):
    import copy
    return copy.deepcopy(model)


class Logits(torch.nn.Module):
    """A causal LM's logits alone (a plain tensor output)."""

    def __init__(self, lm):
        super().__init__()
        self.lm = lm

    def forward(self, ids):
        return self.lm(input_ids=ids).logits


def build(model, inputs, target):
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mod, params = ember.frontend.from_pytorch(model, inputs)
    lib = ember.build(mod, target=target, params=params)
    return lib, time.perf_counter() - t0


def run(args):
    rows = []
    for name in args.models.split(","):
        names = list(DENSE) if name == "dense" else [name]
        for n in names:
            for scheme in args.weights.split(","):
                rows += one_model(n, scheme, args)
    return rows


def one_model(name, scheme, args):
    fp, q, inputs, numel = make(name, scheme)
    weights = quantized_bytes(numel, scheme)
    if name == "llama":
        fp, q = Logits(fp), Logits(q)
    with torch.no_grad():
        want_fp = fp(*inputs).numpy()
        want_q = q(*inputs).numpy()
    lib_fp, s_fp = build(fp, inputs, args.target)
    lib_q, s_q = build(q, inputs, args.target)
    rows = []
    for threads in [int(t) for t in args.threads.split(",")]:
        ember.set_num_threads(threads)
        torch.set_num_threads(threads)
        engines = [e2e.ember_engine(lib_fp, inputs), e2e.ember_engine(lib_q, inputs),
                   e2e.torch_engine(fp, inputs), e2e.torch_engine(q, inputs)]
        for e, label in zip(engines, ("ember_fp32", "ember_q", "torch_fp32", "torch_q")):
            e.name = label
        with torch.no_grad():
            res = e2e.measure(engines, args.rounds, 0, args.seconds, 0.5, rotate=True)
        got_fp, got_q = engines[0].outputs()[0], engines[1].outputs()[0]
        scale = float(np.abs(want_q).max())
        row = {"model": f"{name} {scheme}", "threads": threads, "build_s": (s_fp, s_q),
               "ms": {k: v[0] for k, v in res.items()},
               "err_q": float(np.abs(got_q - want_q).max()) / scale,
               "err_fp": float(np.abs(got_fp - want_fp).max()) / float(np.abs(want_fp).max()),
               "quant_err": float(np.abs(want_q - want_fp).max()) / scale}
        if name in DENSE:  # at this thread count
            row["stream_q"] = kernels.stream_gbps(weights, args.target, False)
            row["stream_fp"] = kernels.stream_gbps(4 * numel, args.target, False)
            # Cold: each run after evicting the caches, as a decoder's layer reads its
            # weights from memory (a model's weights do not stay in the L3).
            m = ember.GraphModule(lib_q)
            m.set_input(0, inputs[0].numpy())
            cold_ms = kernels._time_ms(m, True, 20)
            row["cold_q"] = (weights / (cold_ms * 1e6),
                             kernels.stream_gbps(weights, args.target, True))
        row["gbps_q"] = weights / (row["ms"]["ember_q"] * 1e6)
        row["gbps_fp"] = 4 * numel / (row["ms"]["ember_fp32"] * 1e6)
        rows.append(row)
        print_row(row)
    return rows


def print_row(r):
    ms = r["ms"]
    stream = ""
    if "stream_q" in r:
        stream = (f" | {r['gbps_q']:.1f} / {r['stream_q']:.1f} ({100 * r['gbps_q'] / r['stream_q']:.0f}%)"
                  f" | {r['gbps_fp']:.1f} / {r['stream_fp']:.1f} "
                  f"({100 * r['gbps_fp'] / r['stream_fp']:.0f}%)")
        cold, stream_cold = r["cold_q"]
        stream += f" | {cold:.1f} / {stream_cold:.1f} ({100 * cold / stream_cold:.0f}%)"
    else:
        stream = " | - | - | -"
    print(f"| {r['model']} | {r['threads']} | {e2e.fmt_ms(ms['ember_q'])} "
          f"| {e2e.fmt_ms(ms['ember_fp32'])} | {ms['ember_fp32'] / ms['ember_q']:.2f} "
          f"| {e2e.fmt_ms(ms['torch_fp32'])} | {e2e.fmt_ms(ms['torch_q'])}{stream} "
          f"| {r['err_q']:.1e} | {r['quant_err']:.1e} | {r['err_fp']:.1e} |", flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="dense,llama", help="dense (three layers), llama")
    p.add_argument("--weights", default="int8,int4", help="int8, int4 (torchao's schemes)")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--seconds", type=float, default=0.3)
    p.add_argument("--target", default="llvm")
    args = p.parse_args()
    print(f"# weight-only int8/int4: {platform.processor() or platform.machine()}, target "
          f"{args.target!r}, {args.rounds} interleaved rounds, medians; load average "
          f"{os.getloadavg()[0]:.1f}\n")
    print("| model | threads | Ember quantized ms | Ember fp32 ms | fp32 / quantized "
          "| PyTorch fp32 ms | torchao ms | quantized GB/s / stream | fp32 GB/s / stream "
          "| quantized GB/s / stream, cold | error vs torchao | torchao vs fp32 (quantization) "
          "| fp32 error |")
    print("|---|---:|---:|---:|---:|---:|---:|---|---|---|---:|---:|---:|")
    run(args)


if __name__ == "__main__":
    main()
