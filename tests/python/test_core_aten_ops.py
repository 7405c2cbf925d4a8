"""Core ATen ops the importer expresses with other Ember ops (argmax/argmin and max.dim's
indices, any/all, sort/argsort, flip, diagonal, copy/fill, slice/select_scatter, reflect/
replicate/circular padding, cdist/pdist, fold), empty slices, writes into views, and the
refusals that name their reason. Each is imported with torch.export, built and compared
with PyTorch eager: exact for ops that move, compare or select values, rtol=atol=1e-5 for
the distances (sums)."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

import ember

rng = torch.Generator().manual_seed(5)


class Fn(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *xs):
        return self.fn(*xs)


def run(fn, *xs):
    """(Ember's outputs, PyTorch's) as lists of NumPy arrays."""
    mod, params = ember.frontend.from_pytorch(Fn(fn).eval(), xs)
    got = ember.GraphModule(ember.build(mod, params=params))(*[x.numpy() for x in xs])
    want = fn(*xs)
    as_list = lambda v: [np.asarray(t) for t in v] if isinstance(v, (list, tuple)) else [
        np.asarray(v)]
    return as_list(got), as_list(want)


def check(fn, *xs, tol=0.0):
    got, want = run(fn, *xs)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol, equal_nan=True)


def with_ties_and_nan():
    x = torch.randn(3, 7, 5, generator=rng)
    x[1, :, 2] = 1.0     # a row of ties: the first index wins
    x[0, 2, 1] = float("nan")  # NaN wins argmax and argmin, as in torch
    x[2, 3, 4] = -0.0
    x[2, 4, 4] = 0.0
    return x


@pytest.mark.parametrize("fn", [
    lambda x: x.argmax(1), lambda x: x.argmin(-1, keepdim=True), lambda x: x.argmax(),
    lambda x: x.argmin(), lambda x: torch.max(x, 1), lambda x: torch.min(x, 2, keepdim=True),
    lambda x: (x > 0).int().argmax(0), lambda x: (x > 0).int().argmin(2),
], ids=["argmax", "argmin_keepdim", "argmax_all", "argmin_all", "max_dim", "min_dim_keepdim",
        "argmax_int", "argmin_int"])
def test_argmax_argmin_and_max_indices(fn):
    check(fn, with_ties_and_nan())


@pytest.mark.parametrize("fn", [
    lambda x: (x > 0.5).any(1), lambda x: (x > -2).all(), lambda x: x.any(-1, keepdim=True),
    lambda x: (x * 0).all(0), lambda x: x.int().any()])
def test_any_all(fn):
    check(fn, with_ties_and_nan())


@pytest.mark.parametrize("fn", [
    lambda x: torch.sort(x, 1), lambda x: torch.sort(x, 2, descending=True),
    lambda x: torch.sort(x, stable=True, dim=0), lambda x: torch.argsort(x, -1),
    lambda x: torch.sort((x > 0).int() * 3 + (x > 1).int(), dim=1, stable=True)])
def test_sort(fn):
    # Ties sort in index order (torch's stable order); NaN last ascending, first descending.
    check(fn, with_ties_and_nan())


@pytest.mark.parametrize("fn", [
    lambda x: x.flip(0, 2), lambda x: x.flip(-1) * 2, lambda x: x.diagonal(),
    lambda x: x.diagonal(1, 1, 2), lambda x: torch.diagonal(x, -2, 2, 1),
    lambda x: x.diagonal(0, -1, 0)])
def test_flip_diagonal(fn):
    check(fn, with_ties_and_nan())


def test_writes_into_views_and_fill_copy():
    def assign(x, z):
        y = x.clone()
        y[:, 1:6:2] = z          # copy_ into a strided slice -> slice_scatter
        y[2] = 0.5               # fill_ of a select -> select_scatter
        y[:, 0].relu_()          # an in-place op on a view
        y[0, :2].mul_(3)
        return y * 2

    def fill_copy(x):
        y = x.clone().fill_(3.0)
        z = torch.empty(3, 7, 5).copy_(x[:, :1])  # broadcasting copy
        return y + z

    check(assign, with_ties_and_nan(), torch.randn(3, 3, 5, generator=rng))
    check(fill_copy, with_ties_and_nan())
    check(lambda x, z: torch.slice_scatter(x, z, 1, 2, 6), torch.randn(2, 8),
          torch.randn(2, 4))
    check(lambda x, z: torch.select_scatter(x, z, 0, -1), torch.randn(3, 4), torch.randn(4))


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
@pytest.mark.parametrize("pad,rank", [((2, 3), 3), ((1, 2, 3, 1), 4), ((0, 0, 2, 2), 4),
                                      ((1, 1, 2, 0, 1, 2), 5), ((-1, 2), 3)])
def test_padding_modes(mode, pad, rank):
    x = torch.randn(*[2, 3, 5, 4, 6][:rank], generator=rng)
    check(lambda x: F.pad(x, pad, mode=mode) + 1, x)


@pytest.mark.parametrize("p", [2.0, 1.0, 0.0, float("inf"), 3.0])
def test_cdist_pdist(p):
    a, b = torch.randn(2, 5, 8, generator=rng), torch.randn(2, 6, 8, generator=rng)
    check(lambda a, b: torch.cdist(a, b, p=p), a, b, tol=1e-5)
    check(lambda a: F.pdist(a, p), a[0], tol=1e-5)


def test_refused_ops_say_why():
    with pytest.raises(ember.EmberError, match="random numbers.*pass them in as an input"):
        run(lambda x: x + torch.rand(3), torch.randn(3))
    with pytest.raises(ember.EmberError, match="nonzero.*depends on the data"):
        run(lambda x: torch.nonzero(x > 0), torch.randn(3))
    with pytest.raises(ember.EmberError, match="product reduction"):
        run(lambda x: torch.prod(x, 0), torch.randn(3, 2))


def test_histc():
    x = torch.rand(1000, generator=rng) * 3 - 1
    x[:4] = torch.tensor([-0.7, 1.3, 1.4, float("nan")])  # both edges, outside, NaN
    check(lambda x: torch.histc(x, bins=13, min=-0.7, max=1.3), x)
    ids = torch.randint(0, 8, (256,), generator=rng).float()
    check(lambda x: torch.histc(x, bins=8, min=0, max=7), ids)
    with pytest.raises(ember.EmberError, match="histc without a range"):
        run(lambda x: torch.histc(x, bins=4), x)


def test_grouped_matmul_of_mixture_of_experts():
    from transformers.integrations import moe  # noqa: F401  (registers the op)
    x, w = torch.randn(20, 16, generator=rng), torch.randn(4, 16, 8, generator=rng)
    offs = torch.tensor([3, 3, 11, 17], dtype=torch.int32)  # an empty group; rows 17+ zero
    grouped = lambda x, w, offs: torch.ops.transformers.grouped_mm_fallback(x, w, offs)
    check(grouped, x, w, offs, tol=1e-5)


@pytest.mark.parametrize("fn", [
    lambda x: F.avg_pool1d(x, 3), lambda x: F.avg_pool1d(x, 4, 2, 1, ceil_mode=True),
    lambda x: F.avg_pool1d(x, 3, 2, 1, count_include_pad=False),
    lambda x: F.max_pool1d(x, 3, 2, 1), lambda x: F.max_pool1d(x, 2, dilation=2),
    lambda x: F.max_pool1d(x, 3, return_indices=True)[0],
    lambda x: F.adaptive_avg_pool1d(x, 5), lambda x: F.avg_pool1d(x[0], 2)])
def test_pool1d(fn):
    check(fn, torch.randn(2, 6, 17, generator=rng), tol=1e-6)


@pytest.mark.parametrize("fn", [
    # Partial rotary embeddings (Phi-3, GPT-NeoX) at rotary_dim == head_dim: the pass-through
    # half x[..., d:] is empty and concatenated back.
    lambda x: torch.cat([x[..., :5] * 2, x[..., 5:]], -1),
    lambda x: (x[:, 7:].sum(1), x[2:2, :, 1:] + 1),
    lambda x: torch.split(x, [7, 0], 1)[0] - x.narrow(2, 3, 0).sum(-1, keepdim=True)])
def test_empty_slices(fn):
    check(fn, torch.randn(3, 7, 5, generator=rng))


@pytest.mark.parametrize("fn", [
    lambda x: torch.where(x > 0, 0.0, -1e10),  # LongT5's local attention mask
    lambda x: torch.where(x > 0, 1, 2), lambda x: torch.where(x > 0, True, 2),
    lambda x: torch.where(x > 0, 1, 2.5), lambda x: torch.where(x > 0, True, False)])
def test_where_of_two_numbers(fn):
    check(fn, torch.randn(3, 7, 5, generator=rng))


@pytest.mark.parametrize("fn", [
    lambda x: (x > 0).sum(1), lambda x: (x > 0).sum(),  # mask counts (LongT5's global blocks)
    lambda x: (x > 0).int().sum((0, 2), keepdim=True),
    lambda x: (x > 0).sum(1, dtype=torch.float32)])
def test_sum_of_bools_and_integers_is_int64(fn):
    check(fn, torch.randn(3, 7, 5, generator=rng))


@pytest.mark.parametrize("kw", [
    dict(output_size=(8, 6), kernel_size=2, stride=2),  # patches that tile (MobileViTV2)
    dict(output_size=(7, 5), kernel_size=2, stride=2),  # tiles short of the edge: zeros
    dict(output_size=(8, 6), kernel_size=3, padding=1),  # overlapping patches add up
    dict(output_size=(9, 8), kernel_size=(2, 3), dilation=2, stride=(2, 1), padding=(1, 0)),
    dict(output_size=(9, 9), kernel_size=2, stride=3)])  # gaps between patches
@pytest.mark.parametrize("batched", [True, False])
def test_fold(kw, batched):
    image = torch.randn(2, 3, *kw["output_size"], generator=rng)
    x = F.unfold(image, **{k: v for k, v in kw.items() if k != "output_size"}) * 2 - 1
    check(lambda x: F.fold(x, **kw), x if batched else x[0], tol=1e-6)


class _Experts(torch.nn.Module):
    """A mixture-of-experts MLP as transformers runs it: weights stored [G, N, K] and
    transposed for the grouped matmuls, gate and up from one product."""

    def __init__(self, groups, hidden, inner):
        super().__init__()
        self.gate_up = torch.nn.Parameter(torch.randn(groups, 2 * inner, hidden, generator=rng))
        self.down = torch.nn.Parameter(torch.randn(groups, hidden, inner, generator=rng) / 8)

    def forward(self, x, offs):
        grouped = torch.ops.transformers.grouped_mm_fallback
        gate, up = grouped(x, self.gate_up.transpose(-2, -1), offs).chunk(2, dim=-1)
        return grouped(F.silu(gate) * up, self.down.transpose(-2, -1), offs)


def test_grouped_matmul_mixture_of_experts_mlp():
    """Both products are nn.grouped_matmul over the imported (constant, packed) weights, the
    offsets an input: only each row's own expert is multiplied."""
    from transformers.integrations import moe  # noqa: F401  (registers the op)
    m = _Experts(4, 32, 48).eval()
    x = torch.randn(30, 32, generator=rng)
    offs = torch.tensor([5, 5, 19, 27], dtype=torch.int32)
    mod, params = ember.frontend.from_pytorch(m, (x, offs))
    lib = ember.build(mod, params=params)
    graph = lib.get_source("graph")
    assert graph.count("nn.grouped_matmul(") == 2 and "batch_matmul" not in graph, graph
    got = ember.GraphModule(lib)(x.numpy(), offs.numpy())
    with torch.no_grad():
        want = m(x, offs).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
