"""F.interpolate / nn.Upsample (aten.upsample_*, python/ember/frontend/_aten_resize.py)
imported with torch.export and compared with PyTorch eager: every mode, align_corners,
sizes and scale factors up and down, integer and fractional, on 3-D, 4-D and 5-D float32
inputs; the decomposed forms (run_decompositions) and TorchScript traces; the kernels a
resize becomes; the errors.

Tolerance: the nearest modes pick pixels and must be exact; the others within 1e-5 of the
output's scale (max |got - want| <= 1e-5 * max |want|): the weights are PyTorch's float32
formulas, but its x86 build contracts the cubic polynomials into FMAs (weights differ by
up to 7e-7) and its channels-last kernels sum in another order.
"""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

import ember
from ember import ir
from ember.frontend import from_pytorch
from ember.frontend._aten import Converter

SHAPES = {3: (2, 3, 11), 4: (1, 2, 7, 11), 5: (1, 2, 4, 7, 11)}
MODES = {3: ["nearest", "nearest-exact", "linear"],
         4: ["nearest", "nearest-exact", "bilinear", "bicubic"],
         5: ["nearest", "nearest-exact", "trilinear"]}
# name -> the resize arguments for a rank
RESIZES = {
    "x2": lambda r: dict(scale_factor=2.0),
    "x0.5": lambda r: dict(scale_factor=0.5),
    "x1.7": lambda r: dict(scale_factor=1.7),
    "x0.3": lambda r: dict(scale_factor=0.3),
    "x2.1": lambda r: dict(scale_factor=2.1),  # scale 1/2.1 maps, though 7 -> 14 (2-D: 22)
    "x1.05": lambda r: dict(scale_factor=1.05),  # the size stays, the scale is not 1
    "x1.7-recompute": lambda r: dict(scale_factor=1.7, recompute_scale_factor=True),
    "per-axis": lambda r: dict(scale_factor=(1.5, 2.0, 0.6)[5 - r:]),
    "size-up": lambda r: dict(size=(6, 13, 29)[5 - r:]),
    "size-down": lambda r: dict(size=(3, 4, 5)[5 - r:]),
}
NEAREST = ("nearest", "nearest-exact")


def _cases():
    for rank, modes in MODES.items():
        for mode in modes:
            corners = [None] if mode in NEAREST else [False, True]
            aliasing = [False, True] if mode in ("bilinear", "bicubic") else [False]
            for resize in RESIZES:
                for align in corners:
                    for antialias in aliasing:
                        yield pytest.param(rank, mode, resize, align, antialias, id=(
                            f"{rank}d-{mode}-{resize}" + ("-corners" if align else "")
                            + ("-antialias" if antialias else "")))


class Interpolate(torch.nn.Module):
    def __init__(self, **kwargs):
        super().__init__()
        self.kwargs = kwargs

    def forward(self, x):
        return F.interpolate(x, **self.kwargs)


def _run(model, x):
    mod, params = from_pytorch(model, (x,))
    return np.asarray(ember.GraphModule(ember.build(mod, params=params))(x.numpy()))


def _check(got, want, exact):
    want = want.detach().numpy()
    assert got.shape == want.shape and got.dtype == want.dtype
    if exact:
        np.testing.assert_array_equal(got, want)
    else:
        err = np.abs(got - want).max() / np.abs(want).max()
        assert err <= 1e-5, f"max error {err:.2e} of the output's scale"


@pytest.mark.parametrize("rank, mode, resize, align_corners, antialias", list(_cases()))
def test_matches_pytorch(rank, mode, resize, align_corners, antialias):
    torch.manual_seed(0)
    x = torch.randn(SHAPES[rank])
    kwargs = RESIZES[resize](rank)
    kwargs.update(mode=mode, align_corners=align_corners)
    if antialias:
        kwargs["antialias"] = True
    model = Interpolate(**kwargs)
    _check(_run(model, x), model(x), exact=mode in NEAREST)


@pytest.mark.parametrize("size, factor", [((50, 70), 2.1), ((50, 70), 1.01), ((5, 7), 2.1),
                                          ((5, 7), 1.05), ((3, 40), 2.1)])
def test_nearest_2d_follows_the_kernel_pytorch_picks(size, factor):
    """2-D nearest runs PyTorch's channels-last kernel on small outputs (height + width <=
    128), which copies an unchanged size and halves the index of a doubled one, and its
    generic kernel, which maps with the scale factor, on larger ones."""
    x = torch.randn((1, 2) + size)
    model = Interpolate(scale_factor=factor, mode="nearest")
    _check(_run(model, x), model(x), exact=True)


def test_nearest_indices_over_many_sizes():
    """Every output size from 1 to 64 of a 37-pixel row, and a range of scale factors: the
    float32 index arithmetic picks PyTorch's pixels at every boundary."""
    x = torch.randn(1, 2, 37)

    class Many(torch.nn.Module):
        def forward(self, x):
            outs = [F.interpolate(x, size=n, mode=m) for n in range(1, 65) for m in NEAREST]
            outs += [F.interpolate(x, scale_factor=f, mode=m) for m in NEAREST
                     for f in (0.1, 0.33, 0.7, 0.9, 1.1, 1.3, 1.5, 2.5, 3.3, 4.0)]
            return torch.cat(outs, dim=-1)

    _check(_run(Many(), x), Many()(x), exact=True)


def test_upsample_module_in_a_network():
    """nn.Upsample between convolutions, as UNet and FPN decoders use it."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(),
                                torch.nn.Upsample(scale_factor=2, mode="bilinear"),
                                torch.nn.Conv2d(8, 4, 3, padding=1),
                                torch.nn.Upsample(size=(33, 47), mode="nearest")).eval()
    x = torch.randn(1, 3, 12, 20)
    with torch.no_grad():
        _check(_run(model, x), model(x), exact=False)


@pytest.mark.parametrize("mode, kwargs, shape", [
    ("nearest-exact", dict(scale_factor=1.7), (1, 2, 7, 11)),
    ("nearest", dict(scale_factor=2.0), (1, 2, 11)),
    ("linear", dict(scale_factor=1.7), (1, 2, 11)),
    ("linear", dict(size=13, align_corners=True), (1, 2, 11)),
    ("trilinear", dict(scale_factor=0.6), (1, 2, 4, 7, 11)),
    ("bicubic", dict(scale_factor=2.0), (1, 2, 7, 11)),
    ("bicubic", dict(size=(5, 4), align_corners=True), (1, 2, 7, 11))])
def test_decomposed_forms(mode, kwargs, shape):
    """An ExportedProgram lowered to core ATen (run_decompositions) expresses these modes
    with arange, integer clamps and x[idx] (aten.index): they import too."""
    x = torch.randn(shape)
    model = Interpolate(mode=mode, **kwargs)
    program = torch.export.export(model, (x,)).run_decompositions()
    ops = {str(n.target) for n in program.graph.nodes if n.op == "call_function"}
    assert "aten.index.Tensor" in ops, ops
    mod, params = from_pytorch(program, None)
    got = np.asarray(ember.GraphModule(ember.build(mod, params=params))(x.numpy()))
    _check(got, model(x), exact=mode in NEAREST)


@pytest.mark.parametrize("kwargs", [dict(scale_factor=1.7, mode="bilinear"),
                                    dict(size=(13, 29), mode="bicubic", align_corners=True),
                                    dict(scale_factor=0.4, mode="bilinear", antialias=True),
                                    dict(scale_factor=3.0, mode="nearest")])
def test_torchscript_trace(kwargs):
    x = torch.randn(1, 2, 7, 11)
    model = Interpolate(**kwargs)
    got = _run(torch.jit.trace(model, (x,)), x)
    _check(got, model(x), exact=kwargs["mode"] == "nearest")


def test_integer_clamp():
    """clamp of an int64 tensor (decomposed interpolation clamps its indices) stays int64;
    a float bound makes it float32, as in torch."""
    class Clamp(torch.nn.Module):
        def forward(self, i):
            return torch.clamp(i, 2, 7), torch.clamp(i, max=4), torch.clamp(i, 2.5)

    i = torch.arange(-3, 12)
    mod, params = from_pytorch(Clamp(), (i,))
    m = ember.GraphModule(ember.build(mod, params=params))
    m.set_input(0, i.numpy())
    m.run()
    for k, want in enumerate(Clamp()(i)):
        got = m.get_output(k).numpy()
        assert got.dtype == want.numpy().dtype
        np.testing.assert_array_equal(got, want.numpy())


def test_kernels():
    """A bilinear 2x resize is two kernels, one per axis, each its takes fused with the
    weights' multiplies and the add; nearest is one kernel of takes. (One kernel for the
    bilinear resize would recompute each row's horizontal pass for both vertical taps: 3x
    slower on a 1x64x56x56 input; FuseOps' cost rule keeps the two.)"""
    x = torch.randn(1, 64, 56, 56)
    mod, params = from_pytorch(Interpolate(scale_factor=2.0, mode="bilinear"), (x,))
    report = ember.build(mod, params=params, target="llvm -mcpu=znver3").fusion_report()
    assert len(report) == 2, report
    for kernel in report:
        assert sorted(kernel.ops) == ["add", "multiply", "multiply", "take", "take"], report
    mod, params = from_pytorch(Interpolate(scale_factor=2.0, mode="nearest"), (x,))
    report = ember.build(mod, params=params, target="llvm -mcpu=znver3").fusion_report()
    assert [k.ops for k in report] == [["take", "take"]], report


def _failure(model, *inputs):
    with pytest.raises(ember.EmberError) as info:
        from_pytorch(model, inputs)
    return str(info.value)


def test_integer_input_to_a_weighted_mode():
    text = _failure(Interpolate(scale_factor=2.0, mode="bilinear"),
                    torch.arange(12).reshape(1, 1, 3, 4))
    assert "aten.upsample_bilinear2d.vec" in text and "cast the input to float32" in text


def test_input_of_the_wrong_rank():
    """A converter error names the op and says what it takes (a TorchScript graph or a
    hand-written call can reach it; torch.export checks the rank itself)."""
    cx = Converter({})
    x = ir.var("x", [2, 5, 6], "float32")
    cx.convert("upsample_bilinear2d", "aten.upsample_bilinear2d.vec",
               ["input", "output_size", "align_corners", "scale_factors"],
               [x, [4, 4], False, None], None, "up")
    text = str(cx.error())
    assert "aten.upsample_bilinear2d.vec at 'up'" in text
    assert "takes a 4-D input" in text and "got a 3-D one" in text
