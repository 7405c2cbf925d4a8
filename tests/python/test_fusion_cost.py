"""The FuseOps cost rule (src/passes/fusion_cost.cc): a fusion whose kernel is estimated to
be slower than its parts is declined, and the fusion report and the `ember` logger say why.
The cost model is pinned (config FuseOps.cost_model), so the kernels are the same on AVX2 and
AVX-512 hosts and under EMBER_VECTOR_BITS."""
import logging

import numpy as np
import pytest
import torch

import ember
from ember.transform import PassContext

SLOWER = "the fused kernel would be slower"


class ExpBroadcast(torch.nn.Module):
    """exp of a column added to a matrix: fused, exp runs once per element of the sum."""

    def forward(self, x, y):
        return torch.exp(x) + y


def conv_pool():
    """conv -> relu -> 3x3/2 max pool: overlapping windows recompute the conv's rows."""
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Conv2d(8, 16, 3, padding=1), torch.nn.ReLU(),
                               torch.nn.MaxPool2d(3, 2, 1)).eval()


def build(model, inputs, cost_model="avx2", target="llvm"):
    mod, params = ember.frontend.from_pytorch(model, inputs)
    with PassContext(config={"FuseOps.cost_model": cost_model}):
        lib = ember.build(mod, target=target, params=params)
    m = ember.GraphModule(lib)
    for i, x in enumerate(inputs):
        m.set_input(i, x.numpy())
    m.run()
    return lib, np.asarray(m.get_output(0)).copy()


def exp_inputs(cols):
    g = torch.Generator().manual_seed(0)
    return torch.randn(64, 1, generator=g), torch.randn(64, cols, generator=g)


@pytest.mark.parametrize("cost_model", ["avx2", "avx512"])
def test_declines_a_producer_recomputed_by_a_broadcast_and_says_why(cost_model):
    inputs = exp_inputs(4096)
    lib, out = build(ExpBroadcast(), inputs, cost_model)
    report = lib.fusion_report()
    assert len(report) == 2, report
    [(producer, consumer, why)] = report.unfused
    assert "exp" in producer and "add" in consumer
    assert SLOWER in why and "repeat work" in why, why
    np.testing.assert_allclose(out, ExpBroadcast()(*inputs).numpy(), rtol=1e-5, atol=1e-5)
    # A narrow broadcast recomputes little: the one kernel stays.
    assert len(build(ExpBroadcast(), exp_inputs(4), cost_model)[0].fusion_report()) == 1


def test_pattern_rules_alone_fuse_it():
    lib, _ = build(ExpBroadcast(), exp_inputs(4096), cost_model="none")
    assert len(lib.fusion_report()) == 1


def test_conv_pool_with_overlapping_windows_is_declined_at_small_size():
    x = torch.randn(2, 8, 20, 24, generator=torch.Generator().manual_seed(1))
    declined, out = build(conv_pool(), (x,))
    kept, out_kept = build(conv_pool(), (x,), cost_model="none")
    assert len(kept.fusion_report()) == 1
    assert any("conv+pooling" in p for k in kept.fusion_report() for p in k.patterns)
    reasons = [why for _, _, why in declined.fusion_report().unfused]
    assert any(SLOWER in why and "repeat work" in why for why in reasons), reasons
    with torch.no_grad():
        want = conv_pool()(x).numpy()
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(out_kept, want, rtol=1e-4, atol=1e-5)


def test_pinned_model_gives_the_same_kernels_for_either_code_width():
    inputs = exp_inputs(4096)
    for target in ("llvm -vector-bits=256", "llvm -vector-bits=512"):
        lib, _ = build(ExpBroadcast(), inputs, "avx2", target)
        assert len(lib.fusion_report()) == 2, target


def test_logger_says_why(caplog):
    with caplog.at_level(logging.DEBUG, logger="ember"):
        build(ExpBroadcast(), exp_inputs(4096))
    assert any("not fused" in r.getMessage() and SLOWER in r.getMessage()
               for r in caplog.records), [r.getMessage() for r in caplog.records]


def test_bad_cost_model_is_a_clear_error():
    mod, params = ember.frontend.from_pytorch(ExpBroadcast(), exp_inputs(4))
    with PassContext(config={"FuseOps.cost_model": "avx3"}):
        with pytest.raises(ember.EmberError, match="FuseOps.cost_model.*avx3"):
            ember.build(mod, target="llvm", params=params)


class ExpTanh(torch.nn.Module):
    def forward(self, x):
        return torch.tanh(torch.exp(x))


@pytest.mark.parametrize("cost_model", ["avx2", "avx512"])
def test_declines_a_chain_too_long_for_the_out_of_order_window(cost_model):
    """exp -> tanh on ResNet-sized maps: one chain of two transcendental functions per
    element, which measured 1.16x slower fused (AVX2) than as two kernels; small too (120
    floats: 0.59 us fused, 0.39 us as two serial kernels on Zen 5, one thread)."""
    x = torch.randn(2, 192, 56, 56, generator=torch.Generator().manual_seed(0)) * 0.5
    lib, out = build(ExpTanh(), (x,), cost_model)
    report = lib.fusion_report()
    assert len(report) == 2, report
    [(producer, consumer, why)] = report.unfused
    assert SLOWER in why and "out-of-order window" in why, why
    np.testing.assert_allclose(out, torch.tanh(torch.exp(x)).numpy(), rtol=1e-5, atol=1e-6)
    fused, out_fused = build(ExpTanh(), (x,), cost_model="none")
    assert len(fused.fusion_report()) == 1
    np.testing.assert_allclose(out, out_fused, rtol=1e-6, atol=0)
    small = x[:1, :3, :4, :5].contiguous()
    assert len(build(ExpTanh(), (small,), cost_model)[0].fusion_report()) == 2


class LayerNormThen(torch.nn.Module):
    def __init__(self, act, cols=768):
        super().__init__()
        torch.manual_seed(0)
        self.norm, self.act = torch.nn.LayerNorm(cols), act
        self.norm.weight.data.copy_(torch.randn(cols) * 3)
        self.norm.bias.data.copy_(torch.randn(cols))

    def forward(self, x):
        return self.act(self.norm(x))


@pytest.mark.parametrize("cost_model", ["avx2", "avx512"])
@pytest.mark.parametrize("act", [torch.nn.CELU(1.5), torch.nn.Mish(),
                                 torch.nn.GELU(approximate="tanh")], ids=["celu", "mish", "gelu"])
def test_declines_a_layer_norm_whose_epilogue_chain_grows(cost_model, act):
    """Issue 12: layer_norm -> celu/mish/gelu_tanh at BERT size measured 1.1-1.36x slower as
    one kernel: the rows fit in the L2 and the activation is compute-bound, so fusion saves
    little traffic and lengthens every element's chain. The kernel's phases (statistics, then
    normalize + activation) add up in the estimate, which now says so; softsign stays fused.
    (Two rows are left to the estimate: the catalog measures these fused slower at its small
    sizes too.)"""
    model = LayerNormThen(act).eval()
    x = torch.randn(1, 128, 768, generator=torch.Generator().manual_seed(1))
    lib, out = build(model, (x,), cost_model)
    report = lib.fusion_report()
    assert len(report) == 2, report
    [(producer, consumer, why)] = report.unfused
    assert "layer_norm" in producer and SLOWER in why, why
    with torch.no_grad():
        np.testing.assert_allclose(out, model(x).numpy(), rtol=1e-4, atol=1e-5)
    fused, out_fused = build(model, (x,), cost_model="none")
    assert len(fused.fusion_report()) == 1
    np.testing.assert_allclose(out, out_fused, rtol=1e-6, atol=1e-6)
    soft = LayerNormThen(torch.nn.Softsign()).eval()
    lib, out = build(soft, (x,), cost_model)
    assert len(lib.fusion_report()) == 1, lib.fusion_report()
    with torch.no_grad():
        np.testing.assert_allclose(out, soft(x).numpy(), rtol=1e-4, atol=1e-5)
