"""Weight-only int8 dense layers (issue 45): torchao's Int8WeightOnlyConfig exports a linear
layer as mm(x, cast(transpose(int8 weight))) * scale + bias; RecognizePatterns makes that an
nn.dense whose weight stays int8. Where the CPU has no int8 dot product (or config
Int8Products.int8_dot = off) AlterOpLayout packs it as a float weight's panels and the
kernel converts each weight as it reads it: the same float32 products as torchao's model in
eager, so the error is float32 rounding. On VNNI CPUs Int8Products takes each row of
activations to 16 bits in two bytes and multiplies them by the weight words (vpdpbusd):
the activations' rounding adds a bounded error, still far below the quantization error;
AVX2 CPUs with a fast vpmaddubsw (Zen 3) take 14 bits in two 7-bit bytes instead."""
import re
import warnings

import numpy as np
import pytest
import torch

import ember
from ember import ir, op
from op_checks import error_of

quantization = pytest.importorskip("torchao.quantization")


def quantized(model):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        quantization.quantize_(model, quantization.Int8WeightOnlyConfig())
    return model


def build(model, example, target="llvm", **ctx):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mod, params = ember.frontend.from_pytorch(model, example)
    with ember.transform.PassContext(opt_level=3, **ctx):
        return ember.build(mod, target=target, params=params)


def mlp(rows_in, hidden, out):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(rows_in, hidden), torch.nn.GELU(),
                               torch.nn.Linear(hidden, out)).eval()


# Batch 1 (a GEMV: the weights' panels, or lane-packed / row-kept where no vector divides
# the outputs), a few rows (a register tile), and outputs that no vector divides. int8_dot
# "off" keeps the float32 products (each weight converted as it is read): their error is
# float32 rounding. "on" (VNNI CPUs' default) takes the activations to 16 bits a row
# (Int8Products): their rounding adds at most 2^-16 of a row's largest magnitude an element,
# which stays far below the weights' quantization error.
@pytest.mark.parametrize("dot", ["off", "on"])
@pytest.mark.parametrize("rows,hidden,out", [(1, 256, 64), (5, 96, 10), (1, 64, 10)])
def test_weight_only_int8_dense_keeps_int8_weights_and_matches_torchao(rows, hidden, out, dot):
    fp = mlp(48, hidden, out)
    q = quantized(mlp(48, hidden, out))
    x = torch.randn(rows, 48)
    ctx = {"config": {"Int8Products.int8_dot": dot}}
    lib = build(q, (x,), **ctx)
    graph = str(lib.function)
    if dot == "off" or rows > 1:  # more rows keep the float32 products (a GEMM, not a GEMV)
        assert "float32[" in graph and graph.count("int8[") >= 2, graph  # both weights int8
        assert "dense_u8s8" not in graph
    else:
        assert graph.count("nn.dense_u8s8_packed(") == 2, graph
    unfused = build(q, (x,), disabled_passes=["FuseOps"], **ctx)
    with torch.no_grad():
        want, fp32 = q(x).numpy(), fp(x).numpy()
    got = ember.GraphModule(lib)(x.numpy()).numpy()
    scale = np.abs(want).max()
    quantization_error = np.abs(want - fp32).max()
    tolerance = 1e-5 if dot == "off" or rows > 1 else 1e-4
    assert np.abs(got - want).max() <= tolerance * scale < 0.05 * quantization_error
    np.testing.assert_allclose(ember.GraphModule(unfused)(x.numpy()).numpy(), got,
                               atol=1e-5 * scale, rtol=0)


# 16 bits (VNNI: the host forced on) and 14 bits in 7-bit bytes (CPUs with vpmaddubsw's fast
# 7-bit products only: Zen 3's AVX2 code, which every machine here runs).
@pytest.mark.parametrize("k", [64, 250])
@pytest.mark.parametrize("target,top", [("llvm", 32767), ("llvm -mcpu=znver3", 8191)])
def test_16_and_14_bit_activations_stay_within_their_rounding_bound(k, target, top):
    """One quantized linear layer at batch 1 on a row of normal values, one of zeros, and one
    with an outlier 1000 times the rest: each output of the 16-bit (14-bit) activations'
    build is within the bound of x's rounding, max|x_row| / 32767 (8191) / 2 times the sum
    of the output's |weights| (x scale), of torchao's float32 products, plus float32
    rounding. K = 250 leaves a partial word."""
    torch.manual_seed(1)
    q = quantized(torch.nn.Linear(k, 40).eval())
    x = torch.randn(3, k)
    x[1] = 0
    x[2, 7] = 1000
    config = {"Int8Products.int8_dot": "on"} if target == "llvm" else {}
    lib = build(q, (x[:1],), target=target, config=config)
    assert "nn.dense_u8s8" in str(lib.function)
    assert ("activation_bits=7" in str(lib.function)) == (top == 8191), str(lib.function)
    with torch.no_grad():
        want = q(x).numpy()
    w = (q.weight.qdata.float() * q.weight.scale.float().reshape(-1, 1)).abs().numpy()
    bound = (x.abs().amax(dim=1, keepdim=True).numpy() / top / 2) @ w.sum(1, keepdims=True).T
    m = ember.GraphModule(lib)
    got = np.concatenate([m(x[i:i + 1].numpy()).numpy() for i in range(3)])
    assert np.all(np.abs(got - want) <= bound + 1e-6 * np.abs(want).max()), (got - want, bound)
    assert np.all(got[1] == want[1])  # a zero row is its bias


def test_the_pattern_takes_only_8_bit_constants_widened_to_the_data_type():
    """A weight of float32 or int32 keeps the cast (FoldConstant folds it); a weight that is
    an input (not a constant) is left alone; dense's type relation takes int8 weights only
    next to float data."""
    x = ir.var("x", (2, 8))
    a8 = np.arange(-12, 12, dtype=np.int8).reshape(3, 8)
    w8, w32 = ir.const(a8), ir.const(a8.astype(np.int32))
    wv = ir.var("w", (3, 8), "int8")
    xs = np.random.default_rng(0).standard_normal((2, 8)).astype(np.float32)
    for w, narrow in ((w8, True), (w32, False), (wv, False)):
        f = ir.Function([x] + ([wv] if w is wv else []),
                        op.nn.dense(x, op.cast(w, "float32")))
        # int8_dot off: the float32 products (on, VNNI CPUs take 16-bit activations)
        with ember.transform.PassContext(config={"Int8Products.int8_dot": "off"}):
            lib = ember.build(f)
        # the dense's kernel: its parameters' types
        dense = [line for line in str(lib.function).splitlines()
                 if "primitive fn" in line and "-> float32[2, 3]" in line]
        assert len(dense) == 1 and ("int8[" in dense[0]) == narrow, str(lib.function)
        got = ember.GraphModule(lib)(*([xs] + ([a8] if w is wv else []))).numpy()
        np.testing.assert_allclose(got, xs @ a8.T.astype(np.float32), rtol=1e-6, atol=1e-5)
    msg = error_of(lambda: op.nn.dense(ir.var("i", (2, 8), "int32"), w8))
    assert "data" in msg and "int32" in msg


@pytest.mark.parametrize("cpu", ["znver1", "znver3", "znver4", "sapphirerapids"])
def test_the_int8_gemv_reads_whole_vectors_of_weights_on_each_cpu(cpu):
    """Compiled for a named CPU (never run: numerics run on the host above), the batch-1
    dense reads its int8 weights as whole vectors. AVX-512 VNNI CPUs multiply words of four
    weights by the activations' bytes (vpdpbusd on 512-bit vectors), nothing converted;
    Zen 3 (AVX2, fast vpmaddubsw) multiplies them by 7-bit bytes (vpmaddubsw on 256-bit
    vectors); Zen 1 (vpmaddubsw once a cycle) converts each weight to float32."""
    q = quantized(mlp(48, 256, 64))
    lib = build(q, (torch.randn(1, 48),), target=f"llvm -mcpu={cpu}")
    asm = lib.get_source("asm")
    if cpu in ("znver4", "sapphirerapids"):
        assert re.search(r"vpdpbusd\s+[^\n]*%zmm", asm), cpu
        assert not re.search(r"vpmovsxbd", asm), cpu
    elif cpu == "znver3":
        assert re.search(r"vpmaddubsw\s+[^\n]*%ymm", asm), cpu
        assert not re.search(r"vpmovsxbd|vpdpbusd", asm), cpu
    else:
        assert re.search(r"vpmovsxbd\s+[^\n]*%ymm", asm), cpu
        assert re.search(r"vcvtdq2ps\s+%ymm", asm), cpu


# ---------------------------------------------------------------- 4-bit weights in groups

def quantized_int4(model, group):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        quantization.quantize_(model, quantization.IntxWeightOnlyConfig(
            weight_dtype=torch.int4, granularity=quantization.PerGroup(group)))
    return model


@pytest.mark.parametrize("group", [32, 64])
def test_int4_gemv_matches_torchao_within_the_activations_rounding(group):
    """torchao's 4-bit weights with a scale per group (IntxWeightOnlyConfig) at batch 1:
    on VNNI CPUs (int8_dot on) one nn.dense_int4 kernel reads the weights as nibbles (an
    eighth of float32's bytes) with x in 16 bits; each output is within the bound of x's
    rounding (max|x| / 32767 / 2 times the sum of its |dequantized weights|) of torchao's
    model in eager, plus float32 rounding. The same build without FuseOps, or without
    AlterOpLayout (the unpacked op), gives the same numbers; int8_dot off folds the weights to
    float32 (float32 rounding only)."""
    torch.manual_seed(2)
    q = quantized_int4(torch.nn.Linear(256, 48).eval(), group)
    x = torch.randn(4, 256)
    x[1] = 0
    x[2, 5] = 500
    on = {"config": {"Int8Products.int8_dot": "on"}}
    lib = build(q, (x[:1],), **on)
    assert "nn.dense_int4_packed(" in str(lib.function)
    with torch.no_grad():
        want = q(x).numpy()
    w = q.weight.dequantize().abs().numpy()
    bound = (x.abs().amax(dim=1, keepdim=True).numpy() / 32767 / 2) @ w.sum(1, keepdims=True).T
    slack = 2e-6 * np.abs(want).max()
    for extra in ({}, {"disabled_passes": ["FuseOps"]}, {"disabled_passes": ["AlterOpLayout"]}):
        m = ember.GraphModule(build(q, (x[:1],), **on, **extra) if extra else lib)
        got = np.concatenate([m(x[i:i + 1].numpy()).numpy() for i in range(4)])
        assert np.all(np.abs(got - want) <= bound + slack), (extra, got - want, bound)
        assert np.all(got[1] == want[1])  # a zero row is its bias
    off = build(q, (x[:1],), config={"Int8Products.int8_dot": "off"})
    assert "dense_int4" not in str(off.function)
    got = ember.GraphModule(off)(x[:1].numpy()).numpy()
    np.testing.assert_allclose(got, want[:1], rtol=0, atol=1e-5 * np.abs(want).max())


def test_an_int4_mlp_and_its_near_misses():
    """Two int4 layers with a GELU between agree with torchao far below the 4-bit weights'
    quantization error. More rows (a GEMM) and 8-bit groups keep the float32 weights."""
    torch.manual_seed(3)
    fp = mlp(64, 128, 32)
    q = quantized_int4(mlp(64, 128, 32), 32)
    x = torch.randn(1, 64)
    lib = build(q, (x,))
    with torch.no_grad():
        want, fp32 = q(x).numpy(), fp(x).numpy()
    got = ember.GraphModule(lib)(x.numpy()).numpy()
    scale = np.abs(want).max()
    assert np.abs(got - want).max() <= 1e-4 * scale < 0.01 * np.abs(want - fp32).max()
    if "nn.dense_int4" in str(lib.function):  # the host has VNNI
        assert str(lib.function).count("nn.dense_int4_packed(") == 2
    rows = build(q, (torch.randn(3, 64),), config={"Int8Products.int8_dot": "on"})
    assert "dense_int4" not in str(rows.function)
    g8 = mlp(64, 128, 32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        quantization.quantize_(g8, quantization.IntxWeightOnlyConfig(
            weight_dtype=torch.int8, granularity=quantization.PerGroup(32)))
    lib8 = build(g8, (x,), config={"Int8Products.int8_dot": "on"})
    assert "dense_int4" not in str(lib8.function)
    with torch.no_grad():
        want8 = g8(x).numpy()
    np.testing.assert_allclose(ember.GraphModule(lib8)(x.numpy()).numpy(), want8,
                               rtol=0, atol=1e-5 * np.abs(want8).max())


@pytest.mark.parametrize("cpu", ["znver4", "sapphirerapids"])
def test_the_int4_gemv_unpacks_nibbles_into_vpdpbusd_on_each_vnni_cpu(cpu):
    """Compiled for a named VNNI CPU (never run): the 4-bit dense masks and shifts each
    vector of weight words into nibbles and multiplies them with vpdpbusd on 512-bit vectors."""
    q = quantized_int4(torch.nn.Linear(256, 64).eval(), 32)
    lib = build(q, (torch.randn(1, 256),), target=f"llvm -mcpu={cpu}")
    assert "nn.dense_int4_packed(" in str(lib.function)
    asm = lib.get_source("asm")
    assert len(re.findall(r"vpdpbusd\s+[^\n]*%zmm", asm)) >= 8, cpu
    assert re.search(r"vpsrld\s+\$4,[^\n]*%zmm", asm), cpu


def test_bad_int4_operands_are_clear_errors():
    x4, t = ir.var("x", (2, 16), "int32"), ir.var("t", (2,), "int32")
    w, s = ir.var("w", (12, 8), "int32"), ir.var("s", (2, 12))
    assert str(op.nn.dense_int4(x4, t, w, s, group=32).type) == "float32[1, 12]"
    msg = error_of(lambda: op.nn.dense_int4(x4, t, w, s, group=12))
    assert "nn.dense_int4" in msg and "multiple of 8" in msg
    msg = error_of(lambda: op.nn.dense_int4(x4, t, ir.var("w", (12, 6), "int32"), s, group=32))
    assert "do not hold 2 groups of 32" in msg
    assert "not int32 words" in error_of(lambda: op.nn.dense_int4(x4, t, s, s, group=32))
    msg = error_of(lambda: op.nn.dense_int4(x4, t, w, ir.var("s", (12, 2)), group=32))
    assert "are not [2, 12]" in msg


@pytest.mark.parametrize("scheme", ["int8", "int4"])
@pytest.mark.parametrize("target", ["llvm -mcpu=x86-64-v3", "llvm -mcpu=x86-64"])
def test_the_16_bit_gemvs_are_within_their_bound_without_vnni(scheme, target):
    """Forced on for AVX2 (x86-64-v3) and SSE2 (x86-64) code, which every x86-64 host runs:
    the int8 products are then two vpmaddwd per vector (exact), so the int8 and int4 GEMVs
    stay within the bound of the activations' 16-bit rounding, as on VNNI CPUs."""
    torch.manual_seed(4)
    q = torch.nn.Linear(256, 48).eval()
    q = quantized(q) if scheme == "int8" else quantized_int4(q, 32)
    x = torch.randn(1, 256)
    x[0, 9] = 300
    lib = build(q, (x,), target=target, config={"Int8Products.int8_dot": "on"})
    assert ("nn.dense_u8s8" if scheme == "int8" else "nn.dense_int4") in str(lib.function)
    with torch.no_grad():
        want = q(x).numpy()
    w = q.weight.dequantize().abs().numpy()
    bound = x.abs().max().item() / 32767 / 2 * w.sum(1) + 2e-6 * np.abs(want).max()
    got = ember.GraphModule(lib)(x.numpy()).numpy()
    assert np.all(np.abs(got - want) <= bound), (got - want, bound)


@pytest.mark.parametrize("scheme", ["int8", "int4"])
def test_a_non_finite_row_gives_nan_outputs(scheme):
    """A row holding a NaN or an infinity has no 16-bit form: its scale is NaN, so every
    output is NaN (never finite numbers; PyTorch's float products give +-inf for an
    infinity, which the int8 products cannot sign)."""
    torch.manual_seed(5)
    q = torch.nn.Linear(64, 8).eval()
    q = quantized(q) if scheme == "int8" else quantized_int4(q, 32)
    x = torch.randn(1, 64)
    m = ember.GraphModule(build(q, (x,), config={"Int8Products.int8_dot": "on"}))
    for bad in (float("nan"), float("inf"), -float("inf")):
        x[0, 3] = bad
        assert np.isnan(m(x.numpy()).numpy()).all(), bad
