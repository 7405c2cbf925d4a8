"""bfloat16 (issue 45): BERT-base-sized dense layers, ResNet convs and e2e models cast with
model.to(torch.bfloat16), Ember's bfloat16 build with the bfloat16 products on (vdpbf16ps,
BF16Products) and off (float32 products of the widened values, still bfloat16 between
kernels), Ember's float32 build and PyTorch eager in both dtypes.

    PYTHONPATH=python python3 benchmarks/bf16.py [--models dense_128x768x768,resnet50]
        [--threads 1]

Rows: dense_MxKxN is one nn.Linear(K, N) on M rows, convKxK_HxCxO one nn.Conv2d(C, O, K)
(stride 1, same padding) on an HxH image, both with their GFLOP/s; the others are
benchmarks/e2e.py's models (batch 1; resnet18 and resnet50 at 224x224). Times are interleaved rounds (e2e.measure), medians.
The bfloat16 builds' outputs are compared with PyTorch's bfloat16 eager and with the float32
model (max abs error over the output's max abs). On a CPU without AVX512_BF16 the "on" column
is the FMA fallback (forced with config BF16Products.bf16_dot = "on"). Never part of the
test pass/fail.
"""
import argparse
import os
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(ROOT, "python"), os.path.join(ROOT, "benchmarks")]

import ember  # noqa: E402
import e2e  # noqa: E402

DENSE = {"dense_128x768x768": (128, 768, 768), "dense_128x768x3072": (128, 768, 3072),
         "dense_128x3072x768": (128, 3072, 768)}
# ResNet-50's 3x3 convs at 56x56 and 14x14 and a 1x1 of its last stage: (H, C, O, K).
CONV = {"conv3x3_56x64x64": (56, 64, 64, 3), "conv3x3_14x256x256": (14, 256, 256, 3),
        "conv1x1_7x2048x512": (7, 2048, 512, 1)}


def flop(name):
    """The multiply-adds of a layer row, twice; None for a model."""
    if name in DENSE:
        m, k, n = DENSE[name]
        return 2 * m * k * n
    if name in CONV:
        h, c, o, k = CONV[name]
        return 2 * h * h * c * o * k * k
    return None


def make(name):
    torch.manual_seed(0)
    if name in DENSE:
        m, k, n = DENSE[name]
        return torch.nn.Linear(k, n).eval(), (torch.randn(m, k),)
    if name in CONV:
        h, c, o, k = CONV[name]
        return torch.nn.Conv2d(c, o, k, padding=k // 2).eval(), (torch.randn(1, c, h, h),)
    return e2e.make(name, 1)


def build(model, inputs, bf16_dot=None):
    mod, params = ember.frontend.from_pytorch(model, inputs)
    config = {} if bf16_dot is None else {"BF16Products.bf16_dot": bf16_dot}
    with ember.transform.PassContext(opt_level=3, config=config):
        return ember.build(mod, params=params)


def engine(name, lib, inputs):
    m = ember.GraphModule(lib)
    state = {}

    def call():
        state["out"] = m(*inputs)

    def outputs():
        out = state["out"]
        return [torch.from_dlpack(o).float() for o in (out if isinstance(out, tuple) else [out])]
    return e2e.Engine(name, call, outputs)


def torch_engine(name, model, inputs):
    state = {}

    def call():
        with torch.no_grad():
            state["out"] = model(*inputs)
    return e2e.Engine(name, call, lambda: [state["out"].float()])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(list(DENSE) + list(CONV) + [
        "bert_s128", "mlp", "resnet18", "resnet50"]))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=0.3)
    args = ap.parse_args()
    ember.set_num_threads(args.threads)
    torch.set_num_threads(args.threads)
    print(f"threads {args.threads}; {ember.target.machine_model()}")
    print(f"{'model':22} {'ember fp32':>10} {'bf16 on':>9} {'bf16 off':>9} {'torch fp32':>10} "
          f"{'torch bf16':>10}   {'err vs torch bf16':>17} {'err vs fp32':>11}")
    for name in args.models.split(","):
        model, inputs = make(name)
        binputs = tuple(t.to(torch.bfloat16) for t in inputs)
        bmodel = make(name)[0].to(torch.bfloat16)
        engines = [engine("ember fp32", build(model, inputs), inputs),
                   engine("bf16 on", build(bmodel, binputs, "on"), binputs),
                   engine("bf16 off", build(bmodel, binputs, "off"), binputs),
                   torch_engine("torch fp32", model, inputs),
                   torch_engine("torch bf16", bmodel, binputs)]
        times = e2e.measure(engines, args.rounds, 0, args.seconds, 0.2)
        outs = {e.name: e.outputs()[0] for e in engines}
        scale = float(outs["torch fp32"].abs().max())
        err = lambda a, b: float((outs[a] - outs[b]).abs().max()) / scale  # noqa: E731
        row = " ".join(f"{times[e.name][0]:>9.3f}m" for e in engines)
        flops = ""
        if flop(name):
            flops = "  GFLOP/s " + " ".join(
                f"{flop(name) / times[e][0] / 1e6:.0f}" for e in ("ember fp32", "bf16 on"))
        print(f"{name:22} {row}   {err('bf16 on', 'torch bf16'):>17.2e} "
              f"{err('bf16 on', 'ember fp32'):>11.2e}{flops}")


if __name__ == "__main__":
    main()
