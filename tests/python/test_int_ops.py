"""Integer tensors as first-class values (int8, uint8, int32 and int64): arithmetic, floor and trunc
division, remainders, comparisons, bit ops and shifts, where, clamp, abs/neg/sign, sums,
argmax, arange, casts and promotion, imported from PyTorch (torch.export) and compared with
torch exactly; the new ops at the IR level, including the cases torch leaves undefined or
raises on (a zero divisor, INT_MIN // -1, shift amounts outside [0, bits))."""
import numpy as np
import pytest
import torch

import ember
from ember import ir, op
from op_checks import error_of

INT_DTYPES = ["int32", "int64", "int8", "uint8"]
SIGNED_DTYPES = ["int32", "int64", "int8"]


def _import_run(net, *inputs):
    mod, params = ember.frontend.from_pytorch(net, tuple(inputs))
    m = ember.GraphModule(ember.build(mod, params=params))
    out = m(*[t.numpy() for t in inputs])
    return [np.asarray(o) for o in out] if isinstance(out, (list, tuple)) else [np.asarray(out)]


def _check_exact(got, want):
    want = want if isinstance(want, (list, tuple)) else [want]
    assert len(got) == len(want)
    for k, (g, w) in enumerate(zip(got, want)):
        w = w.numpy()
        assert g.dtype == w.dtype, (k, g.dtype, w.dtype)
        assert g.shape == w.shape, (k, g.shape, w.shape)
        np.testing.assert_array_equal(g, w, err_msg=f"output {k}")


def _ints(dtype, shape, low=-50, high=50, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype == "uint8":  # its values, shifted to start at 0
        low, high = 0, high - low
    return torch.randint(low, high, shape, generator=g, dtype=getattr(torch, dtype))


# ---------------------------------------------------------------- through the frontend

@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_arithmetic_and_division_match_torch(dtype):
    tdtype = getattr(torch, dtype)
    divisors = torch.tensor([3, -3, 7, -1, 1, 5, -4, 2], dtype=tdtype)

    class Net(torch.nn.Module):
        def forward(self, x, y):
            return (x + y, x - y, x * y, x * 3 - 7, x // 4, x // -3, x // divisors,
                    torch.div(x, divisors, rounding_mode="trunc"),
                    torch.div(x, -3, rounding_mode="floor"),
                    torch.floor_divide(x, divisors), x % 5, torch.fmod(x, -3),
                    x / y.clamp(min=1),  # true division of integers: float32
                    -x, torch.abs(x), torch.sign(x), torch.maximum(x, y), torch.minimum(x, y))

    x, y = _ints(dtype, (5, 8)), _ints(dtype, (5, 8), seed=1)
    _check_exact(_import_run(Net(), x, y), Net()(x, y))


@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_comparisons_where_bit_ops_and_shifts_match_torch(dtype):
    tdtype = getattr(torch, dtype)
    amounts = torch.tensor([0, 1, 5, 31, 2, 7, 3, 30], dtype=tdtype)

    class Net(torch.nn.Module):
        def forward(self, x, y, s):
            return (x < y, x <= 3, x == y, x != 0, x > y, x >= -2,
                    torch.where(x > y, x, y), torch.where(x > 0, x, 0),
                    x & y, x | 12, x ^ y, ~x, torch.bitwise_and(x, 0xF),
                    x << amounts, x >> amounts, x << 2, x >> 1, x << s, x >> s,
                    (x > 0) & (y > 0), (x > 0) | (y > 0), (x > 0) ^ (y > 0), ~(x > 0))

    x, y = _ints(dtype, (5, 8)), _ints(dtype, (5, 8), seed=1)
    s = _ints(dtype, (5, 8), 0, 31, seed=2)  # in range: out-of-range amounts below
    _check_exact(_import_run(Net(), x, y, s), Net()(x, y, s))


@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_clamp_reductions_argmax_and_casts_match_torch(dtype):
    class Net(torch.nn.Module):
        def forward(self, x):
            return (torch.clamp(x, -10, 20), x.clamp(min=3), x.clamp(max=-3),
                    torch.clip(x, 5, -5),  # min > max: max everywhere, as torch
                    x.clamp(min=2.5),  # a float bound promotes to float32
                    x.sum(), x.sum(dim=1), x.sum(dim=0, keepdim=True), (x > 0).sum(1),
                    torch.cumsum(x, 1), x.amax(1), x.amin(0),
                    torch.argmax(x), torch.argmax(x, 1), torch.argmin(x, 0, keepdim=True),
                        x.float(), x.to(torch.float64), x.bool(), x.long(), x.int(),
                    (x.float() * 0.37).int(), (x > 0).long())

    x = _ints(dtype, (6, 9))
    x[2, 3] = x[2, 5] = 60  # ties: the first index wins
    _check_exact(_import_run(Net(), x), Net()(x))


def test_promotion_and_index_arithmetic_match_torch():
    class Net(torch.nn.Module):
        def forward(self, a, b):  # a int32, b int64
            pos = torch.arange(8)  # int64, folded when the model is built
            rows = torch.arange(2, 14, 3, dtype=torch.int32)
            return (a + b, a * b, a + 2.5, a * 0.5, a + torch.tensor(3),  # 0-dim: stays int32
                    a + True, (pos * 7 + 3) % 5, pos // 3 * 3 + pos % 3, rows + a[:4, 0],
                    a.float() + b, torch.where(a > 0, a, b), a.max(), a < b)

    a = _ints("int32", (8, 8))
    b = _ints("int64", (8, 8), seed=3)
    _check_exact(_import_run(Net(), a, b), Net()(a, b))


def test_bool_arithmetic_matches_torch():
    """bool * bool is and, bool + bool is or (Mask2Former multiplies two masks); a bool
    times a number or a float tensor promotes. (bool - bool: torch.export refuses it.)"""
    class Net(torch.nn.Module):
        def forward(self, a, b, x):
            m, n = a > 0, b > 0
            return m * n, m + n, m * x, m * 3, (m * n) & (a < b), m + 2.5

    a, b = _ints("int32", (4, 6)), _ints("int32", (4, 6), seed=5)
    x = torch.randn(4, 6)
    _check_exact(_import_run(Net(), a, b, x), Net()(a, b, x))


def test_shift_amounts_outside_the_bit_width_match_torch():
    """torch defines them: a left shift gives 0, a right shift the sign (0 or -1)."""
    class Net(torch.nn.Module):
        def forward(self, x, s):
            return x << s, x >> s

    for dtype, bits in (("int32", 32), ("int64", 64)):
        tdtype = getattr(torch, dtype)
        x = torch.tensor([1, -8, 5, -1, 3, -3, 7, -9], dtype=tdtype)
        s = torch.tensor([-1, bits, bits + 6, 3, bits - 1, -bits, 1000, bits - 2], dtype=tdtype)
        _check_exact(_import_run(Net(), x, s), Net()(x, s))


@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_integer_division_needs_a_known_divisor(dtype):
    tdtype = getattr(torch, dtype)
    x = _ints(dtype, (3, 2))

    class ByZero(torch.nn.Module):
        def forward(self, x):
            return x // torch.tensor([1, 0], dtype=tdtype)

    msg = error_of(lambda: ember.frontend.from_pytorch(ByZero(), (x,)))
    assert "floor_divide" in msg and "constant divisor is 0 at element 1" in msg

    class ByInput(torch.nn.Module):
        def forward(self, x, y):
            return torch.div(x, y, rounding_mode="trunc")

    msg = error_of(lambda: ember.frontend.from_pytorch(ByInput(), (x, x + 100)))
    assert "rounding_mode='trunc'" in msg and "computed when the model runs" in msg
    assert "cast both to float32" in msg

    class FloatDivisor(torch.nn.Module):  # true division and float divisors stay floats
        def forward(self, x, y):
            return x / y, x // y.float(), torch.fmod(x, 2.5)

    y = _ints(dtype, (3, 2), 1, 9, seed=4)
    _check_exact(_import_run(FloatDivisor(), x, y), FloatDivisor()(x, y))


def test_unsupported_integer_cases_are_clear_errors():
    class BoolClamp(torch.nn.Module):
        def forward(self, x):
            return torch.clamp(x > 0, 0, 1)

    msg = error_of(lambda: ember.frontend.from_pytorch(BoolClamp(), (torch.ones(3),)))
    assert "clamp of a bool tensor" in msg

    class FloatBits(torch.nn.Module):  # torch refuses bit ops on floats too
        def forward(self, x):
            return torch.bitwise_and(x, x)

    msg = error_of(lambda: ember.frontend.from_pytorch(FloatBits(), (torch.ones(3),)))
    assert "bitwise_and" in msg


# ------------------------------------------------------------------------ the IR ops

def _run(fn, *arrays):
    xs = [ir.var(f"in{i}", a.shape, a.dtype.name) for i, a in enumerate(arrays)]
    m = ember.GraphModule(ember.build(ir.Function(xs, fn(*xs))))
    return np.asarray(m(*arrays))


@pytest.mark.parametrize("dtype", SIGNED_DTYPES)
def test_integer_division_defines_every_divisor(dtype):
    """No SIGFPE: a zero divisor (a hand-built graph's input; torch raises) gives 0, and
    INT_MIN // -1 wraps to INT_MIN (x86's idiv traps on both; torch crashes on the second)."""
    lo = np.iinfo(dtype).min
    a = np.array([lo, lo, 7, -7, 5, 7, -7, 0, lo, 9], dtype)
    b = np.array([-1, 0, -1, 2, -2, 0, 3, -5, 2, 1], dtype)
    want = {"floor_divide": [lo, 0, -7, -4, -3, 0, -3, 0, lo // 2, 9],
            "trunc_divide": [lo, 0, -7, -3, -2, 0, -2, 0, lo // 2, 9],
            "remainder": [0, 0, 0, 1, -1, 0, 2, 0, 0, 0],
            "fmod": [0, 0, 0, -1, 1, 0, -1, 0, 0, 0]}
    for name, values in want.items():
        got = _run(getattr(op, name), a, b)
        assert got.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(got, np.array(values, dtype), err_msg=name)
    # A divisor of every sign against torch (where torch has a value).
    x = np.arange(-40, 40, dtype=dtype).reshape(8, 10)
    y = np.array([3, -3, 7, -1, 1, 5, -4, 2, 11, -12], dtype)
    tx, ty = torch.from_numpy(x), torch.from_numpy(y)
    np.testing.assert_array_equal(_run(op.floor_divide, x, y), torch.floor_divide(tx, ty))
    np.testing.assert_array_equal(_run(op.trunc_divide, x, y),
                                  torch.div(tx, ty, rounding_mode="trunc"))


def test_integer_division_by_a_constant_zero_is_an_error_naming_the_node():
    x = ir.var("x", (3,), "int64")
    msg = error_of(lambda: op.trunc_divide(x, ir.const(np.array([2, 0, 1])), name="q"))
    assert "trunc_divide 'q'" in msg and "constant divisor is 0 at element 1" in msg


def test_uint8_divides_shifts_and_compares_unsigned():
    """uint8 (a quantized activation's type) is unsigned: values past 127 divide, shift,
    compare and take maxima as such, a zero divisor gives 0, shift amounts of 8 and more
    give 0 (as torch), and arithmetic wraps."""
    x = np.array([0, 1, 127, 128, 200, 255, 37, 90], np.uint8)
    y = np.array([0, 3, 2, 255, 7, 16, 1, 128], np.uint8)
    s = np.array([0, 1, 7, 8, 9, 255, 3, 4], np.uint8)
    tx, ty, ts = (torch.from_numpy(v) for v in (x, y, s))
    safe = torch.where(ty == 0, torch.ones_like(ty), ty)
    np.testing.assert_array_equal(_run(op.floor_divide, x, y),
                                  torch.where(ty == 0, 0, tx // safe).numpy())
    np.testing.assert_array_equal(_run(op.remainder, x, y),
                                  torch.where(ty == 0, 0, tx % safe).numpy())
    np.testing.assert_array_equal(_run(op.right_shift, x, s), (tx >> ts).numpy())
    np.testing.assert_array_equal(_run(op.left_shift, x, s), (tx << ts).numpy())
    np.testing.assert_array_equal(_run(op.maximum, x, y), np.maximum(x, y))
    np.testing.assert_array_equal(_run(op.less, x, y), x < y)
    np.testing.assert_array_equal(_run(op.add, x, y), x + y)  # wraps
    np.testing.assert_array_equal(_run(lambda v: op.cast(v, "float32"), x), x.astype(np.float32))


@pytest.mark.parametrize("dtype", SIGNED_DTYPES)
def test_shifts_and_bit_ops(dtype):
    bits = np.iinfo(dtype).bits
    x = np.array([1, -8, 5, -1, 3, -3, 7, np.iinfo(dtype).min], dtype)
    s = np.array([-1, bits, bits + 6, 3, bits - 1, -bits, 0, 1], dtype)
    tx, ts = torch.from_numpy(x), torch.from_numpy(s)
    np.testing.assert_array_equal(_run(op.left_shift, x, s), (tx << ts).numpy())
    np.testing.assert_array_equal(_run(op.right_shift, x, s), (tx >> ts).numpy())
    np.testing.assert_array_equal(_run(op.bitwise_and, x, s), x & s)
    np.testing.assert_array_equal(_run(op.bitwise_or, x, s), x | s)
    np.testing.assert_array_equal(_run(op.bitwise_xor, x, s), x ^ s)
    np.testing.assert_array_equal(_run(op.bitwise_not, x), ~x)
    p, q = np.array([True, True, False, False]), np.array([True, False, True, False])
    np.testing.assert_array_equal(_run(op.bitwise_and, p, q), p & q)
    np.testing.assert_array_equal(_run(op.bitwise_xor, p, q), p ^ q)
    np.testing.assert_array_equal(_run(op.bitwise_not, p), ~p)


def test_integer_clip_rounds_its_bounds_inward_and_saturates():
    x = np.array([-9, -3, -2, 0, 2, 3, 4, 9], np.int32)
    np.testing.assert_array_equal(_run(lambda v: op.clip(v, -2.5, 3.7), x),
                                  np.clip(x, -2, 3))
    big = np.array([np.iinfo(np.int32).min, 0, np.iinfo(np.int32).max], np.int32)
    np.testing.assert_array_equal(_run(lambda v: op.clip(v, -1e30, float("inf")), big), big)


def test_integer_ops_refuse_other_dtypes():
    f = ir.var("f", (3,), "float32")
    b = ir.var("b", (3,), "bool")
    assert "implemented for integer tensors only" in error_of(lambda: op.floor_divide(f, f))
    assert "implemented for integer tensors only" in error_of(lambda: op.left_shift(b, b))
    assert "takes integer and bool tensors only" in error_of(lambda: op.bitwise_and(f, f))
    assert "takes integer and bool tensors only" in error_of(lambda: op.bitwise_not(f))
    i = ir.var("i", (3,), "int32")
    assert "input dtypes differ" in error_of(lambda: op.right_shift(i, ir.var("j", (3,), "int64")))


def test_int8_and_uint8_tensors_in_and_out_of_a_model(tmp_path):
    """8-bit tensors cross every boundary as themselves: torch and NumPy inputs, DLPack,
    outputs, an 8-bit parameter, and a model file. uint8 with int8 promotes to int16 in
    torch, which Ember lacks: a clear error."""
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("w", torch.tensor([-128, -1, 0, 1, 127, 5], dtype=torch.int8))

        def forward(self, a, b):  # a uint8, b int8
            return a + 3, b * self.w, a.int() - b, (b > -2) & (a < 250), a.float() * 0.5

    a = _ints("uint8", (4, 6), 0, 256)
    b = _ints("int8", (4, 6), -128, 128, seed=1)
    mod, params = ember.frontend.from_pytorch(Net(), (a, b))
    lib = ember.build(mod, params=params)
    want = Net()(a, b)
    _check_exact([np.asarray(o) for o in ember.GraphModule(lib)(a, b)], want)
    m = ember.GraphModule(lib)
    m.set_input(0, ember.Tensor.from_dlpack(a))
    m.set_input(1, b.numpy())
    m.run()
    assert torch.equal(torch.from_dlpack(m.get_output(1)), want[1])
    lib.export(tmp_path / "m.ember")
    _check_exact([np.asarray(o) for o in ember.GraphModule(ember.load(tmp_path / "m.ember"))(
        a.numpy(), b.numpy())], want)

    class Mixed(torch.nn.Module):
        def forward(self, a, b):
            return a + b

    assert "promotes them to int16" in error_of(
        lambda: ember.frontend.from_pytorch(Mixed(), (a, b)))
