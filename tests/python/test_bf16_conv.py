"""bfloat16 convs on vdpbf16ps (issue 45). BF16Products turns a bfloat16 conv (groups 1) into
nn.conv2d_bf16 over int32 words of two channels' bfloat16 values (nn.pack_bf16_pairs along
axis 1; an odd channel count's last word holds a zero) where the machine model has bf16_dot
(or config "BF16Products.bf16_dot" = "on"), and AlterOpLayout runs it blocked:
nn.conv2d_bf16_blocked reads the NCHW[c]c bfloat16 values a pair at a time as one word and
takes one vdpbf16ps per word against a vector of output channels' weight words, into float32
sums (two FMAs of the widened halves without AVX512_BF16: the same sums but for subnormals,
which vdpbf16ps flushes). The epilogue and its rounding to bfloat16 are as before, and the
block is shared by consecutive convs: no packing kernel between them. Grouped and depthwise
convs keep the float32 conv of the widened values.

Tolerances as test_bf16_gemm.py and test_bf16.py: the op's float32 sums against a float64
conv of the same bfloat16 values within 1e-5 of the sum of the products' magnitudes; a layer
against torch's bfloat16 conv within two bfloat16 ulps (rtol 2^-7) and against float32
within 1e-2 of the outputs' scale; a whole model within 3e-2 (every layer rounds)."""
import re

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import ember
from ember import ir, op
import models

BF16_ULP = 2.0 ** -8


def _bf16(shape, seed):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed)).to(torch.bfloat16)


def kernels_of(lib):
    return " ".join(" ".join(k.ops) for k in lib.fusion_report())


def _build(model, x, mode="on", target="llvm"):
    mod, params = ember.frontend.from_pytorch(model, (x,))
    with ember.transform.PassContext(opt_level=3, config={"BF16Products.bf16_dot": mode}):
        return ember.build(mod, target=target, params=params)


def _run(lib, x):
    return torch.from_dlpack(ember.GraphModule(lib)(x)).clone()


# (channels, height, width, out channels, kernel, stride, padding, blocked at 512 and 256 bits)
OP_CASES = [(3, 20, 20, 32, 7, 2, 3, True),    # an RGB stem: 3 channels, one block of 2 words
            (32, 7, 7, 64, 3, 1, 1, True),     # a narrow image
            (36, 9, 9, 40, 3, 2, 1, True),     # padded blocks (256 bits: 40; 512: NCHW form)
            (32, 8, 8, 16, 1, 2, 0, True),     # a strided 1x1, subsampled first
            (6, 9, 10, 5, 3, 1, 1, False)]     # 5 outputs take no block: the NCHW form


@pytest.mark.parametrize("c,h,w,o,k,stride,pad,blocked", OP_CASES)
def test_bf16_conv_sums_in_float32(c, h, w, o, k, stride, pad, blocked):
    """nn.conv2d_bf16 of pairs along the channels, NCHW (AlterOpLayout and FuseOps off) and
    blocked, at the host's width and at 256 bits, against a float64 conv of the same values."""
    xb, wb = _bf16((2, c, h, w), c), _bf16((o, c, k, k), o)
    x = ir.var("x", xb.shape, "bfloat16")
    y = op.nn.conv2d_bf16(op.nn.pack_bf16_pairs(x, axis=1),
                          op.nn.pack_bf16_pairs(ir.const(wb), axis=1),
                          strides=[stride, stride], padding=[pad, pad])
    f = ir.Function([x], y)
    want = F.conv2d(xb.double(), wb.double(), stride=stride, padding=pad).numpy()
    scale = F.conv2d(xb.double().abs(), wb.double().abs(), stride=stride, padding=pad).numpy()
    for target, disabled in [("llvm", []), ("llvm -vector-bits=256", []),
                             ("llvm", ["FuseOps", "AlterOpLayout"])]:
        with ember.transform.PassContext(disabled_passes=disabled):
            lib = ember.build(f, target=target)
        if target.endswith("256"):
            assert ("nn.conv2d_bf16_blocked" in kernels_of(lib)) == blocked, kernels_of(lib)
        got = ember.GraphModule(lib)(xb).numpy()
        assert got.dtype == np.float32
        assert np.all(np.abs(got - want) <= 1e-5 * scale + 1e-30), (target, disabled)


def test_channel_pairs_are_little_endian_halves_zero_past_c():
    x = torch.tensor([1.0, 2.0, -3.0]).reshape(1, 3, 1, 1).to(torch.bfloat16)
    v = ir.var("x", (1, 3, 1, 1), "bfloat16")
    f = ir.Function([v], op.nn.pack_bf16_pairs(v, axis=1))
    got = ember.GraphModule(ember.build(f))(x).numpy()
    bits = x.view(torch.int16).numpy().astype(np.uint16).astype(np.uint32).reshape(3)
    want = np.array([bits[0] | bits[1] << 16, bits[2]], np.uint32).view(np.int32)
    np.testing.assert_array_equal(got.reshape(2), want)


# (channels, out channels, kernel, stride, padding, dilation, image size)
LAYERS = [(3, 32, 7, 2, 3, 1, 32), (64, 64, 3, 1, 1, 1, 7), (32, 64, 1, 2, 0, 1, 14),
          (16, 32, 3, 1, 2, 2, 12), (24, 40, 3, 1, 1, 1, 10)]


@pytest.mark.parametrize("mode", ["on", "off"])
@pytest.mark.parametrize("c,o,k,stride,pad,dilation,size", LAYERS)
def test_bf16_conv_layer_matches_torch(c, o, k, stride, pad, dilation, size, mode):
    """A bfloat16 nn.Conv2d with its bias: the blocked bfloat16 conv (or, off, the float32
    conv of the widened values) within two bfloat16 ulps of torch's bfloat16 conv and 1e-2
    of the float32 one."""
    torch.manual_seed(c + o)
    conv = nn.Conv2d(c, o, k, stride=stride, padding=pad, dilation=dilation)
    x = torch.randn(2, c, size, size)
    with torch.no_grad():
        ref32 = conv(x)
        conv, xb = conv.to(torch.bfloat16), x.to(torch.bfloat16)
        want = conv(xb)
    lib = _build(conv, xb, mode)
    assert ("nn.conv2d_bf16_blocked" in kernels_of(lib)) == (mode == "on"), kernels_of(lib)
    got = _run(lib, xb)
    assert got.dtype == torch.bfloat16
    scale = float(ref32.abs().max())
    torch.testing.assert_close(got.float(), want.float(), rtol=2 * BF16_ULP,
                               atol=4 * BF16_ULP * scale)
    torch.testing.assert_close(got.float(), ref32, rtol=1e-2, atol=1e-2 * scale)


@pytest.mark.parametrize("groups", [4, 32])
def test_grouped_and_depthwise_convs_keep_the_float32_path(groups):
    torch.manual_seed(groups)
    conv = nn.Conv2d(32, 32, 3, padding=1, groups=groups).to(torch.bfloat16)
    xb = _bf16((1, 32, 9, 9), 3)
    lib = _build(conv, xb)
    assert "bf16" not in kernels_of(lib), kernels_of(lib)
    with torch.no_grad():
        want = conv(xb)
    torch.testing.assert_close(_run(lib, xb).float(), want.float(), rtol=2 * BF16_ULP,
                               atol=4 * BF16_ULP * float(want.float().abs().max()))


def _stack():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
                         nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(),
                         nn.Conv2d(32, 64, 1)).eval().to(torch.bfloat16)


def test_consecutive_bf16_convs_share_the_block():
    """Three bfloat16 convs with their epilogues: each kernel writes bfloat16 values in the
    blocked layout the next conv reads a pair at a time (no packing kernel, one to_blocked of
    the input, one from_blocked of the output)."""
    lib = _build(_stack(), _bf16((1, 3, 16, 16), 1))
    kernels = [k.ops for k in lib.fusion_report()]
    assert [k[0] for k in kernels].count("nn.conv2d_bf16_blocked") == 3, kernels
    assert sum(k.count("to_blocked") for k in kernels) == 1, kernels
    assert sum(k.count("from_blocked") for k in kernels) == 1, kernels
    assert "nn.pack_bf16_pairs" not in kernels_of(lib)
    outputs = [line.split("->")[1].split("{")[0].strip()
               for line in lib.get_source("graph").splitlines() if "primitive fn" in line]
    assert all(o.startswith("bfloat16") for o in outputs), outputs


@pytest.mark.parametrize("cpu,bf16_dot", [("znver4", True), ("sapphirerapids", True),
                                          ("znver3", False)])
def test_bf16_cpus_run_the_convs_as_vdpbf16ps(cpu, bf16_dot):
    """AVX512_BF16 CPUs take the blocked bfloat16 convs, one vdpbf16ps of zmm registers per
    word of a broadcast pair (compiled, not run: the host may lack the instruction); Zen 3
    keeps the float32 convs of the widened values, which run on the host (any x86-64-v3)
    and match torch; forced on, it compiles the same bfloat16 convs with FMAs instead, whose
    float32 sums run on the host too."""
    target = f"llvm -mcpu={cpu}"
    assert ember.target.machine_model(target).bf16_dot == bf16_dot
    xb = _bf16((1, 3, 16, 16), 2)
    lib = _build(_stack(), xb, "target", target)
    asm = lib.get_source("asm")
    found = [r for line in asm.splitlines() if "vdpbf16ps" in line
             for r in re.findall(r"%([xyz]mm)\d+", line)]
    if bf16_dot:
        assert kernels_of(lib).count("nn.conv2d_bf16_blocked") == 3, kernels_of(lib)
        assert "zmm" in found, cpu
        return
    assert "bf16" not in kernels_of(lib) and not found, cpu
    forced = _build(_stack(), xb, "on", target)
    assert kernels_of(forced).count("nn.conv2d_bf16_blocked") == 3, kernels_of(forced)
    assert "vdpbf16ps" not in forced.get_source("asm")
    with torch.no_grad():
        want = _stack()(xb)
    scale = float(want.float().abs().max())
    for built in (lib, forced):
        torch.testing.assert_close(_run(built, xb).float(), want.float(), rtol=3e-2,
                                   atol=3e-2 * scale)


@pytest.mark.parametrize("family,width", [("resnet18", None), ("resnet18", 32),
                                          ("mobilenet_v2", None)])
def test_models_cast_to_bfloat16_run_their_convs_on_bf16_products(family, width):
    """ResNet-18 (the narrow test model, and 32 channels wide: blocks of whole vectors) and
    MobileNetV2 cast to bfloat16, with the bfloat16 convs on: against torch's bfloat16 and
    float32 models within 3e-2 of the outputs' scale."""
    model, inputs = models.make(family, batch=2)
    if width:
        torch.manual_seed(0)
        model = models.resnet18(width=width).eval()
    with torch.no_grad():
        ref32 = model(*inputs)
        model = model.to(torch.bfloat16)
        xb = inputs[0].to(torch.bfloat16)
        want = model(xb)
    lib = _build(model, xb)
    assert "nn.conv2d_bf16_blocked" in kernels_of(lib), kernels_of(lib)
    got = _run(lib, xb)
    assert got.dtype == torch.bfloat16
    scale = float(ref32.abs().max())
    torch.testing.assert_close(got.float(), want.float(), rtol=3e-2, atol=3e-2 * scale)
    torch.testing.assert_close(got.float(), ref32, rtol=3e-2, atol=3e-2 * scale)


def test_bad_conv_operands_name_the_op():
    x = ir.var("x", (1, 8, 6, 6), "float32")
    w2 = ir.var("w", (4, 4, 3, 3), "int32")
    with pytest.raises(ember.EmberError, match=r"nn.conv2d_bf16.*pack them with "
                                               r"nn.pack_bf16_pairs along axis 1"):
        op.nn.conv2d_bf16(x, w2)
    x2 = ir.var("x2", (1, 4, 6, 6), "int32")
    with pytest.raises(ember.EmberError, match="nn.conv2d_bf16 takes groups = 1 only"):
        op.nn.conv2d_bf16(x2, ir.var("w", (4, 2, 3, 3), "int32"), groups=2)
    blocked = ir.var("xb", (1, 1, 6, 6, 8), "float32")
    words = ir.var("wb", (1, 1, 3, 3, 4, 16), "int32")
    with pytest.raises(ember.EmberError, match="nn.conv2d_bf16_blocked.*is not bfloat16"):
        op.nn.conv2d_bf16_blocked(blocked, words)
    with pytest.raises(ember.EmberError, match="nn.conv2d_bf16_blocked.*same channel blocks"):
        op.nn.conv2d_bf16_blocked(ir.var("xb", (1, 1, 6, 6, 4), "bfloat16"), words)
