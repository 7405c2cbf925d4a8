"""Fusion-catalog cases of DirectML's fused activations and normalisations, run by
test_catalog.py and timed by benchmarks/catalog.py.

Every activation (DirectML's list, and the ones Ember had before) runs after an elementwise
add whose inputs are numerically hard: -0.0, values exactly at and one float away from each
activation's threshold, magnitudes where exp overflows float32 (89, 100, 1e4, 1e30) and
where softplus/mish/elu lose accuracy if computed naively (-20, -1e-7). Then each anchor
kind (conv2d, dense, matmul, a BatchNorm that is not folded, layer norm, instance norm)
takes a few activations, so every activation meets a real anchor. Negative cases are
boundaries FuseOps must keep: an opaque softmax, a conv's input, a second anchor, and a
value that is also a model output."""
import numpy as np
import torch
from torch import nn

from catalog_real import BERT_FFN, BERT_TOKENS, RESNET_56, RESNET_56_WIDE, real


def _module(fn, *layers):
    """An eval-mode module whose forward is fn(self, *inputs); `layers` become m.l0, m.l1..."""
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            for i, layer in enumerate(layers):
                setattr(self, f"l{i}", layer)

        def forward(self, *inputs):
            return fn(self, *inputs)
    return M().eval()


def _rand(*shape, scale=1.0, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g) * scale


# Activations as (module factory, thresholds where its formula switches). Attributes are
# not the defaults, so they reach the ops.
ACTIVATIONS = {
    "elu": (lambda: nn.ELU(0.7), [0.0]),
    "selu": (nn.SELU, [0.0]),
    "celu": (lambda: nn.CELU(1.5), [0.0]),
    "softplus": (lambda: nn.Softplus(beta=2.0, threshold=5.0), [2.5]),
    "softsign": (nn.Softsign, [0.0]),
    "threshold": (lambda: nn.Threshold(0.25, -1.5), [0.25]),
    "hardshrink": (lambda: nn.Hardshrink(0.3), [0.3, -0.3]),
    "softshrink": (lambda: nn.Softshrink(0.3), [0.3, -0.3]),
    "mish": (nn.Mish, [20.0, -20.0]),
    "relu": (nn.ReLU, [0.0]),
    "leaky_relu": (lambda: nn.LeakyReLU(0.2), [0.0]),
    "relu6": (nn.ReLU6, [6.0]),
    "hardtanh": (lambda: nn.Hardtanh(-0.5, 2.0), [-0.5, 2.0]),
    "hardsigmoid": (nn.Hardsigmoid, [3.0, -3.0]),
    "hardswish": (nn.Hardswish, [3.0, -3.0]),
    "sigmoid": (nn.Sigmoid, [0.0]),
    "tanh": (nn.Tanh, [0.625, -0.625]),
    "gelu": (nn.GELU, [0.84375 * 2 ** 0.5]),
    "gelu_tanh": (lambda: nn.GELU(approximate="tanh"), [0.0]),
    "silu": (nn.SiLU, [0.0]),
    "identity": (nn.Identity, [0.0]),
}


def hard_values(thresholds):
    """A 1-D float32 tensor of hard inputs: fixed extremes, each threshold with its float32
    neighbours, and random values at several scales."""
    fixed = [-0.0, 0.0, 1e-7, -1e-7, 1e-30, -1e-30, 0.5, -0.5, 1.0, -1.0, 3.0, -3.0, 6.0, 20.0,
             -20.0, 30.0, -30.0, 88.0, -88.0, 89.0, -89.0, 100.0, -100.0, 1e4, -1e4, 1e30, -1e30]
    vals = list(fixed)
    for t in thresholds:
        t32 = np.float32(t)
        vals += [t32, np.nextafter(t32, np.float32(np.inf)), np.nextafter(t32, np.float32(-np.inf))]
    out = np.array(vals, dtype=np.float32)
    rnd = np.concatenate([_rand(32, scale=s, seed=i).numpy() for i, s in enumerate((1, 5, 40))])
    return torch.from_numpy(np.concatenate([out, rnd.astype(np.float32)]))


def _add_inputs(thresholds):
    def make():
        x = hard_values(thresholds)
        # x + (-0.0) is x exactly, -0.0 included: the activation sees the hard values.
        return x.reshape(1, -1), torch.full((1, x.numel()), -0.0)
    return make


def _conv(cin=3, cout=4):
    torch.manual_seed(0)
    return nn.Conv2d(cin, cout, 3, padding=1)


def _linear():
    torch.manual_seed(0)
    return nn.Linear(8, 6)


def _bn(channels=4):
    torch.manual_seed(0)
    bn = nn.BatchNorm2d(channels)
    bn.running_mean.copy_(torch.randn(channels))
    bn.running_var.copy_(torch.rand(channels) + 0.5)
    bn.weight.data.copy_(torch.randn(channels) * 3)
    bn.bias.data.copy_(torch.randn(channels))
    return bn.eval()


def _layer_norm():
    torch.manual_seed(0)
    ln = nn.LayerNorm(16)
    ln.weight.data.copy_(torch.randn(16) * 10)  # large outputs reach exp's hard range
    ln.bias.data.copy_(torch.randn(16))
    return ln


def _instance_norm():
    torch.manual_seed(0)
    norm = nn.InstanceNorm2d(4, affine=True)
    norm.weight.data.copy_(torch.randn(4) * 10)
    norm.bias.data.copy_(torch.randn(4))
    return norm


class _MatmulWeight(nn.Module):
    """x @ W with a [8, 6] weight (torch.matmul, not nn.Linear)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.w = nn.Parameter(torch.randn(8, 6))

    def forward(self, x):
        return x @ self.w


def _act(name):
    return ACTIVATIONS[name][0]()


def case(name, model, inputs, kernels, pattern, negative=False, **extra):
    return dict(name=name, model=model, inputs=inputs, kernels=kernels, pattern=pattern,
                negative=negative, **extra)


def _seq(*layers):
    return lambda: nn.Sequential(*[f() for f in layers]).eval()


# Anchors: (model builder taking an activation factory, inputs, pattern of the fused kernel).
ANCHORS = {
    "conv2d": (lambda act: _seq(_conv, act), lambda: (_rand(1, 3, 6, 6, scale=10),),
               "conv2d+bias/residual+activation epilogue", real(RESNET_56, dims={3: 64, 4: 64})),
    "dense": (lambda act: _seq(_linear, act), lambda: (_rand(2, 8, scale=10),),
              "dense+bias/residual+activation epilogue",
              real(BERT_TOKENS, dims={8: 768, 6: 3072})),
    "matmul": (lambda act: _seq(_MatmulWeight, act), lambda: (_rand(3, 8, scale=5),),
               "activation epilogue", real(BERT_TOKENS, dims={8: 768, 6: 3072})),
    "batch_norm_after_add": (
        lambda act: lambda: _module(lambda m, x, y: m.l1(m.l0(x + y)), _bn(), act()),
        lambda: (_rand(1, 4, 5, 5, scale=5), _rand(1, 4, 5, 5, seed=2)), "elementwise chain",
        real(RESNET_56_WIDE, RESNET_56_WIDE, dims={4: 256})),
    "batch_norm_on_input": (lambda act: _seq(_bn, act), lambda: (_rand(1, 4, 5, 5, scale=5),),
                            "elementwise chain", real(RESNET_56_WIDE, dims={4: 256})),
    "layer_norm": (lambda act: _seq(_layer_norm, act), lambda: (_rand(2, 3, 16),),
                   "layer_norm+", real((1,) + BERT_TOKENS, dims={16: 768})),
    "instance_norm": (lambda act: _seq(_instance_norm, act), lambda: (_rand(2, 4, 5, 6),),
                      "instance_norm+", real(RESNET_56, dims={4: 64})),
}

# Which activations meet each anchor: every DirectML activation meets at least two anchors.
PAIRS = {
    "conv2d": ["elu", "softplus", "mish", "hardshrink"],
    "dense": ["selu", "softsign", "threshold", "gelu"],
    "matmul": ["celu", "softshrink", "mish"],
    "batch_norm_after_add": ["elu", "threshold", "hardswish"],
    "batch_norm_on_input": ["softplus", "selu"],
    "layer_norm": ["mish", "celu", "gelu_tanh", "softsign"],
    "instance_norm": ["selu", "softshrink", "hardshrink", "leaky_relu"],
}

# Pairs whose small inputs FuseOps' cost rule runs as two kernels (the AVX2 model that the
# tests pin), as the catalog benchmark measured faster: a norm's statistics and a long
# activation chain in one kernel keep the out-of-order window from overlapping rows (small,
# Zen 5, one thread: layer_norm -> celu 1.4x, instance_norm -> selu 1.3x fused). Their
# fused kernels are checked, forced, in test_activations.py; the instance norm pairs fuse
# at the real sizes. (instance_norm -> softshrink, hardshrink, leaky_relu fuse since the
# statistics of all 8 rows are one block: 0.095-0.114 us fused, 0.139 us apart.) The batch
# norm -> softplus pair over 100 values is a tie (est. 2 kcycles either way; measured 0.42 us
# fused, 0.44 apart): a kernel's call, 15 cycles, does not tip it.
SMALL_APART = {("layer_norm", "mish"), ("layer_norm", "celu"), ("layer_norm", "gelu_tanh"),
               ("instance_norm", "selu"), ("batch_norm_on_input", "softplus")}

CASES = []
for _name, (_factory, _thresholds) in ACTIVATIONS.items():
    CASES.append(case(
        f"add_{_name}", (lambda f: lambda: _module(lambda m, x, y: m.l0(x + y), f()))(_factory),
        _add_inputs(_thresholds), 1, "elementwise chain" if _name != "identity" else None,
        real=real(BERT_FFN, BERT_FFN)))
for _anchor, _acts in PAIRS.items():
    _make, _inputs, _pattern, _real = ANCHORS[_anchor]
    for _name in _acts:
        _apart = (_anchor, _name) in SMALL_APART
        CASES.append(case(f"{_anchor}_{_name}", _make(ACTIVATIONS[_name][0]), _inputs,
                          2 if _apart else 1, None if _apart else _pattern, rtol=2e-4,
                          atol=2e-4, real=_real))

CASES += [
    # Softmax is opaque: the activation after it is its own kernel.
    case("negative_softmax_then_elu",
         lambda: _module(lambda m, x: m.l0(torch.softmax(x, -1)), nn.ELU()),
         lambda: (_rand(3, 16, scale=5),), 2, None, True, absent="softmax+",
         real=real((12 * 128, 128))),
    # An activation never fuses into a conv's input (the conv would recompute it per tap).
    case("negative_mish_before_conv",
         lambda: _module(lambda m, x: m.l0(m.l1(x)), _conv(), nn.Mish()),
         lambda: (_rand(1, 3, 6, 6, scale=5),), 2, None, True, absent="activation",
         real=real(RESNET_56, dims={3: 64, 4: 64})),
    # Two anchors stay two kernels: layer norm, then dense with its activation.
    case("negative_layer_norm_then_linear_selu",
         lambda: _module(lambda m, x: m.l2(m.l1(m.l0(x))), nn.LayerNorm(8), _linear(), nn.SELU()),
         lambda: (_rand(2, 8),), 2, None, True, absent="layer_norm+",
         real=real(BERT_TOKENS, dims={8: 768, 6: 3072})),
    case("negative_instance_norm_then_conv",
         lambda: _module(lambda m, x: m.l1(m.l0(x)), nn.InstanceNorm2d(3), _conv()),
         lambda: (_rand(1, 3, 6, 6, scale=3),), 2, None, True,
         absent="instance_norm+bias", real=real(RESNET_56, dims={3: 64, 4: 64})),
    # The conv's result is also returned, so it is stored and the softplus runs alone.
    case("negative_conv_output_also_returned",
         lambda: _module(lambda m, x: (lambda y: (y, m.l1(y)))(m.l0(x)), _conv(),
                         nn.Softplus()),
         lambda: (_rand(1, 3, 6, 6, scale=5),), 2, None, True,
         absent="conv2d+bias/residual+activation", real=real(RESNET_56, dims={3: 64, 4: 64})),
]
