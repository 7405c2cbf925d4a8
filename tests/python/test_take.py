"""take / x[idx] / index_select / embedding: negative indices wrap as in PyTorch's x[idx],
and an index out of range is an EmberError -- at build time for constant indices, at run
time (checked inside the kernel) otherwise -- never a clamp or a read outside the tensor.
Every run test is done at both vector widths."""
import numpy as np
import pytest
import torch

import ember
from ember import ir, op
from op_checks import build_run

WIDTHS = [256, 512]
rng = np.random.default_rng(7)


def _module(make, data_shape, idx_shape, vector_bits, idx_dtype="int64", params=None):
    x = ir.var("x", shape=data_shape)
    idx = ir.var("idx", shape=idx_shape, dtype=idx_dtype)
    lib = ember.build(ir.Function([x, idx], make(x, idx)),
                      target=f"llvm -vector-bits={vector_bits}", params=params)
    return ember.GraphModule(lib)


def _error(fn):
    with pytest.raises(ember.EmberError) as info:
        fn()
    return str(info.value)


@pytest.mark.parametrize("vector_bits", WIDTHS)
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_negative_indices_wrap_like_torch(vector_bits, axis):
    data = rng.standard_normal((6, 37, 5)).astype(np.float32)
    size = data.shape[axis]
    idx = rng.integers(-size, size, (3, 19)).astype(np.int64)
    idx[0, :2] = [-1, -size]  # the last and the first
    x = ir.var("x", shape=data.shape)
    i = ir.var("i", shape=idx.shape, dtype="int64")
    _, (got,) = build_run(ir.Function([x, i], op.nn.relu(op.take(x, i, axis=axis))), [data, idx],
                          vector_bits)
    index = [slice(None)] * 3
    index[axis] = torch.from_numpy(idx)
    want = torch.relu(torch.from_numpy(data)[tuple(index)])
    np.testing.assert_array_equal(got, want.numpy())


@pytest.mark.parametrize("vector_bits", WIDTHS)
@pytest.mark.parametrize("bad", [37, 1000, -38])
def test_run_time_index_out_of_range_is_an_error(vector_bits, bad):
    data = rng.standard_normal((4, 37)).astype(np.float32)
    m = _module(lambda x, i: op.take(x, i, axis=1, name="pick"), data.shape, (29,), vector_bits)
    good = rng.integers(-37, 37, 29).astype(np.int64)
    idx = good.copy()
    idx[21] = bad  # a lane in the middle of a vector (and in the masked tail at 512 bits)
    msg = _error(lambda: m(x=data, idx=idx))
    assert "kernel 'pick'" in msg and f"take index {bad} is out of range" in msg
    assert "axis 1 of size 37" in msg and "valid indices are -37 to 36" in msg
    # The error is cleared: the same module runs the next good input.
    np.testing.assert_array_equal(np.asarray(m(x=data, idx=good)), data[:, good])


@pytest.mark.parametrize("vector_bits", WIDTHS)
def test_run_time_error_with_int32_indices_in_a_fused_kernel(vector_bits):
    data = rng.standard_normal((9, 16)).astype(np.float32)
    m = _module(lambda x, i: op.nn.relu(op.add(op.take(x, i, name="emb"), ir.const(np.float32(1)))), data.shape,
                (5,), vector_bits, idx_dtype="int32")
    msg = _error(lambda: m(x=data, idx=np.array([0, 1, 2, 3, 9], np.int32)))
    assert "emb" in msg and "take index 9" in msg and "axis 0 of size 9" in msg


@pytest.mark.parametrize("vector_bits", WIDTHS)
def test_negative_index_is_an_error_where_torch_refuses_it(vector_bits):
    data = rng.standard_normal((7, 8)).astype(np.float32)
    m = _module(lambda x, i: op.take(x, i, allow_negative=False, name="lookup"), data.shape,
                (3,), vector_bits)
    msg = _error(lambda: m(x=data, idx=np.array([1, -1, 2], np.int64)))
    assert "take index -1" in msg and "valid indices are 0 to 6" in msg
    assert "negative" in msg
    np.testing.assert_array_equal(np.asarray(m(x=data, idx=np.array([6, 0, 2]))),
                                  data[[6, 0, 2]])


def test_parallel_kernel_reports_the_error():
    """A take large enough to run on the thread pool: a bad index in another thread's
    chunk is still reported."""
    threads = ember.get_num_threads()
    ember.set_num_threads(4)  # more threads than this machine's cores is fine
    try:
        data = rng.standard_normal((300, 64)).astype(np.float32)
        m = _module(lambda x, i: op.take(x, i), data.shape, (4096,), 256)
        idx = rng.integers(0, 300, 4096).astype(np.int64)
        idx[4000] = 300  # in the last thread's chunk
        msg = _error(lambda: m(x=data, idx=idx))
        assert "take index 300" in msg
    finally:
        ember.set_num_threads(threads)


def test_constant_indices_out_of_range_fail_when_the_node_is_made():
    x = ir.var("x", shape=(5, 3))
    msg = _error(lambda: op.take(x, ir.const(np.array([0, 5], np.int64)), name="sel"))
    assert "take 'sel'" in msg and "constant index 5 (element 1 of the indices)" in msg
    assert "axis 0 of size 5" in msg
    msg = _error(lambda: op.take(x, ir.const(np.array([-4], np.int32)), axis=1))
    assert "constant index -4" in msg and "valid indices are -3 to 2" in msg
    msg = _error(lambda: op.take(x, ir.const(np.array([-1])), allow_negative=False))
    assert "constant index -1" in msg and "valid indices are 0 to 4" in msg
    # In range, negative ones included: no error.
    op.take(x, ir.const(np.array([-5, 4], np.int64)))


def test_bound_params_out_of_range_fail_at_build_time():
    data = np.zeros((5, 3), np.float32)
    msg = _error(lambda: _module(lambda x, i: op.take(x, i, name="rows"), data.shape, (2,), 256,
                                 params={"idx": np.array([1, 7], np.int64)}))
    assert "take 'rows'" in msg and "constant index 7" in msg


def test_exported_model_reports_the_error(tmp_path):
    data = rng.standard_normal((5, 3)).astype(np.float32)
    path = str(tmp_path / "take.ember")
    x = ir.var("x", shape=data.shape)
    i = ir.var("idx", shape=(2,), dtype="int64")
    ember.build(ir.Function([x, i], op.take(x, i, name="rows"))).export(path)
    loaded = ember.GraphModule(ember.load(path))
    msg = _error(lambda: loaded(x=data, idx=np.array([0, 5], np.int64)))
    assert "kernel 'rows'" in msg and "take index 5" in msg
    np.testing.assert_array_equal(np.asarray(loaded(x=data, idx=np.array([-1, 0]))),
                                  data[[-1, 0]])


class _Indexing(torch.nn.Module):
    def forward(self, x, idx):
        return x[:, idx] * 2


class _Embedding(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(10, 4)

    def forward(self, ids):
        return self.emb(ids)


def test_frontend_indexing_wraps_and_embedding_refuses_negative():
    x = torch.randn(3, 8)
    idx = torch.tensor([-1, 0, -8, 7])
    mod, params = ember.frontend.from_pytorch(_Indexing().eval(), (x, idx))
    m = ember.GraphModule(ember.build(mod, params=params))
    np.testing.assert_array_equal(np.asarray(m(x, idx)), (x[:, idx] * 2).numpy())
    assert "take index 8" in _error(lambda: m(x, torch.tensor([0, 1, 8, 2])))

    model = _Embedding().eval()
    ids = torch.tensor([[1, 9, 0]])
    mod, params = ember.frontend.from_pytorch(model, (ids,))
    m = ember.GraphModule(ember.build(mod, params=params))
    np.testing.assert_allclose(np.asarray(m(ids)), model(ids).detach().numpy(), rtol=0, atol=0)
    with pytest.raises(IndexError):
        model(torch.tensor([[1, -1, 0]]))  # torch refuses a negative id ...
    assert "take index -1" in _error(lambda: m(torch.tensor([[1, -1, 0]])))  # ... and so do we
