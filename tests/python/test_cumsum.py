"""cumsum (src/ir/ops/scan.cc, its own loop nest) against torch.cumsum, directly and through
the PyTorch frontend, and its errors.

Float results are compared exactly: like torch's CPU kernel, Ember keeps a float32 running
sum in float64 and adds in index order, so every rounding is the same. Shapes are awkward
(odd lengths, inner sizes that are and are not multiples of a vector), along the first,
middle and last axis, at both vector widths; integer and bool data give int64, as in torch.
"""
import numpy as np
import pytest
import torch

import ember
from ember import ir, op
from op_checks import build_run, error_of, run, t

rng = np.random.default_rng(11)

# (shape, axis): inner sizes 1 (last axis), 5 (no vector divides it), 24 and 16 (blocks of
# vectors), a long axis, and a size-1 axis.
CASES = [((7,), 0), ((3, 17), 1), ((3, 17), 0), ((2, 37, 5), 1), ((3, 11, 24), -2),
         ((13, 6, 8), 0), ((2, 1000, 16), 1), ((4, 1, 3), 1), ((1, 9), -1)]


def data(shape, dtype):
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if np.issubdtype(dtype, np.integer):
        return rng.integers(-1000, 1000, shape).astype(dtype)
    return (rng.standard_normal(shape) * 10).astype(dtype)


@pytest.mark.parametrize("bits", [256, 512])
@pytest.mark.parametrize("shape,axis", CASES)
def test_float32_matches_torch_exactly(shape, axis, bits):
    x = data(shape, np.float32)
    v = ir.var("x", shape, "float32")
    _, (got,) = build_run(ir.Function([v], op.cumsum(v, axis=axis)), [x], bits)
    want = torch.cumsum(t(x), axis).numpy()
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.int64, np.bool_])
def test_other_dtypes(dtype):
    xs = [data(s, dtype) for s, _ in CASES[:6]]
    got = run(lambda *vs: [op.cumsum(v, axis=a) for v, (_, a) in zip(vs, CASES)], *xs)
    for g, x, (_, axis) in zip(got, xs, CASES):
        want = torch.cumsum(t(x), axis).numpy()
        assert g.dtype == want.dtype  # int64 for integers and bools, as torch
        np.testing.assert_array_equal(g, want)


def test_float32_sum_does_not_drift():
    x = np.array([[1e8, 1.0, -1e8], [3e7, 0.25, -3e7]], dtype=np.float32)
    got = run(lambda v: op.cumsum(v, axis=1), x)
    np.testing.assert_array_equal(got, torch.cumsum(t(x), 1).numpy())
    assert got[0, 2] == 1.0 and got[1, 2] == 0.25  # a float32 running sum would give 0
    got = run(lambda v: op.cumsum(v, axis=0), np.ascontiguousarray(x.T))
    np.testing.assert_array_equal(got, torch.cumsum(t(x.T), 0).numpy())


def test_nan_and_inf_propagate():
    x = np.array([1.0, np.inf, 2.0, -np.inf, 3.0, np.nan, 4.0], dtype=np.float32)
    got = run(lambda v: op.cumsum(v, axis=0), x)
    np.testing.assert_array_equal(got, torch.cumsum(t(x), 0).numpy())


def test_runs_alone_and_after_fused_producers():
    x = data((5, 33), np.float32)
    got = run(lambda v: op.multiply(op.cumsum(op.exp(v), axis=1), v), x)
    want = (torch.cumsum(torch.exp(t(x)).double(), 1).float() * t(x)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_errors_name_the_node():
    x = ir.var("x", (2, 3), "float32")
    msg = error_of(lambda: op.cumsum(x, axis=2, name="running"))
    assert "cumsum 'running'" in msg and "axis 2 is out of range" in msg
    msg = error_of(lambda: op.cumsum(x, name="running"))
    assert "cumsum 'running'" in msg and "needs the attribute axis" in msg
    msg = error_of(lambda: op.cumsum(ir.var("s", (), "float32"), axis=0, name="c0"))
    assert "cumsum 'c0'" in msg and "scalar" in msg and "reshape it to [1]" in msg
    msg = error_of(lambda: op.cumsum(x, axis=0, exclusive=1))
    assert "unknown attribute 'exclusive'" in msg


def test_torch_cumsum_through_the_frontend():
    class Model(torch.nn.Module):
        def forward(self, x, i):
            return (torch.cumsum(x, 1), torch.cumsum(x, -1, dtype=torch.float64),
                    x.cumsum(dim=0), torch.cumsum(i, 0), torch.cumsum(x[0, 0, 0], 0))

    inputs = (t(data((3, 17, 5), np.float32)), t(data((6, 4), np.int32)))
    mod, params = ember.frontend.from_pytorch(Model().eval(), inputs)
    m = ember.GraphModule(ember.build(mod, target="llvm", params=params))
    for n, a in enumerate(inputs):
        m.set_input(n, a.numpy())
    m.run()
    with torch.no_grad():
        want = Model()(*inputs)
    assert m.get_num_outputs() == len(want)
    for n, w in enumerate(want):
        got = np.asarray(m.get_output(n))
        assert got.dtype == w.numpy().dtype and got.shape == tuple(w.shape)
        np.testing.assert_array_equal(got, w.numpy())
