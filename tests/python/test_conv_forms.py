"""Convolutions beyond 2-D forward (python/ember/frontend/_aten_conv.py): 1-D, 3-D and
transposed convolutions of every rank, and 3-D max/average/adaptive pooling, imported with
torch.export (and after run_decompositions, where they arrive as aten.convolution) and
compared with PyTorch eager; unbatched inputs; the errors.

Tolerance: max |got - want| <= 2e-5 of the output's scale (max |want|); the rewrites sum in
another order than PyTorch's kernels (a 3-D conv's depth taps join its channel sum; a
transposed conv's zeros are multiplied). Max pooling picks values and must be exact.
"""
import numpy as np
import pytest
import torch
import torch.nn as nn

import ember
from ember.frontend import from_pytorch


def _run(model, x, decompose=False):
    model = model.eval()
    if decompose:
        program = torch.export.export(model, (x,)).run_decompositions()
        mod, params = from_pytorch(program, (x,))
    else:
        mod, params = from_pytorch(model, (x,))
    return np.asarray(ember.GraphModule(ember.build(mod, params=params))(x.numpy()))


def _check(model, x, exact=False, decompose=False):
    with torch.no_grad():
        want = model.eval()(x).numpy()
    got = _run(model, x, decompose)
    assert got.shape == want.shape, (got.shape, want.shape)
    if exact:
        np.testing.assert_array_equal(got, want)
    else:
        err = np.abs(got - want).max() / np.abs(want).max()
        assert err <= 2e-5, f"max error {err:.2e} of the output's scale"


CONV3D = {
    "plain": dict(kernel_size=3),
    "padded": dict(kernel_size=3, padding=1),
    "tubelet": dict(kernel_size=(2, 4, 4), stride=(2, 4, 4)),  # VideoMAE's patch embedding
    "strided-dilated": dict(kernel_size=(3, 3, 2), stride=(2, 1, 2), padding=(2, 1, 0),
                            dilation=(2, 1, 1)),
    "grouped": dict(kernel_size=(3, 1, 3), padding=(1, 0, 1), groups=2),
    "depthwise": dict(kernel_size=3, padding=1, groups=4),
    "same": dict(kernel_size=(2, 3, 4), padding="same"),
    "pointwise": dict(kernel_size=1),
}


@pytest.mark.parametrize("case", list(CONV3D))
@pytest.mark.parametrize("decompose", [False, True], ids=["export", "decomposed"])
def test_conv3d_matches_pytorch(case, decompose):
    torch.manual_seed(0)
    kwargs = dict(CONV3D[case])
    out = 8 if kwargs.get("groups", 1) != 4 else 4
    model = nn.Conv3d(4, out, bias=case != "plain", **kwargs)
    _check(model, torch.randn(2, 4, 6, 9, 10), decompose=decompose)


TRANSPOSED = {
    "upsample-by-kernel": dict(kernel_size=2, stride=2),  # DPT's and UNet's upsampling
    "upsample-by-4": dict(kernel_size=4, stride=4, bias=False),
    "overlapping": dict(kernel_size=4, stride=2, padding=1),  # DCGAN, segmentation heads
    "output-padding": dict(kernel_size=3, stride=2, padding=1, output_padding=1),
    "dilated": dict(kernel_size=3, stride=1, padding=2, dilation=2),
    "grouped": dict(kernel_size=3, stride=2, groups=2),
    "large-padding": dict(kernel_size=3, stride=3, padding=2),  # padding crops the spread
}


@pytest.mark.parametrize("rank", [1, 2, 3])
@pytest.mark.parametrize("case", list(TRANSPOSED))
def test_transposed_conv_matches_pytorch(rank, case):
    torch.manual_seed(0)
    layer = {1: nn.ConvTranspose1d, 2: nn.ConvTranspose2d, 3: nn.ConvTranspose3d}[rank]
    model = layer(4, 6, **TRANSPOSED[case])
    shape = (2, 4) + (5, 6, 7)[3 - rank:]
    _check(model, torch.randn(shape), decompose=case == "grouped")


def test_unbatched_inputs():
    torch.manual_seed(0)
    _check(nn.Conv2d(3, 5, 3, padding=1), torch.randn(3, 8, 9))
    _check(nn.Conv3d(3, 5, 3), torch.randn(3, 5, 6, 7))
    _check(nn.ConvTranspose2d(3, 5, 2, stride=2), torch.randn(3, 4, 5))


POOLS = {
    "max": lambda: nn.MaxPool3d(3, stride=2, padding=1),
    "max-ceil-dilated": lambda: nn.MaxPool3d((2, 3, 3), stride=(1, 2, 2), dilation=(2, 1, 1),
                                             ceil_mode=True),
    "avg": lambda: nn.AvgPool3d(3, stride=2, padding=1),
    "avg-exclude-pad": lambda: nn.AvgPool3d(3, stride=2, padding=1, count_include_pad=False),
    "avg-ceil": lambda: nn.AvgPool3d((2, 3, 2), stride=(2, 2, 3), ceil_mode=True),
    "avg-ceil-pad": lambda: nn.AvgPool3d(3, stride=2, padding=1, ceil_mode=True,
                                         count_include_pad=False),
    "adaptive": lambda: nn.AdaptiveAvgPool3d((2, 3, 5)),
    "adaptive-global": lambda: nn.AdaptiveAvgPool3d(1),
    "adaptive-keep": lambda: nn.AdaptiveAvgPool3d((None, 4, None)),
}


@pytest.mark.parametrize("case", list(POOLS))
def test_pool3d_matches_pytorch(case):
    torch.manual_seed(0)
    x = torch.randn(2, 3, 7, 9, 10)
    _check(POOLS[case](), x, exact=case.startswith("max"))
    _check(POOLS[case](), x[0], exact=case.startswith("max"))  # unbatched


def test_a_video_network():
    """A tubelet embedding, a 3-D conv block, pooling and a transposed conv back up."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv3d(3, 8, (2, 4, 4), stride=(2, 4, 4)), nn.ReLU(),
                          nn.Conv3d(8, 8, 3, padding=1), nn.BatchNorm3d(8), nn.ReLU(),
                          nn.MaxPool3d((1, 2, 2)), nn.ConvTranspose3d(8, 4, (1, 2, 2),
                                                                      stride=(1, 2, 2)))
    with torch.no_grad():
        model[3].running_mean.uniform_(-0.5, 0.5)
        model[3].running_var.uniform_(0.5, 2.0)
    _check(model, torch.randn(1, 3, 8, 32, 32))


def test_errors_name_the_problem():
    torch.manual_seed(0)
    with pytest.raises(ember.EmberError, match="divisor_override"):
        _run(nn.AvgPool3d(2, divisor_override=3), torch.randn(1, 2, 4, 4, 4))

