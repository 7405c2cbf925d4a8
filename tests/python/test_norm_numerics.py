"""Layer and instance norm of constant and near-constant rows against PyTorch in float64.

mean_variance_norm (src/ir/ops/nn_norm.cc) shifts each row by its first element before summing:
without it, the float32 mean of a constant row c is a few ulps off c, and x - mean times
rsqrt(eps) gave errors of gamma * ulp(c) / sqrt(eps) (0.02 for c = 1000) where torch gives
exactly beta; rows of large offset and small spread (1000 + 1e-3 * noise) lost their spread's
digits. Each case runs unfused and fused after a dense (the row-block GEMM kernel, whose
scratch buffer is on the heap), at both vector widths.

Tolerance: rtol 1e-4, atol 1e-4 against float64 on the same float32 inputs (the outputs have
unit scale); a constant row must give beta to 1e-6. Last, the loop nest of a per-row statistic
under an output vectorized across rows (log-sum-exp): it still sums along each row.
"""
import re

import numpy as np
import pytest
import torch

import ember
from ember import ir, op
from op_checks import STRUCTURE_CPUS, build_for, build_run

WIDTHS = [256, 512]
TOL = dict(rtol=1e-4, atol=1e-4)
CONSTANTS = [0.0, 1.6129835844039917, -7.3, 1000.0, -3.0e4, 1e-3, 65504.0]


def _rows(kind, m, n, rng):
    if kind == "constant":
        c = np.resize(np.array(CONSTANTS, "float32"), m)
        return np.repeat(c[:, None], n, axis=1)
    return (1000 + 1e-3 * rng.standard_normal((m, n))).astype("float32")


def _affine(n, rng):
    return rng.standard_normal(n).astype("float32"), rng.standard_normal(n).astype("float32")


def _reference(x, gamma, beta):
    t = torch.from_numpy(x).double()
    return torch.nn.functional.layer_norm(t, (x.shape[-1],), torch.from_numpy(gamma).double(),
                                          torch.from_numpy(beta).double(), 1e-5).numpy()


def _check(got, x, gamma, beta, kind):
    want = _reference(x, gamma, beta)
    np.testing.assert_allclose(got, want, **TOL)
    if kind == "constant":
        np.testing.assert_allclose(got, np.broadcast_to(beta, got.shape), rtol=0, atol=1e-6)


@pytest.mark.parametrize("bits", WIDTHS)
@pytest.mark.parametrize("kind", ["constant", "near_constant"])
@pytest.mark.parametrize("n", [29, 768])
def test_layer_norm_rows(bits, kind, n):
    rng = np.random.default_rng(n)
    x_np = _rows(kind, 7, n, rng)
    gamma, beta = _affine(n, rng)
    x = ir.var("x", x_np.shape, "float32")
    f = ir.Function([x], op.nn.layer_norm(x, ir.const(gamma), ir.const(beta)))
    _, (got,) = build_run(f, [x_np], bits)
    _check(got, x_np, gamma, beta, kind)


@pytest.mark.parametrize("bits", WIDTHS)
@pytest.mark.parametrize("kind", ["constant", "near_constant"])
def test_layer_norm_fused_after_dense(bits, kind, tmp_path):
    """dense -> bias_add -> add -> layer_norm as one kernel (the dense is its anchor; forced:
    at K = 32 the cost rule runs the norm apart on AVX-512, measured 75 us against 90 fused).
    A zero weight and bias make the norm's input exactly the residual rows, so the reference
    needs no GEMM. The exported model (its scratch buffer comes from the runtime's ember_alloc
    through the file's import slots) gives the same numbers."""
    rng = np.random.default_rng(bits)
    m, n, k = 256, 768, 32
    x = ir.var("x", (m, k), "float32")
    r = ir.var("r", (m, n), "float32")
    w = ir.const(np.zeros((n, k), "float32"))
    y = op.add(op.nn.bias_add(op.nn.dense(x, w), ir.const(np.zeros(n, "float32")), axis=1), r)
    gamma, beta = _affine(n, rng)
    f = ir.Function([x, r], op.nn.layer_norm(y, ir.const(gamma), ir.const(beta)))
    data = [rng.standard_normal((m, k)).astype("float32"), _rows(kind, m, n, rng)]
    lib, (got,) = build_run(f, data, bits, config={"FuseOps.cost_model": "none"})
    kernels = lib.fusion_report()
    assert len(kernels) == 1 and kernels[0].anchor.startswith("nn.dense"), kernels
    _check(got, data[1], gamma, beta, kind)
    assert "ember_alloc" in lib.get_source("ll")  # the GEMM's block of rows is on the heap

    lib.export(tmp_path / "m.ember")
    mod = ember.GraphModule(ember.load(tmp_path / "m.ember"))
    for i, a in enumerate(data):
        mod.set_input(i, a)
    mod.run()
    np.testing.assert_array_equal(mod.get_output(0).numpy(), got)


@pytest.mark.parametrize("kind", ["constant", "near_constant"])
def test_instance_norm_planes(kind):
    """instance_norm shares the computation: each (n, c) plane is a row."""
    rng = np.random.default_rng(3)
    x_np = _rows(kind, 6, 35, rng).reshape(2, 3, 5, 7)
    gamma, beta = _affine(3, rng)
    x = ir.var("x", x_np.shape, "float32")
    f = ir.Function([x], op.nn.instance_norm(x, ir.const(gamma), ir.const(beta)))
    _, (got,) = build_run(f, [x_np], 256)
    want = torch.nn.functional.instance_norm(
        torch.from_numpy(x_np).double(), weight=torch.from_numpy(gamma).double(),
        bias=torch.from_numpy(beta).double(), eps=1e-5).numpy()
    np.testing.assert_allclose(got, want, **TOL)
    if kind == "constant":
        np.testing.assert_allclose(got, np.broadcast_to(beta[:, None, None], got.shape), rtol=0,
                                   atol=1e-6)


@pytest.mark.parametrize("bits", WIDTHS)
@pytest.mark.parametrize("shape", [(1, 8, 56, 56), (2, 3, 13, 11)])
def test_instance_norm_sums_a_plane_in_one_contiguous_loop(bits, shape):
    """The statistics of an (n, c) plane are one loop over its H x W values, read at one flat
    index (annotated a rolled sum, which LLVM vectorizes into interleaved accumulators), not H loops of W each
    ending in a horizontal add: an instance norm over 64 x 56 x 56 on Zen 5 took 109 us that
    way, 25 us this way. Numbers against PyTorch in float64."""
    rng = np.random.default_rng(shape[-1])
    x_np = (rng.standard_normal(shape) * 3 + 1).astype("float32")
    gamma, beta = _affine(shape[1], rng)
    x = ir.var("x", shape, "float32")
    f = ir.Function([x], op.nn.instance_norm(x, ir.const(gamma), ir.const(beta)))
    _, (got,) = build_run(f, [x_np], bits)
    loop = build_for(f, STRUCTURE_CPUS[bits], bits).get_source("loop")
    plane = shape[2] * shape[3]
    for stat in ("sum", "fix", "var"):
        m = re.search(rf"for (\S*instance_norm_{stat}\S*) in \[0, {plane}\) rolled_sum\(\d\):\n(.*)\n",
                      loop)
        assert m, loop
        read = re.search(r"p0\[([^\]]*)\]", m.group(2)).group(1)
        assert read.endswith(f"+ {m.group(1)})") and "/" not in read and "%" not in read, read
    want = torch.nn.functional.instance_norm(
        torch.from_numpy(x_np).double(), weight=torch.from_numpy(gamma).double(),
        bias=torch.from_numpy(beta).double(), eps=1e-5).numpy()
    np.testing.assert_allclose(got, want, **TOL)


@pytest.mark.parametrize("bits", [256, 512])
def test_row_statistics_sum_along_their_rows(bits):
    """A log-sum-exp per row of 3072: the output vectorizes across rows, but its max and sum
    walk each row (their reduction loops innermost, none vectorized across 16 strided rows:
    that ran 4.2x the unfused kernels on Zen 5), and match NumPy."""
    x = ir.var("x", (64, 3072), "float32")
    f = ir.Function([x], op.log_sum_exp(x, axis=1))
    lib = ember.build(f, target=f"llvm -vector-bits={bits}")
    loops = build_for(f, STRUCTURE_CPUS[bits], bits).get_source("loop")
    assert not re.search(r"log_sum_exp_(max|sum)\.i in \[0, \d+\) vectorized", loops), loops
    assert re.search(r"for log_sum_exp_sum\.r1 in \[0, 3072\) rolled_sum\(4\):\n\s+log_sum_exp_sum\[",
                     loops), loops
    xs = np.random.default_rng(0).standard_normal((64, 3072)).astype(np.float32) * 4
    m = ember.GraphModule(lib)
    got = m(x=xs)
    want = torch.logsumexp(torch.from_numpy(xs), dim=1).numpy()
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("bits", [256, 512])
def test_log_sum_exp_edges_with_a_nan_free_max(bits):
    """The log-sum-exp's max leaves NaNs out (so the code generator's max needs no NaN
    propagation: one vmaxps, `nnan`); a NaN still reaches its row's result through the sum.
    Rows with NaN, +inf (one, or two and a large finite value), -inf, all -inf, all NaN and
    finite values, against PyTorch."""
    inf, nan = np.inf, np.nan
    rows = [[1.0, nan, 2.0, 3.0], [nan] * 4, [inf, 1.0, 2.0, 3.0], [-inf, 1.0, 2.0, 3.0],
            [-inf] * 4, [80.0, -80.0, 1.0, 0.5], [inf, 100.0, inf, -inf], [nan, inf, -inf, 0.0]]
    xs = np.array(rows * 2, dtype=np.float32)  # 16 rows: a vector of rows at either width
    x = ir.var("x", xs.shape, "float32")
    lib = ember.build(ir.Function([x], op.log_sum_exp(x, axis=1)),
                      target=f"llvm -vector-bits={bits}")
    named = ember.build(ir.Function([x], op.log_sum_exp(x, axis=1)),
                        target=f"llvm -mcpu={STRUCTURE_CPUS[bits]} -vector-bits={bits}")
    assert re.search(r"nnan [^\n]*@llvm\.(vector\.reduce\.fmaximum|maximum)", named.get_source("ll"))
    got = np.asarray(ember.GraphModule(lib)(x=xs))
    want = torch.logsumexp(torch.from_numpy(xs), dim=1).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6, equal_nan=True)


def _contracted_error(y, want, v):
    """Max error of each normalized row summed against the positive vector v, relative to the
    largest such sum: a shift common to a row's outputs adds up along v, rounding does not."""
    exact = want @ v
    return np.abs(y.astype(np.float64) @ v - exact).max() / np.abs(exact).max()


@pytest.mark.parametrize("bits", WIDTHS)
def test_centred_rows_have_no_common_offset(bits):
    """Rows of zero mean whose first element (the shift) is far from it, normalized without
    an affine: BiT's weight standardization (F.batch_norm of each conv's weights, imported as
    an instance norm), whose rows its convs then sum against ReLU outputs. The correction
    stage (`_fix`) makes the outputs of a row centred to within rounding; without it each row
    was off by one common ~ulp and this error was 7-10x PyTorch's (BiT 1.8e-4 of its output
    scale against eager). Bound: 2x PyTorch's float32 layer norm on the same rows (both
    against float64)."""
    rng = np.random.default_rng(bits)
    m, n = 64, 576  # a 3 x 3 conv's weights over 64 channels
    x_np = rng.standard_normal((m, n)).astype("float32")
    x_np[:, 0] = np.where(x_np[:, 0] > 0, 2.5, -2.5)  # the shift, far from the mean
    v = np.abs(rng.standard_normal(n))  # ReLU outputs
    ones, zeros = np.ones(n, "float32"), np.zeros(n, "float32")
    want = _reference(x_np, ones, zeros)
    pt = torch.nn.functional.layer_norm(torch.from_numpy(x_np), (n,)).numpy()
    x = ir.var("x", x_np.shape, "float32")
    f = ir.Function([x], op.nn.layer_norm(x, ir.const(ones), ir.const(zeros)))
    _, (got,) = build_run(f, [x_np], bits)
    np.testing.assert_allclose(got, want, **TOL)
    assert _contracted_error(got, want, v) <= 2 * _contracted_error(pt, want, v)
