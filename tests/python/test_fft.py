"""torch.fft imported (python/ember/frontend/_aten_fft.py): complex values live only in the
importer as real/imaginary pairs, each transform a product with constant DFT matrices.
Checked against PyTorch eager through torch.export and after run_decompositions (which
turns the calls into _fft_r2c/_fft_c2c/_fft_c2r): every transform family, n/s cropping and
padding, odd and even lengths, every norm, and the ways out of the complex domain (real,
imag, abs, view_as_real); FNet's token mixing; the refusals.

Tolerance: max |got - want| <= 1e-5 of the output's scale (times the transform length's
square root for the spectra: a DFT sums n terms in another order than PyTorch's FFT).
"""
import numpy as np
import pytest
import torch

import ember
from ember.frontend import from_pytorch


class Fn(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


def _run(model, x, decompose):
    if decompose:
        model = torch.export.export(model, (x,)).run_decompositions()
    mod, params = from_pytorch(model, (x,))
    return np.asarray(ember.GraphModule(ember.build(mod, params=params))(x.numpy()))


F = torch.fft
CASES = {
    "fft-real": lambda x: torch.view_as_real(F.fft(x)),
    "fft-n-crop": lambda x: F.fft(x, n=6).real,
    "fft-n-pad-ortho": lambda x: F.fft(x, n=12, norm="ortho").imag,
    "ifft": lambda x: F.ifft(x, dim=1).imag * 2 + F.ifft(x, dim=1).real,
    "fft2-forward": lambda x: F.fft2(x, norm="forward").real,
    "fftn-abs": lambda x: F.fftn(x, dim=(1, 2)).abs(),
    "fftn-all": lambda x: F.fftn(x).real,
    "ifftn-of-fftn": lambda x: F.ifftn(F.fftn(x, dim=(-2, -1)), dim=(-2, -1)).real,
    "rfft": lambda x: torch.view_as_real(F.rfft(x)),
    "rfft-odd-n": lambda x: F.rfft(x, n=7).abs(),
    "rfft2": lambda x: torch.view_as_real(F.rfft2(x)),
    "rfftn-s": lambda x: F.rfftn(x, s=(4, 6)).imag,
    "irfft-of-rfft": lambda x: F.irfft(F.rfft(x)),
    "irfft-n-odd": lambda x: F.irfft(F.rfft(x), n=9),
    "irfft2-ortho": lambda x: F.irfft2(F.rfft2(x, norm="ortho"), norm="ortho"),
    "scaled-spectrum": lambda x: F.irfft(F.rfft(x) * torch.linspace(0, 1, x.shape[-1] // 2 + 1)),
    "power-spectrum": lambda x: F.rfft(x * torch.hann_window(x.shape[-1])).abs() ** 2,
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("decompose", [False, True], ids=["export", "decomposed"])
def test_fft_matches_pytorch(case, decompose):
    torch.manual_seed(0)
    x = torch.randn(2, 5, 10)
    model = Fn(CASES[case])
    want = model(x).numpy()
    got = _run(model, x, decompose)
    assert got.shape == want.shape
    err = np.abs(got - want).max() / np.abs(want).max()
    assert err <= 1e-5, f"max error {err:.2e} of the output's scale"


def test_fnet_layer_matches_pytorch():
    """FNet mixes tokens with the real part of a 2-D FFT over (sequence, hidden)."""
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.FNetConfig(num_hidden_layers=1)
    base = transformers.FNetModel(config).eval()
    model = Fn(lambda ids: base(input_ids=ids)[0]).eval()
    ids = torch.randint(3, 1000, (1, 128))
    with torch.no_grad():
        want = model(ids).numpy()
    mod, params = from_pytorch(model, (ids,))
    got = np.asarray(ember.GraphModule(ember.build(mod, params=params))(ids.numpy()))
    err = np.abs(got - want).max() / np.abs(want).max()
    assert err <= 1e-4, f"max error {err:.2e} of the output's scale"


def test_complex_values_elsewhere_are_refused_with_a_reason():
    x = torch.randn(2, 8)
    with pytest.raises(ember.EmberError, match="complex tensor"):
        _run(Fn(lambda x: torch.exp(F.fft(x)).real), x, False)
    with pytest.raises(ember.EmberError, match="two complex tensors"):
        _run(Fn(lambda x: (F.fft(x) * F.fft(x)).real), x, False)
    with pytest.raises(ember.EmberError, match="returns a complex tensor.*view_as_real"):
        _run(Fn(lambda x: F.fft(x)), x, False)
