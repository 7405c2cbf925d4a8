"""Every model family gives the same outputs with all passes, with FuseOps disabled, and
with FuseOps and FoldConstant disabled (rtol 1e-4 / atol 1e-5 against PyTorch, like the
frontend tests; the three Ember builds agree with each other within 1e-5)."""
import numpy as np
import pytest
import torch

import ember
from ember.transform import PassContext

import models

CONFIGS = [{}, {"disabled_passes": ["FuseOps"]},
           {"disabled_passes": ["FuseOps", "FoldConstant"]}]


def _run(lib, inputs):
    m = ember.GraphModule(lib)
    for i, x in enumerate(inputs):
        m.set_input(i, x.numpy())
    m.run()
    return [np.asarray(m.get_output(i)).copy() for i in range(m.get_num_outputs())]


@pytest.mark.parametrize("family", sorted(models.FAMILIES))
def test_pass_configurations_agree(family):
    model, inputs = models.make(family, batch=2)
    with torch.no_grad():
        expected = model(*inputs)
    expected = [expected] if isinstance(expected, torch.Tensor) else list(expected)
    mod, params = ember.frontend.from_pytorch(model, inputs)
    results, kernels = [], []
    for cfg in CONFIGS:
        with PassContext(**cfg):
            lib = ember.build(mod, target="llvm", params=params)
        kernels.append(len(lib.fusion_report()))
        results.append(_run(lib, inputs))
    for outs in results:
        for got, want in zip(outs, expected):
            np.testing.assert_allclose(got, want.numpy(), rtol=1e-4, atol=1e-5)
    for outs in results[1:]:
        for got, ref in zip(outs, results[0]):
            np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)
    # Fusion never adds kernels; folding never adds kernels.
    assert kernels[0] <= kernels[1] <= kernels[2], kernels
