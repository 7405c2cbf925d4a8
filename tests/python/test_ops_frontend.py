"""The ops the PyTorch frontend needs (issue 3), compiled with ember.build and compared with
PyTorch, plus their user errors.

Tolerances: elementwise, layout and indexing ops rtol=1e-5, atol=1e-5 (exact where the op
only moves or compares values); reductions, layer_norm and log_softmax rtol=1e-5,
atol=1e-5 after the sums (the summation order differs from PyTorch's); broadcasting
batch_matmul rtol=1e-4, atol=1e-4. Several ops share one build to keep the suite fast.
"""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

import ember
from ember import ir, op
from op_checks import EW, GEMM, check, run, t

EXACT = dict(rtol=0, atol=0)

rng = np.random.default_rng(1)


def randn(*shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


SPECIALS = np.array([0.0, -0.0, 0.5, -0.5, 1.5, 2.5, -2.5, 1e-30, 3.0, -3.0, 1e30, -1e30,
                     np.inf, -np.inf, np.nan], dtype=np.float32)


# ------------------------------------------------------------------------- elementwise

def test_unary_math():
    x = np.concatenate([randn(200) * 4, SPECIALS])
    pos = np.concatenate([rng.uniform(0, 50, 200), [0.0, 1e-30, 1e-40, 1.0, np.inf, np.nan,
                                                    -1.0]]).astype(np.float32)
    i = rng.integers(-100, 100, (3, 5))
    got = run(lambda a, p, n: [op.erf(a), op.log(p), op.abs(a), op.negative(a), op.floor(a),
                               op.ceil(a), op.round(a), op.abs(n), op.negative(n)], x, pos, i)
    with np.errstate(all="ignore"):
        for g, fn in zip(got[:7], [torch.erf, None, torch.abs, torch.neg, torch.floor, torch.ceil,
                                   torch.round]):
            check(g, fn(t(x)) if fn else torch.log(t(pos)), EW)
    check(got[7], np.abs(i), EXACT)
    check(got[8], -i, EXACT)
    specials = got[6][len(x) - len(SPECIALS):]
    assert list(specials[2:7]) == [0.0, -0.0, 2.0, 2.0, -2.0]  # halves round to even
    assert np.signbit(specials[3])


def test_activations():
    x = np.concatenate([randn(300) * 5, SPECIALS[:-3], [np.nan]]).astype(np.float32)
    got = run(lambda a: [op.nn.gelu(a), op.nn.gelu(a, approximate="tanh"),
                         op.nn.leaky_relu(a, alpha=0.2), op.nn.leaky_relu(a), op.nn.silu(a),
                         op.nn.hardswish(a), op.nn.hardsigmoid(a)], x)
    x_t = t(x)
    check(got[0], F.gelu(x_t), EW)
    check(got[1], F.gelu(x_t, approximate="tanh"), EW)
    check(got[2], F.leaky_relu(x_t, 0.2), EW)
    check(got[3], F.leaky_relu(x_t), EW)
    check(got[4], F.silu(x_t), EW)
    check(got[5], F.hardswish(x_t), EW)
    check(got[6], F.hardsigmoid(x_t), EW)
    assert all(np.isnan(g[-1]) for g in got)  # NaN passes through every activation


def test_power_maximum_minimum():
    a = np.concatenate([rng.uniform(0.1, 4, 50), [-2.0, -2.0, -0.5, 0.0, np.nan, 1.0]])
    b = np.concatenate([rng.uniform(-3, 3, 50), [3.0, 2.0, 0.5, 0.0, 0.0, np.nan]])
    a, b = a.astype(np.float32), b.astype(np.float32)
    m = np.array([[1.0, np.nan, -np.inf], [0.0, -0.0, 5.0]], dtype=np.float32)
    n = np.array([2.0, 1.0, np.nan], dtype=np.float32)
    i, j = rng.integers(-9, 9, (4, 3)), rng.integers(-9, 9, (3,))
    got = run(lambda *v: [op.power(v[0], v[1]), op.maximum(v[2], v[3]), op.minimum(v[2], v[3]),
                          op.maximum(v[4], v[5]), op.minimum(v[4], v[5])], a, b, m, n, i, j)
    with np.errstate(all="ignore"):
        check(got[0], torch.pow(t(a), t(b)), EW)
    check(got[1], torch.maximum(t(m), t(n)), EXACT)  # NaN in either input gives NaN
    check(got[2], torch.minimum(t(m), t(n)), EXACT)
    check(got[3], np.maximum(i, j), EXACT)
    check(got[4], np.minimum(i, j), EXACT)


def test_compare_logical_where():
    a = np.array([[1.0, np.nan, 3.0, -0.0], [2.0, 2.0, np.inf, 0.0]], dtype=np.float32)
    b = np.array([2.0, np.nan, 3.0, 0.0], dtype=np.float32)
    p = rng.random((3, 4)) > 0.5
    q = rng.random((4,)) > 0.5
    x, y = randn(3, 1), randn(1, 4)
    got = run(lambda *v: [op.equal(v[0], v[1]), op.not_equal(v[0], v[1]), op.less(v[0], v[1]),
                          op.less_equal(v[0], v[1]), op.greater(v[0], v[1]),
                          op.greater_equal(v[0], v[1]), op.logical_and(v[2], v[3]),
                          op.logical_or(v[2], v[3]), op.logical_not(v[2]),
                          op.logical_not(v[0]), op.logical_and(v[0], v[3]),
                          op.where(v[2], v[4], v[5]), op.where(op.greater(v[4], v[5]), v[4], v[5]),
                          op.equal(v[2], v[3])], a, b, p, q, x, y)
    at, bt = t(a), t(b)
    for g, fn in zip(got[:6], [torch.eq, torch.ne, torch.lt, torch.le, torch.gt, torch.ge]):
        check(g, fn(at, bt), EXACT)
    check(got[6], np.logical_and(p, q), EXACT)
    check(got[7], np.logical_or(p, q), EXACT)
    check(got[8], np.logical_not(p), EXACT)
    check(got[9], torch.logical_not(at), EXACT)  # NaN is true, -0.0 is false
    check(got[10], torch.logical_and(at, t(q)), EXACT)
    check(got[11], torch.where(t(p), t(x), t(y)), EXACT)
    check(got[12], torch.maximum(t(x), t(y)), EXACT)
    check(got[13], p == q, EXACT)


def test_cast():
    x = np.array([-2.7, -0.5, 0.0, 0.4, 1.9, 1e6, np.nan], dtype=np.float32)
    i = np.array([[-3, 0, 7]], dtype=np.int64)
    b = np.array([True, False])
    got = run(lambda a, n, c: [op.cast(op.strided_slice(a, [0], [6]), "int32"),
                               op.cast(n, "float32"), op.cast(a, np.float64),
                               op.cast(a, torch.bool), op.cast(c, "float32"),
                               op.cast(n, "int32"), op.cast(n, "bool")], x, i, b)
    check(got[0], t(x[:6]).to(torch.int32), EXACT)  # truncation toward zero
    check(got[1], t(i).float(), EXACT)
    check(got[2], t(x).double(), EXACT)
    check(got[3], t(x).bool(), EXACT)  # NaN is true
    check(got[4], t(b).float(), EXACT)
    check(got[5], t(i).int(), EXACT)
    check(got[6], t(i).bool(), EXACT)


# ------------------------------------------------------------------------------ reductions

def test_reductions():
    x = randn(3, 4, 5)
    n = x.copy()
    n[1, 2, 3] = np.nan
    i = rng.integers(-50, 50, (4, 6))
    got = run(lambda a, b, c: [op.sum(a, axis=1), op.sum(a, axis=(0, 2), keepdims=True),
                               op.sum(a), op.mean(a, axis=-1), op.mean(a, axis=[0, 1]),
                               op.mean(a, keepdims=True), op.max(a, axis=0), op.min(a, axis=2),
                               op.max(a), op.max(b, axis=2), op.min(b, axis=(1, 2)),
                               op.sum(c, axis=0), op.max(c, axis=1, keepdims=True)], x, n, i)
    xt, nt = t(x), t(n)
    check(got[0], xt.sum(1), EW)
    check(got[1], xt.sum((0, 2), keepdim=True), EW)
    check(got[2], xt.sum(), EW)  # a rank-0 result
    check(got[3], xt.mean(-1), EW)
    check(got[4], xt.mean((0, 1)), EW)
    check(got[5], xt.mean((0, 1, 2), keepdim=True), EW)
    check(got[6], xt.amax(0), EXACT)
    check(got[7], xt.amin(2), EXACT)
    check(got[8], xt.amax(), EXACT)
    check(got[9], nt.amax(2), EXACT)  # NaN propagates to its row only
    check(got[10], nt.amin((1, 2)), EXACT)
    assert np.isnan(got[9][1, 2]) and np.isnan(got[10][1]) and not np.isnan(got[10][0])
    check(got[11], i.sum(0), EXACT)
    check(got[12], i.max(1, keepdims=True), EXACT)


def test_long_reduction_rows():
    # Rows longer than a vector, with a tail, reduced along the last and a leading axis.
    x = randn(5, 203)
    got = run(lambda a: [op.sum(a, axis=-1), op.mean(a, axis=0), op.max(a, axis=-1)], x)
    check(got[0], t(x).sum(-1), EW)
    check(got[1], t(x).mean(0), EW)
    check(got[2], t(x).amax(-1), EXACT)


# ------------------------------------------------------------------ layer_norm, log_softmax

def test_layer_norm():
    x = randn(2, 5, 8) * 3 + 1
    g, b = randn(8), randn(8)
    g2, b2 = randn(5, 8), randn(5, 8)
    v = randn(37)
    got = run(lambda a, *p: [op.nn.layer_norm(a, p[0], p[1]),
                             op.nn.layer_norm(a, p[2], p[3], axis=1, epsilon=1e-3),
                             op.nn.layer_norm(a), op.nn.layer_norm(p[4], axis=0)],
              x, g, b, g2, b2, v)
    check(got[0], F.layer_norm(t(x), (8,), t(g), t(b)), EW)
    check(got[1], F.layer_norm(t(x), (5, 8), t(g2), t(b2), eps=1e-3), EW)
    check(got[2], F.layer_norm(t(x), (8,)), EW)
    check(got[3], F.layer_norm(t(v), (37,)), EW)


def test_layer_norm_float64():
    x = randn(4, 6, dtype=np.float64)
    got = run(lambda a: op.nn.layer_norm(a), x)
    check(got, F.layer_norm(t(x), (6,)), dict(rtol=1e-12, atol=1e-12))


def test_log_softmax():
    x = randn(2, 3, 19) * 4
    big = np.array([[1000.0, 999.0, -1000.0], [-np.inf, 0.0, 1.0]], dtype=np.float32)
    got = run(lambda a, b: [op.nn.log_softmax(a), op.nn.log_softmax(a, axis=1),
                            op.nn.log_softmax(a, axis=0), op.nn.log_softmax(b)], x, big)
    check(got[0], F.log_softmax(t(x), dim=-1), EW)
    check(got[1], F.log_softmax(t(x), dim=1), EW)
    check(got[2], F.log_softmax(t(x), dim=0), EW)
    check(got[3], F.log_softmax(t(big), dim=-1), EW)  # stable; -inf stays -inf


# --------------------------------------------------------------------- layout and indexing

def test_strided_slice_and_split():
    x = randn(4, 6, 7)
    big = np.iinfo(np.int64).max
    got = run(lambda a: [op.strided_slice(a, [1], [big]),
                         op.strided_slice(a, [0, 1], [4, 6], strides=[2, 2]),
                         op.strided_slice(a, [-4], [100], strides=[3], axes=[-1]),
                         op.strided_slice(a, [2, -3], [5, -1], axes=[2, 0])] +
              # torch.split(a, 3, dim=2) as the frontend maps it: three slices.
              [op.strided_slice(a, [s], [s + 3], axes=[2]) for s in (0, 3, 6)], x)
    check(got[0], x[1:], EXACT)
    check(got[1], x[0:4:2, 1:6:2], EXACT)
    check(got[2], x[:, :, -4:100:3], EXACT)
    check(got[3], x[-3:-1, :, 2:5], EXACT)
    for g, w in zip(got[4:], torch.split(t(x), 3, dim=2)):
        check(g, w, EXACT)


def test_pad():
    x = randn(2, 3, 4, 5)
    i = rng.integers(-5, 5, (3, 4))
    got = run(lambda a, n: [op.nn.pad(a, [[0, 0], [0, 0], [1, 2], [3, 0]]),
                            op.nn.pad(a, [0, 0, 1, 1, -1, 2, 2, -2], pad_value=-1.5),
                            op.nn.pad(n, ((2, 0), (0, 1)), pad_value=7)], x, i)
    check(got[0], F.pad(t(x), (3, 0, 1, 2)), EXACT)
    check(got[1], F.pad(t(x), (2, -2, -1, 2, 1, 1), value=-1.5), EXACT)
    check(got[2], F.pad(t(i), (0, 1, 2, 0), value=7), EXACT)


def test_expand_dims_squeeze_broadcast_to():
    x = randn(3, 1, 4)
    got = run(lambda a: [op.expand_dims(a, 0), op.expand_dims(a, -1, num_newaxis=2),
                         op.squeeze(a), op.squeeze(a, axis=1),
                         op.broadcast_to(a, (2, 3, 5, 4)), op.broadcast_to(a, (-1, 6, -1)),
                         op.nn.relu(op.squeeze(op.expand_dims(a, 2), axis=[1, 2]))], x)
    xt = t(x)
    check(got[0], xt.unsqueeze(0), EXACT)
    check(got[1], xt[..., None, None], EXACT)
    check(got[2], xt.squeeze(), EXACT)
    check(got[3], xt.squeeze(1), EXACT)
    check(got[4], xt.expand(2, 3, 5, 4), EXACT)
    check(got[5], xt.expand(-1, 6, -1), EXACT)
    check(got[6], torch.relu(xt.squeeze(1)), EXACT)


def test_take():
    w = randn(10, 6)
    ids = rng.integers(0, 10, (2, 5))
    ids32 = np.array([3, 0, 3, 1], dtype=np.int32)
    negative = np.array([-4, -10, 9], dtype=np.int64)
    got = run(lambda a, b, c, d: [op.take(a, b), op.take(a, c, axis=1), op.take(a, d),
                                  op.take(a, c, axis=-1)], w, ids, ids32, negative)
    check(got[0], F.embedding(t(ids), t(w)), EXACT)
    check(got[1], torch.index_select(t(w), 1, t(ids32)), EXACT)
    check(got[2], t(w)[t(negative)], EXACT)  # negative indices count from the end, as x[idx]
    check(got[3], got[1], EXACT)


# ------------------------------------------------------------------------ matrix products

def test_broadcasting_batch_matmul_and_matrix_vector():
    a, b = randn(2, 1, 5, 6), randn(3, 6, 4)
    c, d = randn(5, 6), randn(2, 3, 6, 7)
    e, f = randn(3, 5, 6), randn(6)
    g, h = randn(4, 5, 3), randn(4, 3, 2)
    got = run(lambda *v: [op.nn.batch_matmul(v[0], v[1]), op.nn.batch_matmul(v[2], v[3]),
                          op.nn.matmul(v[4], v[5]), op.nn.batch_matmul(v[6], v[7])],
              a, b, c, d, e, f, g, h)
    check(got[0], torch.matmul(t(a), t(b)), GEMM)
    check(got[1], torch.matmul(t(c), t(d)), GEMM)
    check(got[2], torch.matmul(t(e), t(f)), GEMM)
    check(got[3], torch.bmm(t(g), t(h)), GEMM)


# ------------------------------------------------------------------------------- errors

def error_message(fn):
    with pytest.raises(ember.EmberError) as info:
        fn()
    return str(info.value)


def test_errors():
    x = ir.var("x", shape=(2, 3, 4))
    i64 = ir.var("i", shape=(3,), dtype="int64")
    b = ir.var("b", shape=(3, 4), dtype="bool")
    msg = error_message(lambda: op.sum(x, axis=3, name="head.sum"))
    assert "sum 'head.sum'" in msg and "axis 3 is out of range" in msg
    msg = error_message(lambda: op.mean(i64))
    assert "mean" in msg and "int64" in msg and "float" in msg
    msg = error_message(lambda: op.nn.layer_norm(x, ir.var("g", shape=(3,)),
                                                 ir.var("bt", shape=(4,)), name="ln"))
    assert "nn.layer_norm 'ln'" in msg and "gamma is float32[3]" in msg and "[4]" in msg
    msg = error_message(lambda: op.nn.layer_norm(x, axis=5))
    assert "axis 5 is out of range" in msg
    msg = error_message(lambda: op.take(x, ir.var("f", shape=(3,)), name="embed"))
    assert "take 'embed'" in msg and "int32 or int64" in msg
    msg = error_message(lambda: op.where(ir.var("c", shape=(3, 4)), x, x))
    assert "condition" in msg and "bool" in msg
    msg = error_message(lambda: op.where(b, x, i64))
    assert "same dtype" in msg
    msg = error_message(lambda: op.maximum(x, ir.var("y", shape=(5,))))
    assert "cannot broadcast" in msg
    msg = error_message(lambda: op.log(i64))
    assert "log" in msg and "float" in msg
    msg = error_message(lambda: op.nn.log_softmax(x, axis=-4))
    assert "nn.log_softmax" in msg and "out of range" in msg
    msg = error_message(lambda: op.squeeze(x, axis=0))
    assert "size 2" in msg and "size-1" in msg
    msg = error_message(lambda: op.strided_slice(x, [0], [2], strides=[0]))
    assert "positive" in msg
    msg = error_message(lambda: op.broadcast_to(x, (2, 5, 4)))
    assert "dimension 1 has size 3" in msg
    msg = error_message(lambda: op.nn.pad(x, [1, 1]))
    assert "needs 6" in msg
    msg = error_message(lambda: op.nn.pad(x, [(1, 1, 1)]))
    assert "pad_width[0]" in msg and "pair" in msg
    msg = error_message(lambda: op.nn.pad(x, [0, 0, 0, 0, 1, 1], pad_mode="reflect"))
    assert "reflect" in msg and "constant" in msg
    msg = error_message(lambda: op.cast(x, "float16"))
    assert "float16" in msg
    msg = error_message(lambda: op.nn.gelu(x, approximate="fast"))
    assert "'none' or 'tanh'" in msg
    msg = error_message(lambda: op.nn.batch_matmul(x, ir.var("w", shape=(5, 4, 2))))
    assert "batch sizes [2] and [5]" in msg
    msg = error_message(lambda: op.sum(x, axis="1"))
    assert "op.sum" in msg and "axis" in msg
