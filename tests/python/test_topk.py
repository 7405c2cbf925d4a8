"""topk (op.topk and torch.topk through the frontend) against torch.topk, and its errors.

Values are compared with rtol=1e-6 (topk only moves values; the softmax forms rtol=1e-5,
atol=1e-6), indices exactly; the inputs have no ties, so the indices are unambiguous.
Several outputs share one build to keep the suite fast.
"""
import numpy as np
import pytest
import torch

import ember
from ember import ir, op
from op_checks import run, t

EXACT = dict(rtol=1e-6, atol=0)
SOFTMAX = dict(rtol=1e-5, atol=1e-6)
rng = np.random.default_rng(7)


def distinct(*shape, dtype=np.float32, scale=0.01):
    """A shuffled ramp: no two elements equal (nor their softmax probabilities)."""
    n = int(np.prod(shape))
    x = (rng.permutation(n) - n // 2) * scale
    return x.astype(dtype).reshape(shape)


def fields(result):
    return [ir.TupleGetItem(result, 0), ir.TupleGetItem(result, 1)]


def expect_topk(got, x, k, dim=-1, largest=True, tol=EXACT):
    values, indices = torch.topk(t(x), k, dim=dim, largest=largest)
    assert got[0].dtype == x.dtype and got[1].dtype == np.int64
    np.testing.assert_allclose(got[0], values.numpy(), **tol)
    np.testing.assert_array_equal(got[1], indices.numpy())


def test_op_topk_matches_torch():
    x2 = distinct(6, 50)
    x3 = distinct(3, 17, 5)
    xl = distinct(2, 600)
    xi = distinct(4, 30, dtype=np.int64, scale=3)
    xd = distinct(3, 40, dtype=np.float64)
    cases = [  # (input index, k, axis, largest)
        (0, 5, -1, True), (0, 1, -1, True), (0, 50, -1, True), (0, 7, -1, False),
        (1, 4, 1, True), (1, 17, 1, False), (1, 2, 0, True), (1, 3, 2, False),
        (2, 300, -1, True), (2, 599, -1, False),  # k past the local list: kept in the output
        (3, 6, -1, True), (3, 3, 0, False), (4, 10, -1, True)]
    inputs = [x2, x3, xl, xi, xd]

    def make(*xs):
        out = []
        for i, k, axis, largest in cases:
            out += fields(op.topk(xs[i], k, axis=axis, largest=largest))
        return out
    got = run(make, *inputs)
    for n, (i, k, axis, largest) in enumerate(cases):
        expect_topk(got[2 * n:2 * n + 2], inputs[i], k, axis, largest)


def test_nan_ranks_above_every_number():
    x = distinct(4, 20)
    x[0, 3] = np.nan
    x[1, 19] = np.nan
    x[2, 0] = -np.inf
    x[3, 5] = np.inf
    got = run(lambda a: fields(op.topk(a, 3)) + fields(op.topk(a, 4, largest=False)), x)
    for half, largest, k in ((got[:2], True, 3), (got[2:], False, 4)):
        values, indices = torch.topk(t(x), k, largest=largest)
        np.testing.assert_allclose(half[0], values.numpy(), equal_nan=True, **EXACT)
        np.testing.assert_array_equal(half[1], indices.numpy())


def test_frontend_topk_and_softmax_topk():
    class Model(torch.nn.Module):
        def forward(self, x, y, i):
            a = torch.topk(x, 5)
            b = torch.topk(y, 2, dim=1, largest=False, sorted=False)
            c = torch.topk(i, 3, dim=0)
            d = torch.topk(torch.softmax(x, dim=-1), 4)
            e = torch.topk(torch.log_softmax(y, dim=1), 3, dim=1)
            return a.values, a.indices, b[0], b[1], c[0], c[1], d[0], d[1], e[0], e[1]

    x, y = distinct(8, 64, scale=0.05), distinct(2, 9, 3, scale=0.05)
    i = distinct(12, 4, dtype=np.int64, scale=1)
    inputs = (t(x), t(y), t(i))
    mod, params = ember.frontend.from_pytorch(Model().eval(), inputs)
    lib = ember.build(mod, target="llvm", params=params)
    m = ember.GraphModule(lib)
    for n, a in enumerate(inputs):
        m.set_input(n, a.numpy())
    m.run()
    got = [np.asarray(m.get_output(n)) for n in range(m.get_num_outputs())]
    with torch.no_grad():
        want = [w.numpy() for w in Model()(*inputs)]
    assert len(got) == len(want) == 10
    for n in range(5):
        tol = SOFTMAX if n >= 3 else EXACT
        assert got[2 * n].dtype == want[2 * n].dtype
        np.testing.assert_allclose(got[2 * n], want[2 * n], **tol, err_msg=f"values {n}")
        np.testing.assert_array_equal(got[2 * n + 1], want[2 * n + 1], err_msg=f"indices {n}")
    # Both softmax -> topk pairs became one topk kernel each; nothing else fused with them.
    patterns = [p for k in lib.fusion_report() for p in k.patterns]
    assert "softmax->topk" in patterns and "log_softmax->topk" in patterns, lib.fusion_report()
    assert len(lib.fusion_report()) == 5


def test_errors_name_the_node():
    x = ir.var("x", shape=(4, 6))
    with pytest.raises(ember.EmberError, match=r"head\.topk.*k is 7.*between 1 and 6"):
        op.topk(x, 7, name="head.topk")
    with pytest.raises(ember.EmberError, match=r"head\.topk.*k is 0"):
        op.topk(x, 0, name="head.topk")
    with pytest.raises(ember.EmberError, match="head.topk"):
        op.topk(x, 2, axis=2, name="head.topk")
    with pytest.raises(ember.EmberError, match="cast it"):
        op.topk(ir.var("b", shape=(4,), dtype="bool"), 1, name="head.topk")
    with pytest.raises(ember.EmberError, match="'k' must be an integer"):
        op.topk(x, 1.5)
    with pytest.raises(ember.EmberError, match="tuple type"):
        op.topk(x, 2).shape  # a tuple: take a field first


def test_two_output_kernel_exports_and_reloads(tmp_path):
    """The topk kernel writes two outputs; a saved model runs it the same way."""
    class Model(torch.nn.Module):
        def forward(self, x):
            return torch.topk(torch.softmax(x, dim=-1), 3)

    x = t(distinct(5, 40, scale=0.1))
    mod, params = ember.frontend.from_pytorch(Model().eval(), (x,))
    lib = ember.build(mod, target="llvm", params=params)
    lib.export(tmp_path / "topk.ember")
    loaded = ember.load(tmp_path / "topk.ember")
    assert loaded._kernels() == lib._kernels()
    with torch.no_grad():
        want = Model()(x)
    for library in (lib, loaded):
        m = ember.GraphModule(library)
        m.set_input(0, x.numpy())
        m.run()
        np.testing.assert_allclose(np.asarray(m.get_output(0)), want.values.numpy(), **SOFTMAX)
        np.testing.assert_array_equal(np.asarray(m.get_output(1)), want.indices.numpy())


@pytest.mark.parametrize("inner", [8, 12, 6, 3, 5, 16, 24])
def test_softmax_topk_along_a_middle_axis(inner):
    """A middle axis: rows that are neighbours in memory take their max and sum together as
    vectors (all inner positions where they fit one vector, else blocks of 8, 4 or 2); a -inf
    logit and large ones inside."""
    x, y = distinct(3, 40, inner, scale=0.05), distinct(2, 33, inner, scale=0.05)
    # Past float32 exp overflow without the row's max (the kernel takes it in partial maxima
    # over j mod 4, then a tail): the max at j = 5, 7 (mod 4: 1, 3) and the tail j = 32. The
    # log_softmax case (y) takes the largest: its smallest values never round to equal.
    x[1, 5, :] = 95.0 + np.arange(inner)
    y[0, 10, :] = 200.0 - np.arange(inner)
    y[0, 32, :] = 210.0 + np.arange(inner)
    y[1, 7, :] = 200.0 + np.arange(inner)
    y[0, 7, 1] = -np.inf
    class Model(torch.nn.Module):
        def forward(self, x, y):
            return (torch.topk(torch.softmax(x, dim=1), 4, dim=1)
                    + torch.topk(torch.log_softmax(y, dim=1), 3, dim=1, largest=False))

    inputs = (t(x), t(y))
    mod, params = ember.frontend.from_pytorch(Model().eval(), inputs)
    lib = ember.build(mod, target="llvm", params=params)
    patterns = [p for k in lib.fusion_report() for p in k.patterns]
    assert "softmax->topk" in patterns and "log_softmax->topk" in patterns, lib.fusion_report()
    m = ember.GraphModule(lib)
    for n, a in enumerate(inputs):
        m.set_input(n, a.numpy())
    m.run()
    got = [np.asarray(m.get_output(n)) for n in range(4)]
    for (vals, idx), data, k, largest, fn in ((got[:2], x, 4, True, torch.softmax),
                                              (got[2:], y, 3, False, torch.log_softmax)):
        want = torch.topk(fn(t(data), dim=1), k, dim=1, largest=largest)
        np.testing.assert_allclose(vals, want.values.numpy(), **SOFTMAX)
        np.testing.assert_array_equal(idx, want.indices.numpy())
