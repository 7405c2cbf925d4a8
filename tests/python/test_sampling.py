"""F.grid_sample (python/ember/frontend/_aten_grid_sample.py), Tensor.unfold, torch.einsum
(_aten_einsum.py, reached by TorchScript traces) and tril/triu imported with torch.export
(einsum and tril also through torch.jit.trace) and compared with PyTorch eager: grid_sample
in every supported mode, padding mode and align_corners, positions inside and outside the
image; einsum with batch, contracted, free, summed-out and broadcast (ellipsis) indices,
implicit outputs and three operands; the refused forms.

Tolerance: grid_sample within 1e-5 of the output's scale (the weights are PyTorch's
formulas in float32, summed in its order, but its vectorized kernel computes the source
coordinate as coord * scale + offset); einsum within 1e-5 of it (other summation order);
unfold, tril and triu copy and must be exact.
"""
import numpy as np
import pytest
import torch
import torch.nn as nn

import ember
from ember.frontend import from_pytorch


class GridSample(nn.Module):
    def __init__(self, **kwargs):
        super().__init__()
        self.kwargs = kwargs

    def forward(self, x, grid):
        return torch.nn.functional.grid_sample(x, grid, **self.kwargs)


def _run2(model, *inputs):
    mod, params = from_pytorch(model, inputs)
    lib = ember.build(mod, params=params)
    return np.asarray(ember.GraphModule(lib)(*[t.numpy() for t in inputs]))


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_grid_sample_matches_pytorch(mode, padding_mode, align_corners):
    """Sampling positions inside and well outside the image (|grid| up to 2.5, so that
    reflection folds more than once), at a different output size than the input's."""
    torch.manual_seed(0)
    x = torch.randn(2, 3, 7, 9)
    grid = torch.rand(2, 5, 6, 2) * 5 - 2.5
    grid[0, 0, :3] = torch.tensor([[-1.0, -1.0], [1.0, 1.0], [0.0, 0.0]])  # corners, centre
    model = GridSample(mode=mode, padding_mode=padding_mode, align_corners=align_corners)
    want = model(x, grid).numpy()
    got = _run2(model, x, grid)
    assert got.shape == want.shape
    err = np.abs(got - want).max() / np.abs(want).max()
    assert err <= 1e-5, f"max error {err:.2e} of the output's scale"


def test_grid_sample_refuses_bicubic_and_3d():
    x, grid = torch.randn(1, 2, 5, 5), torch.rand(1, 3, 3, 2) * 2 - 1
    with pytest.raises(ember.EmberError, match="mode='bicubic'"):
        _run2(GridSample(mode="bicubic", align_corners=False), x, grid)
    with pytest.raises(ember.EmberError, match="grid_sampler_3d"):
        _run2(GridSample(align_corners=False), torch.randn(1, 2, 3, 5, 5),
              torch.rand(1, 2, 3, 3, 3) * 2 - 1)


class Unfold(nn.Module):
    def __init__(self, dim, size, step):
        super().__init__()
        self.args = (dim, size, step)

    def forward(self, x):
        return x.unfold(*self.args) * 2.0


@pytest.mark.parametrize("dim, size, step", [(-1, 3, 1), (1, 4, 2), (0, 2, 3), (2, 5, 5),
                                             (1, 7, 1)])
def test_unfold_matches_pytorch(dim, size, step):
    """Tensor.unfold (UnivNet's and audio models' framing), overlapping and not."""
    x = torch.randn(4, 7, 10)
    model = Unfold(dim, size, step)
    np.testing.assert_array_equal(_run2(model, x), model(x).numpy())


# ------------------------------------------- torch.einsum, tril/triu (TorchScript traces)

class Einsum(nn.Module):
    def __init__(self, equation):
        super().__init__()
        self.equation = equation

    def forward(self, *xs):
        return torch.einsum(self.equation, *xs)


EINSUMS = {
    "ij,jk->ik": [(3, 4), (4, 5)],
    "bij,bjk->bik": [(2, 3, 4), (2, 4, 5)],
    "bhqd,bhkd->bhqk": [(2, 3, 5, 8), (2, 3, 6, 8)],  # attention scores
    "bhqk,bhkd->bqhd": [(2, 3, 5, 6), (2, 3, 6, 8)],  # output permuted
    "ij->ji": [(3, 4)],
    "ij->": [(3, 4)],
    "bij->bj": [(2, 3, 4)],
    "i,j->ij": [(3,), (4,)],  # outer product
    "i,i->": [(5,), (5,)],
    "ij,ij->ij": [(3, 4), (3, 4)],
    "...ij,...jk->...ik": [(2, 3, 4, 5), (3, 5, 6)],  # broadcast batch
    "bxd,bzd->bxz": [(2, 7, 8), (1, 6, 8)],
    "abc,cd,de->abe": [(2, 3, 4), (4, 5), (5, 6)],
    "ijk,k": [(2, 3, 4), (4,)],  # implicit output
    "bcxd,bcyd->bcxy": [(1, 4, 6, 16), (1, 4, 6, 16)],  # Longformer's chunks
    "ik,jk->": [(3, 4), (5, 4)],
}


@pytest.mark.parametrize("equation", list(EINSUMS))
@pytest.mark.parametrize("traced", [False, True], ids=["export", "trace"])
def test_einsum_matches_pytorch(equation, traced):
    """Through a TorchScript trace (aten::einsum whole) and torch.export (decomposed by
    PyTorch): within 1e-5 of the output's scale (sums in another order)."""
    torch.manual_seed(0)
    xs = [torch.randn(s) for s in EINSUMS[equation]]
    model = Einsum(equation)
    want = model(*xs).numpy()
    if traced:
        with torch.no_grad():
            model = torch.jit.trace(model, tuple(xs))
    got = _run2(model, *xs)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5 * max(np.abs(want).max(), 1))


def test_einsum_refuses_diagonals():
    model = torch.jit.trace(Einsum("ii->i"), (torch.randn(3, 3),))
    with pytest.raises(ember.EmberError, match="diagonal"):
        _run2(model, torch.randn(3, 3))


class Triangles(nn.Module):
    def forward(self, x):
        return x.tril(), x.triu(1), x.tril(-2), (x > 0).triu(), x.int().tril(3)


@pytest.mark.parametrize("traced", [False, True], ids=["export", "trace"])
def test_tril_triu_match_pytorch(traced):
    x = torch.randn(2, 5, 7)
    model = Triangles()
    want = model(x)
    if traced:
        model = torch.jit.trace(model, (x,))
    mod, params = from_pytorch(model, (x,))
    got = ember.GraphModule(ember.build(mod, params=params))(x.numpy())
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g), w.numpy())
