"""Fusion-catalog cases of the rewrite passes (SimplifyExpr, FoldPadIntoConv,
RecognizePatterns), run by test_catalog.py and timed by benchmarks/catalog.py.

Inputs include the numerically hard values of each pattern: -0.0, values at the ReLU and
GELU thresholds, large magnitudes for exp (LogSumExp near float32 overflow), and infinities
where PyTorch defines the result."""
import math

import torch
import torch.nn.functional as F

from catalog_real import (BERT_FFN, BERT_TOKENS, RESNET_28, RESNET_56, RESNET_56_WIDE,
                          real)


def _module(fn, *layers):
    """An eval-mode module whose forward is fn(self, x); `layers` become attributes."""
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            for i, layer in enumerate(layers):
                setattr(self, f"l{i}", layer)

        def forward(self, x):
            return fn(self, x)
    torch.manual_seed(0)
    return M().eval()


def _conv_pair(channels):
    """A 3x3 and a 1x1 conv of `channels`, with the same weights in every call (the layers
    passed to _module are made before it seeds)."""
    torch.manual_seed(0)
    return (torch.nn.Conv2d(channels, channels, 3, padding=1),
            torch.nn.Conv2d(channels, channels, 1))


def _rand(*shape, scale=1.0):
    g = torch.Generator().manual_seed(1)
    return torch.randn(*shape, generator=g) * scale


def _with_edges(x):
    """x with -0.0, 0.0 and small values at the front (thresholds of ReLU / GELU)."""
    flat = x.reshape(-1).clone()
    flat[:6] = torch.tensor([-0.0, 0.0, 1e-7, -1e-7, 3.0, -3.0])
    return flat.reshape(x.shape)


def _conv():
    torch.manual_seed(0)
    return torch.nn.Conv2d(4, 8, 3)


def _distinct(*shape, scale=0.05):
    """A shuffled ramp: no ties among the elements (nor their softmax probabilities), so
    topk's indices are unambiguous."""
    g = torch.Generator().manual_seed(2)
    n = math.prod(shape)
    return ((torch.randperm(n, generator=g) - n // 2) * scale).float().reshape(shape)


def _topk_logits():
    """Logits past float32 exp overflow (only the max-subtracted softmax is finite there),
    a widely spread row (probabilities down to 1e-40), and -0.0 / 0.0."""
    x = _distinct(6, 100)
    x[0] += 90.0
    x[1] *= 20.0
    x[2, :2] = torch.tensor([-0.0, 0.0])
    return (x,)


# The fused build's config for a case whose schedule the FuseOps cost rule declines.
_RULE_OFF = {"FuseOps.cost_model": "none"}


def case(name, model, inputs, kernels, pattern, negative=False, **extra):
    return dict(name=name, model=model, inputs=inputs, kernels=kernels, pattern=pattern,
                negative=negative, **extra)


def _gelu_erf_a(m, x):
    return x * 0.5 * (1.0 + torch.erf(x / math.sqrt(2.0)))


def _gelu_erf_b(m, x):
    return 0.5 * ((torch.erf(x * 0.7071067811865476) + 1.0) * x)


def _gelu_tanh(m, x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)))


def _gelu_tanh_pow(m, x):
    inner = 0.7978845608 * (x + 0.044715 * torch.pow(x, 3))
    return x * (1.0 + torch.tanh(inner)) * 0.5


def _lse_large():
    x = _rand(4, 16, scale=5.0)
    x[0] += 80.0  # exp overflows float32 past 88.7: only the stable form survives a sum
    x[1, :3] = float("-inf")
    return (x,)


def _conv_pool(pool, act=torch.relu, **conv):
    """conv -> bn -> act -> pool (the ResNet stem, a VGG block)."""
    torch.manual_seed(0)
    c = torch.nn.Conv2d(8, 16, 3, padding=1, **conv)
    bn = torch.nn.BatchNorm2d(16)
    bn.running_mean.uniform_(-0.5, 0.5)
    bn.running_var.uniform_(0.5, 2.0)
    return _module(lambda m, x: m.l2(act(m.l1(m.l0(x)))), c, bn, pool)


def _dw_pw(stride=1, pw_kernel=1):
    """MobileNet's separable block: depthwise conv + act -> pointwise conv + act."""
    torch.manual_seed(0)
    dw = torch.nn.Conv2d(16, 16, 3, padding=1, groups=16)
    pw = torch.nn.Conv2d(16, 24, pw_kernel, stride=stride)
    return _module(lambda m, x: F.relu6(m.l1(F.relu6(m.l0(x)))), dw, pw)


def _pool_input():
    """Feature maps whose conv outputs reach both sides of 0 (ReLU's threshold) and whose
    -0.0 survives into the conv."""
    x = _rand(2, 8, 20, 24)
    x[0, 0, 0, :2] = torch.tensor([-0.0, 0.0])
    return (x,)


def _pool_input_16():
    x = _rand(1, 16, 14, 18)
    x[0, 0, 0, :2] = torch.tensor([-0.0, 0.0])
    return (x,)


CASES = [
    # ---------------------------------------------------------------- SimplifyExpr
    case("relu_relu", lambda: _module(lambda m, x: torch.relu(torch.relu(m.l0(x))), _conv()),
         lambda: (_with_edges(_rand(1, 4, 10, 10)),), 1, "ReLU -> ReLU"),
    case("identity_scale_erased",
         lambda: _module(lambda m, x: torch.relu(((m.l0(x) * 1.0) / 1.0) - 0.0), _conv()),
         lambda: (_with_edges(_rand(1, 4, 10, 10)),), 1, "identity scale erased"),
    case("negative_broadcast_is_not_identity",
         lambda: _module(lambda m, x: torch.relu(x * torch.ones(1, 5))),
         lambda: (_with_edges(_rand(6, 1)),), 1, None, True, absent="identity scale erased"),
    case("negative_plus_zero_keeps_sign_of_zero",
         lambda: _module(lambda m, x: torch.relu(x) * -1.0 + 0.0),
         lambda: (_with_edges(_rand(4, 8)),), 1, None, True, absent="identity scale erased"),
    case("shuffle_inverse_pair_erased",
         lambda: _module(lambda m, x: torch.sigmoid(torch.relu(x).permute(0, 2, 3, 1)
                                                    .permute(0, 3, 1, 2))),
         lambda: (_rand(2, 3, 4, 5),), 1, "shuffle -> shuffle"),
    case("shuffle_pair_merged",
         lambda: _module(lambda m, x: x.permute(0, 2, 3, 1).permute(0, 2, 1, 3) + 1.0),
         lambda: (_rand(2, 3, 4, 5),), 1, "shuffle -> shuffle"),
    # (exp -> tanh would run as two kernels: one chain of both is too long for the window)
    case("shuffle_reshape_chain_erased",
         lambda: _module(lambda m, x: torch.relu(torch.exp(x).reshape(2, -1).reshape(6, -1)
                                                 .reshape(x.shape) - 2.0)),
         lambda: (_rand(2, 3, 4, 5),), 1, "shuffle -> shuffle"),
    case("negative_shuffle_not_identity",
         lambda: _module(lambda m, x: torch.exp(x).permute(0, 2, 1).reshape(x.shape) + 1.0),
         # 3 kernels: fused, the reshape would divide every lane's index, and the exp would
         # run on 3-lane vectors (8 of them, not 6): more than a kernel's call saves here
         # (FuseOps cost rule).
         lambda: (_rand(2, 3, 4),), 3, None, True, absent="shuffle -> shuffle"),
    case("shuffle_reduce",
         lambda: _module(lambda m, x: torch.relu(x.permute(0, 2, 1).sum(dim=1))),
         lambda: (_rand(2, 16, 8),), 1, "shuffle -> reduce"),
    case("shuffle_reduce_keepdim",
         lambda: _module(lambda m, x: x.permute(0, 1, 3, 2).amax(dim=(2, 3), keepdim=True)
                         * 2.0),
         lambda: (_rand(2, 3, 4, 5),), 1, "shuffle -> reduce"),
    case("negative_shuffle_reduce_keepdim_moves_axis",
         lambda: _module(lambda m, x: x.permute(0, 2, 1).amax(dim=1, keepdim=True) * 2.0),
         lambda: (_rand(2, 16, 8),), 2, None, True, absent="shuffle -> reduce"),
    case("negative_shuffle_reduce_reorders",
         lambda: _module(lambda m, x: x.permute(2, 1, 0).sum(dim=1) * 2.0),
         lambda: (_rand(3, 4, 5),), 2, None, True, absent="shuffle -> reduce"),
    case("mean_hw_global_pool",
         lambda: _module(lambda m, x: torch.relu(m.l0(x)).mean(dim=(2, 3), keepdim=True),
                         _conv()),
         lambda: (_rand(1, 4, 10, 10),), 2, "average-reduce -> global average pool"),
    case("mean_hw_global_pool_epilogue",
         lambda: _module(lambda m, x: x.mean(dim=(-2, -1), keepdim=True) + 1.0),
         lambda: (_rand(2, 8, 7, 9),), 1, "average-reduce -> global average pool"),
    case("negative_mean_hw_no_keepdim",
         lambda: _module(lambda m, x: x.mean(dim=(-2, -1)) + 1.0),
         lambda: (_rand(2, 8, 7, 9),), 1, None, True,
         absent="average-reduce -> global average pool"),
    case("negative_mean_over_c",
         lambda: _module(lambda m, x: x.mean(dim=(1, 2), keepdim=True)),
         lambda: (_rand(2, 8, 7, 9),), 1, None, True,
         absent="average-reduce -> global average pool"),
    # ---------------------------------------------------------------- FoldPadIntoConv
    case("pad_into_conv",
         lambda: _module(lambda m, x: torch.relu(m.l0(F.pad(x, (1, 2, 0, 1)))), _conv()),
         lambda: (_rand(1, 4, 9, 9),), 1, "Padding + Convolution"),
    case("pad_into_avg_pool",
         lambda: _module(lambda m, x: F.avg_pool2d(F.pad(x, (1, 1, 1, 1)), 3, 1)),
         lambda: (_rand(1, 4, 8, 8),), 1, "Padding + Pooling"),
    case("pad_into_max_pool",
         lambda: _module(lambda m, x: F.max_pool2d(F.pad(x, (1, 0, 1, 0), value=-math.inf),
                                                   2, 2)),
         lambda: (_rand(1, 4, 7, 7),), 1, "Padding + Pooling"),
    case("negative_pad_crop",
         lambda: _module(lambda m, x: m.l0(F.pad(x, (-1, -1, 0, 0))), _conv()),
         lambda: (_rand(1, 4, 9, 9),), 2, None, True, absent="Padding +"),
    case("negative_pad_value",
         lambda: _module(lambda m, x: m.l0(F.pad(x, (1, 1, 1, 1), value=1.0)), _conv()),
         lambda: (_rand(1, 4, 9, 9),), 2, None, True, absent="Padding +"),
    case("negative_pad_channels",
         lambda: _module(lambda m, x: m.l0(F.pad(x, (0, 0, 0, 0, 1, 1))[:, :x.shape[1]]), _conv()),
         lambda: (_rand(1, 4, 9, 9),), 2, None, True, absent="Padding +"),
    case("negative_max_pool_zero_pad",
         lambda: _module(lambda m, x: F.max_pool2d(F.pad(x, (1, 1, 1, 1)), 2, 2)),
         lambda: (_rand(1, 4, 6, 6) - 5.0,), 2, None, True, absent="Padding +"),
    # ---------------------------------------------------------------- RecognizePatterns
    case("gelu_erf", lambda: _module(_gelu_erf_a),
         lambda: (_with_edges(_rand(4, 32, scale=4.0)),), 1, "GELU(erf) recognition"),
    case("gelu_erf_rearranged", lambda: _module(_gelu_erf_b),
         lambda: (_with_edges(_rand(4, 32, scale=4.0)),), 1, "GELU(erf) recognition"),
    case("gelu_tanh", lambda: _module(_gelu_tanh),
         lambda: (_with_edges(_rand(4, 32, scale=4.0)),), 1, "GELU(tanh) recognition"),
    case("gelu_tanh_pow_after_linear",
         lambda: _module(lambda m, x: _gelu_tanh_pow(m, m.l0(x)), torch.nn.Linear(16, 32)),
         lambda: (_rand(4, 16, scale=3.0),), 1, "GELU(tanh) recognition"),
    case("negative_gelu_wrong_constant",
         lambda: _module(lambda m, x: x * 0.6 * (1.0 + torch.erf(x / math.sqrt(2.0)))),
         lambda: (_rand(4, 32),), 1, None, True, absent="GELU"),
    case("l1_norm", lambda: _module(lambda m, x: torch.abs(x).sum(dim=-1)),
         lambda: (_with_edges(_rand(4, 32)),), 1, "L1Norm recognition"),
    case("sum_squares", lambda: _module(lambda m, x: (x * x).sum(dim=1, keepdim=True) + 1.0),
         lambda: (_rand(4, 32, 3, scale=100.0),), 1, "SumSquares recognition",
         rtol=2e-4),
    case("l2_norm", lambda: _module(lambda m, x: torch.sqrt(torch.pow(x, 2).sum(dim=-1))),
         lambda: (_with_edges(_rand(4, 32)),), 1, "L2Norm recognition"),
    case("log_sum", lambda: _module(lambda m, x: torch.log(torch.sigmoid(x).sum(dim=-1))),
         lambda: (_rand(4, 32, scale=10.0),), 1, "LogSum recognition"),
    case("log_sum_exp_naive", lambda: _module(lambda m, x: torch.log(torch.exp(x).sum(dim=-1))),
         lambda: (_rand(4, 16, scale=3.0) + 75.0,), 1, "LogSumExp recognition"),
    case("log_sum_exp_torch", lambda: _module(lambda m, x: torch.logsumexp(x, dim=-1)),
         _lse_large, 1, "LogSumExp recognition"),
    case("log_sum_exp_stable_by_hand",
         lambda: _module(lambda m, x: (lambda mx: torch.log(torch.exp(x - mx).sum(
             dim=1, keepdim=True)) + mx)(x.amax(dim=1, keepdim=True))),
         _lse_large, 1, "LogSumExp recognition"),
    # max over another axis: the stable form does not apply, only its inner log(sum(exp)).
    # 2 kernels: the amax, then the sub, log-sum-exp and final + mx, whose rows' logs are
    # computed as one vector before the rows (vectorize_row_invariants).
    case("log_sum_exp_partial_other_max_axis",
         lambda: _module(lambda m, x: (lambda mx: torch.log(torch.exp(x - mx).sum(
             dim=1, keepdim=True)) + mx)(x.amax(dim=0, keepdim=True))),
         lambda: (_rand(4, 16, scale=3.0),), 2, "LogSumExp recognition"),
    case("softmax_log", lambda: _module(lambda m, x: torch.log(torch.softmax(x, dim=-1))),
         lambda: (_rand(4, 32, scale=8.0),), 1, "softmax -> log"),
    # softmax -> topk (TensorRT): one topk kernel that selects on the logits and normalises
    # only the k winners; values compared with tolerance, indices exactly (no ties).
    case("softmax_topk",
         lambda: _module(lambda m, x: tuple(torch.topk(torch.softmax(x, dim=-1), 5))),
         _topk_logits, 1, "softmax->topk", bench_inputs=lambda: (_distinct(256, 1000),)),
    case("log_softmax_topk_middle_axis",
         lambda: _module(lambda m, x: tuple(torch.topk(F.log_softmax(x, dim=1), 3, dim=1,
                                                       largest=False))),
         lambda: (_distinct(2, 40, 3),), 1, "log_softmax->topk"),
    case("negative_softmax_topk_softmax_is_output",
         lambda: _module(lambda m, x: (lambda p: (p,) + tuple(torch.topk(p, 5)))(
             torch.softmax(x, dim=-1))),
         _topk_logits, 2, None, True, absent="softmax->topk"),
    # conv + pooling (TensorRT): the pooling reads the conv's rows tile by tile in one kernel;
    # overlapping windows (3x3/2, padded) and ceil mode included.
    case("conv_relu_max_pool_2x2", lambda: _conv_pool(torch.nn.MaxPool2d(2)), _pool_input, 1,
         "conv+pooling", config=_RULE_OFF),
    # The FuseOps cost rule declines every conv+pooling kernel below, at these sizes and at
    # real ones (measured 1.1x to 10x slower at ResNet sizes with benchmarks/catalog.py: too
    # few accumulators in the conv's register tile, lane guards for 28-wide rows, and 1.4x the
    # conv's rows for overlapping windows); test_fusion_cost.py checks it says so. The
    # schedule is tested here with the rule off.
    case("conv_relu_max_pool_3x3_s2_pad", lambda: _conv_pool(torch.nn.MaxPool2d(3, 2, 1)),
         _pool_input, 1, "conv+pooling", config=_RULE_OFF),
    case("conv_gelu_avg_pool_ceil",
         lambda: _conv_pool(torch.nn.AvgPool2d(3, 2, 1, ceil_mode=True,
                                               count_include_pad=False), act=F.gelu),
         _pool_input, 1, "conv+pooling", config=_RULE_OFF),
    case("conv_strided_max_pool", lambda: _conv_pool(torch.nn.MaxPool2d(2), stride=2),
         _pool_input, 1, "conv+pooling", config=_RULE_OFF),
    # Two activations of the conv joined before the pooling: both applied once per element.
    case("conv_two_branches_pool",
         lambda: _module(lambda m, x: (lambda y: F.max_pool2d(torch.relu(y) + torch.sigmoid(y), 2))(
             m.l0(x)), torch.nn.Conv2d(8, 16, 3, padding=1)),
         _pool_input, 1, "conv+pooling", config=_RULE_OFF),
    # The conv's activation is also a model output: it must be stored, so no fusion.
    case("negative_conv_pool_conv_is_output",
         lambda: _module(lambda m, x: (lambda y: (y, F.max_pool2d(y, 2)))(torch.relu(m.l0(x))),
                         torch.nn.Conv2d(8, 16, 3, padding=1)),
         _pool_input, 2, None, True, absent="conv+pooling"),
    # depthwise conv + act -> pointwise conv + act (TensorRT): one kernel computes each row's
    # depthwise outputs once, then every output channel of the 1x1 conv from them. This NCHW
    # kernel is what FuseOps builds when the convs keep the plain layout; with AlterOpLayout
    # on (opt level 3) they run as two blocked kernels instead, which measured 6x faster on
    # MobileNetV2 (16 vs 98 ms at 1 thread, AVX2).
    # The cost rule declines this one too (the 1x1 conv recomputes the depthwise rows it
    # reads): tested with the rule off.
    case("depthwise_relu6_pointwise_relu6", lambda: _dw_pw(), _pool_input_16, 1,
         "depthwise conv -> pointwise conv", disabled_passes=["AlterOpLayout"],
         config=_RULE_OFF),
    case("depthwise_relu6_pointwise_relu6_blocked", lambda: _dw_pw(), _pool_input_16, 4,
         None, True, absent="depthwise conv -> pointwise conv"),
    # Not one kernel: the two convs run as two blocked (NCHW[c]c) kernels, AlterOpLayout
    # adding the layout conversion of the input and of the output, and the strided
    # pointwise conv's subsample (a 1x1 pooling of stride 2: 5 kernels).
    case("negative_depthwise_then_strided_pointwise", lambda: _dw_pw(stride=2), _pool_input_16,
         5, None, True, absent="depthwise conv -> pointwise conv"),
    # In NCHW, where FuseOps' depthwise -> pointwise pattern applies (rule off: only the
    # pattern's own check declines it). AlterOpLayout keeps these convs in NCHW on AVX-512
    # (24 channels would pad to 32 while the 16-pixel rows fill NCHW's vectors) but blocks
    # them on AVX2: pinned off, the case is the same on both.
    case("negative_depthwise_then_3x3_conv", lambda: _dw_pw(pw_kernel=3), _pool_input_16, 2,
         None, True, absent="depthwise conv -> pointwise conv", disabled_passes=["AlterOpLayout"],
         config=_RULE_OFF),
    # 33 channels no vector block divides: padded to whole blocks (40 or 48) the convs would
    # run 1.47x or 2.1x the multiply-adds (#12: measured 1.44x slower than plain at 56x56), so
    # AlterOpLayout keeps NCHW (channel_block_for): two plain conv kernels at either width.
    case("conv_sigmoid_conv_padded_channels",
         lambda: _module(lambda m, x: m.l1(torch.sigmoid(m.l0(x))), *_conv_pair(33)),
         lambda: (_rand(1, 33, 7, 13),), 2, "conv2d+bias/residual+activation epilogue"),
    # 31 channels pad to 32 at either width (one lane in 32 wasted): blocked, the sigmoid
    # makes the pad channels 0.5, which the second conv's zero weights for them drop.
    # to_blocked, two convs, from_blocked.
    case("conv_sigmoid_conv_padded_31_channels",
         lambda: _module(lambda m, x: m.l1(torch.sigmoid(m.l0(x))), *_conv_pair(31)),
         lambda: (_rand(1, 31, 7, 13),), 4, "conv2d+bias/residual+activation epilogue"),
    case("negative_softmax_topk_other_axis",
         lambda: _module(lambda m, x: tuple(torch.topk(torch.softmax(x, dim=1), 2, dim=0))),
         lambda: (_distinct(6, 10),), 2, None, True, absent="softmax->topk"),
]
# Note: log(softmax(x)) and the naive log(sum(exp(x))) become the stable ops; where PyTorch's
# naive form underflows to -inf or overflows to inf the rewritten graph gives the finite,
# accurate value instead, so those inputs stay in the range where the naive form is finite.

# Real sizes (benchmarks/catalog.py --size real; see catalog_real.py): BERT-base activations
# and ResNet-50 / MobileNetV2 feature maps.
_CONV_56 = real(RESNET_56, dims={4: 64, 8: 64})
_POOL_56 = real(RESNET_56, dims={8: 64, 16: 64})
_DW_PW_28 = real((1, 144, 28, 28), dims={16: 144, 24: 32})
_HEADS = (12, 128, 64)
_LOGITS = (128, 30522)
REAL = {
    "relu_relu": _CONV_56, "identity_scale_erased": _CONV_56,
    "conv_sigmoid_conv_padded_channels": real((1, 33, 56, 56)),  # awkward channels kept
    "conv_sigmoid_conv_padded_31_channels": real((1, 31, 56, 56)),
    "negative_broadcast_is_not_identity": real((128 * 768, 1)),
    "negative_plus_zero_keeps_sign_of_zero": real(BERT_FFN),
    "shuffle_inverse_pair_erased": real(RESNET_56_WIDE), "shuffle_pair_merged": real(RESNET_56_WIDE),
    "shuffle_reshape_chain_erased": real((2, 192, 56, 56)),
    "negative_shuffle_not_identity": real(_HEADS), "shuffle_reduce": real(_HEADS),
    "shuffle_reduce_keepdim": real(RESNET_56_WIDE),
    "negative_shuffle_reduce_keepdim_moves_axis": real(_HEADS),
    "negative_shuffle_reduce_reorders": real(_HEADS),
    "mean_hw_global_pool": real(RESNET_28, dims={4: 128, 8: 128}),
    "mean_hw_global_pool_epilogue": real((1, 2048, 7, 7)),
    "negative_mean_hw_no_keepdim": real((1, 2048, 7, 7)),
    "negative_mean_over_c": real((1, 2048, 7, 7)),
    "pad_into_conv": _CONV_56, "pad_into_avg_pool": real(RESNET_56_WIDE),
    "pad_into_max_pool": real((1, 64, 112, 112)), "negative_pad_crop": _CONV_56,
    "negative_pad_value": _CONV_56, "negative_pad_channels": _CONV_56,
    "negative_max_pool_zero_pad": real(RESNET_56),
    "gelu_erf": real(BERT_FFN), "gelu_erf_rearranged": real(BERT_FFN),
    "gelu_tanh": real(BERT_FFN),
    "gelu_tanh_pow_after_linear": real(BERT_TOKENS, dims={16: 768, 32: 3072}),
    "negative_gelu_wrong_constant": real(BERT_FFN), "l1_norm": real(BERT_FFN),
    "sum_squares": real((128, 768, 4)), "l2_norm": real(BERT_FFN), "log_sum": real(BERT_FFN),
    "log_sum_exp_naive": real(BERT_FFN), "log_sum_exp_torch": real(BERT_FFN),
    "log_sum_exp_stable_by_hand": real(BERT_FFN),
    "log_sum_exp_partial_other_max_axis": real(BERT_FFN), "softmax_log": real(BERT_FFN),
    "softmax_topk": real(_LOGITS), "log_softmax_topk_middle_axis": real((16, 1000, 8)),
    "negative_softmax_topk_softmax_is_output": real(_LOGITS),
    "conv_relu_max_pool_2x2": _POOL_56, "conv_relu_max_pool_3x3_s2_pad": _POOL_56,
    "conv_gelu_avg_pool_ceil": _POOL_56, "conv_strided_max_pool": _POOL_56,
    "conv_two_branches_pool": _POOL_56, "negative_conv_pool_conv_is_output": _POOL_56,
    "depthwise_relu6_pointwise_relu6": _DW_PW_28,
    "depthwise_relu6_pointwise_relu6_blocked": _DW_PW_28,
    "negative_depthwise_then_strided_pointwise": _DW_PW_28,
    "negative_depthwise_then_3x3_conv": _DW_PW_28,
    "negative_softmax_topk_other_axis": real((128, 1000)),
}
for _case in CASES:
    _case["real"] = REAL[_case["name"]]
