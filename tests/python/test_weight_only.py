"""Weight-only int8 dense layers (issue 45): torchao's Int8WeightOnlyConfig exports a linear
layer as mm(x, cast(transpose(int8 weight))) * scale + bias; RecognizePatterns makes that an
nn.dense whose weight stays int8 (AlterOpLayout packs it as a float weight's panels) and the
kernel converts each weight as it reads it. Checked against torchao's quantized model run in
eager, which computes the same float32 products of the same int8 values: the error is
float32 rounding (a different summation order), far below the quantization error."""
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
# the outputs), a few rows (a register tile), and outputs that no vector divides.
@pytest.mark.parametrize("rows,hidden,out", [(1, 256, 64), (5, 96, 10), (1, 64, 10)])
def test_weight_only_int8_dense_keeps_int8_weights_and_matches_torchao(rows, hidden, out):
    fp = mlp(48, hidden, out)
    q = quantized(mlp(48, hidden, out))
    x = torch.randn(rows, 48)
    lib = build(q, (x,))
    graph = str(lib.function)
    assert "float32[" in graph and graph.count("int8[") >= 2, graph  # both weights stay int8
    unfused = build(q, (x,), disabled_passes=["FuseOps"])
    with torch.no_grad():
        want, fp32 = q(x).numpy(), fp(x).numpy()
    got = ember.GraphModule(lib)(x.numpy()).numpy()
    scale = np.abs(want).max()
    quantization_error = np.abs(want - fp32).max()
    assert np.abs(got - want).max() <= 1e-5 * scale < 0.01 * quantization_error
    np.testing.assert_allclose(ember.GraphModule(unfused)(x.numpy()).numpy(), got,
                               atol=1e-5 * scale, rtol=0)


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
def test_the_int8_gemv_converts_whole_vectors_on_each_cpu(cpu):
    """Compiled for a named CPU (never run: numerics run on the host above), the batch-1
    dense reads its int8 weights as whole vectors of sign-extended bytes converted to
    float32: 256-bit vectors on AVX2 CPUs, 512-bit ones on AVX-512 CPUs."""
    q = quantized(mlp(48, 256, 64))
    lib = build(q, (torch.randn(1, 48),), target=f"llvm -mcpu={cpu}")
    asm = lib.get_source("asm")
    reg = "zmm" if cpu in ("znver4", "sapphirerapids") else "ymm"
    assert re.search(rf"vpmovsxbd\s+[^\n]*%{reg}", asm), cpu
    assert re.search(rf"vcvtdq2ps\s+%{reg}", asm), cpu
