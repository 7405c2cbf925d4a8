"""Core ATen's float32 pointwise ops, imported from PyTorch and swept at edge values
(0, -0, +-inf, NaN, denormals, huge, negatives, domain edges) in one model.

Reference: the op in float64 on the same float32 inputs, rounded to float32 (PyTorch's own
float32 results at denormals and signs of zero depend on the CPU's vector loop, e.g. its
log1p flushes denormals to 0). Tolerance: 2 float32 ulp relative (|err| <= 2.4e-7 |ref|),
and exact NaN positions, infinities and signs of zero. A dense grid of ordinary values is
also compared with PyTorch's float32 results (4 ulp, plus 1e-30 absolute)."""
import math

import numpy as np
import pytest
import torch

import ember

EDGES = [0.0, -0.0, math.inf, -math.inf, math.nan, 1e-45, -1e-45, 1.2e-38, 1e-30, 1e-7,
         0.5, -0.5, 0.999, -0.999, 1.0, -1.0, 1.001, 2.0, -2.5, 3.0, 8.0, 10.0, 20.5, -20.5,
         88.7, -103.0, 100.0, 1000.0, 12345.678, 1e10, 1e30, -1e30, 3.4e38, -3.4e38,
         math.pi, math.pi / 2, 1e-3, -7.25]

UNARY = ["log1p", "expm1", "exp2", "log2", "log10", "erfc", "trunc", "sign", "sin", "cos",
         "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "isnan",
         "isinf", "isfinite", "exp", "log", "sqrt", "rsqrt", "abs", "neg", "floor", "ceil",
         "round", "sigmoid", "tanh", "erf", "reciprocal", "relu"]
BINARY = ["atan2", "fmod", "remainder", "maximum", "minimum", "pow"]


class AllOps(torch.nn.Module):
    def forward(self, x, a, b):
        outs = [getattr(torch, name)(x) for name in UNARY]
        outs += [getattr(torch, name)(a, b) for name in BINARY]
        return tuple(outs)


def float64_reference(name, *args):
    wide = [torch.from_numpy(np.asarray(v, dtype=np.float64)) for v in args]
    if name in ("fmod", "remainder"):  # exact in float64: C fmod, then torch's adjustment
        a, b = (np.asarray(v, dtype=np.float64) for v in args)
        with np.errstate(invalid="ignore"):
            m = np.fmod(a, b).astype(np.float32)
        if name == "fmod":
            return m
        b32 = np.asarray(args[1], dtype=np.float32)
        flip = (m != 0) & ((b32 < 0) != (m < 0))
        return np.where(flip, m + b32, m)
    out = getattr(torch, name)(*wide).numpy()
    with np.errstate(over="ignore"):  # float64 results beyond float32 round to inf
        return out if out.dtype == bool else out.astype(np.float32)


# Ember's relu(-0) is +0 where PyTorch keeps -0 (a documented difference, README); maximum
# and minimum of +0 and -0 may return either zero (as C's fmax).
ZERO_SIGN_DIFFERS = {"relu", "maximum", "minimum"}


def check(name, got, want, rtol=2.4e-7, atol=0.0):
    got, want = np.asarray(got), np.asarray(want)
    if want.dtype == bool:
        assert (got == want).all(), name
        return
    g, w = got.astype(np.float64), want.astype(np.float64)
    nan = np.isnan(w)
    assert (np.isnan(g) == nan).all(), (name, g[np.isnan(g) != nan], w[np.isnan(g) != nan])
    finite = np.isfinite(w)
    assert (g[~finite & ~nan] == w[~finite & ~nan]).all(), name
    zero = (w == 0) & (name not in ZERO_SIGN_DIFFERS)
    assert (np.signbit(g[zero]) == np.signbit(w[zero])).all(), (name, "sign of zero")
    with np.errstate(invalid="ignore"):
        err = np.abs(g - w)[finite]
    bad = err > rtol * np.abs(w[finite]) + atol
    assert not bad.any(), (name, list(zip(g[finite][bad], w[finite][bad])))


@pytest.fixture(scope="module")
def module():
    x = torch.tensor(EDGES, dtype=torch.float32)
    a = x.repeat_interleave(len(EDGES))
    b = x.repeat(len(EDGES))
    func, params = ember.frontend.from_pytorch(AllOps(), (x, a, b))
    return ember.GraphModule(ember.build(func, params=params))


def test_edge_values_match_float64(module):
    x = np.array(EDGES, dtype=np.float32)
    a, b = np.repeat(x, len(EDGES)), np.tile(x, len(EDGES))
    outputs = module(x, a, b)
    for name, got in zip(UNARY + BINARY, outputs):
        args = (x,) if name in UNARY else (a, b)
        if name == "pow":
            continue  # pow's accuracy is |y log x| ulp (prim_math.h): swept in test_ops
        check(name, np.asarray(got), float64_reference(name, *args),
              rtol=0 if name in ("trunc", "sign", "floor", "ceil", "round", "abs", "neg",
                                 "relu", "maximum", "minimum", "fmod") else 2.4e-7)


def test_ordinary_values_match_pytorch(module):
    rng = np.random.default_rng(0)
    grid = np.concatenate([np.linspace(-12, 12, 1001), rng.standard_normal(500) * 100,
                           np.geomspace(1e-6, 1e6, 200)]).astype(np.float32)
    x, a, b = grid, grid, np.roll(grid, 7)
    func, params = ember.frontend.from_pytorch(
        AllOps(), tuple(torch.from_numpy(v) for v in (x, a, b)))
    outputs = ember.GraphModule(ember.build(func, params=params))(x, a, b)
    for name, got in zip(UNARY + BINARY, outputs):
        args = (x,) if name in UNARY else (a, b)
        if name == "pow":
            continue
        want = getattr(torch, name)(*(torch.from_numpy(v) for v in args)).numpy()
        if want.dtype != bool:  # PyTorch's float32 sinh/cosh overflow early (e^x / 2)
            exact = float64_reference(name, *args)
            want = np.where(np.isinf(want) & np.isfinite(exact), exact, want)
        check(name, np.asarray(got), want, rtol=4.8e-7, atol=1e-30)


@pytest.mark.parametrize("name", ["sin", "fmod"])
def test_float32_only_ops_reject_float64(name):
    x = ember.ir.var("x", shape=(4,), dtype="float64")
    args = (x,) if name == "sin" else (x, x)
    with pytest.raises(ember.EmberError, match="implemented for float32"):
        getattr(ember.op, name)(*args)


@pytest.mark.parametrize("dtype", ["int32", "int64"])
@pytest.mark.parametrize("name", ["fmod", "remainder"])
def test_integer_fmod_and_remainder_match_torch(dtype, name):
    """Index arithmetic (Swin's window indices): every sign of dividend and divisor, by a
    scalar and by a constant tensor, through the frontend; a zero constant divisor is an
    error naming the node, and a divisor computed when the model runs is refused."""
    fn = getattr(torch, name)
    tdtype = getattr(torch, dtype)
    divisors = torch.tensor([3, -3, 7, -1, 1, 5, -4, 2], dtype=tdtype)

    class Net(torch.nn.Module):
        def forward(self, x):
            return fn(x, 4) + fn(x, -3) + fn(x, divisors)

    x = torch.arange(-20, 20, dtype=tdtype).reshape(5, 8)
    mod, params = ember.frontend.from_pytorch(Net(), (x,))
    got = np.asarray(ember.GraphModule(ember.build(mod, params=params))(x=x.numpy()))
    np.testing.assert_array_equal(got, Net()(x).numpy())

    class ByZero(torch.nn.Module):
        def forward(self, x):
            return fn(x, torch.tensor([1, 0], dtype=tdtype))

    with pytest.raises(ember.EmberError, match="constant divisor is 0 at element 1"):
        ember.frontend.from_pytorch(ByZero(), (x[:, :2].contiguous(),))

    class ByInput(torch.nn.Module):
        def forward(self, x, y):
            return fn(x, y)

    with pytest.raises(ember.EmberError, match="computed when the model runs"):
        ember.frontend.from_pytorch(ByInput(), (x, x + 100))


def test_integer_fmod_by_a_zero_input_gives_zero():
    # A hand-built graph may divide by an input: a zero divisor gives 0 (torch raises).
    x = ember.ir.var("x", shape=(4,), dtype="int64")
    y = ember.ir.var("y", shape=(4,), dtype="int64")
    m = ember.GraphModule(ember.build(ember.ir.Function([x, y], ember.op.fmod(x, y))))
    got = np.asarray(m(x=np.array([7, -7, 5, 9]), y=np.array([2, 2, 0, -4])))
    np.testing.assert_array_equal(got, [1, -1, 0, 1])
