"""The int8 GEMM (issue 45): nn.pack_bytes4 packs uint8 activations and int8 weights four
bytes to an int32 word along K, and nn.dense_u8s8 sums their products exactly in int32 (one
vpdpbusd per vector where the CPU has VNNI). Checked exactly against NumPy's int64 product on
the host; the instruction choice compiled for named CPUs (never run there)."""
import re

import numpy as np
import pytest

import ember
from ember import ir, op
from op_checks import error_of


def int8_products(m, n, k, seed=0, weight_input=False):
    rng = np.random.default_rng(seed)
    xq = rng.integers(0, 256, (m, k)).astype(np.uint8)
    wq = rng.integers(-128, 128, (n, k)).astype(np.int8)
    xq[0, :4], wq[0, :4] = 255, -128  # the extremes: no 16-bit saturation (vpmaddubsw's)
    x = ir.var("x", (m, k), "uint8")
    w = ir.var("w", (n, k), "int8") if weight_input else ir.const(wq)
    f = ir.Function([x] + ([w] if weight_input else []),
                    op.nn.dense_u8s8(op.nn.pack_bytes4(x), op.nn.pack_bytes4(w)))
    return f, [xq] + ([wq] if weight_input else []), xq.astype(np.int64) @ wq.astype(np.int64).T


# A GEMV, a short K that four does not divide (zero words past it), outputs that no vector
# divides, a register-tiled GEMM, and a weight that is an input (not packed in panels).
@pytest.mark.parametrize("m,n,k,weight_input", [(1, 64, 256, False), (5, 10, 67, False),
                                                (64, 100, 60, False), (48, 96, 512, False),
                                                (7, 33, 40, True)])
def test_int8_dense_is_exact(m, n, k, weight_input):
    f, args, want = int8_products(m, n, k, weight_input=weight_input)
    for disabled in ([], ["FuseOps", "AlterOpLayout"]):
        with ember.transform.PassContext(disabled_passes=disabled):
            got = ember.GraphModule(ember.build(f))(*args).numpy()
        assert got.dtype == np.int32
        np.testing.assert_array_equal(got, want)


def test_packing_words_are_little_endian_bytes_zero_past_k():
    x = np.array([[1, 2, 3, 4, 255, 128]], np.uint8)
    v = ir.var("x", (1, 6), "uint8")
    got = ember.GraphModule(ember.build(ir.Function([v], op.nn.pack_bytes4(v))))(x).numpy()
    np.testing.assert_array_equal(got, [[0x04030201, 0x80FF]])


@pytest.mark.parametrize("cpu,instruction,register", [("znver4", "vpdpbusd", "zmm"),
                                                      ("cascadelake", "vpdpbusd", "zmm"),
                                                      ("alderlake", "vpdpbusd", "ymm"),
                                                      ("znver3", "vpmaddwd", "ymm"),
                                                      ("znver1", "vpmaddwd", "ymm"),
                                                      ("skylake-avx512", "vpmaddwd", "zmm")])
def test_vnni_cpus_run_the_products_as_vpdpbusd(cpu, instruction, register):
    """AVX-512 VNNI CPUs take vpdpbusd at 512 bits, AVX-VNNI ones (Alder Lake) its VEX form
    at 256; the others two vpmaddwd per vector of the bytes widened to int16 (AVX2, or
    AVX-512BW at 512 bits; exact, where vpmaddubsw would saturate)."""
    f, _, _ = int8_products(32, 64, 256)
    asm = ember.build(f, target=f"llvm -mcpu={cpu}").get_source("asm")
    found = re.findall(instruction + r"\s+[^\n]*%(\w+)", asm)
    assert found and all(r.startswith(register) for r in found), cpu
    assert "pmaddubsw" not in asm, cpu
    if instruction != "vpdpbusd":
        assert "vpdpbusd" not in asm, cpu


# Without VNNI: AVX2 (x86-64-v3, as Zen 1 to 3 and Haswell) and SSE2 (x86-64) code, which
# every x86-64-v3 host runs.
NO_VNNI = [("llvm -mcpu=x86-64-v3", "ymm"), ("llvm -mcpu=x86-64", "xmm")]


def pad_word(zero):
    """The int32 word of four bytes of the zero point (what Int8Products gives pad_word)."""
    return int(np.array(zero * 0x01010101, np.uint32).view(np.int32))


def int8_conv_case(c, h, w, o, k, stride, pad, zero, seed, extremes=False):
    """(the function of nn.conv2d_u8s8 over packed words of a uint8 image and int8 weights,
    padded with the zero point in every byte; its input; the exact result: a float64 conv of
    the image padded with the zero point). `extremes`: one pixel of 255s and one output
    channel's weights all -128."""
    import torch
    rng = np.random.default_rng(seed)
    xq = rng.integers(0, 256, (2, c, h, w)).astype(np.uint8)
    wq = rng.integers(-128, 128, (o, c, k, k)).astype(np.int8)
    if extremes:
        xq[0, :, 0, 0], wq[0] = 255, -128
    x = ir.var("x", xq.shape, "uint8")
    y = op.nn.conv2d_u8s8(op.nn.pack_bytes4(x, axis=1), op.nn.pack_bytes4(ir.const(wq), axis=1),
                          strides=[stride, stride], padding=[pad, pad], pad_word=pad_word(zero))
    padded = torch.nn.functional.pad(torch.from_numpy(xq.astype(np.float64)), [pad] * 4,
                                     value=zero)
    want = torch.nn.functional.conv2d(padded, torch.from_numpy(wq.astype(np.float64)),
                                      stride=stride).numpy()
    return ir.Function([x], y), xq, want.astype(np.int64)


@pytest.mark.parametrize("target,register", NO_VNNI)
def test_int8_products_without_vnni_are_exact(target, register):
    """The vpmaddwd form (no vpdpbusd) of the dense and the conv gives exactly the int64
    product, and what the host's build gives (vpdpbusd where the host has VNNI)."""
    for m, n, k in [(48, 96, 512), (5, 10, 67)]:
        f, args, want = int8_products(m, n, k)
        lib = ember.build(f, target=target)
        assert re.search(r"pmaddwd\s+[^\n]*%" + register, lib.get_source("asm"))
        assert "vpdpbusd" not in lib.get_source("asm")
        np.testing.assert_array_equal(ember.GraphModule(lib)(*args).numpy(), want)
    f, xq, want = int8_conv_case(16, 8, 8, 7, 3, 1, 1, 200, seed=1, extremes=True)
    got, host = (ember.GraphModule(ember.build(f, target=t))(xq).numpy() for t in (target, "llvm"))
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got, host)


@pytest.mark.parametrize("c,h,w,o,k,stride,pad,zero", [(6, 9, 10, 5, 3, 1, 1, 7),
                                                       (16, 8, 8, 7, 3, 2, 1, 200),
                                                       (33, 5, 17, 4, 1, 1, 0, 0)])
def test_int8_conv_is_exact_with_the_zero_point_as_padding(c, h, w, o, k, stride, pad, zero):
    """nn.conv2d_u8s8 over words of four channels (a channel count four does not divide: zero
    bytes in the last word, against zero weights), padded with the zero point in every byte,
    against a float64 conv of the image padded with the zero point."""
    f, xq, want = int8_conv_case(c, h, w, o, k, stride, pad, zero, seed=c)
    got = ember.GraphModule(ember.build(f))(xq).numpy()
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("c,h,w,o,k,stride,pad,zero", [(32, 7, 7, 64, 3, 1, 1, 9),
                                                       (64, 14, 14, 48, 1, 1, 0, 3),
                                                       (3, 20, 20, 32, 7, 2, 3, 128),
                                                       (36, 9, 9, 40, 3, 2, 1, 255),
                                                       (32, 8, 8, 16, 1, 2, 0, 5)])
def test_blocked_int8_conv_is_exact_at_any_image_size(c, h, w, o, k, stride, pad, zero):
    """AlterOpLayout runs an int8 conv whose channels take an int32 block of whole words on
    the blocked layout (nn.conv2d_u8s8_blocked: a broadcast data word times a vector of
    output channels), at 256 bits on any host: narrow images, an RGB stem (3 channels as one
    padded word), padded channel blocks (36 -> 40), a strided 1x1 (subsampled first). Exact
    against a float64 conv of the image padded with the zero point."""
    f, xq, want = int8_conv_case(c, h, w, o, k, stride, pad, zero, seed=c + o)
    lib = ember.build(f, target="llvm -vector-bits=256")
    assert "nn.conv2d_u8s8_blocked" in kernels_of(lib), kernels_of(lib)
    got = ember.GraphModule(lib)(xq).numpy()
    np.testing.assert_array_equal(got, want)


def int8_depthwise_case(c, h, w, k, stride, pad, dilation, zero, seed):
    """(the function of nn.conv2d_u8s8's depthwise form, groups = c, over a uint8 image and
    int8 weights [c, 1, k, k], padded with the zero point; its input; the exact result: a
    float64 depthwise conv of the image padded with the zero point). Channel 0 of the first
    image is all 255 and its weights all -128: the largest sums."""
    import torch
    rng = np.random.default_rng(seed)
    xq = rng.integers(0, 256, (2, c, h, w)).astype(np.uint8)
    wq = rng.integers(-128, 128, (c, 1, k, k)).astype(np.int8)
    xq[0, 0], wq[0] = 255, -128
    x = ir.var("x", xq.shape, "uint8")
    y = op.nn.conv2d_u8s8(x, ir.const(wq), strides=[stride, stride], padding=[pad, pad],
                          dilation=[dilation, dilation], groups=c, pad_word=pad_word(zero))
    padded = torch.nn.functional.pad(torch.from_numpy(xq.astype(np.float64)), [pad] * 4,
                                     value=zero)
    want = torch.nn.functional.conv2d(padded, torch.from_numpy(wq.astype(np.float64)),
                                      stride=stride, dilation=dilation, groups=c).numpy()
    return ir.Function([x], y), xq, want


@pytest.mark.parametrize("c,h,w,k,stride,pad,dilation,zero", [(32, 9, 9, 3, 1, 1, 1, 7),
                                                              (48, 14, 13, 3, 2, 1, 1, 200),
                                                              (36, 7, 10, 5, 1, 2, 1, 255),
                                                              (16, 12, 12, 3, 1, 2, 2, 0)])
def test_depthwise_int8_conv_is_exact(c, h, w, k, stride, pad, dilation, zero):
    """nn.conv2d_u8s8's depthwise form (uint8 bytes by one int8 weight per channel and tap)
    sums each window exactly, as float32 (which holds sums of up to 514 taps exactly), in
    NCHW (AlterOpLayout off) and blocked at 256 bits on any host: strides, a 5x5 window over
    channels a block pads (36 in blocks of 8), dilation, the zero point as padding. Against a
    float64 depthwise conv of the image padded with the zero point, extreme sums included."""
    f, xq, want = int8_depthwise_case(c, h, w, k, stride, pad, dilation, zero, seed=c + k)
    for disabled in ([], ["AlterOpLayout"]):
        with ember.transform.PassContext(opt_level=3, disabled_passes=disabled):
            lib = ember.build(f, target="llvm -vector-bits=256")
        assert ("nn.conv2d_u8s8_blocked" in kernels_of(lib)) == (not disabled), kernels_of(lib)
        got = ember.GraphModule(lib)(xq).numpy()
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got, want)


def test_depthwise_int8_conv_bad_operands_are_clear_errors():
    x, w = ir.var("x", (1, 8, 30, 30), "uint8"), ir.var("w", (8, 1, 3, 3), "int8")
    msg = error_of(lambda: op.nn.conv2d_u8s8(ir.var("f", (1, 8, 6, 6)), w, groups=8))
    assert "nn.conv2d_u8s8" in msg and "uint8 data and an int8 weight" in msg
    msg = error_of(lambda: op.nn.conv2d_u8s8(x, ir.var("w", (8, 1, 3, 3), "int8"), groups=4))
    assert "nn.conv2d_u8s8" in msg and "not a depthwise conv" in msg
    msg = error_of(lambda: op.nn.conv2d_u8s8(x, ir.var("w", (8, 1, 23, 23), "int8"), groups=8))
    assert "nn.conv2d_u8s8" in msg and "at most 514 taps" in msg


def kernels_of(lib):
    return " ".join(" ".join(k.ops) for k in lib.fusion_report())


def test_bad_operands_are_clear_errors():
    f = ir.var("f", (2, 8))
    assert "packs int8 or uint8 bytes" in error_of(lambda: op.nn.pack_bytes4(f))
    words = op.nn.pack_bytes4(ir.var("x", (2, 8), "uint8"))
    assert "pack the uint8 activations" in error_of(lambda: op.nn.dense_u8s8(words, f))
    w = op.nn.pack_bytes4(ir.var("w", (3, 12), "int8"))
    assert "words of K" in error_of(lambda: op.nn.dense_u8s8(words, w))


# ----------------------------------------------------------- PT2E linear layers (Int8Products)

pt2e = pytest.importorskip("torchao.quantization.pt2e.quantize_pt2e")
x86 = pytest.importorskip("torchao.quantization.pt2e.quantizer.x86_inductor_quantizer")


def pt2e_mlp():
    import warnings

    import torch
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(67, 128), torch.nn.ReLU(),
                                torch.nn.Linear(128, 10)).eval()
    example = (torch.randn(5, 67),)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        quantizer = x86.X86InductorQuantizer()
        quantizer.set_global(x86.get_default_x86_inductor_quantization_config())
        prepared = pt2e.prepare_pt2e(torch.export.export(model, example).module(), quantizer)
        for _ in range(4):
            prepared(torch.randn(5, 67))
        converted = pt2e.convert_pt2e(prepared)
        program = torch.export.export(converted, example)
    mod, params = ember.frontend.from_pytorch(program, example)
    return model, converted, mod, params


def test_pt2e_linear_layers_run_as_int8_products_and_match_the_reference():
    """With the int8 kernels forced on (any host runs them: exact, vpdpbusd or not) and with
    them off, the model matches the converted module within a small part of its own
    quantization error; the int8 build rounds the product once, not per term."""
    import torch
    model, converted, mod, params = pt2e_mlp()
    builds = {}
    for mode in ("on", "off"):
        with ember.transform.PassContext(opt_level=3, config={"Int8Products.int8_dot": mode}):
            builds[mode] = ember.build(mod, params=params)
    assert kernels_of(builds["on"]).count("nn.dense_u8s8_packed") == 2
    assert "nn.dense_u8s8" not in kernels_of(builds["off"])
    for seed in range(3):
        x = torch.randn(5, 67, generator=torch.Generator().manual_seed(seed))
        with torch.no_grad():
            want, fp32 = converted(x).numpy(), model(x).numpy()
        quantization_error = np.abs(want - fp32).max()
        for mode, lib in builds.items():
            got = ember.GraphModule(lib)(x.numpy()).numpy()
            assert np.abs(got - want).max() <= 0.01 * quantization_error, (mode, seed)


@pytest.mark.parametrize("cpu,int8", [("znver4", True), ("sapphirerapids", True),
                                      ("alderlake", True), ("znver3", False),
                                      ("skylake-avx512", False)])
def test_int8_products_are_chosen_where_the_cpu_multiplies_int8_in_one_instruction(cpu, int8):
    """Compiled for a named CPU (not run): VNNI CPUs take the int8 kernels, the others keep
    the float32 product: two vpmaddwd and the bytes' widening per vector run no faster than
    four FMAs on Zen 1, Zen 2 and Haswell, and barely faster on Zen 3 (issue 45)."""
    _, _, mod, params = pt2e_mlp()
    target = f"llvm -mcpu={cpu}"
    assert ember.target.machine_model(target).int8_dot == int8
    lib = ember.build(mod, target=target, params=params)
    assert ("nn.dense_u8s8_packed" in kernels_of(lib)) == int8, cpu


@pytest.mark.parametrize("size,target", [(16, "llvm"), (6, "llvm"),
                                         (6, "llvm -vector-bits=256")])
def test_pt2e_convolutions_run_as_int8_convs_and_match_the_reference(size, target):
    """A PT2E conv net (conv + BN + ReLU stem, a residual conv, pooling, a classifier) at
    16 x 16 and 6 x 6: with the int8 kernels forced on, its convs and the classifier are int8
    products (blocked: 16 channels are an int32 block at either vector width, the RGB stem one
    word), the residual block's quantizing epilogue between them; the outputs match the
    converted module within a small part of its quantization error, as the float build does."""
    import torch
    from test_quantized import ConvNet, quantize
    torch.manual_seed(0)
    model, shape = ConvNet().eval(), (2, 3, size, size)
    example = (torch.randn(shape),)
    converted, program = quantize(model, example, [torch.randn(shape) for _ in range(4)])
    mod, params = ember.frontend.from_pytorch(program, example)
    builds = {}
    for mode in ("on", "off"):
        with ember.transform.PassContext(opt_level=3, config={"Int8Products.int8_dot": mode}):
            builds[mode] = ember.build(mod, target=target, params=params)
    assert kernels_of(builds["on"]).count("nn.conv2d_u8s8_blocked") == 2, kernels_of(builds["on"])
    for seed in range(3):
        x = torch.randn(shape, generator=torch.Generator().manual_seed(seed))
        with torch.no_grad():
            want, fp32 = converted(x).numpy(), model(x).numpy()
        quantization_error = np.abs(want - fp32).max()
        for mode, lib in builds.items():
            got = ember.GraphModule(lib)(x.numpy()).numpy()
            assert np.abs(got - want).max() <= 0.1 * quantization_error, (mode, seed)


@pytest.mark.parametrize("stride,target,relu6", [(1, "llvm", True), (2, "llvm", True),
                                                 (1, "llvm -vector-bits=256", True),
                                                 (1, "llvm", False)])
def test_pt2e_inverted_residual_runs_as_int8_convs_in_one_block(stride, target, relu6):
    """MobileNetV2's block under PT2E: 1x1 expand, 3x3 depthwise (stride 1 with the residual,
    or 2), 1x1 project. With the int8 kernels forced on, all three are blocked int8 convs
    (the depthwise one over the expand's uint8 bytes, in the same block: no conversion and
    no float conv between them); the outputs match the converted module within a small part
    of its quantization error. Without the expand's ReLU6 the depthwise conv's input has a
    zero point other than 0 (its padding and the weight sums' correction)."""
    import torch
    from test_quantized import quantize

    class InvertedResidual(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.expand = torch.nn.Sequential(
                torch.nn.Conv2d(16, 64, 1), torch.nn.ReLU6() if relu6 else torch.nn.Identity())
            self.depthwise = torch.nn.Sequential(
                torch.nn.Conv2d(64, 64, 3, stride=stride, padding=1, groups=64),
                torch.nn.ReLU6())
            self.project = torch.nn.Conv2d(64, 16, 1)

        def forward(self, x):
            y = self.project(self.depthwise(self.expand(x)))
            return x + y if stride == 1 else y

    torch.manual_seed(0)
    model, shape = InvertedResidual().eval(), (1, 16, 10, 10)
    example = (torch.randn(shape),)
    converted, program = quantize(model, example, [torch.randn(shape) for _ in range(4)])
    mod, params = ember.frontend.from_pytorch(program, example)
    with ember.transform.PassContext(opt_level=3, config={"Int8Products.int8_dot": "on"}):
        lib = ember.build(mod, target=target, params=params)
    kernels = [" ".join(k.ops) for k in lib.fusion_report()]
    convs = [i for i, k in enumerate(kernels) if "nn.conv2d_u8s8_blocked" in k]
    assert len(convs) == 3 and "nn.conv2d_blocked" not in " ".join(kernels), kernels
    assert ("subtract" in kernels[convs[1]]) == (not relu6), kernels  # the zero point's
    # expand -> depthwise -> project, one kernel after another, pass NCHW[c]c bytes.
    assert convs == [convs[0], convs[0] + 1, convs[0] + 2], kernels
    assert not any(c in kernels[i] for i in convs[:2] for c in ("to_blocked", "from_blocked"))
    for seed in range(3):
        x = torch.randn(shape, generator=torch.Generator().manual_seed(seed))
        with torch.no_grad():
            want, fp32 = converted(x).numpy(), model(x).numpy()
        got = ember.GraphModule(lib)(x.numpy()).numpy()
        assert np.abs(got - want).max() <= 0.1 * np.abs(want - fp32).max(), seed


@pytest.mark.parametrize("target", [t for t, _ in NO_VNNI])
def test_pt2e_models_with_int8_products_without_vnni(target):
    """With the int8 kernels forced on and built without VNNI: the PT2E MLP (only elementwise
    float between its int32 sums) gives exactly the outputs of the host's build; the conv net
    (a float average pool, whose sum order follows the vector width) matches the converted
    module as closely as the host's build does."""
    import torch
    from test_quantized import ConvNet, quantize
    on = {"Int8Products.int8_dot": "on"}
    _, _, mod, params = pt2e_mlp()
    x = np.random.default_rng(0).standard_normal((5, 67)).astype(np.float32)
    outs = []
    for t in (target, "llvm"):
        with ember.transform.PassContext(opt_level=3, config=on):
            lib = ember.build(mod, target=t, params=params)
        assert kernels_of(lib).count("nn.dense_u8s8_packed") == 2, t
        outs.append(ember.GraphModule(lib)(x).numpy())
    np.testing.assert_array_equal(outs[0], outs[1])

    torch.manual_seed(0)
    model, shape = ConvNet().eval(), (2, 3, 16, 16)
    example = (torch.randn(shape),)
    converted, program = quantize(model, example, [torch.randn(shape) for _ in range(4)])
    mod, params = ember.frontend.from_pytorch(program, example)
    with ember.transform.PassContext(opt_level=3, config=on):
        lib = ember.build(mod, target=target, params=params)
    assert kernels_of(lib).count("nn.conv2d_u8s8_blocked") == 2, kernels_of(lib)
    x = torch.randn(shape, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        want, fp32 = converted(x).numpy(), model(x).numpy()
    got = ember.GraphModule(lib)(x.numpy()).numpy()
    assert np.abs(got - want).max() <= 0.1 * np.abs(want - fp32).max()
