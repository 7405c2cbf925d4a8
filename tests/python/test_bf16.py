"""bfloat16 tensors (issue 45): a storage type computed the way PyTorch computes it on the CPU,
each op in float32 with its result rounded to nearest even, sums accumulating in float32.

Tolerances. Elementwise ops, casts and the ops that only select or move elements match
torch's bfloat16 result exactly (the same float32 computation, the same rounding);
transcendental functions and reductions (softmax, norms, sums, pooling), whose float32
results may differ from torch's by float32 ulps (other polynomials, another summation order)
and so round to a neighbouring bfloat16: at most one bfloat16 ulp. Dense, conv and matmul accumulate in float32 in another order
than torch's kernels, and their results round once to bfloat16: compared with torch's
bfloat16 result within two bfloat16 ulps (rtol 2^-7) plus an absolute term for
cancellation, and with the float32 model within the bfloat16 tolerance rtol/atol 1e-2 of
the outputs' scale (a whole model: 3e-2, as every layer rounds its activations)."""
import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import ember
from ember import ir, op
import models

BF16_ULP = 2.0 ** -8


def _run(net, *inputs, opt_level=3):
    mod, params = ember.frontend.from_pytorch(net, tuple(inputs))
    with ember.transform.PassContext(opt_level=opt_level):
        lib = ember.build(mod, params=params)
    out = ember.GraphModule(lib)(*inputs)
    outs = out if isinstance(out, (list, tuple)) else [out]
    return [torch.from_dlpack(o).clone() for o in outs]


def _bf16(shape, seed=0, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g) * scale).to(torch.bfloat16)


class Fn(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


def _assert_ulps(got, want, ulps):
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape
    g, w = got.float(), want.float()
    nan = torch.isnan(w)
    assert torch.equal(torch.isnan(g), nan)
    diff = (g - w).abs()[~nan]
    # a bfloat16 ulp at |w| in [2^(e-1), 2^e): 2^(e-8)
    _, e = torch.frexp(w[~nan])
    bound = ulps * torch.ldexp(torch.ones_like(w[~nan]), e - 8)
    assert bool((diff <= bound).all()), float(diff.max())


# ---------------------------------------------------------------------- runtime and I/O

def test_dtype_and_dlpack_round_trip():
    x = _bf16((3, 5))
    t = ember.Tensor.from_dlpack(x)
    assert t.dtype == "bfloat16" and t.shape == (3, 5)
    assert torch.equal(torch.from_dlpack(t), x)
    with pytest.raises(ember.EmberError, match="NumPy has no bfloat16"):
        t.numpy()
    with pytest.raises((ember.EmberError, BufferError), match="NumPy has no bfloat16"):
        np.asarray(t)


def test_ir_const_var_and_model_file(tmp_path):
    w = _bf16((4, 6), seed=1)
    x = ir.var("x", (2, 6), "bfloat16")
    f = ir.Function([x], op.nn.dense(x, ir.const(w, "w")))
    lib = ember.build(f)
    xs = _bf16((2, 6), seed=2)
    want = F.linear(xs, w)
    got = torch.from_dlpack(ember.GraphModule(lib)(xs))
    assert got.dtype == torch.bfloat16
    _assert_ulps(got, want, 2)
    path = tmp_path / "m.ember"
    lib.export(str(path))
    again = torch.from_dlpack(ember.GraphModule(ember.load(str(path)))(xs))
    assert torch.equal(again, got)


# ---------------------------------------------------------------------- elementwise and casts

EXACT = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "maximum": torch.maximum,
    "relu": lambda a, b: torch.relu(a),
    "neg_abs": lambda a, b: -a.abs(),
    "scalar_mul": lambda a, b: a * 0.1,
    "scalar_add": lambda a, b: 3 + a,
    "scalar_div": lambda a, b: a / 3.0,
    "where": lambda a, b: torch.where(a > b, a, b),
    "compare": lambda a, b: a < b,
    "sqrt": lambda a, b: torch.sqrt(a.abs()),
    "clamp": lambda a, b: a.clamp(-0.5, 0.5),
    "cumsum": lambda a, b: a.cumsum(-1),
    "sort": lambda a, b: torch.sort(a, -1)[0],
    "topk": lambda a, b: torch.topk(a, 3)[0],
    "argmax": lambda a, b: a.argmax(-1),
    "amax": lambda a, b: a.amax(-1),
    "pad": lambda a, b: F.pad(a, (1, 2)),
    "floor": lambda a, b: (a * 3).floor(),
    "remainder": lambda a, b: a % 0.3,
    "sin": lambda a, b: a.sin(),
    "cat_transpose": lambda a, b: torch.cat([a, b], 0).t(),
}
TRANSCENDENTAL = {
    "exp": lambda a, b: torch.exp(a),
    "tanh": lambda a, b: torch.tanh(a),
    "sigmoid": lambda a, b: torch.sigmoid(a),
    "gelu": lambda a, b: F.gelu(a),
    "silu": lambda a, b: F.silu(a),
    "softmax": lambda a, b: torch.softmax(a, dim=-1),
    "layer_norm": lambda a, b: F.layer_norm(a, (a.shape[-1],)),
    "sum": lambda a, b: a.sum(dim=-1),
    "mean": lambda a, b: a.mean(dim=0),
    "log_softmax": lambda a, b: F.log_softmax(a, dim=-1),
    "var": lambda a, b: a.var(dim=-1),
    "rsqrt": lambda a, b: a.abs().rsqrt(),
}


@pytest.mark.parametrize("name", sorted(EXACT))
def test_elementwise_exact(name):
    a, b = _bf16((4, 37), 1, 3.0), _bf16((4, 37), 2, 3.0)
    want = EXACT[name](a, b)
    got, = _run(Fn(EXACT[name]), a, b)
    _assert_ulps(got, want, 0)


@pytest.mark.parametrize("name", sorted(TRANSCENDENTAL))
def test_elementwise_transcendental(name):
    a, b = _bf16((4, 37), 1, 2.0), _bf16((4, 37), 2)
    want = TRANSCENDENTAL[name](a, b)
    got, = _run(Fn(TRANSCENDENTAL[name]), a, b)
    _assert_ulps(got, want, 1)
    # and against float32, within bfloat16's tolerance
    ref = TRANSCENDENTAL[name](a.float(), b.float())
    torch.testing.assert_close(got.float(), ref, rtol=1e-2, atol=1e-2)


def test_casts_round_to_nearest_even_and_keep_nan():
    # ties, the largest finite values, infinities, NaN, subnormals, negative zero
    special = torch.tensor([1.0 + 2 ** -8, 1.0 + 3 * 2 ** -8, -(1.0 + 2 ** -8), 3.3895e38,
                            3.4e38, float("inf"), -float("inf"), float("nan"), 1e-40, -0.0,
                            0.1, -2.5e-39, 65504.0, 1.00390625], dtype=torch.float32)
    x = torch.cat([special, torch.randn(200) * 100])

    got, = _run(Fn(lambda v: v.to(torch.bfloat16)), x)
    want = x.to(torch.bfloat16)
    assert torch.equal(got.view(torch.int16)[~torch.isnan(want)],
                       want.view(torch.int16)[~torch.isnan(want)])
    assert torch.isnan(got[torch.isnan(want)]).all()
    back, = _run(Fn(lambda v: v.float()), want)
    assert torch.equal(back[~torch.isnan(want)], want.float()[~torch.isnan(want)])
    # float64 and integers go through float32 as torch's conversion does
    d = torch.randn(300, dtype=torch.float64) * 1000
    got, = _run(Fn(lambda v: v.to(torch.bfloat16)), d)
    assert torch.equal(got, d.to(torch.bfloat16))
    i = torch.randint(-100000, 100000, (300,))
    got, = _run(Fn(lambda v: v.to(torch.bfloat16)), i)
    assert torch.equal(got, i.to(torch.bfloat16))
    b = _bf16((300,), 3, 300.0)
    got, = _run(Fn(lambda v: v.to(torch.int32)), b)
    assert torch.equal(got, b.to(torch.int32))


def test_constant_folding_agrees_with_generated_code():
    # the same casts of constants, folded at build time (FoldConstant) and computed at run
    # time: identical bits
    values = torch.tensor([1.0 + 2 ** -8, 1.0 + 3 * 2 ** -8, 0.1, 3.4e38, float("nan"), 1e-40,
                           -7.77, 123456.0])
    folded, = _run(Fn(lambda v: v * 0 + values.to(torch.bfloat16) * 2.0), torch.ones(8, dtype=torch.bfloat16))
    want = (torch.ones(8, dtype=torch.bfloat16) * 0 + values.to(torch.bfloat16) * 2.0)
    assert torch.equal(folded[~torch.isnan(want)], want[~torch.isnan(want)])
    x = ir.var("x", (8,), "float32")
    c = ir.call("cast", [ir.const(values.numpy())], {"dtype": "bfloat16"})
    f = ir.Function([x], ir.call("cast", [x], {"dtype": "bfloat16"}) + c)
    run_time = torch.from_dlpack(ember.GraphModule(ember.build(f))(values.numpy()))
    assert torch.equal(run_time.view(torch.int16)[~torch.isnan(want)],
                       (values.to(torch.bfloat16) * 2).view(torch.int16)[~torch.isnan(want)])


IMAGE = {
    "max_pool": lambda x: F.max_pool2d(x, 2),
    "avg_pool": lambda x: F.avg_pool2d(x, 2),
    "adaptive_avg_pool": lambda x: F.adaptive_avg_pool2d(x, 1),
    "bilinear": lambda x: F.interpolate(x, scale_factor=2, mode="bilinear"),
    "batch_norm": lambda x: F.batch_norm(x, torch.zeros(4).bfloat16(), torch.ones(4).bfloat16()),
}


@pytest.mark.parametrize("name", sorted(IMAGE))
def test_image_ops(name):
    x = _bf16((2, 4, 8, 8), 7)
    got, = _run(Fn(IMAGE[name]), x)
    _assert_ulps(got, IMAGE[name](x), 1)


# ---------------------------------------------------------------------- products

def _product_checks(got, want_bf16, want_f32, scale):
    assert got.dtype == torch.bfloat16
    g = got.float()
    torch.testing.assert_close(g, want_bf16.float(), rtol=2 * BF16_ULP, atol=4 * BF16_ULP * scale)
    torch.testing.assert_close(g, want_f32, rtol=1e-2, atol=1e-2 * scale)


@pytest.mark.parametrize("shape", [(1, 64, 48), (33, 200, 70), (128, 768, 96)])
def test_dense(shape):
    m, k, n = shape
    lin = nn.Linear(k, n)
    torch.manual_seed(0)
    x = torch.randn(m, k)
    ref32 = lin(x).detach()
    lin = lin.to(torch.bfloat16)
    xb = x.to(torch.bfloat16)
    got, = _run(lin, xb)
    _product_checks(got, lin(xb).detach(), ref32, ref32.abs().max())


def test_matmul_and_bmm():
    a, b = _bf16((3, 17, 40), 5), _bf16((3, 40, 23), 6)
    got, = _run(Fn(torch.matmul), a, b)
    ref = torch.matmul(a.float(), b.float())
    _product_checks(got, torch.matmul(a, b), ref, ref.abs().max())


@pytest.mark.parametrize("groups,stride", [(1, 1), (1, 2), (4, 1)])
def test_conv2d(groups, stride):
    conv = nn.Conv2d(16, 32, 3, stride=stride, padding=1, groups=groups)
    x = torch.randn(2, 16, 14, 14)
    ref32 = conv(x).detach()
    conv = conv.to(torch.bfloat16)
    xb = x.to(torch.bfloat16)
    got, = _run(conv, xb)
    _product_checks(got, conv(xb).detach(), ref32, ref32.abs().max())


# ---------------------------------------------------------------------- whole models

@pytest.mark.parametrize("family", ["mlp", "resnet18", "mobilenet_v2", "encoder",
                                    "mha_encoder"])
def test_model_cast_to_bfloat16(family):
    model, inputs = models.make(family, batch=2)
    model = model.eval()
    with torch.no_grad():
        ref32 = model(*inputs)
        model = model.to(torch.bfloat16)
        binputs = tuple(t.to(torch.bfloat16) for t in inputs)
        want = model(*binputs)
    got, = _run(model, *binputs)
    assert got.dtype == torch.bfloat16
    scale = float(ref32.abs().max())
    # every layer rounds its activations to bfloat16, in both implementations
    torch.testing.assert_close(got.float(), want.float(), rtol=3e-2, atol=3e-2 * scale)
    torch.testing.assert_close(got.float(), ref32, rtol=3e-2, atol=3e-2 * scale)


def test_mixed_float32_input_bfloat16_model():
    lin = nn.Linear(16, 8).to(torch.bfloat16)
    net = Fn(lambda x: lin(x.to(torch.bfloat16)).float())
    x = torch.randn(4, 16)
    got, = _run(net, x)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, net(x).detach(), rtol=2 * BF16_ULP, atol=1e-2)


# ---------------------------------------------------------------------- refusals

def test_float16_is_refused_with_a_clear_message():
    with pytest.raises(ember.EmberError, match="float16"):
        _run(nn.Linear(4, 4).half(), torch.randn(2, 4).half())


def test_an_op_without_bfloat16_says_so_and_names_the_op():
    x, grid = _bf16((1, 2, 4, 4)), _bf16((1, 3, 3, 2))
    with pytest.raises(ember.EmberError, match="grid_sample.*float32"):
        _run(Fn(lambda a, g: F.grid_sample(a, g, align_corners=False)), x, grid)


def test_bfloat16_with_float_promotes_as_torch():
    a, b = _bf16((5,), 1), torch.randn(5)
    got, = _run(Fn(lambda x, y: x + y), a, b)
    assert got.dtype == torch.float32
    assert torch.equal(got, a + b)
    got, = _run(Fn(lambda x, y: x * y), a, torch.tensor(2.5))  # a 0-d float32 tensor
    assert got.dtype == torch.bfloat16
    assert torch.equal(got, a * torch.tensor(2.5))
