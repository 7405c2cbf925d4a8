"""Int8 products of 7-bit activations (issue 45). PT2E's reduce_range quantizes activations to
[0, 127], the config torchao recommends for CPUs without VNNI. Int8Products proves each
activation byte (and the zero point that padding reads) below 128 and marks the product
activation_bits=7. Its steps are then dot_u7s8, which without VNNI run as vpmaddubsw (a pair
of such products sums within int16: no saturation) and vpmaddwd by ones. Targets whose
vpmaddubsw and vpmaddwd issue twice a cycle (Zen 3, Skylake; MachineModel.int8_dot_7bit)
take those products; Haswell, Zen 1 and Zen 2 keep float32.

Numerics: exact against NumPy's int64 products, on the host, with code for named CPUs
(x86-64-v3 is AVX2, which every machine here runs; x86-64-v2 has SSSE3's 128-bit
pmaddubsw; x86-64 has SSE2 only). Models: against the converted module run in eager, within
a small part of its own quantization error. Instruction choices: compiled for named CPUs."""
import re
import warnings

import numpy as np
import pytest

import ember
from ember import ir, op
from op_checks import error_of
from test_int8_gemm import kernels_of, pad_word

pytest.importorskip("torchao.quantization.pt2e.quantize_pt2e")

# (target, register of vpmaddubsw or None: SSE2 has none, and takes DotU8S8's vpmaddwd pair)
TARGETS = [("llvm", None), ("llvm -mcpu=x86-64-v3", "ymm"), ("llvm -mcpu=x86-64-v2", "xmm"),
           ("llvm -mcpu=x86-64", None)]


def seven_bit_dense(m, n, k, seed=0):
    rng = np.random.default_rng(seed)
    xq = rng.integers(0, 128, (m, k)).astype(np.uint8)
    wq = rng.integers(-128, 128, (n, k)).astype(np.int8)
    xq[0, :4], wq[0, :4] = 127, -128  # the extremes: 2 * 127 * -128 within int16
    xq[-1, :4], wq[-1, :4] = 127, 127
    x = ir.var("x", (m, k), "uint8")
    y = op.nn.dense_u8s8(op.nn.pack_bytes4(x), op.nn.pack_bytes4(ir.const(wq)),
                         activation_bits=7)
    return ir.Function([x], y), xq, xq.astype(np.int64) @ wq.astype(np.int64).T


def seven_bit_conv(zero, seed=1):
    import torch
    rng = np.random.default_rng(seed)
    xq = rng.integers(0, 128, (2, 16, 8, 8)).astype(np.uint8)
    wq = rng.integers(-128, 128, (7, 16, 3, 3)).astype(np.int8)
    xq[0, :, 0, 0], wq[0] = 127, -128
    x = ir.var("x", xq.shape, "uint8")
    y = op.nn.conv2d_u8s8(op.nn.pack_bytes4(x, axis=1), op.nn.pack_bytes4(ir.const(wq), axis=1),
                          padding=[1, 1], pad_word=pad_word(zero), activation_bits=7)
    padded = torch.nn.functional.pad(torch.from_numpy(xq.astype(np.float64)), [1] * 4,
                                     value=zero)
    want = torch.nn.functional.conv2d(padded, torch.from_numpy(wq.astype(np.float64))).numpy()
    return ir.Function([x], y), xq, want.astype(np.int64)


@pytest.mark.parametrize("target,register", TARGETS)
def test_seven_bit_products_are_exact(target, register):
    """The dense (a register-tiled GEMM; a short K and outputs no vector divides) and the
    conv (blocked by AlterOpLayout, and NCHW without it) of bytes below 128 give exactly
    the int64 products: vpmaddubsw then vpmaddwd where the target has SSSE3 and no VNNI."""
    for m, n, k in [(48, 96, 512), (5, 10, 67)]:
        f, xq, want = seven_bit_dense(m, n, k)
        lib = ember.build(f, target=target)
        asm = lib.get_source("asm")
        if register:
            assert re.search(r"pmaddubsw\s+[^\n]*%" + register, asm), target
            assert "vpdpbusd" not in asm
        elif target != "llvm":
            assert "pmaddubsw" not in asm
        np.testing.assert_array_equal(ember.GraphModule(lib)(xq).numpy(), want)
    f, xq, want = seven_bit_conv(zero=100)
    for disabled in ([], ["AlterOpLayout"]):
        with ember.transform.PassContext(opt_level=3, disabled_passes=disabled):
            got = ember.GraphModule(ember.build(f, target=target))(xq).numpy()
        np.testing.assert_array_equal(got, want)


def test_activation_bits_is_7_or_8():
    x = op.nn.pack_bytes4(ir.var("x", (2, 8), "uint8"))
    w = op.nn.pack_bytes4(ir.var("w", (3, 8), "int8"))
    assert "activation_bits must be 7" in error_of(
        lambda: op.nn.dense_u8s8(x, w, activation_bits=6))


def pt2e(family, reduce_range):
    """(the float model, the converted module, the imported module, params, input shape)."""
    import torch
    from test_quantized import ConvNet, quantize
    torch.manual_seed(0)
    if family == "convnet":
        model, shape = ConvNet().eval(), (2, 3, 16, 16)
    else:
        model = torch.nn.Sequential(torch.nn.Linear(67, 128), torch.nn.ReLU(),
                                    torch.nn.Linear(128, 10)).eval()
        shape = (5, 67)
    example = (torch.randn(shape),)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        converted, program = quantize(model, example, [torch.randn(shape) for _ in range(4)],
                                      reduce_range=reduce_range)
    mod, params = ember.frontend.from_pytorch(program, example)
    return model, converted, mod, params, shape


INT8_KERNEL = {"convnet": "nn.conv2d_u8s8_blocked", "mlp": "nn.dense_u8s8_packed"}


@pytest.mark.parametrize("family", ["convnet", "mlp"])
def test_reduce_range_models_run_as_int8_products_on_avx2(family):
    """Built for Zen 3 (AVX2, no VNNI) with the target's own choice: every conv or dense of
    the reduce_range model is a 7-bit int8 product (vpmaddubsw), and the outputs match the
    converted module within a small part of its quantization error, as the host's build
    (vpdpbusd where it has VNNI) and the float build (int8 products off) do."""
    import torch
    model, converted, mod, params, shape = pt2e(family, reduce_range=True)
    target = "llvm -mcpu=znver3"
    assert ember.target.machine_model(target).int8_dot_7bit
    builds = {"znver3": ember.build(mod, target=target, params=params),
              "host": ember.build(mod, params=params)}
    with ember.transform.PassContext(opt_level=3, config={"Int8Products.int8_dot": "off"}):
        builds["float"] = ember.build(mod, target=target, params=params)
    assert kernels_of(builds["znver3"]).count(INT8_KERNEL[family]) == 2, kernels_of(builds["znver3"])
    assert "u8s8" not in kernels_of(builds["float"])
    assert "pmaddubsw" in builds["znver3"].get_source("asm")
    for seed in range(3):
        x = torch.randn(shape, generator=torch.Generator().manual_seed(seed))
        with torch.no_grad():
            want, fp32 = converted(x).numpy(), model(x).numpy()
        quantization_error = np.abs(want - fp32).max()
        for name, lib in builds.items():
            got = ember.GraphModule(lib)(x.numpy()).numpy()
            assert np.abs(got - want).max() <= 0.1 * quantization_error, (name, seed)


@pytest.mark.parametrize("cpu,seven", [("znver3", True), ("skylake", True),
                                       ("skylake-avx512", True), ("haswell", False),
                                       ("znver1", False), ("znver2", False)])
def test_seven_bit_products_are_chosen_where_vpmaddubsw_doubles_the_float_rate(cpu, seven):
    """Compiled for a named CPU (not run): the reduce_range MLP's denses are int8 products
    where vpmaddubsw and vpmaddwd each issue twice a cycle (llvm-mca: 2x float32's products a
    cycle), float32 where once (Haswell, Zen 1, Zen 2: level with the FMAs). The default
    config's activations (0 to 255) stay float32 on every CPU without VNNI."""
    target = f"llvm -mcpu={cpu}"
    assert ember.target.machine_model(target).int8_dot_7bit == seven
    assert not ember.target.machine_model(target).int8_dot
    _, _, mod, params, _ = pt2e("mlp", reduce_range=True)
    assert ("nn.dense_u8s8" in kernels_of(ember.build(mod, target=target, params=params))) == seven
    _, _, mod, params, _ = pt2e("mlp", reduce_range=False)
    assert "nn.dense_u8s8" not in kernels_of(ember.build(mod, target=target, params=params))


def test_a_model_left_in_float32_says_why(caplog):
    """Built for Zen 3, the default config's MLP (activations up to 255) logs a warning that
    names reduce_range; the reduce_range one, and the default one on the host with VNNI or
    with the products switched off, log none; on Haswell (no fast int8) an info line."""
    import logging
    _, _, mod, params, _ = pt2e("mlp", reduce_range=False)
    _, _, mod7, params7, _ = pt2e("mlp", reduce_range=True)

    def warnings_of(m, p, target, **ctx):
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="ember"):
            with ember.transform.PassContext(opt_level=3, **ctx):
                ember.build(m, target=target, params=p)
        return [(r.levelno, r.getMessage()) for r in caplog.records
                if "int8" in r.getMessage() and "kernel" not in r.getMessage()]

    said = warnings_of(mod, params, "llvm -mcpu=znver3")
    assert len(said) == 1 and said[0][0] == logging.WARNING and "reduce_range" in said[0][1]
    assert warnings_of(mod7, params7, "llvm -mcpu=znver3") == []
    assert warnings_of(mod, params, "llvm -mcpu=znver3",
                       config={"Int8Products.int8_dot": "off"}) == []
    assert warnings_of(mod, params, "llvm -mcpu=znver4") == []
    said = warnings_of(mod7, params7, "llvm -mcpu=haswell")
    assert len(said) == 1 and said[0][0] == logging.INFO, said
