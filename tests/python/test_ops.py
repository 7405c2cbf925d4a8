"""Every registered op compiled with ember.build and compared with PyTorch.

Tolerances: elementwise, layout, pooling and softmax ops rtol=1e-5, atol=1e-5; conv2d,
dense, matmul and batch_matmul rtol=1e-4, atol=1e-4 (the summation order differs from
PyTorch's). The transcendental expansions are also checked in ulps against float64
PyTorch on dense grids, including 0, -0, tiny, large, inf and NaN.
"""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

import ember
from ember import ir, op
from op_checks import EW, GEMM, build_run, check, run, t


rng = np.random.default_rng(0)


def randn(*shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


# ------------------------------------------------------------------------------- conv2d

# (N, C, H, W, O, (KH, KW), stride, padding, dilation, groups)
CONV_CASES = [
    (1, 3, 9, 9, 5, (3, 3), 1, 1, 1, 1),
    (2, 5, 8, 7, 4, (1, 1), 1, 0, 1, 1),          # 1x1, batch 2
    (1, 3, 16, 17, 17, (7, 7), 2, 3, 1, 1),       # 7x7 stride 2, odd sizes
    (1, 4, 11, 11, 6, (3, 3), 1, 2, 2, 1),        # dilation 2
    (2, 24, 9, 9, 24, (3, 3), 2, 1, 1, 24),       # depthwise stride 2
    (1, 6, 7, 9, 9, (3, 3), 1, 1, 1, 3),          # grouped
    (1, 17, 6, 5, 16, (3, 1), (2, 1), (1, 0), 1, 1),  # non-square kernel and stride
]


@pytest.mark.parametrize("n,c,h,w,o,k,stride,pad,dil,groups", CONV_CASES)
def test_conv2d(n, c, h, w, o, k, stride, pad, dil, groups):
    x, wt = randn(n, c, h, w), randn(o, c // groups, *k)
    got = run(lambda a, b: op.nn.conv2d(a, b, strides=stride, padding=pad, dilation=dil,
                                        groups=groups, name="conv"), x, wt)
    check(got, F.conv2d(t(x), t(wt), stride=stride, padding=pad, dilation=dil, groups=groups),
          GEMM)


def test_conv2d_asymmetric_padding_and_const_weight():
    x, wt = randn(1, 5, 8, 10), randn(3, 5, 3, 3)
    # ember's padding is (top, left, bottom, right); F.pad takes (left, right, top, bottom).
    got = run(lambda a: op.nn.conv2d(a, ir.const(wt, name="w"), padding=(0, 2, 1, 1),
                                     strides=2), x)
    check(got, F.conv2d(F.pad(t(x), (2, 1, 0, 1)), t(wt), stride=2), GEMM)


def test_conv2d_relu_chain():
    x, wt = randn(1, 3, 10, 10), randn(8, 3, 3, 3)
    got = run(lambda a, b: op.nn.relu(op.nn.conv2d(a, b, padding=1)), x, wt)
    check(got, F.relu(F.conv2d(t(x), t(wt), padding=1)), GEMM)


# ------------------------------------------------------------------ dense, matmul, bmm

def test_dense_matmul_batch_matmul():
    x2, w2 = randn(4, 30), randn(10, 30)
    x3, w3 = randn(2, 3, 17), randn(5, 17)
    a, b = randn(3, 5, 6), randn(6, 4)
    a2, b2 = randn(7, 24), randn(24, 3)
    ba, bb = randn(3, 5, 6), randn(3, 6, 2)
    got = run(lambda *v: [op.nn.dense(v[0], v[1]), op.nn.dense(v[2], v[3]),
                          op.nn.matmul(v[4], v[5]), op.nn.matmul(v[6], v[7]),
                          op.nn.batch_matmul(v[8], v[9])],
              x2, w2, x3, w3, a, b, a2, b2, ba, bb)
    check(got[0], F.linear(t(x2), t(w2)), GEMM)
    check(got[1], F.linear(t(x3), t(w3)), GEMM)
    check(got[2], t(a) @ t(b), GEMM)
    check(got[3], t(a2) @ t(b2), GEMM)
    check(got[4], torch.bmm(t(ba), t(bb)), GEMM)


# ---------------------------------------------------------------- bias_add, batch_norm

def test_bias_add_and_batch_norm():
    x, b = randn(2, 5, 4, 3), randn(5)
    y, c = randn(3, 7), randn(7)
    g, beta, mean = randn(5), randn(5), randn(5)
    var = rng.uniform(0.1, 2.0, 5).astype(np.float32)
    got = run(lambda *v: [op.nn.bias_add(v[0], v[1]), op.nn.bias_add(v[2], v[3], axis=-1),
                          op.nn.batch_norm(v[0], v[4], v[5], v[6], v[7], epsilon=1e-3)],
              x, b, y, c, g, beta, mean, var)
    check(got[0], t(x) + t(b).reshape(1, 5, 1, 1), EW)
    check(got[1], t(y) + t(c), EW)
    want = F.batch_norm(t(x), t(mean), t(var), t(g), t(beta), training=False, eps=1e-3)
    check(got[2], want, EW)


# ------------------------------------------------------------------------- elementwise

def test_binary_broadcasting():
    a, b = randn(4, 1, 3), randn(5, 1)
    c, d = randn(2, 3, 4, 5), randn(3, 1, 5)
    s = randn(1, 1)  # rank difference and size-1 dims on both sides
    e = rng.uniform(0.5, 2.0, (3, 4)).astype(np.float32)
    one = randn(1)
    got = run(lambda *v: [op.add(v[0], v[1]), op.subtract(v[2], v[3]),
                          op.multiply(v[4], v[2]), op.divide(v[5], v[6]),
                          op.divide(v[6], v[5])],
              a, b, c, d, s, e, one)
    check(got[0], t(a) + t(b), EW)
    check(got[1], t(c) - t(d), EW)
    check(got[2], t(s) * t(c), EW)
    check(got[3], t(e) / t(one), EW)
    check(got[4], t(one) / t(e), EW)


def test_binary_float64_and_int64():
    a, b = randn(3, 4, dtype=np.float64), randn(4, dtype=np.float64)
    i, j = rng.integers(-50, 50, (2, 3)), rng.integers(-50, 50, (3,))
    got = run(lambda *v: [op.multiply(v[0], v[1]), op.add(v[2], v[3]),
                          op.subtract(v[2], v[3])], a, b, i, j)
    check(got[0], t(a) * t(b), EW)
    check(got[1], t(i) + t(j), EW)
    check(got[2], t(i) - t(j), EW)


SPECIALS = np.array([0.0, -0.0, 1e-30, -1e-30, 1e-45, 3.0, -3.0, 1e30, -1e30, np.inf, -np.inf,
                     np.nan], dtype=np.float32)


def test_unary_ops():
    x = np.concatenate([randn(3, 50).ravel() * 4, SPECIALS])
    pos = np.concatenate([rng.uniform(0, 100, 200), [0.0, 1e-30, 1e30, np.inf, np.nan]])
    pos = pos.astype(np.float32)
    got = run(lambda a, p: [op.nn.relu(a), op.sigmoid(a), op.tanh(a), op.exp(a),
                            op.clip(a, a_min=-1.5, a_max=2.0), op.sqrt(p), op.rsqrt(p)], x, pos)
    with np.errstate(all="ignore"):
        check(got[0], torch.relu(t(x)), EW)  # NaN stays NaN (assert_allclose matches NaNs)
        check(got[1], torch.sigmoid(t(x)), EW)
        check(got[2], torch.tanh(t(x)), EW)
        check(got[3], torch.exp(t(x)), EW)
        check(got[4], torch.clamp(t(x), -1.5, 2.0), EW)
        check(got[5], torch.sqrt(t(pos)), EW)
        check(got[6], torch.rsqrt(t(pos)), EW)
    assert np.isnan(got[0][-1]) and np.isnan(got[4][-1])
    assert np.signbit(got[2][-11]) and got[2][-11] == 0  # tanh(-0) = -0


def ulp_error(got, x, fn):
    """Max error of float32 `got` in float32 ulps of fn(x) computed in float64 by torch."""
    ref = fn(torch.from_numpy(x.astype(np.float64))).numpy()
    with np.errstate(over="ignore"):
        ref32 = ref.astype(np.float32)
    special = ~np.isfinite(ref32)
    np.testing.assert_array_equal(got[special], ref32[special])
    finite = ~special
    spacing = np.spacing(np.maximum(np.abs(ref32[finite]), np.finfo(np.float32).tiny))
    return float(np.max(np.abs(got[finite].astype(np.float64) - ref[finite]) / spacing))


@pytest.mark.parametrize("name,lo,hi,max_ulp", [
    ("exp", -110.0, 92.0, 2.0), ("tanh", -12.0, 12.0, 2.0), ("sigmoid", -110.0, 110.0, 2.5)])
def test_transcendental_accuracy(name, lo, hi, max_ulp):
    x = np.concatenate([np.linspace(lo, hi, 400001), np.linspace(-1e-3, 1e-3, 20001),
                        rng.uniform(-2, 2, 100000), SPECIALS]).astype(np.float32)
    got = run(getattr(op, name), x)
    assert ulp_error(got, x, getattr(torch, name)) <= max_ulp
    assert np.array_equal(np.signbit(got[x == 0]), np.signbit(x[x == 0])) or name != "tanh"


def test_transcendentals_float64():
    x = np.linspace(-700, 700, 20001)
    s = np.linspace(-20, 20, 20001)
    got = run(lambda a, b: [op.exp(a), op.tanh(b), op.sigmoid(b)], x, s)
    np.testing.assert_allclose(got[0], np.exp(x), rtol=1e-14, atol=0)
    # tanh's small-argument polynomial is fitted for float32 (~1e-9 relative in float64).
    np.testing.assert_allclose(got[1], np.tanh(s), rtol=1e-9, atol=0)
    np.testing.assert_allclose(got[2], torch.sigmoid(t(s)).numpy(), rtol=1e-14, atol=0)


# ------------------------------------------------------------------------------ pooling

# (N, C, H, W, kernel, stride, padding, dilation, ceil_mode)
MAX_POOL_CASES = [
    (1, 3, 8, 8, 2, 2, 0, 1, False),
    (2, 5, 7, 7, 3, 2, 1, 1, True),      # ceil mode
    (1, 3, 6, 6, 3, 2, 1, 1, True),
    (1, 17, 11, 9, 3, 1, 1, 2, False),   # dilation 2
    (1, 2, 9, 10, (3, 2), (2, 3), (1, 1), 1, True),
    (1, 4, 7, 7, 10, 10, 0, 1, True),    # ceil mode: one window, larger than the input
    (1, 4, 7, 6, (9, 12), (8, 12), (1, 2), 1, True),
]


@pytest.mark.parametrize("n,c,h,w,k,s,p,d,ceil", MAX_POOL_CASES)
def test_max_pool2d(n, c, h, w, k, s, p, d, ceil):
    x = randn(n, c, h, w)
    got = run(lambda a: op.nn.max_pool2d(a, pool_size=k, strides=s, padding=p, dilation=d,
                                         ceil_mode=ceil), x)
    check(got, F.max_pool2d(t(x), k, s, p, dilation=d, ceil_mode=ceil), EW)


def test_max_pool2d_asymmetric_padding_and_default_strides():
    x = randn(1, 3, 7, 8)
    got = run(lambda a: [op.nn.max_pool2d(a, pool_size=3, strides=2, padding=(1, 0, 2, 1)),
                         op.nn.max_pool2d(a, pool_size=2)], x)
    padded = F.pad(t(x), (0, 1, 1, 2), value=-np.inf)
    check(got[0], F.max_pool2d(padded, 3, 2), EW)
    check(got[1], F.max_pool2d(t(x), 2), EW)


# (N, C, H, W, kernel, stride, padding, ceil_mode, count_include_pad)
AVG_POOL_CASES = [
    (1, 3, 8, 8, 2, 2, 0, False, True),
    (2, 5, 7, 7, 3, 2, 1, True, True),
    (2, 5, 7, 7, 3, 2, 1, True, False),
    (1, 24, 6, 9, 3, 1, 1, False, False),
    (1, 1, 5, 5, 2, 2, 1, True, True),   # last ceil window would start in the padding
    (1, 4, 10, 11, (3, 2), (2, 3), (1, 1), True, False),
    # ceil mode, one window larger than the (padded) input, clipped to it (EfficientNet's
    # head: a 2560-wide window over 7x7)
    (1, 16, 7, 7, 2560, 2560, 0, True, True),
    (1, 3, 7, 7, 12, 12, 1, True, True),
    (1, 3, 7, 7, 12, 12, 1, True, False),
    (1, 3, 5, 8, (9, 4), (9, 4), (1, 0), True, True),
]


@pytest.mark.parametrize("n,c,h,w,k,s,p,ceil,include_pad", AVG_POOL_CASES)
def test_avg_pool2d(n, c, h, w, k, s, p, ceil, include_pad):
    x = randn(n, c, h, w)
    got = run(lambda a: op.nn.avg_pool2d(a, pool_size=k, strides=s, padding=p, ceil_mode=ceil,
                                         count_include_pad=include_pad), x)
    check(got, F.avg_pool2d(t(x), k, s, p, ceil_mode=ceil, count_include_pad=include_pad), EW)


def test_avg_pool2d_asymmetric_padding():
    x = randn(1, 3, 7, 8)
    got = run(lambda a: op.nn.avg_pool2d(a, pool_size=3, strides=2, padding=(1, 0, 2, 1)), x)
    check(got, F.avg_pool2d(F.pad(t(x), (0, 1, 1, 2)), 3, 2), EW)


@pytest.mark.parametrize("h,w,oh,ow", [(7, 10, 3, 4), (8, 8, 2, 2), (6, 9, 4, 5), (5, 5, 5, 5),
                                       (3, 3, 5, 7), (9, 7, 1, 1)])
def test_adaptive_avg_pool2d(h, w, oh, ow):
    x = randn(2, 3, h, w)
    got = run(lambda a: op.nn.adaptive_avg_pool2d(a, output_size=(oh, ow)), x)
    check(got, F.adaptive_avg_pool2d(t(x), (oh, ow)), EW)


# ------------------------------------------------------------------------------ softmax

def test_softmax_each_axis():
    x = randn(2, 3, 4, 5) * 3
    big = np.array([[1000.0, 999.0, -1000.0], [-np.inf, 0.0, 1.0]], dtype=np.float32)
    got = run(lambda a, b: [op.nn.softmax(a, axis=ax) for ax in (0, 1, 2, 3, -1)] +
              [op.nn.softmax(b)], x, big)
    for i, ax in enumerate((0, 1, 2, 3, -1)):
        check(got[i], F.softmax(t(x), dim=ax), EW)
    check(got[5], F.softmax(t(big), dim=-1), EW)  # stable for large values


def test_softmax_1d():
    # Short (one vector) and long (split into vectors, with a guarded tail) rows.
    for n in (7, 100):
        v = randn(n)
        check(run(lambda a: op.nn.softmax(a, axis=0), v), F.softmax(t(v), dim=0), EW)


# ------------------------------------------------------------------------------- layout

def test_transpose():
    a, b, c = randn(3, 5), randn(2, 3, 4), randn(2, 3, 4, 5)
    got = run(lambda x, y, z: [op.transpose(x), op.transpose(y, axes=(1, 2, 0)),
                               op.transpose(y), op.transpose(z, axes=(0, 2, 3, 1)),
                               op.transpose(z, axes=(-1, 1, 0, 2))], a, b, c)
    check(got[0], t(a).T, EW)
    check(got[1], t(b).permute(1, 2, 0), EW)
    check(got[2], t(b).permute(2, 1, 0), EW)
    check(got[3], t(c).permute(0, 2, 3, 1), EW)
    check(got[4], t(c).permute(3, 1, 0, 2), EW)


@pytest.mark.parametrize("bits", [256, 512])
@pytest.mark.parametrize("shape,axes", [
    ((1, 40, 33, 35), (0, 3, 2, 1)),  # innermost reads across rows: tiled, rows 35 = 16+16+3
    ((3, 37, 48), (0, 2, 1)),
    ((2, 40, 20), (0, 2, 1)),  # a contiguous axis of 20: tiled, 16 + 4 shifted back
    ((64, 50), (1, 0)),
    ((2, 24, 40, 9), (0, 3, 1, 2)),  # the contiguous axis is short (9): not tiled
])
def test_transposes_read_each_input_line_for_many_outputs(bits, shape, axes):
    # A transpose whose innermost output axis reads the input across its rows takes 16 values
    # of the axis along the input's rows just outside the vector loop (tile_transpose), the
    # last tile shifted back; any epilogue and any size give the same values.
    a = randn(*shape)
    x = ir.var("x", shape, "float32")
    lib, (got,) = build_run(ir.Function([x], op.nn.relu(op.transpose(x, axes=axes))), [a], bits)
    np.testing.assert_array_equal(got, F.relu(t(a).permute(*axes)).numpy())


def test_concatenate_each_axis():
    a = randn(2, 3, 4)
    parts = {0: (randn(1, 3, 4), randn(3, 3, 4)), 1: (randn(2, 5, 4), randn(2, 1, 4)),
             2: (randn(2, 3, 2), randn(2, 3, 7))}
    arrays = [a] + [p for ax in (0, 1, 2) for p in parts[ax]]
    got = run(lambda x, *v: [op.concatenate([x, v[0], v[1]], axis=0),
                             op.concatenate([x, v[2], v[3]], axis=1),
                             op.concatenate((x, v[4], v[5]), axis=-1),
                             op.concatenate([x], axis=1)], *arrays)
    for i, ax in enumerate((0, 1, 2)):
        check(got[i], torch.cat([t(a), t(parts[ax][0]), t(parts[ax][1])], dim=ax), EW)
    check(got[3], t(a), EW)


def test_reshape_and_flatten():
    x = randn(2, 3, 4, 5)
    got = run(lambda a: [op.reshape(a, newshape=(4, -1)), op.flatten(a),
                         op.flatten(a, start_dim=1, end_dim=2), op.nn.relu(op.reshape(a, (120,))),
                         op.exp(op.flatten(op.transpose(a, axes=(0, 2, 1, 3))))], x)
    check(got[0], t(x).reshape(4, -1), EW)
    check(got[1], torch.flatten(t(x), 1), EW)
    check(got[2], torch.flatten(t(x), 1, 2), EW)
    check(got[3], torch.relu(t(x).reshape(120)), EW)
    check(got[4], torch.exp(torch.flatten(t(x).permute(0, 2, 1, 3), 1)), EW)


# ------------------------------------------------------------------------------- errors

def error_message(fn):
    with pytest.raises(ember.EmberError) as info:
        fn()
    return str(info.value)


def test_errors_name_the_op_and_say_what_to_do():
    x = ir.var("x", shape=(1, 64, 8, 8))
    msg = error_message(lambda: op.nn.conv2d(x, ir.var("w", shape=(64, 32, 3, 3)),
                                             name="layer1.0.conv1"))
    assert "nn.conv2d 'layer1.0.conv1'" in msg
    assert "data has 64 channels but the weight expects 32" in msg
    assert "groups" in msg
    msg = error_message(lambda: op.add(ir.var("a", shape=(2, 3)), ir.var("b", shape=(4,)),
                                       name="res"))
    assert "cannot broadcast" in msg and "[2, 3]" in msg and "[4]" in msg and "'res'" in msg
    msg = error_message(lambda: op.nn.softmax(ir.var("s", shape=(2, 3)), axis=2))
    assert "axis 2 is out of range" in msg
    msg = error_message(lambda: op.transpose(ir.var("s", shape=(2, 3)), axes=(0, 5)))
    assert "out of range" in msg
    msg = error_message(lambda: op.reshape(ir.var("r", shape=(2, 3)), newshape=(4, 2)))
    assert "6 elements" in msg and "8 elements" in msg
    msg = error_message(lambda: op.nn.relu(ir.var("i", shape=(3,), dtype="int64")))
    assert "nn.relu" in msg and "float" in msg and "int64" in msg
    msg = error_message(lambda: op.concatenate([ir.var("p", shape=(2, 3)),
                                                ir.var("q", shape=(3, 3))], axis=1))
    assert "input 1" in msg
    msg = error_message(lambda: op.nn.dense(ir.var("d", shape=(4, 40)),
                                            ir.var("w", shape=(10, 30))))
    assert "40 features" in msg
    msg = error_message(lambda: ir.call("nn.rleu", [x]))
    assert "did you mean" in msg and "nn.relu" in msg
