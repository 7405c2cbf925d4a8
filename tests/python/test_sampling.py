"""F.grid_sample (python/ember/frontend/_aten_grid_sample.py) and Tensor.unfold imported with
torch.export and compared with PyTorch eager: every supported mode, padding mode and
align_corners, positions inside and outside the image; the refused forms.

Tolerance: grid_sample within 1e-5 of the output's scale (the weights are PyTorch's
formulas in float32, summed in its order, but its vectorized kernel computes the source
coordinate as coord * scale + offset); unfold copies and must be exact.
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
