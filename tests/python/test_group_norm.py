"""group_norm (an instance norm over the channel groups, then the per-channel affine) and
torch.linalg.vector_norm through the frontend, against torch: groups of one channel, of all
channels and between, with and without affine, 3-D to 5-D inputs; every order of the vector
norm, dims and keepdim; weight norm's parametrization; batch norms with the batch's
statistics (BiT's weight standardization)."""
import numpy as np
import pytest
import torch

import ember


def _run(net, *xs):
    mod, params = ember.frontend.from_pytorch(net.eval(), xs)
    m = ember.GraphModule(ember.build(mod, params=params))
    for i, x in enumerate(xs):
        m.set_input(i, x.numpy())
    m.run()
    return [np.asarray(m.get_output(i)) for i in range(m.get_num_outputs())]


@pytest.mark.parametrize("groups", [1, 4, 12])
@pytest.mark.parametrize("shape", [(2, 12, 33), (1, 12, 7, 9), (1, 12, 3, 4, 5)])
@pytest.mark.parametrize("affine", [True, False])
def test_group_norm_matches_torch(groups, shape, affine):
    torch.manual_seed(groups)
    norm = torch.nn.GroupNorm(groups, 12, eps=1e-3, affine=affine)
    if affine:
        with torch.no_grad():
            norm.weight.normal_()
            norm.bias.normal_()
    x = torch.randn(shape) * 3 + 1
    (got,) = _run(norm, x)
    np.testing.assert_allclose(got, norm(x).detach().numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("order", [2, 1, 3, 0.5, 0, float("inf"), -float("inf")])
@pytest.mark.parametrize("dim,keepdim", [(None, False), ((1, 2), False), (-1, True)])
def test_vector_norm_matches_torch(order, dim, keepdim):
    class Norm(torch.nn.Module):
        def forward(self, x):
            return torch.linalg.vector_norm(x, ord=order, dim=dim, keepdim=keepdim)

    x = torch.randn(3, 5, 7)
    x[0, 0, :3] = 0
    (got,) = _run(Norm(), x)
    np.testing.assert_allclose(got, Norm()(x).numpy(), rtol=2e-5, atol=1e-6)


def test_weight_norm_parametrization():
    torch.manual_seed(0)
    conv = torch.nn.utils.parametrizations.weight_norm(torch.nn.Conv1d(8, 16, 5, padding=2),
                                                       dim=2)
    x = torch.randn(1, 8, 40)
    (got,) = _run(conv, x)
    np.testing.assert_allclose(got, conv(x).detach().numpy(), rtol=1e-5, atol=1e-5)


class BatchStatistics(torch.nn.Module):
    """Batch norms that normalize with the batch's own statistics in eval mode: BiT's weight
    standardization (F.batch_norm(w, None, None, training=True)) before its conv, and a
    BatchNorm2d without running statistics. With F.unfold (no converter) the program is
    decomposed, and both arrive as _native_batch_norm_legit.no_stats."""

    def __init__(self, unfold):
        super().__init__()
        self.unfold = unfold
        self.weight = torch.nn.Parameter(torch.randn(6, 3, 3, 3) * 2 + 0.5)
        self.norm = torch.nn.BatchNorm2d(6, eps=1e-3, track_running_stats=False)
        with torch.no_grad():
            self.norm.weight.normal_()
            self.norm.bias.normal_()

    def forward(self, x):
        w = torch.nn.functional.batch_norm(self.weight.reshape(1, 6, -1), None, None,
                                           training=True, eps=1e-6).reshape_as(self.weight)
        y = self.norm(torch.nn.functional.conv2d(x, w))
        return torch.nn.functional.unfold(y, 2) if self.unfold else y


@pytest.mark.parametrize("unfold", [False, True])
def test_batch_norm_with_batch_statistics(unfold):
    torch.manual_seed(0)
    net = BatchStatistics(unfold).eval()
    x = torch.randn(2, 3, 9, 8)
    with torch.no_grad():
        want = net(x).numpy()
    (got,) = _run(net, x)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
