"""GEMM paths (src/passes/schedule/default_schedule.cc register tiles, AlterOpLayout's packed
dense weights) against NumPy in float64 at awkward sizes, for both vector widths, with the
layout pass on and off; and reductions fused onto a GEMM output (dense -> add -> layer norm,
dense -> softmax) against the unfused build.

Tolerance: float32 sums of K products in any order, compared with float64: rtol 1e-4 plus
atol 1e-5 * sqrt(K) (the inputs are standard normal, so the sums grow like sqrt(K)).
"""
import itertools
import re

import numpy as np
import pytest

import ember
from ember import ir, op
from op_checks import STRUCTURE_CPUS, build_for, build_run

WIDTHS = [256, 512]
LAYOUTS = {"packed": [], "plain": ["AlterOpLayout"]}
SIZES = [1, 3, 17, 64, 127, 768, 3072]
# (M, N, K): every size appears in every position; the largest products stay cheap.
CASES = sorted({(m, n, k) for m, n, k in itertools.product(SIZES, SIZES, SIZES)
                if m * n * k <= 3 * 1024 * 1024 and (m in (1, 17, 127) or n in (3, 768))})[::7]


def assert_gemm_close(got, want, k, what):
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5 * np.sqrt(k) + 1e-6, err_msg=what)


@pytest.mark.parametrize("bits", WIDTHS)
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_dense_at_awkward_sizes(bits, layout):
    rng = np.random.default_rng(bits)
    xs, outs, ref, data = [], [], [], []
    for m, n, k in CASES:
        x = ir.var(f"x{len(xs)}", (m, k), "float32")
        w = rng.standard_normal((n, k)).astype("float32")
        b = rng.standard_normal(n).astype("float32")
        xs.append(x)
        outs.append(op.nn.relu(op.nn.bias_add(op.nn.dense(x, ir.const(w)), ir.const(b), axis=1)))
        a = rng.standard_normal((m, k)).astype("float32")
        data.append(a)
        ref.append(np.maximum(a.astype(np.float64) @ w.T.astype(np.float64) + b, 0))
    lib, got = build_run(ir.Function(xs, ir.Tuple(outs)), data, bits, LAYOUTS[layout])
    anchors = sorted(r.anchor for r in lib.fusion_report())
    lanes = bits // 32
    # A GEMV over outputs no vector divides keeps its weight rows (dot products along K).
    want = sorted("nn.dense" if layout == "plain" or (m == 1 and n % lanes) else "nn.dense_packed"
                  for m, n, k in CASES)
    assert anchors == want
    for (m, n, k), g, r in zip(CASES, got, ref):
        assert_gemm_close(g, r, k, f"dense M={m} N={n} K={k}")


@pytest.mark.parametrize("bits", WIDTHS)
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_matmul_by_a_constant_is_packed(bits, layout):
    # x @ W with a constant W [K, N] takes dense's packed panels (transposed at build time);
    # a 1-D W and a variable W stay matmuls.
    rng = np.random.default_rng(11)
    shapes = [((17, 64), (64, 127)), ((3, 768), (768, 3)), ((2, 5, 13), (13, 33))]
    xs, outs, data, ref = [], [], [], []
    for i, (sa, sb) in enumerate(shapes):
        a, w = rng.standard_normal(sa).astype("float32"), rng.standard_normal(sb).astype("float32")
        x = ir.var(f"x{i}", sa, "float32")
        xs.append(x)
        outs.append(op.nn.relu(op.nn.matmul(x, ir.const(w))))
        data.append(a)
        ref.append(np.maximum(np.matmul(a.astype(np.float64), w.astype(np.float64)), 0))
    v = rng.standard_normal(13).astype("float32")
    x = ir.var("xv", (4, 13), "float32")
    xs.append(x)
    outs.append(op.nn.matmul(x, ir.const(v)))
    a = rng.standard_normal((4, 13)).astype("float32")
    data.append(a)
    ref.append(a.astype(np.float64) @ v.astype(np.float64))
    lib, got = build_run(ir.Function(xs, ir.Tuple(outs)), data, bits, LAYOUTS[layout])
    anchors = sorted(r.anchor for r in lib.fusion_report())
    packed = ["nn.dense_packed"] * 3 if layout == "packed" else ["nn.matmul"] * 3
    assert anchors == sorted(packed + ["nn.matmul"])
    for (sa, sb), g, r in zip(shapes + [((4, 13), (13,))], got, ref):
        assert_gemm_close(g, r, sa[-1], f"matmul {sa} @ constant {sb}")


@pytest.mark.parametrize("bits", WIDTHS)
def test_matmul_and_batch_matmul(bits):
    rng = np.random.default_rng(7)
    shapes = [((17, 64), (64, 127)), ((3, 768), (768, 3)), ((1, 127), (127, 64)),
              ((2, 3, 17, 64), (64, 17)),                       # matmul, batched a
              ((4, 17, 3), (4, 3, 127)), ((2, 1, 64, 17), (3, 17, 3)),  # broadcast batch
              ((1, 127, 64), (5, 64, 1))]
    xs, outs, data, ref = [], [], [], []
    for i, (sa, sb) in enumerate(shapes):
        a, b = (rng.standard_normal(s).astype("float32") for s in (sa, sb))
        va, vb = ir.var(f"a{i}", sa, "float32"), ir.var(f"b{i}", sb, "float32")
        f = op.nn.matmul if len(sb) == 2 else op.nn.batch_matmul
        xs += [va, vb]
        outs.append(f(va, vb))
        data += [a, b]
        ref.append(np.matmul(a.astype(np.float64), b.astype(np.float64)))
    _, got = build_run(ir.Function(xs, ir.Tuple(outs)), data, bits)
    for (sa, sb), g, r in zip(shapes, got, ref):
        assert_gemm_close(g, r, sa[-1], f"matmul {sa} @ {sb}")


@pytest.mark.parametrize("bits", WIDTHS)
@pytest.mark.parametrize("m,n,k", [(128, 768, 96), (17, 64, 33), (1, 24, 5), (6, 1000, 8),
                                   (197, 768, 64), (131, 48, 40)])  # prime rows: shifted blocks
def test_reductions_fused_onto_a_gemm_match_unfused(bits, m, n, k):
    rng = np.random.default_rng(m + n)
    x = ir.var("x", (m, k), "float32")
    r = ir.var("r", (m, n), "float32")
    w = ir.const((rng.standard_normal((n, k)) / np.sqrt(k)).astype("float32"))
    b = ir.const(rng.standard_normal(n).astype("float32"))
    y = op.add(op.nn.bias_add(op.nn.dense(x, w), b, axis=1), r)
    gamma = ir.const(rng.standard_normal(n).astype("float32"))
    beta = ir.const(rng.standard_normal(n).astype("float32"))
    outs = ir.Tuple([op.nn.layer_norm(y, gamma, beta), op.nn.softmax(op.nn.dense(x, w))])
    data = [rng.standard_normal((m, k)).astype("float32"),
            rng.standard_normal((m, n)).astype("float32")]
    f = ir.Function([x, r], outs)
    # Fused whatever the cost rule says (at K = 8 it may run the norm apart): the numbers of
    # the fused kernel are what this checks.
    lib, fused = build_run(f, data, bits, config={"FuseOps.cost_model": "none"})
    _, unfused = build_run(f, data, bits, ["FuseOps"])
    kernels = [rep for rep in lib.fusion_report() if "nn.layer_norm" in rep.ops]
    assert len(kernels) == 1 and kernels[0].anchor.startswith("nn.dense"), lib.fusion_report()
    for a, b in zip(fused, unfused):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_row_statistics_over_a_gemm_block_walk_rows_contiguously():
    """dense -> add -> layer norm at BERT's shape computes a block of GEMM rows, then the
    layer norm's sum and variance of each row: the loop over a row's elements sits inside
    the loop over the block's rows, so each statistic reads its row contiguously (and LLVM
    vectorizes the sum) instead of one element of every row per step."""
    rng = np.random.default_rng(0)
    x = ir.var("x", (128, 96), "float32")
    r = ir.var("r", (128, 768), "float32")
    w = ir.const(rng.standard_normal((768, 96)).astype("float32"))
    y = op.nn.layer_norm(op.add(op.nn.dense(x, w), r))
    lib = ember.build(ir.Function([x, r], y), target="llvm -mcpu=znver3 -vector-bits=256")
    lines = lib.get_source("loop").splitlines()
    for stat in ("layer_norm_sum", "layer_norm_fix", "layer_norm_var"):
        rows = [i for i, l in enumerate(lines) if re.match(rf"\s*for {stat}\.\w+ in \[0, 64\)", l)]
        elems = [i for i, l in enumerate(lines) if re.match(rf"\s*for {stat}\.r0 in \[0, 768\)", l)]
        assert len(rows) == 1 and len(elems) == 1, "\n".join(lines)
        assert rows[0] < elems[0], "\n".join(lines)


@pytest.mark.parametrize("bits", WIDTHS)
def test_short_rows_pack_into_one_panel(bits):
    """N = 10 (a classifier's logits) over two rows is a row no vector divides: the register
    tile takes it as one vector of 10 lanes, so the weight is packed as one panel of 10
    columns, whose k-th row is one contiguous load (two 8-wide panels would make it a gather
    across them)."""
    rng = np.random.default_rng(1)
    x = ir.var("x", (2, 300), "float32")
    w = rng.standard_normal((10, 300)).astype("float32")
    f = ir.Function([x], op.nn.dense(x, ir.const(w)))
    data = [rng.standard_normal((2, 300)).astype("float32")]
    lib, (got,) = build_run(f, data, bits)
    assert "float32[1, 300, 10]" in lib.get_source("loop"), lib.get_source("loop")
    assert_gemm_close(got, data[0].astype(np.float64) @ w.T.astype(np.float64), 300, "N=10")


@pytest.mark.parametrize("bits", WIDTHS)
@pytest.mark.parametrize("n", [10, 100])
def test_a_gemv_over_short_rows_is_dot_products(bits, n):
    """One row of activations (batch 1) over outputs no vector divides: the weight keeps its
    [N, K] rows and each output is a dot product along K, not a one-vector register tile
    whose single FMA chain runs at the FMA latency. At 512 bits each row's reduction loop is
    innermost and contiguous (LLVM vectorizes it into interleaved accumulators); at 256
    bits that pace is half the L2's, and blocks of rows accumulate vector partials together
    (the rows unrolled inside the reduction loop, sharing each activation vector), summed
    across their lanes after it."""
    rng = np.random.default_rng(n)
    x = ir.var("x", (1, 2048), "float32")
    w = rng.standard_normal((n, 2048)).astype("float32")
    b = rng.standard_normal(n).astype("float32")
    f = ir.Function([x], op.nn.relu(op.nn.bias_add(op.nn.dense(x, ir.const(w)), ir.const(b))))
    data = [rng.standard_normal((1, 2048)).astype("float32")]
    _, (got,) = build_run(f, data, bits)
    lib = build_for(f, STRUCTURE_CPUS[bits], bits)
    loop = lib.get_source("loop")
    lanes = bits == 256 and n <= 16  # one tile's rows, packed in lanes: one stream
    weight = "float32[256, 10, 8]" if lanes else f"float32[{n}, 2048]"
    assert weight in loop and "dense_packed" not in loop, loop
    assert {r.anchor for r in lib.fusion_report()} == {"nn.dense_lanes" if lanes else "nn.dense"}
    # The dot-rows template (cpu_template_dot_rows.cc) names the path it took.
    assert {r.schedule for r in lib.fusion_report()} == {"gemv.rows" if bits == 512 else
                                                        "gemv.dot_rows"}
    lines = loop.splitlines()

    def loops(pattern):
        return [i for i, l in enumerate(lines) if re.match(rf"\s*for {pattern}", l)]

    if bits == 512:
        k, j = loops(r"dense\.k in \[0, 2048\) rolled_sum\(4\):"), loops(r"dense\.j in")
        assert len(k) == 1 and len(j) == 1 and j[0] < k[0], loop
        assert "partial" not in loop, loop
    else:
        k = loops(r"dense\.partial\.k(\.o)? in \[0, 256\)" if lanes else r"dense\.partial\.k\.o in")
        rows = loops(r"dense\.partial\.j(\.i)? in .* unrolled")
        assert len(k) == 1 and rows and k[0] < rows[-1], loop
        assert re.search(r"for dense\.partial\.dense\.f(\.i)? in \[0, 8\) vectorized", loop), loop
    if n == 10:  # one tile of the whole short row, not shifted tiles that repeat outputs
        assert loops(r"dense\.j in \[0, 10\):"), loop
    want = np.maximum(data[0].astype(np.float64) @ w.T.astype(np.float64) + b, 0)
    assert_gemm_close(got, want, 2048, f"N={n}")


@pytest.mark.parametrize("bits", WIDTHS)
def test_gemvs_over_short_rows_at_awkward_sizes(bits):
    """Batch-1 dense and matmul by a constant over outputs no vector divides, at awkward N and
    K: [N, K] dot products, and at 256 bits, where K takes whole vectors and N is one tile,
    nn.dense_lanes over a weight packed in lanes. Against NumPy in float64, with an epilogue."""
    rng = np.random.default_rng(bits + 1)
    shapes = [(n, k) for n in (1, 3, 5, 10, 13, 15, 17) for k in (8, 12, 64, 200, 768)]
    xs, outs, data, ref = [], [], [], []
    for i, (n, k) in enumerate(shapes):
        w = rng.standard_normal((n, k)).astype("float32")
        b = rng.standard_normal(n).astype("float32")
        a = rng.standard_normal((1, 1, k)).astype("float32")
        x = ir.var(f"x{i}", (1, 1, k), "float32")
        y = op.nn.dense(x, ir.const(w)) if i % 2 else op.nn.matmul(x, ir.const(w.T.copy()))
        xs.append(x)
        outs.append(op.tanh(op.add(y, ir.const(b))))
        data.append(a)
        ref.append(np.tanh(a.astype(np.float64) @ w.T.astype(np.float64) + b))
    _, got = build_run(ir.Function(xs, ir.Tuple(outs)), data, bits)
    lib = build_for(ir.Function(xs, ir.Tuple(outs)), STRUCTURE_CPUS[bits], bits)
    lanes = sorted(r.anchor for r in lib.fusion_report() if r.anchor == "nn.dense_lanes")
    want = [n for n, k in shapes if bits == 256 and n % 8 and n <= 16 and k % 8 == 0]
    assert len(lanes) == len(want)
    for (n, k), g, r in zip(shapes, got, ref):
        assert_gemm_close(g, r, k, f"GEMV N={n} K={k}")
