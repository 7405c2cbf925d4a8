"""The int8 GEMM (issue 45): nn.pack_bytes4 packs uint8 activations and int8 weights four
bytes to an int32 word along K, and nn.dense_u8s8 sums their products exactly in int32 (one
vpdpbusd per vector where the CPU has VNNI). Checked exactly against NumPy's int64 product on
the host; the instruction choice compiled for named CPUs (never run there)."""
import re

import numpy as np
import pytest

import ember
from ember import ir, op
from op_checks import error_of


def int8_dense(m, n, k, seed=0, weight_input=False):
    rng = np.random.default_rng(seed)
    xq = rng.integers(0, 256, (m, k)).astype(np.uint8)
    wq = rng.integers(-128, 128, (n, k)).astype(np.int8)
    xq[0, :4], wq[0, :4] = 255, -128  # the extremes: no 16-bit saturation (vpmaddubsw's)
    x = ir.var("x", (m, k), "uint8")
    w = ir.var("w", (n, k), "int8") if weight_input else ir.const(wq)
    f = ir.Function([x] + ([w] if weight_input else []),
                    op.nn.dense_u8s8(op.nn.pack_bytes4(x), op.nn.pack_bytes4(w)))
    return f, [xq] + ([wq] if weight_input else []), xq.astype(np.int64) @ wq.astype(np.int64).T


# A GEMV, a short K that four does not divide (zero words past it), outputs that no vector
# divides, a register-tiled GEMM, and a weight that is an input (not packed in panels).
@pytest.mark.parametrize("m,n,k,weight_input", [(1, 64, 256, False), (5, 10, 67, False),
                                                (64, 100, 60, False), (48, 96, 512, False),
                                                (7, 33, 40, True)])
def test_int8_dense_is_exact(m, n, k, weight_input):
    f, args, want = int8_dense(m, n, k, weight_input=weight_input)
    for disabled in ([], ["FuseOps", "AlterOpLayout"]):
        with ember.transform.PassContext(disabled_passes=disabled):
            got = ember.GraphModule(ember.build(f))(*args).numpy()
        assert got.dtype == np.int32
        np.testing.assert_array_equal(got, want)


def test_packing_words_are_little_endian_bytes_zero_past_k():
    x = np.array([[1, 2, 3, 4, 255, 128]], np.uint8)
    v = ir.var("x", (1, 6), "uint8")
    got = ember.GraphModule(ember.build(ir.Function([v], op.nn.pack_bytes4(v))))(x).numpy()
    np.testing.assert_array_equal(got, [[0x04030201, 0x80FF]])


@pytest.mark.parametrize("cpu,register", [("znver4", "zmm"), ("cascadelake", "zmm"),
                                          ("alderlake", "ymm"), ("znver3", None),
                                          ("skylake-avx512", None)])
def test_vnni_cpus_run_the_products_as_vpdpbusd(cpu, register):
    """AVX-512 VNNI CPUs take vpdpbusd at 512 bits, AVX-VNNI ones (Alder Lake) its VEX form
    at 256; the others widen the bytes to int32 products (exact, and slower than float32
    FMAs: their vpmaddubsw / vpmaddwd kernel is still to come)."""
    f, _, _ = int8_dense(32, 64, 256)
    asm = ember.build(f, target=f"llvm -mcpu={cpu}").get_source("asm")
    found = re.findall(r"vpdpbusd\s+[^\n]*%(\w+)", asm)
    if register:
        assert found and all(r.startswith(register) for r in found), cpu
    else:
        assert not found, cpu


def test_bad_operands_are_clear_errors():
    f = ir.var("f", (2, 8))
    assert "packs int8 or uint8 bytes" in error_of(lambda: op.nn.pack_bytes4(f))
    words = op.nn.pack_bytes4(ir.var("x", (2, 8), "uint8"))
    assert "pack the uint8 activations" in error_of(lambda: op.nn.dense_u8s8(words, f))
    w = op.nn.pack_bytes4(ir.var("w", (3, 12), "int8"))
    assert "words of K" in error_of(lambda: op.nn.dense_u8s8(words, w))
