"""gather (torch.gather): out[i] = data[i with its `axis` coordinate replaced by index[i]],
and adv_index (x[i, j]: several index tensors), against torch at both vector widths, with
constant and run-time indices of both integer types; bad indices and shapes are EmberErrors
naming the node (constant indices: when the graph is built; run-time ones: when the model
runs, naming the kernel)."""
import numpy as np
import pytest
import torch

import ember
from ember import ir, op
from op_checks import build_run

WIDTHS = [256, 512]
rng = np.random.default_rng(11)


def _error(fn):
    with pytest.raises(ember.EmberError) as info:
        fn()
    return str(info.value)


@pytest.mark.parametrize("bits", WIDTHS)
@pytest.mark.parametrize("axis", [0, 1, 2, -1])
@pytest.mark.parametrize("idx_dtype", ["int64", "int32"])
def test_gather_matches_torch(bits, axis, idx_dtype):
    data = rng.standard_normal((4, 37, 5)).astype(np.float32)
    # Smaller than data along the other axes, any size along the gathered one.
    shape = [3, 29, 4]
    shape[axis] = 7
    idx = rng.integers(0, data.shape[axis], shape).astype(idx_dtype)
    want = torch.relu(torch.gather(torch.from_numpy(data), axis, torch.from_numpy(idx).long()))
    x = ir.var("x", shape=data.shape)
    i = ir.var("i", shape=idx.shape, dtype=idx_dtype)
    _, (got,) = build_run(ir.Function([x, i], op.nn.relu(op.gather(x, i, axis=axis))),
                          [data, idx], bits)
    np.testing.assert_array_equal(got, want.numpy())
    # Constant indices (folded into the kernel's loads).
    _, (got,) = build_run(ir.Function([x], op.gather(x, ir.const(idx), axis=axis)), [data], bits)
    np.testing.assert_array_equal(got, torch.gather(torch.from_numpy(data), axis,
                                                    torch.from_numpy(idx).long()).numpy())


def test_gather_of_integers_and_the_frontend():
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("table", torch.arange(40).reshape(4, 10) * 3)

        def forward(self, x, pos):
            ids = torch.gather(self.table.expand(x.shape[0], -1, -1), 2, pos)  # int64 data
            return torch.gather(x, 1, pos[:, :, :1].expand(-1, -1, x.shape[2])) + ids[:, :, :1]

    net = Net().eval()
    x = torch.randn(2, 6, 10)
    pos = torch.randint(0, 4, (2, 4, 10))
    mod, params = ember.frontend.from_pytorch(net, (x, pos))
    m = ember.GraphModule(ember.build(mod, params=params))
    got = np.asarray(m(x=x.numpy(), pos=pos.numpy()))
    np.testing.assert_allclose(got, net(x, pos).numpy(), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("bits", WIDTHS)
def test_run_time_bad_index_is_an_error(bits):
    data = rng.standard_normal((4, 37)).astype(np.float32)
    x = ir.var("x", shape=data.shape)
    i = ir.var("i", shape=(4, 9), dtype="int64")
    m = ember.GraphModule(ember.build(ir.Function([x, i], op.gather(x, i, axis=1, name="pick")),
                                      target=f"llvm -vector-bits={bits}"))
    good = rng.integers(0, 37, (4, 9)).astype(np.int64)
    for bad in (37, -1):  # torch.gather refuses negative indices too
        idx = good.copy()
        idx[2, 5] = bad
        msg = _error(lambda: m(x=data, i=idx))
        assert "kernel 'pick'" in msg and f"index {bad} is out of range" in msg
        assert "axis 1 of size 37" in msg and "valid indices are 0 to 36" in msg
    np.testing.assert_array_equal(np.asarray(m(x=data, i=good)),
                                  np.take_along_axis(data, good, axis=1))


def test_bad_gathers_are_errors_naming_the_node():
    x = ir.var("x", shape=(5, 3))
    msg = _error(lambda: op.gather(x, ir.const(np.array([[0], [5]], np.int64)), name="sel"))
    assert "gather 'sel'" in msg and "constant index 5" in msg and "axis 0 of size 5" in msg
    msg = _error(lambda: op.gather(x, ir.const(np.array([[-1]], np.int64)), axis=1))
    assert "constant index -1" in msg and "valid indices are 0 to 2" in msg
    msg = _error(lambda: op.gather(x, ir.var("i", shape=(5,), dtype="int64")))
    assert "as many dimensions as data" in msg
    msg = _error(lambda: op.gather(x, ir.var("i", shape=(2, 4), dtype="int64"), axis=0))
    assert "larger than data" in msg and "axis 1" in msg
    msg = _error(lambda: op.gather(x, ir.var("i", shape=(2, 3), dtype="float32")))
    assert "indices must be int32 or int64, got float32[2, 3]" in msg


# ------------------------------------------------------- adv_index: x[i, j] with several tensors

@pytest.mark.parametrize("bits", WIDTHS)
@pytest.mark.parametrize("where", ["leading", "middle", "apart"])
def test_advanced_indexing_by_several_tensors_matches_torch(bits, where):
    """x[i, j], x[:, i, j] and x[i, :, j] with index tensors that broadcast together (the
    masks transformers builds: batch_idx[:, None] and kv_idx[None, :]), negative indices
    included, through the frontend, against torch."""
    class Net(torch.nn.Module):
        def forward(self, x, i, j):
            if where == "leading":
                return x[i, j]
            return x[:, i, j] if where == "middle" else x[i, :, j]

    x = torch.randn(5, 6, 7)
    i = torch.randint(-5, 5, (3, 1))
    j = torch.randint(-6, 6, (4,))
    mod, params = ember.frontend.from_pytorch(Net().eval(), (x, i, j))
    lib = ember.build(mod, target=f"llvm -vector-bits={bits}", params=params)
    got = np.asarray(ember.GraphModule(lib)(x=x.numpy(), i=i.numpy(), j=j.numpy()))
    np.testing.assert_array_equal(got, Net()(x, i, j).numpy())


def test_advanced_indexing_errors():
    x = ir.var("x", shape=(4, 5))
    i = ir.var("i", shape=(3,), dtype="int64")
    msg = _error(lambda: op.adv_index(x, [i, i, i]))
    assert "index more axes than data" in msg
    msg = _error(lambda: op.adv_index(x, [i, ir.var("f", shape=(3,))]))
    assert "index 1 must be int32 or int64, got float32[3]" in msg
    msg = _error(lambda: op.adv_index(x, [i, ir.var("k", shape=(2,), dtype="int64")]))
    assert "cannot broadcast shapes [3] and [2]" in msg
    msg = _error(lambda: op.adv_index(x, [i, ir.const(np.array([5], np.int64))], name="pick"))
    assert "adv_index 'pick'" in msg and "constant index 5" in msg and "axis 1 of size 5" in msg
    m = ember.GraphModule(ember.build(ir.Function([x, i], op.adv_index(x, [i, i], name="pair"))))
    msg = _error(lambda: m(x=np.zeros((4, 5), np.float32), i=np.array([0, 4, 1])))
    assert "kernel 'pair'" in msg and "index 4 is out of range for axis 0 of size 4" in msg
