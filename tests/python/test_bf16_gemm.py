"""The bfloat16 GEMM (issue 45): nn.pack_bf16_pairs packs bfloat16 activations and weights two
to an int32 word along K, and nn.dense_bf16 sums their products in float32, one vdpbf16ps per
vector where the CPU has AVX512_BF16 (two FMAs of the widened halves elsewhere: the same
sums, in the same order, except that vdpbf16ps flushes subnormals). BF16Products chooses it
for a bfloat16 dense by constant weights where the machine model has bf16_dot (or config
"BF16Products.bf16_dot" = "on"). Numerics on the host; the instruction choice compiled for
named CPUs (never run there).

Tolerance: the products of bfloat16 values are exact in float32, so against a float64
product of the same bfloat16 values the float32 sums are within K * 2^-24 of the sum of the
products' magnitudes (rtol 1e-5 of it here)."""
import re

import numpy as np
import pytest
import torch
import torch.nn as nn

import ember
from ember import ir, op


def _bf16(shape, seed):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed)).to(torch.bfloat16)


def kernels_of(lib):
    return " ".join(" ".join(k.ops) for k in lib.fusion_report())


@pytest.mark.parametrize("m,n,k,weight_input", [(1, 64, 256, False), (5, 10, 67, False),
                                                (64, 100, 60, False), (48, 96, 512, False),
                                                (7, 33, 41, True)])
def test_bf16_dense_sums_in_float32(m, n, k, weight_input):
    xb, wb = _bf16((m, k), 1), _bf16((n, k), 2)
    x = ir.var("x", (m, k), "bfloat16")
    w = ir.var("w", (n, k), "bfloat16") if weight_input else ir.const(wb)
    f = ir.Function([x] + ([w] if weight_input else []),
                    op.nn.dense_bf16(op.nn.pack_bf16_pairs(x), op.nn.pack_bf16_pairs(w)))
    x64, w64 = xb.double(), wb.double()
    want = (x64 @ w64.T).numpy()
    scale = (x64.abs() @ w64.abs().T).numpy()
    for disabled in ([], ["FuseOps", "AlterOpLayout"]):
        with ember.transform.PassContext(disabled_passes=disabled):
            lib = ember.build(f)
        got = ember.GraphModule(lib)(xb, *([wb] if weight_input else [])).numpy()
        assert got.dtype == np.float32
        assert np.all(np.abs(got - want) <= 1e-5 * scale + 1e-30), disabled


def test_pairs_are_little_endian_halves_zero_past_k():
    x = torch.tensor([[1.0, 2.0, -3.0]]).to(torch.bfloat16)
    v = ir.var("x", (1, 3), "bfloat16")
    got = ember.GraphModule(ember.build(ir.Function([v], op.nn.pack_bf16_pairs(v))))(x).numpy()
    bits = x.view(torch.int16).numpy().astype(np.uint16).astype(np.uint32)
    want = np.array([[bits[0, 0] | bits[0, 1] << 16, bits[0, 2]]], np.uint32).view(np.int32)
    np.testing.assert_array_equal(got, want)


def test_bad_operands_say_what_to_pack():
    x = ir.var("x", (2, 8), "float32")
    with pytest.raises(ember.EmberError, match="nn.pack_bf16_pairs packs bfloat16"):
        op.nn.pack_bf16_pairs(x)
    with pytest.raises(ember.EmberError, match="pack the bfloat16 activations"):
        op.nn.dense_bf16(x, ir.var("w", (4, 4), "int32"))
    with pytest.raises(ember.EmberError, match="BF16Products.bf16_dot"):
        with ember.transform.PassContext(config={"BF16Products.bf16_dot": "yes"}):
            ember.build(ir.Function([x], op.nn.relu(x)))


def _linear_model(k=96, n=80):
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(k, n), nn.GELU(), nn.Linear(n, 24)).to(torch.bfloat16).eval()


@pytest.mark.parametrize("mode", ["on", "off"])
def test_bf16_linear_layers_match_torch(mode):
    model = _linear_model()
    x = _bf16((9, 96), 3)
    mod, params = ember.frontend.from_pytorch(model, (x,))
    with ember.transform.PassContext(opt_level=3, config={"BF16Products.bf16_dot": mode}):
        lib = ember.build(mod, params=params)
    assert (kernels_of(lib).count("nn.dense_bf16_packed") == 2) == (mode == "on")
    got = torch.from_dlpack(ember.GraphModule(lib)(x))
    with torch.no_grad():
        want, ref32 = model(x), model.float()(x.float())
    scale = float(ref32.abs().max())
    torch.testing.assert_close(got.float(), want.float(), rtol=2 ** -7, atol=2 ** -7 * scale)
    torch.testing.assert_close(got.float(), ref32, rtol=1e-2, atol=1e-2 * scale)


def test_matmul_by_a_constant_matrix_and_a_3d_input():
    v = _bf16((40, 24), 4)

    class M(nn.Module):
        def forward(self, x):
            return x @ v

    x = _bf16((2, 5, 40), 5)
    mod, params = ember.frontend.from_pytorch(M(), (x,))
    with ember.transform.PassContext(config={"BF16Products.bf16_dot": "on"}):
        lib = ember.build(mod, params=params)
    assert "nn.dense_bf16" in kernels_of(lib)
    got = torch.from_dlpack(ember.GraphModule(lib)(x))
    torch.testing.assert_close(got.float(), (x @ v).float(), rtol=2 ** -7, atol=1e-2)


@pytest.mark.parametrize("cpu,register", [("znver4", "zmm"), ("sapphirerapids", "zmm"),
                                          ("znver3", None), ("skylake-avx512", None)])
def test_bf16_cpus_run_the_products_as_vdpbf16ps(cpu, register):
    """AVX512_BF16 CPUs take the bfloat16 kernels (vdpbf16ps at 512 bits); the others keep
    the float32 dense of the widened values, and forced on they compile the FMA fallback."""
    target = f"llvm -mcpu={cpu}"
    assert ember.target.machine_model(target).bf16_dot == (register is not None)
    mod, params = ember.frontend.from_pytorch(_linear_model(), (_bf16((32, 96), 6),))
    lib = ember.build(mod, target=target, params=params)
    asm = lib.get_source("asm")
    found = [r for line in asm.splitlines() if "vdpbf16ps" in line
             for r in re.findall(r"%([xyz]mm)\d+", line)]
    if register:
        assert "nn.dense_bf16_packed" in kernels_of(lib)
        # (the last layer's 24 outputs: a zmm and a ymm)
        assert register in found and set(found) <= {"zmm", "ymm"}, cpu
    else:
        assert "nn.dense_bf16" not in kernels_of(lib) and not found, cpu
        with ember.transform.PassContext(config={"BF16Products.bf16_dot": "on"}):
            forced = ember.build(mod, target=target, params=params)
        assert "nn.dense_bf16_packed" in kernels_of(forced)
        assert "vdpbf16ps" not in forced.get_source("asm")


def test_storage_between_kernels_is_bfloat16():
    """The casts LegalizeBF16 puts around each op fuse into the kernels, and the dense's
    activations are packed words of bfloat16 pairs: every kernel writes bfloat16 or
    bfloat16 pairs. (Not so around ops that are never fused, softmax and log_softmax,
    attention, cumsum, topk: their float32 inputs and outputs cross kernels widened.)"""
    x = ir.var("x", (64, 64), "bfloat16")
    w = ir.const(_bf16((64, 64), 4), "w")
    y = op.exp(x) * x
    f = ir.Function([x], op.tanh(op.nn.dense(y, w)) + y)
    with ember.transform.PassContext(config={"BF16Products.bf16_dot": "on"}):
        graph = ember.build(f).get_source("graph")
    outputs = [line.split("->")[1].split("{")[0].strip()
               for line in graph.splitlines() if "primitive fn" in line]
    assert len(outputs) >= 2 and all(o.startswith(("bfloat16", "int32")) for o in outputs), graph
