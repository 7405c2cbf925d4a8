"""Lesson 09: quantized models — PT2E int8, which CPUs run it as int8, and what it costs.

    PYTHONPATH=python python3 tutorials/09_quantized.py

Past the float32 FMA peak, CPUs multiply 8-bit integers: VNNI's vpdpbusd (AVX-512 VNNI on
Zen 4 and 5 and Xeons since Cascade Lake; AVX-VNNI on Alder Lake) adds four uint8 x int8
products into each int32 lane, four times float32's products per instruction. This lesson
quantizes a small CNN with torchao's PT2E flow, imports the converted module as it is, and
shows:

  1. the int8 kernels in the fusion report: each conv and the classifier is one exact int8
     product, its scales, bias, ReLU, residual add and the next quantize its epilogue;
  2. the error against PyTorch's own reference of the quantized graph (the converted
     module run in eager), in units of the quantization's own error;
  3. which CPUs take which products (ember.target.machine_model): without VNNI the int8
     products pay off only for activations below 128, which torchao gives with
     reduce_range=True (vpmaddubsw then multiplies them exactly, twice float32's rate on
     Zen 3 and Skylake; Haswell, Zen 1 and Zen 2 keep float32).

Ember never changes a model's arithmetic to get there: a product the target cannot speed up
runs in float32 between the quantize and dequantize nodes, with the same numbers.
"""
import warnings

import numpy as np
import torch

import ember


class SmallNet(torch.nn.Module):
    """Conv + BatchNorm + ReLU, a residual conv, pooling and a classifier."""

    def __init__(self):
        super().__init__()
        self.stem = torch.nn.Sequential(torch.nn.Conv2d(3, 32, 3, padding=1),
                                        torch.nn.BatchNorm2d(32), torch.nn.ReLU())
        self.conv = torch.nn.Conv2d(32, 32, 3, padding=1)
        self.head = torch.nn.Linear(32, 10)

    def forward(self, x):
        h = self.stem(x)
        h = torch.relu(self.conv(h) + h)
        return self.head(torch.nn.functional.adaptive_avg_pool2d(h, 1).flatten(1))


def pt2e_quantize(model, example, calibration, reduce_range):
    """torchao's post-training flow: capture, prepare with X86InductorQuantizer, calibrate,
    convert. The result is a GraphModule of float32 ops between quantize / dequantize nodes
    (BatchNorm folded, int8 per-channel weights, uint8 per-tensor activations)."""
    from torchao.quantization.pt2e import quantize_pt2e
    from torchao.quantization.pt2e.quantizer import x86_inductor_quantizer as x86
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graph = torch.export.export(model, example, strict=True).module()
        quantizer = x86.X86InductorQuantizer()
        quantizer.set_global(
            x86.get_default_x86_inductor_quantization_config(reduce_range=reduce_range))
        prepared = quantize_pt2e.prepare_pt2e(graph, quantizer)
        with torch.no_grad():
            for x in calibration:
                prepared(x)
        return quantize_pt2e.convert_pt2e(prepared)


def main(size=32):
    torch.manual_seed(0)
    model = SmallNet().eval()
    x = torch.randn(1, 3, size, size)
    calibration = [torch.randn(1, 3, size, size) for _ in range(8)]

    # 1. Quantize, import, build for this machine. The fusion report names each kernel's
    #    ops: on a VNNI CPU the convs are nn.conv2d_u8s8_blocked (NCHW[c]c bytes, four
    #    channels a word) and the classifier nn.dense_u8s8_packed.
    converted = pt2e_quantize(model, (x,), calibration, reduce_range=False)
    mod, params = ember.frontend.from_pytorch(converted, (x,))
    host = ember.target.machine_model("llvm")
    print(f"this machine: {host}")
    lib = ember.build(mod, target="llvm", params=params)
    int8_kernels = [k.name for k in lib.fusion_report() if any("u8s8" in op for op in k.ops)]
    print(f"{len(lib.fusion_report())} kernels, int8 ones: {int8_kernels}")
    assert bool(int8_kernels) == host.int8_dot

    # 2. Against the reference: the converted module in eager. The int8 build sums each
    #    product exactly and rounds once, where the float reference rounds every term, so
    #    the two differ by far less than quantizing cost.
    with torch.no_grad():
        want, fp32 = converted(x).numpy(), model(x).numpy()
    got = ember.GraphModule(lib)(x.numpy()).numpy()
    error, quantization_error = np.abs(got - want).max(), np.abs(want - fp32).max()
    print(f"max |Ember - PyTorch PT2E| = {error:.2e}, "
          f"{error / quantization_error:.3f} of the quantization error {quantization_error:.2e}")
    assert error <= 0.1 * quantization_error

    # 3. Which CPUs take which products. Compiled for named CPUs (LLVM targets any CPU from
    #    any host); Zen 3's code runs on any AVX2 machine, so this one checks it too.
    for cpu in ("znver4", "znver3", "skylake", "znver2", "haswell"):
        m = ember.target.machine_model(f"llvm -mcpu={cpu}")
        print(f"{cpu:10s} int8 products: {'all' if m.int8_dot else 'none':4s}   "
              f"of 7-bit activations: {'yes' if m.int8_dot_7bit else 'no'}")
    seven_bit = pt2e_quantize(model, (x,), calibration, reduce_range=True)
    mod7, params7 = ember.frontend.from_pytorch(seven_bit, (x,))
    kernels = {}
    for label, source, p in (("default (0..255)", mod, params), ("reduce_range (0..127)", mod7,
                                                                 params7)):
        lib = ember.build(source, target="llvm -mcpu=znver3", params=p)
        kernels[label] = sum(any("u8s8" in op for op in k.ops) for k in lib.fusion_report())
        print(f"Zen 3, {label}: {kernels[label]} int8 kernels")
    assert kernels["default (0..255)"] == 0 and kernels["reduce_range (0..127)"] == 3
    with torch.no_grad():
        want7 = seven_bit(x).numpy()
    got7 = ember.GraphModule(lib)(x.numpy()).numpy()
    assert np.abs(got7 - want7).max() <= 0.1 * np.abs(want7 - fp32).max()
    return len(int8_kernels)


def test_lesson_09():
    main(size=16)


if __name__ == "__main__":
    main()
