"""The scatter family (src/ir/ops/scatter.cc: scatter and index_put, each its own loop nest)
against torch: scatter, scatter_add and scatter_reduce (sum, prod, mean, amax, amin, with
and without include_self), index_put (several and apart index tensors, broadcasting
values, accumulate, a bool mask), index_add, index_copy, index_fill, masked_scatter and
masked_fill, for float32 and int64 data, indices given when the model runs and as
constants, fused and unfused. Colliding assignments take the last write in row-major order
of the indices (torch leaves that order undefined); accumulations add every update. Bad
indices are errors as gather's: constant ones when the graph is built, run-time ones when
it runs, naming the kernel; bad shapes are EmberErrors naming the op."""
import numpy as np
import pytest
import torch

import ember
from ember import ir, op
from op_checks import build_run, error_of

rng = np.random.default_rng(5)
DTYPES = ["float32", "int64"]
REDUCES = ["sum", "prod", "amax", "amin", "mean"]


def _data(shape, dtype):
    if dtype == "int64":
        return rng.integers(-9, 10, shape).astype(np.int64)
    return rng.standard_normal(shape).astype(np.float32)


def _same(got, want, dtype):
    want = want.numpy() if isinstance(want, torch.Tensor) else want
    assert got.dtype == want.dtype and got.shape == want.shape
    if dtype == "int64":
        np.testing.assert_array_equal(got, want)
    else:  # a float sum or product of colliding updates may be taken in another order
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def _unique_indices(shape, axis, size):
    """Indices of `shape` without repeats along `axis` (a permutation prefix per row), so
    that an assignment has one writer per element, as torch needs for a defined result."""
    moved = list(shape)
    moved.append(moved.pop(axis))
    rows = int(np.prod(moved[:-1]))
    idx = np.stack([rng.permutation(size)[:moved[-1]] for _ in range(rows)])
    return np.moveaxis(idx.reshape(moved), -1, axis).astype(np.int64)


# ------------------------------------------------------------------------ the IR ops

SCATTER_CASES = [((5, 7), (3, 4), (4, 6), 1), ((5, 7), (5, 2), (5, 3), 0),
                 ((4, 6, 3), (2, 6, 3), (3, 6, 3), 1), ((4, 6, 3), (4, 2, 2), (4, 3, 2), -1),
                 ((9,), (9,), (9,), 0)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("data_shape,index_shape,update_shape,axis", SCATTER_CASES)
def test_scatter_matches_torch(dtype, data_shape, index_shape, update_shape, axis):
    data = _data(data_shape, dtype)
    updates = _data(update_shape, dtype)
    size = data_shape[axis]
    unique = _unique_indices(index_shape, axis, size)
    repeats = rng.integers(0, size, index_shape).astype(np.int64)
    d, i, u = (ir.var(n, a.shape, a.dtype.name) for n, a in
               (("d", data), ("i", unique), ("u", updates)))
    td, tu = torch.from_numpy(data), torch.from_numpy(updates)
    for idx_dtype in ("int64", "int32"):
        iv = ir.var("i", index_shape, idx_dtype)
        _, (got,) = build_run(ir.Function([d, iv, u], op.scatter(d, iv, u, axis=axis)),
                              [data, unique.astype(idx_dtype), updates], 256)
        _same(got, td.scatter(axis, torch.from_numpy(unique), tu), dtype)
    for reduce in ("sum", "prod", "amax", "amin"):
        for include_self in (True, False):
            f = ir.Function([d, i, u], op.scatter(d, i, u, axis=axis, reduce=reduce,
                                                  include_self=include_self))
            _, (got,) = build_run(f, [data, repeats, updates], 512)
            want = td.scatter_reduce(axis, torch.from_numpy(repeats), tu, reduce,
                                     include_self=include_self)
            _same(got, want, dtype)
    # Constant indices: checked when the graph is built, loaded like an input.
    _, (got,) = build_run(ir.Function([d, u], op.scatter(d, ir.const(repeats), u, axis=axis,
                                                         reduce="sum")), [data, updates], 256)
    _same(got, td.scatter_add(axis, torch.from_numpy(repeats), tu), dtype)


def test_colliding_assignments_take_the_last_write():
    data = np.zeros((2, 5), np.float32)
    updates = np.arange(1, 13, dtype=np.float32).reshape(2, 6)
    idx = np.array([[1, 3, 1, 1, 0, 3], [4, 4, 2, 0, 2, 4]])
    d, i, u = ir.var("d", (2, 5)), ir.var("i", (2, 6), "int64"), ir.var("u", (2, 6))
    _, (got,) = build_run(ir.Function([d, i, u], op.scatter(d, i, u, axis=1)),
                          [data, idx, updates], 256)
    np.testing.assert_array_equal(got, [[5, 4, 0, 6, 0], [10, 0, 11, 0, 12]])
    x, j, v = ir.var("x", (3,)), ir.var("j", (4,), "int64"), ir.var("v", (4,))
    _, (got,) = build_run(ir.Function([x, j, v], op.index_put(x, [j], v)),
                          [np.zeros(3, np.float32), np.array([2, -1, 0, 0]),
                           np.array([1, 2, 3, 4], np.float32)], 256)
    np.testing.assert_array_equal(got, [4, 0, 2])  # index -1 is 2: its second write wins
    _, (got,) = build_run(ir.Function([x, j, v], op.index_put(x, [j], v, accumulate=True)),
                          [np.zeros(3, np.float32), np.array([2, -1, 0, 0]),
                           np.array([1, 2, 3, 4], np.float32)], 256)
    np.testing.assert_array_equal(got, [7, 0, 3])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("accumulate", [False, True])
def test_index_put_matches_torch(dtype, accumulate):
    data = _data((4, 5, 6, 3), dtype)
    td = torch.from_numpy(data)
    i = np.array([[0], [3], [-2]])             # broadcasts with j to B = (3, 2)
    j = np.array([4, -5]).astype(np.int32)
    cases = [  # (index tensors, axis, values shape, torch's indices: None is a full slice)
        ([i, j], 1, (4, 3, 2, 3), lambda a, b: [None, a, b]),
        ([i, j], 1, (2, 1), lambda a, b: [None, a, b]),
        ([i, j], 0, (2, 6, 3), lambda a, b: [a, b]),
        ([j], 2, (), lambda b: [None, None, b]),
    ]
    for tensors, axis, vshape, key in cases:
        values = _data(vshape, dtype)
        d = ir.var("d", data.shape, dtype)
        ivs = [ir.var(f"i{n}", t.shape, t.dtype.name) for n, t in enumerate(tensors)]
        v = ir.var("v", values.shape, dtype)
        f = ir.Function([d, v] + ivs, op.index_put(d, ivs, v, axis=axis, accumulate=accumulate))
        # torch sums colliding updates; an assignment needs distinct indices (these are)
        _, (got,) = build_run(f, [data, values] + tensors, 512 if accumulate else 256)
        want = torch.ops.aten.index_put(td, key(*[torch.from_numpy(t).long() for t in tensors]),
                                        torch.from_numpy(values), accumulate)
        _same(got, want, dtype)


# ------------------------------------------------------------------- through the frontend

class Scatters(torch.nn.Module):
    def forward(self, x, i, s, j, m, t):
        out = [x.scatter(1, i, s), x.scatter_add(1, i, s), x.scatter(1, i, 3),
               torch.scatter(x, 0, i[:, :2] % 4, s, reduce="add"),
               x.index_add(0, j, t[:3]), x.index_add(1, j, t[:, :3], alpha=2),
               x.index_copy(0, j[:2], t[:2]), x.index_fill(1, j, -1), x.masked_fill(m, 5),
               x.masked_scatter(m, t * 3)]
        out += [x.scatter_reduce(1, i, s, r, include_self=inc)
                for r in REDUCES for inc in (True, False)]
        y = x.clone()
        y[j] = 7
        z = x.clone()
        z[:, j] += t[:, :3]
        w = x.clone()
        w[m] = 0
        v = torch.index_put(x, (m,), torch.tensor(2).to(x.dtype), accumulate=True)
        u = x.reshape(2, 3, 4).clone()  # indices apart: their dims come first in the values
        u[(j[1:] % 2)[:, None], :, j[None, :]] = t[:2, :3, None] + t[2, :3]
        q = x.clone()
        q[1:3] = t[0]  # slice_scatter of a copy
        q[:, -1] = t[1, :4] * 2  # select_scatter
        q[::2, 1:5:3] = 9
        out += [y, z, w, v, u, q]
        return tuple(out)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("fuse", [True, False])
def test_frontend_matches_torch(dtype, fuse):
    tdtype = getattr(torch, dtype)
    x = torch.from_numpy(_data((4, 6), dtype))
    s = torch.from_numpy(_data((4, 5), dtype))
    i = torch.from_numpy(np.stack([rng.permutation(6)[:5] for _ in range(3)]))
    j = torch.tensor([2, 0, 1])
    m = torch.from_numpy(rng.random((4, 6)) < 0.4)
    t = torch.from_numpy(_data((4, 6), dtype)).to(tdtype)
    inputs = (x, i, s, j, m, t)
    mod, params = ember.frontend.from_pytorch(Scatters(), inputs)
    with ember.transform.PassContext(disabled_passes=[] if fuse else ["FuseOps"]):
        lib = ember.build(mod, params=params)
    got = ember.GraphModule(lib)(*[v.numpy() for v in inputs])
    want = Scatters()(*inputs)
    assert len(got) == len(want)
    for k, (g, w) in enumerate(zip(got, want)):
        _same(np.asarray(g), w, dtype)


def test_fused_and_unfused_builds_agree_and_scatter_stays_alone():
    x, i, u = ir.var("x", (6, 9)), ir.var("i", (6, 4), "int64"), ir.var("u", (6, 4))
    y = op.add(op.nn.relu(op.scatter(op.exp(x), i, op.negative(u), axis=1, reduce="sum")), x)
    z = op.multiply(op.index_put(op.sigmoid(x), [op.cast(i, "int32")], op.expand_dims(u, 2),
                                 axis=0, accumulate=True), x)
    f = ir.Function([x, i, u], ir.Tuple([y, op.sum(z, axis=1)]))
    data = [rng.standard_normal((6, 9)).astype(np.float32),
            rng.integers(0, 6, (6, 4)).astype(np.int64),
            rng.standard_normal((6, 4)).astype(np.float32)]
    fused, a = build_run(f, data, 256)
    _, b = build_run(f, data, 256, disabled_passes=["FuseOps"])
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_allclose(a[1], b[1], rtol=1e-6)  # the sum's fused multiply may contract
    kernels = fused._kernels()
    for name in ("scatter", "index_put"):
        assert [k["ops"] for k in kernels if name in k["ops"]] == [[name]]
    tx, ti, tu = (torch.from_numpy(v) for v in data)
    want = torch.relu(tx.exp().scatter_add(1, ti, -tu)) + tx
    np.testing.assert_allclose(a[0], want.numpy(), rtol=1e-6, atol=1e-6)


def test_constant_indices_through_the_frontend():
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("i", torch.tensor([[3, 0, 5], [1, 1, 2]]))
            self.register_buffer("j", torch.tensor([4, 0]))

        def forward(self, x, s):
            return x.scatter_add(1, self.i, s) + x.index_add(0, self.j, s[:, :1] * 0 + x[:2])

    x, s = torch.randn(5, 6), torch.randn(2, 3)
    mod, params = ember.frontend.from_pytorch(Net(), (x, s))
    got = ember.GraphModule(ember.build(mod, params=params))(x=x.numpy(), s=s.numpy())
    np.testing.assert_allclose(np.asarray(got), Net()(x, s).numpy(), rtol=1e-6, atol=1e-6)


def test_slice_assignment_exports_and_is_refused_in_a_trace():
    """torch.export records x[1:3] = y on x itself (slice_scatter); a TorchScript trace writes
    through a view of x (copy_ into a slice), which value semantics would lose: refused."""
    class Assign(torch.nn.Module):
        def forward(self, x, y):
            x = x.clone()
            x[1:3] = y
            x[0].index_fill_(0, torch.tensor([1]), 5.0)
            return x * 2

    x, y = torch.zeros(4, 3), torch.ones(2, 3)
    mod, params = ember.frontend.from_pytorch(Assign(), (x, y))
    got = ember.GraphModule(ember.build(mod, params=params))(x.numpy(), y.numpy())
    np.testing.assert_array_equal(np.asarray(got), Assign()(x, y).numpy())
    traced = torch.jit.trace(Assign(), (x, y))
    msg = error_of(lambda: ember.frontend.from_pytorch(traced, (x, y)))
    assert "aten::copy_" in msg and "aten::index_fill_" in msg
    assert "not supported in a TorchScript trace" in msg


# ------------------------------------------------------------------------------ errors

def test_run_time_bad_indices_are_errors_naming_the_kernel():
    x, i, u = ir.var("x", (4, 6)), ir.var("i", (4, 2), "int64"), ir.var("u", (4, 2))
    m = ember.GraphModule(ember.build(ir.Function([x, i, u], op.scatter(x, i, u, axis=1,
                                                                          name="put"))))
    data = np.zeros((4, 6), np.float32)
    for bad in (6, -1):  # torch.scatter refuses negative indices too
        idx = np.zeros((4, 2), np.int64)
        idx[2, 1] = bad
        msg = error_of(lambda: m(x=data, i=idx, u=np.ones((4, 2), np.float32)))
        assert "kernel 'put'" in msg and f"index {bad} is out of range" in msg
        assert "axis 1 of size 6" in msg and "valid indices are 0 to 5" in msg
    j = ir.var("j", (3,), "int64")
    v = ir.var("v", (3, 6))
    m = ember.GraphModule(ember.build(ir.Function([x, j, v], op.index_put(x, [j], v,
                                                                            name="rows"))))
    msg = error_of(lambda: m(x=data, j=np.array([0, 4, -5]), v=np.ones((3, 6), np.float32)))
    assert "kernel 'rows'" in msg and "index 4 is out of range for axis 0 of size 4" in msg
    np.testing.assert_array_equal(  # -4 wraps to row 0 (allow_negative, as x[idx] = v)
        np.asarray(m(x=data, j=np.array([-4, 3, 1]), v=np.ones((3, 6), np.float32))).sum(1),
        [6, 6, 0, 6])

    class IndexAdd(torch.nn.Module):  # torch's index_add refuses negative indices
        def forward(self, x, j, s):
            return x.index_add(0, j, s)

    xs, js, ss = torch.zeros(4, 6), torch.tensor([0, 1]), torch.ones(2, 6)
    mod, params = ember.frontend.from_pytorch(IndexAdd(), (xs, js, ss))
    m = ember.GraphModule(ember.build(mod, params=params))
    msg = error_of(lambda: m(x=xs.numpy(), j=np.array([0, -1]), s=ss.numpy()))
    assert "index -1 is out of range" in msg and "valid indices are 0 to 3" in msg

    class MaskedScatter(torch.nn.Module):  # fewer source elements than Trues
        def forward(self, x, m, s):
            return x.masked_scatter(m, s)

    ms = torch.zeros(4, 6, dtype=torch.bool)
    mod, params = ember.frontend.from_pytorch(MaskedScatter(), (xs, ms, torch.ones(5)))
    m = ember.GraphModule(ember.build(mod, params=params))
    full = np.ones((4, 6), bool)
    assert "out of range" in error_of(lambda: m(x=xs.numpy(), m=full, s=np.ones(5, np.float32)))


def test_bad_scatters_are_errors_naming_the_node():
    x = ir.var("x", (5, 3))
    u = ir.var("u", (5, 3))
    msg = error_of(lambda: op.scatter(x, ir.const(np.array([[0], [3]])), u, axis=1, name="s"))
    assert "scatter 's'" in msg and "constant index 3" in msg and "axis 1 of size 3" in msg
    msg = error_of(lambda: op.scatter(x, ir.const(np.array([[-1]])), u))
    assert "constant index -1" in msg and "valid indices are 0 to 4" in msg
    msg = error_of(lambda: op.scatter(x, ir.var("i", (5,), "int64"), u))
    assert "as many dimensions as data" in msg
    msg = error_of(lambda: op.scatter(x, ir.var("i", (2, 4), "int64"), ir.var("w", (2, 5))))
    assert "larger than data" in msg and "axis 1" in msg
    msg = error_of(lambda: op.scatter(x, ir.var("i", (2, 3), "int64"), ir.var("w", (1, 3))))
    assert "larger than updates" in msg
    msg = error_of(lambda: op.scatter(x, ir.var("i", (2, 3), "int64"), u, reduce="mean"))
    assert "reduce = 'mean' is not supported" in msg
    msg = error_of(lambda: op.scatter(x, ir.var("i", (2, 3), "float32"), u))
    assert "indices must be int32 or int64" in msg
    msg = error_of(lambda: op.scatter(x, ir.var("i", (2, 3), "int64"), ir.var("w", (5, 3),
                                                                               "int64")))
    assert "cast them to the same dtype" in msg
    i = ir.var("i", (2,), "int64")
    msg = error_of(lambda: op.index_put(x, [i], ir.var("v", (3, 3)), name="ip"))
    assert "index_put 'ip'" in msg and "do not broadcast to the indexed shape [2, 3]" in msg
    msg = error_of(lambda: op.index_put(x, [i, i, i], ir.var("v", (2,))))
    assert "index more axes than data" in msg
    msg = error_of(lambda: op.index_put(x, [ir.const(np.array([7]))], ir.var("v", (3,))))
    assert "constant index 7" in msg


def test_frontend_shape_errors_name_the_op():
    # torch.export checks these shapes itself; the converter checks them for other graphs.
    from ember.frontend import _aten
    cx = _aten.Converter({})
    x = ir.var("x", (4, 6))
    args = _aten.Args("index_add", ["self", "dim", "index", "source", "alpha"],
                      [x, 0, ir.var("j", (2,), "int64"), ir.var("s", (3, 6)), 1])
    msg = error_of(lambda: _aten.CONVERTERS["index_add"](cx, args))
    assert "index_add: source float32[3, 6] must have shape [2, 6]" in msg
    args = _aten.Args("scatter", ["self", "dim", "index", "src"],
                      [x, 1, ir.var("i", (4,), "int64"), ir.var("s", (4, 6))])
    msg = error_of(lambda: _aten.CONVERTERS["scatter"](cx, args))
    assert "scatter: index int64[4] must have the rank of self" in msg

    class MaskRows(torch.nn.Module):  # one row per True: the count depends on the data
        def forward(self, x, m, v):
            y = x.clone()
            y[m] = v
            return y

    with pytest.raises(ember.EmberError):
        ember.frontend.from_pytorch(MaskRows(), (torch.zeros(4, 3), torch.ones(4, dtype=bool),
                                                 torch.ones(4, 3)))
