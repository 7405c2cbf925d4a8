"""nn.grouped_matmul (mixture-of-experts grouped matmul) against a float64 NumPy reference,
at both vector widths, with offsets as a run-time input and as a constant; malformed
offsets (unsorted, negative, past the rows) give the clamped result, never a crash; bad
types name the op. Tolerance rtol=1e-5, atol=1e-5 * sqrt(K) (float32 sums of K products).
"""
import numpy as np
import pytest
import torch

import ember
from ember import ir, op
from op_checks import build_run, error_of

rng = np.random.default_rng(11)


def reference(x, w, offs):
    """The op's definition in float64: group g ends at the running maximum of offsets[:g + 1]
    clamped to [0, S] and starts where group g - 1 ends; later rows are zero."""
    S, N = x.shape[0], w.shape[2]
    out = np.zeros((S, N))
    start = running = 0
    for g, o in enumerate(offs):
        running = max(running, int(o))
        end = min(running, S)
        out[start:end] = x[start:end].astype(np.float64) @ w[g].astype(np.float64)
        start = end
    return out


def random_offsets(S, G, rows_past=0, empty=True):
    """Sorted cumulative counts ending at S - rows_past, with some empty groups."""
    cuts = np.sort(rng.integers(0, S - rows_past + 1, size=G - 1))
    if empty and G > 2:
        cuts[1] = cuts[0]  # an empty group
    return np.concatenate([cuts, [S - rows_past]]).astype(np.int32)


def build_and_run(x, w, offs, vector_bits, const_offsets=False, const_weight=False,
                  with_lib=False):
    """Runs nn.grouped_matmul; offsets and weight are inputs, or constants (a constant weight
    is packed in panels by AlterOpLayout where its N takes whole vectors)."""
    xv = ir.var("x", shape=x.shape, dtype=x.dtype.name)
    params, inputs = [xv], [x]
    if const_weight:
        wv = ir.const(w)
    else:
        wv = ir.var("w", shape=w.shape, dtype=w.dtype.name)
        params.append(wv)
        inputs.append(w)
    if const_offsets:
        ov = ir.const(offs)
    else:
        ov = ir.var("offs", shape=offs.shape, dtype=offs.dtype.name)
        params.append(ov)
        inputs.append(offs)
    lib, outs = build_run(ir.Function(params, op.nn.grouped_matmul(xv, wv, ov)), inputs,
                          vector_bits)
    return (lib, outs[0]) if with_lib else outs[0]


def expect_close(got, x, w, offs):
    want = reference(x, w, offs)
    assert got.shape == want.shape and got.dtype == x.dtype
    K = x.shape[1]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.sqrt(K))


# (S, K, N, G, rows past the last offset): N that no vector divides (7, 24, 100), N below a
# vector and below a tile, long K (K blocks), a single group, one row.
SHAPES = [(1, 16, 24, 1, 0), (7, 33, 7, 3, 2), (20, 64, 100, 4, 3), (300, 1024, 100, 8, 17),
          (64, 128, 5, 2, 0), (45, 16, 1000, 6, 0), (256, 64, 7168, 8, 5),
          (130, 700, 160, 5, 1)]


@pytest.mark.parametrize("vector_bits", [256, 512])
@pytest.mark.parametrize("S,K,N,G,past", SHAPES, ids=lambda v: str(v))
def test_matches_reference(S, K, N, G, past, vector_bits):
    x = rng.standard_normal((S, K), dtype=np.float32)
    w = rng.standard_normal((G, K, N), dtype=np.float32)
    offs = random_offsets(S, G, past)
    expect_close(build_and_run(x, w, offs, vector_bits), x, w, offs)


@pytest.mark.parametrize("vector_bits", [256, 512])
def test_constant_offsets_and_int64(vector_bits):
    x = rng.standard_normal((50, 96), dtype=np.float32)
    w = rng.standard_normal((4, 96, 40), dtype=np.float32)
    offs = np.array([0, 13, 13, 44], dtype=np.int32)
    expect_close(build_and_run(x, w, offs, vector_bits, const_offsets=True), x, w, offs)
    o64 = offs.astype(np.int64)
    expect_close(build_and_run(x, w, o64, vector_bits), x, w, o64)
    expect_close(build_and_run(x, w, o64, vector_bits, const_offsets=True), x, w, o64)


@pytest.mark.parametrize("vector_bits", [256, 512])
@pytest.mark.parametrize("S,K,N,G,past,block", [
    (256, 64, 7168, 8, 5, {256: 16, 512: 64}), (33, 40, 96, 3, 0, {256: 16, 512: 48}),
    (20, 64, 100, 4, 3, {256: None, 512: None}), (9, 300, 16, 2, 1, {256: 16, 512: 16}),
    (70, 2048, 128, 4, 0, {256: 16, 512: 64})], ids=lambda v: str(v))
def test_constant_weight_packed_in_panels(S, K, N, G, past, block, vector_bits):
    """A constant weight (a model's experts) is packed by AlterOpLayout in panels of the
    kernel's column tile where N takes whole vectors (else kept plain); same results."""
    x = rng.standard_normal((S, K), dtype=np.float32)
    w = rng.standard_normal((G, K, N), dtype=np.float32)
    offs = random_offsets(S, G, past)
    lib, got = build_and_run(x, w, offs, vector_bits, const_weight=True, with_lib=True)
    graph = lib.get_source("graph")
    b = block[vector_bits]
    assert f"weight_block={b or 0}" in graph, graph
    expect_close(got, x, w, offs)


def test_packed_weight_given_directly():
    """weight_block=B: the weight as [G, N / B, K, B] panels (B not a multiple of the vector:
    the panel's last vector shifts back within it)."""
    S, K, N, G = 29, 50, 72, 3
    x = rng.standard_normal((S, K), dtype=np.float32)
    w = rng.standard_normal((G, K, N), dtype=np.float32)
    offs = np.array([7, 7, 25], dtype=np.int32)
    for block in (72, 24, 8, 36):
        panels = np.ascontiguousarray(w.reshape(G, K, N // block, block).transpose(0, 2, 1, 3))
        xv, wv = ir.var("x", shape=x.shape), ir.var("w", shape=panels.shape)
        ov = ir.var("offs", shape=(G,), dtype="int32")
        f = ir.Function([xv, wv, ov], op.nn.grouped_matmul(xv, wv, ov, weight_block=block))
        for bits in (256, 512):
            expect_close(build_run(f, [x, panels, offs], bits)[1][0], x, w, offs)


def test_float64():
    x = rng.standard_normal((30, 40))
    w = rng.standard_normal((3, 40, 19))
    offs = np.array([10, 11, 28], dtype=np.int64)
    got = build_and_run(x, w, offs, 512)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, reference(x, w, offs), rtol=1e-12, atol=1e-12)


def test_one_build_many_offsets_at_run_time():
    """The offsets are data: one build, run with different (also malformed) offsets. Unsorted
    offsets end each group at their running maximum, negative ones at 0, ones past the rows at
    S: a defined result, nothing read or written out of bounds."""
    S, K, N, G = 37, 48, 72, 5
    x = rng.standard_normal((S, K), dtype=np.float32)
    w = rng.standard_normal((G, K, N), dtype=np.float32)
    xv, wv = ir.var("x", shape=x.shape), ir.var("w", shape=w.shape)
    ov = ir.var("offs", shape=(G,), dtype="int32")
    lib = ember.build(ir.Function([xv, wv, ov], op.nn.grouped_matmul(xv, wv, ov)), target="llvm")
    m = ember.GraphModule(lib)
    m.set_input("x", x)
    m.set_input("w", w)
    for offs in ([0, 0, 0, 0, 0], [37, 37, 37, 37, 37], [3, 9, 20, 30, 37], [20, 5, 30, 2, 33],
                 [-4, 10, -100, 50, 1000], [2**31 - 1, 0, 5, 6, 7], [-2**31, -1, 0, 3, -5],
                 [40, 41, 42, 43, 44]):
        offs = np.array(offs, dtype=np.int32)
        m.set_input("offs", offs)
        m.run()
        got = m.get_output(0).numpy()
        assert np.isfinite(got).all(), offs
        expect_close(got, x, w, offs)


@pytest.mark.parametrize("const_weight", [False, True])
def test_empty_dimensions(const_weight):
    for S, K, N in ((0, 16, 8), (4, 0, 8), (4, 16, 0), (0, 0, 0)):
        x = np.ones((S, K), np.float32)
        w = np.ones((2, K, N), np.float32)
        offs = np.array([1, 2], np.int32)
        got = build_and_run(x, w, offs, 512, const_weight=const_weight)
        np.testing.assert_array_equal(got, reference(x, w, offs))


def test_matches_torch_grouped_mm():
    x = torch.randn(40, 32)
    w = torch.randn(3, 32, 24)
    offs = torch.tensor([8, 8, 31], dtype=torch.int32)
    want = torch._grouped_mm(x, w, offs=offs)[:31]  # torch leaves rows past the last unset
    got = build_and_run(x.numpy(), w.numpy(), offs.numpy(), 512)
    np.testing.assert_allclose(got[:31], want.numpy(), rtol=1e-5, atol=1e-5 * np.sqrt(32))
    assert (got[31:] == 0).all()


def test_bad_inputs_name_the_op():
    def call(x_shape, w_shape, o_shape, x_dtype="float32", w_dtype="float32", o_dtype="int32",
             **attrs):
        return lambda: op.nn.grouped_matmul(ir.var("x", shape=x_shape, dtype=x_dtype),
                                            ir.var("w", shape=w_shape, dtype=w_dtype),
                                            ir.var("o", shape=o_shape, dtype=o_dtype), **attrs)
    cases = [
        (call((2, 3, 4), (2, 4, 5), (2,)), "data must be 2-D"),
        (call((3, 4), (4, 5), (2,)), "weight must be 3-D"),
        (call((3, 4), (2, 4, 5), (2, 1)), "offsets must be 1-D"),
        (call((3, 4), (2, 5, 5), (2,)), "data's K (dimension 1) must equal weight's K"),
        (call((3, 4), (2, 4, 5), (3,)), "one entry per group"),
        (call((3, 4), (2, 4, 5), (2,), o_dtype="float32"), "must be int32 or int64"),
        (call((3, 4), (2, 4, 5), (2,), x_dtype="int32", w_dtype="int32"), "float tensor"),
        (call((3, 4), (2, 4, 5), (2,), w_dtype="float64"), "same dtype"),
        (call((3, 4), (2, 4, 5), (2,), weight_block=5), "must be 4-D [groups, N / 5, K, 5]"),
        (call((3, 4), (2, 3, 4, 8), (2,), weight_block=4), "must be 4-D [groups, N / 4, K, 4]"),
        (call((3, 4), (2, 3, 5, 4), (2,), weight_block=4), "must equal weight's K (dimension 2)"),
        (call((3, 4), (2, 4, 5), (2,), weight_block=-1), "weight_block must be 0 or"),
    ]
    for fn, text in cases:
        message = error_of(fn)
        assert "nn.grouped_matmul" in message and text in message, message


def test_registered_with_its_own_lowering():
    assert "nn.grouped_matmul" in ember.ir.list_ops()
    o = ember.ir.get_op("nn.grouped_matmul")
    assert o.has_lower and not o.has_compute and o.pattern == "Opaque"
