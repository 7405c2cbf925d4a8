"""DirectML's fused activations and normalisations (src/ir/ops/activations.cc,
nn.instance_norm, nn.layer_norm as a fusion anchor) against PyTorch on hard inputs.

Hard inputs: -0.0, values exactly at and one float away from each threshold, magnitudes
where e^x overflows float32 (89, 100, 1e4, 1e30), +-inf and NaN. Checks:
  * special values exactly as a float64 reference has them: NaN, the same infinities, and
    the sign of zero results (except softshrink, whose torch reference's scalar and vector
    loops disagree). Never float32 PyTorch's signs of zero: they depend on the vector loop
    torch picks for the CPU (AVX2 or AVX-512), and the verdict must not. Ember's relu and
    clamp give +0.0 for -0.0 where torch keeps -0.0 (documented in the README);
  * finite values within rtol 2e-6 (a few float32 ulp) of a float64 reference, and within
    rtol 1e-4 of float32 PyTorch (whose vectorized erf is itself ~1e-4 off near x = -3);
  * relative accuracy where the naive formula cancels: elu/celu/selu near 0 (expm1) and
    softplus/mish far below 0 (log1p), against float64 PyTorch;
  * fusion with every anchor kind in one kernel, equal to the unfused build (rtol 1e-5)
    and to PyTorch (rtol/atol 2e-4: summation order of conv/dense/norms);
  * user errors name the op and say what to do.
"""
import math
import re

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import ember
from ember import ir, op
from ember.frontend import from_pytorch
from ember.transform import PassContext
from op_checks import error_of

# Thresholds used below (softplus's is threshold / beta = 2.5).
THRESHOLDS = [0.0, 0.25, -0.3, 0.3, 2.5, 20.0, -20.0, 3.0, -3.0, 6.0, 0.625, -0.625, -0.5, 2.0]


def hard_inputs(dtype=np.float32):
    vals = [-0.0, 0.0, 1e-7, -1e-7, 1e-30, -1e-30, 1e-45, -1e-45, 0.5, -0.5, 1.0, -1.0, 30.0,
            -30.0, 88.0, -88.0, 89.0, -89.0, 100.0, -100.0, 1e4, -1e4, 1e30, -1e30, np.inf,
            -np.inf, np.nan]
    for t in THRESHOLDS:
        t = dtype(t)
        vals += [t, np.nextafter(t, dtype(np.inf)), np.nextafter(t, dtype(-np.inf))]
    rng = np.random.default_rng(0)
    vals += list(rng.standard_normal(64) * 4) + list(rng.standard_normal(32) * 40)
    return np.array(vals, dtype=dtype)


def stable_softplus64(z):
    return np.logaddexp(0.0, z)


def torch_softplus_no_threshold(z):
    """log(1 + e^z) without overflow (torch's softplus overflows above its threshold)."""
    return torch.clamp(z, min=0) + torch.log1p(torch.exp(-z.abs()))


# name -> (ember op on an expression, float32 torch function, float64 reference f(x, the
# input's dtype) or None to use the torch function in float64, check the sign of zero
# results).
ACTS = {
    "elu": (lambda v: op.nn.elu(v, 0.7), lambda t: F.elu(t, 0.7), None, True),
    "selu": (op.nn.selu, F.selu, None, True),
    "celu": (lambda v: op.nn.celu(v, 1.5), lambda t: F.celu(t, 1.5), None, True),
    "softplus": (lambda v: op.nn.softplus(v, 2.0, 5.0), lambda t: F.softplus(t, 2.0, 5.0),
                 lambda x, dt: np.where(2 * x > 5, x, stable_softplus64(2 * x) / 2), True),
    "softsign": (op.nn.softsign, F.softsign, None, True),
    "threshold": (lambda v: op.nn.thresholded_relu(v, 0.25, -1.5),
                  lambda t: F.threshold(t, 0.25, -1.5), None, True),
    "thresholded_relu_default": (op.nn.thresholded_relu, lambda t: F.threshold(t, 1.0, 0.0),
                                 None, True),
    # The float64 references use lambd rounded to the input dtype, as the ops compare.
    "hardshrink": (lambda v: op.nn.hardshrink(v, 0.3), lambda t: F.hardshrink(t, 0.3),
                   lambda x, dt: F.hardshrink(torch.from_numpy(x), float(dt(0.3))).numpy(),
                   True),
    "softshrink": (lambda v: op.nn.softshrink(v, 0.3), lambda t: F.softshrink(t, 0.3),
                   lambda x, dt: F.softshrink(torch.from_numpy(x), float(dt(0.3))).numpy(),
                   False),
    "mish": (op.nn.mish, F.mish, None, True),
    # Ember's max/min give +0.0 for -0.0 where torch's relu and clamp keep -0.0.
    "relu": (op.nn.relu, F.relu, None, False),
    "leaky_relu": (lambda v: op.nn.leaky_relu(v, 0.2), lambda t: F.leaky_relu(t, 0.2), None,
                   True),
    "relu6": (lambda v: op.clip(v, 0.0, 6.0), F.relu6, None, False),
    "hardtanh": (lambda v: op.clip(v, -0.5, 2.0), lambda t: F.hardtanh(t, -0.5, 2.0), None,
                 False),
    "hardsigmoid": (op.nn.hardsigmoid, F.hardsigmoid, None, True),
    "hardswish": (op.nn.hardswish, F.hardswish, None, True),
    "sigmoid": (op.sigmoid, torch.sigmoid, None, True),
    "tanh": (op.tanh, torch.tanh, None, True),
    # float64 reference without torch's cancellation: x * erfc(-x / sqrt 2) / 2 (torch's
    # 0.5 x (1 + erf(x / sqrt 2)) is -0 in float64 below x = -8.3, where GELU is -1e-17).
    "gelu": (op.nn.gelu, F.gelu,
             lambda x, t: x * 0.5 * np.vectorize(math.erfc)(-x / math.sqrt(2.0)), True),
    "gelu_tanh": (lambda v: op.nn.gelu(v, "tanh"), lambda t: F.gelu(t, approximate="tanh"),
                  None, True),
    "silu": (op.nn.silu, F.silu, None, True),
    "log_sigmoid": (op.nn.log_sigmoid, F.logsigmoid, None, True),
    # DirectML-only activations: torch compositions as the float32 reference.
    "parametric_softplus": (lambda v: op.nn.parametric_softplus(v, 1.5, -0.7),
                            lambda t: 1.5 * torch_softplus_no_threshold(-0.7 * t),
                            lambda x, dt: 1.5 * stable_softplus64(-0.7 * x), True),
    "scaled_tanh": (lambda v: op.nn.scaled_tanh(v, 1.7159, 0.6667),
                    lambda t: 1.7159 * torch.tanh(0.6667 * t), None, True),
    "linear_act": (lambda v: op.nn.linear_act(v, -2.5, 0.5), lambda t: -2.5 * t + 0.5, None,
                   True),
}


def run(func, *inputs):
    lib = ember.build(func)
    m = ember.GraphModule(lib)
    for i, a in enumerate(inputs):
        m.set_input(i, a)
    m.run()
    return [np.asarray(m.get_output(i)).copy() for i in range(m.get_num_outputs())]


_BUILT = {}


def all_activations(dtype):
    """Every activation of ACTS on hard_inputs(dtype), built once as one function."""
    if dtype not in _BUILT:
        x = hard_inputs(dtype)
        v = ir.var("x", x.shape, np.dtype(dtype).name)
        outs = run(ir.Function([v], ir.Tuple([a[0](v) for a in ACTS.values()])), x)
        _BUILT[dtype] = (x, dict(zip(ACTS, outs)))
    return _BUILT[dtype]


def reference64(name, x):
    _, fn32, ref64, _ = ACTS[name]
    if ref64 is not None:
        with np.errstate(all="ignore"):
            return ref64(x.astype(np.float64), x.dtype.type)
    return fn32(torch.from_numpy(x.astype(np.float64))).numpy()


@pytest.mark.parametrize("name", list(ACTS))
def test_hard_inputs_match_torch(name):
    x, got_all = all_activations(np.float32)
    got = got_all[name]
    _, fn32, _, check_zero_sign = ACTS[name]
    want = fn32(torch.from_numpy(x)).numpy()
    with np.errstate(over="ignore"):
        ref = reference64(name, x).astype(np.float32)  # inf where float32 overflows
    assert got.dtype == np.float32
    # Special values exactly as the float64 reference has them, which is float32 PyTorch's
    # except where torch's vector loop differs from its scalar one (gelu(inf) is NaN there).
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref), err_msg=f"{name}: NaN at x = "
                                  f"{x[np.isnan(got) != np.isnan(ref)]}")
    inf = np.isinf(ref)
    np.testing.assert_array_equal(got[inf], ref[inf], err_msg=f"{name}: infinities")
    if check_zero_sign:
        # Against float64, never float32 PyTorch: which vector loop torch picks (AVX2 or
        # AVX-512) decides its sign of zero (its AVX2 gelu gives +0.0 for x <= -9.3).
        zero = ref == 0
        bad = np.signbit(got[zero]) != np.signbit(ref[zero])
        assert not bad.any(), f"{name}: sign of zero differs from float64 at x = {x[zero][bad]}"
    finite = np.isfinite(want) & np.isfinite(ref)
    np.testing.assert_allclose(got[finite], want[finite], rtol=1e-4, atol=1e-6,
                               err_msg=f"{name} vs float32 PyTorch")
    # A few ulp of float64, plus what exp amplifies (|x| ~ 40 turns the input's half-ulp
    # rounding into ~2e-6 relative; GELU's e^(-x^2 / 2) turns it into x^2 * 6e-8, so it gets
    # 2e-5 up to x = -13, where it reaches the denormals). Float32 GELU has no cancellation
    # (torch's 0.5 x (1 + erf(x / sqrt 2)) loses all digits by x = -5): relative throughout.
    ok = np.isfinite(ref)
    np.testing.assert_allclose(got[ok], ref[ok], rtol=2e-5 if name == "gelu" else 5e-6,
                               atol=1e-30, err_msg=f"{name} vs float64")


# Small inputs where e^x - 1 or log(1 + e^x) computed naively lose most digits.
@pytest.mark.parametrize("name,xs", [
    ("elu", [-1e-6, -3e-4, -0.01, -0.2, -0.34, -0.35, 1e-6]),
    ("celu", [-1e-6, -3e-4, -0.01, -0.5, -0.52, -0.53]),
    ("selu", [-1e-7, -1e-5, -0.3]),
    ("softplus", [-20.0, -30.0, -40.0, -45.0, -0.001, 0.001, 2.4999]),
    ("mish", [-1e-6, -0.001, -15.0, -30.0, -50.0, 8.0, 9.5, 19.9, 20.1]),
    ("parametric_softplus", [30.0, 45.0, 60.0, -60.0, 0.001]),
    ("log_sigmoid", [10.0, 20.0, 40.0, 80.0, -1e-6, 1e-6, -20.0, -100.0]),
])
def test_relative_accuracy_where_naive_formulas_cancel(name, xs):
    x = np.array(xs, dtype=np.float32)
    v = ir.var("x", x.shape, "float32")
    (got,) = run(ir.Function([v], ACTS[name][0](v)), x)
    ref = reference64(name, x)
    np.testing.assert_allclose(got, ref, rtol=2e-6, atol=0, err_msg=name)


@pytest.mark.parametrize("name", ["elu", "selu", "celu", "softplus", "softsign", "threshold",
                                  "hardshrink", "softshrink", "mish", "parametric_softplus",
                                  "linear_act", "relu", "log_sigmoid"])
def test_float64(name):
    x, got_all = all_activations(np.float64)
    got, ref = got_all[name], reference64(name, x)
    assert got.dtype == np.float64
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref), err_msg=name)
    ok = np.isfinite(ref)
    np.testing.assert_allclose(got[ok], ref[ok], rtol=1e-13, atol=1e-300, err_msg=name)


# ------------------------------------------------------------------ PyTorch frontend

TORCH_MODULES = [
    nn.ELU(0.3), nn.SELU(), nn.CELU(0.7), nn.Softplus(0.5, 8.0), nn.Softsign(),
    nn.Threshold(-0.4, 3.0), nn.Hardshrink(0.8), nn.Softshrink(0.8), nn.Mish(), nn.Identity(),
    nn.Tanhshrink(), nn.LogSigmoid(),
]


def build_torch(model, inputs, trace=False, **ctx):
    model = model.eval()
    source = torch.jit.trace(model, inputs) if trace else model
    f, params = from_pytorch(source, inputs)
    with PassContext(**ctx):
        lib = ember.build(f, params=params)
    m = ember.GraphModule(lib)
    for i, a in enumerate(inputs):
        m.set_input(i, a.numpy())
    m.run()
    return lib, np.asarray(m.get_output(0)).copy()


@pytest.mark.parametrize("trace", [False, True], ids=["export", "trace"])
@pytest.mark.parametrize("module", TORCH_MODULES, ids=lambda m: type(m).__name__)
def test_torch_modules(module, trace):
    x = torch.from_numpy(hard_inputs()[:-3].reshape(1, -1))  # finite inputs
    lib, got = build_torch(module, (x,), trace=trace)
    want = module(x).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    graph = lib.get_source("graph")
    expected = {nn.ELU: "nn.elu", nn.SELU: "nn.selu", nn.CELU: "nn.celu",
                nn.Softplus: "nn.softplus", nn.Threshold: "nn.thresholded_relu",
                nn.Hardshrink: "nn.hardshrink", nn.Softshrink: "nn.softshrink",
                nn.Mish: "nn.mish", nn.LogSigmoid: "nn.log_sigmoid"}.get(type(module))
    if expected:
        assert expected in graph, graph


@pytest.mark.parametrize("norm,shape", [
    (lambda: nn.InstanceNorm2d(3, affine=True), (2, 3, 5, 7)),
    (lambda: nn.InstanceNorm2d(3), (1, 3, 4, 4)),
    (lambda: nn.InstanceNorm1d(4, affine=True, eps=1e-3), (2, 4, 9)),
    (lambda: nn.InstanceNorm3d(2, affine=True), (1, 2, 3, 4, 5)),
], ids=["2d_affine", "2d", "1d", "3d"])
def test_instance_norm(norm, shape):
    torch.manual_seed(0)
    model = norm()
    if model.affine:
        model.weight.data.normal_()
        model.bias.data.normal_()
    x = torch.randn(*shape) * 3 + 1
    lib, got = build_torch(model, (x,))
    with torch.no_grad():
        np.testing.assert_allclose(got, model.eval()(x).numpy(), rtol=1e-4, atol=1e-5)
    assert "nn.instance_norm" in lib.get_source("graph")


def test_instance_norm_with_running_stats_is_a_batch_norm():
    torch.manual_seed(0)
    model = nn.InstanceNorm2d(3, affine=True, track_running_stats=True)
    model.running_mean.normal_()
    model.running_var.uniform_(0.5, 2.0)
    x = torch.randn(2, 3, 4, 4)
    lib, got = build_torch(model, (x,))
    with torch.no_grad():
        np.testing.assert_allclose(got, model.eval()(x).numpy(), rtol=1e-5, atol=1e-5)
    assert "nn.instance_norm" not in lib.get_source("graph")


# ------------------------------------------------------------------ fusion with the anchors

def _bn(c):
    torch.manual_seed(1)
    bn = nn.BatchNorm2d(c)
    bn.running_mean.normal_()
    bn.running_var.uniform_(0.5, 2.0)
    bn.weight.data.normal_()
    return bn


class AddNormAct(nn.Module):
    """A residual add into a layer norm, then an activation: one kernel."""

    def __init__(self, act, shape):
        super().__init__()
        self.norm, self.act = nn.LayerNorm(shape), act

    def forward(self, x, y):
        return self.act(self.norm(x + y))


class BnAfterAdd(nn.Module):
    def __init__(self, act):
        super().__init__()
        self.bn, self.act = _bn(4), act

    def forward(self, x, y):
        return self.act(self.bn(x + y))


FUSION_CASES = [
    ("conv_mish", lambda: nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.Mish()),
     lambda: (torch.randn(1, 3, 9, 9) * 5,), "conv2d+"),
    ("conv_bn_elu", lambda: nn.Sequential(nn.Conv2d(3, 8, 3), _bn(8), nn.ELU()),
     lambda: (torch.randn(1, 3, 9, 9),), "conv2d+"),
    ("linear_softplus", lambda: nn.Sequential(nn.Linear(16, 12), nn.Softplus(1.5, 4.0)),
     lambda: (torch.randn(3, 16) * 6,), "dense+"),
    ("bn_after_add_celu", lambda: BnAfterAdd(nn.CELU(0.5)),
     lambda: (torch.randn(1, 4, 6, 6), torch.randn(1, 4, 6, 6)), "elementwise chain"),
    ("layer_norm_2_axes_selu", lambda: nn.Sequential(nn.LayerNorm([5, 12]), nn.SELU()),
     lambda: (torch.randn(3, 5, 12) * 4,), "layer_norm+"),
    ("add_layer_norm_mish", lambda: AddNormAct(nn.Mish(), 24),
     lambda: (torch.randn(2, 7, 24), torch.randn(2, 7, 24)), "layer_norm+"),
    ("instance_norm_hardshrink",
     lambda: nn.Sequential(nn.InstanceNorm2d(5, affine=True), nn.Hardshrink(0.6)),
     lambda: (torch.randn(2, 5, 6, 10) * 2,), "instance_norm+"),
]


@pytest.mark.parametrize("name,model,inputs,pattern", FUSION_CASES,
                         ids=[c[0] for c in FUSION_CASES])
def test_fuses_into_one_kernel(name, model, inputs, pattern):
    """Each chain can be one kernel, and that kernel computes what the unfused ops do. The
    fusion is forced (cost_model "none"): at these few elements FuseOps' cost rule runs some
    apart, as measured faster (Zen 5, one thread: linear_softplus 0.196 us fused vs 0.109 us
    as two kernels, add_layer_norm_mish 0.46 vs 0.35); its default build must agree too."""
    torch.manual_seed(0)
    model, inputs = model().eval(), inputs()
    lib, fused = build_torch(model, inputs, config={"FuseOps.cost_model": "none"})
    _, unfused = build_torch(model, inputs, disabled_passes=["FuseOps"])
    _, default = build_torch(model, inputs)
    np.testing.assert_allclose(default, unfused, rtol=1e-5, atol=1e-5)
    report = lib.fusion_report()
    assert len(report) == 1, str(report)
    assert any(pattern in p for p in report[0].patterns), str(report)
    np.testing.assert_allclose(fused, unfused, rtol=1e-5, atol=1e-5)
    with torch.no_grad():
        np.testing.assert_allclose(fused, model(*inputs).numpy(), rtol=2e-4, atol=2e-4)


@pytest.mark.parametrize("shape, tile_rows", [((6, 32), 6), ((4, 768), 1)])
def test_layer_norm_epilogue_loop_nest(shape, tile_rows):
    """layer_norm -> gelu lowers to one loop over tiles of rows (parallel where the work is
    worth handing to other threads): the rows' shift (their first element), sum, variance and
    correction (the mean of the centred values) are computed into per-tile locals inside it, then the normalised, activated rows are
    stored with a vectorized loop. Nothing else is allocated and each row is stored once.
    Short rows share a tile (up to 4 KB: the six rows of 32), so their dependent sums
    overlap; a 3 KB row has a tile of its own."""
    x = ir.var("x", shape, "float32")
    y = op.nn.gelu(op.nn.layer_norm(x, name="ln"), name="act")
    # The loop nest of the fused kernel, whatever FuseOps' cost rule says of it on this host.
    with ember.transform.PassContext(config={"FuseOps.cost_model": "none"}):
        lib = ember.build(ir.Function([x], y))
    loops = lib.get_source("loop")
    assert len(lib.fusion_report()) == 1
    lines = loops.splitlines()
    tile = [i for i, l in enumerate(lines) if l.strip().startswith("for ")][:1]
    par = [i for i, l in enumerate(lines) if "parallel" in l]
    assert tile and set(par) <= set(tile), loops
    allocs = [l.strip() for l in lines if "allocate" in l]
    assert allocs == [f"allocate layer_norm_{s}: float32[{tile_rows}]"
                      for s in ("shift", "sum", "var", "fix")], loops
    assert all(i > tile[0] for i, l in enumerate(lines) if "allocate" in l), loops
    stores = [l for l in lines if re.match(r"\s*gelu\[", l)]
    assert len(stores) == 1, loops
    assert any("vectorized" in l for l in lines), loops


# ------------------------------------------------------------------ user errors

def test_errors_name_the_op_and_say_what_to_do():
    x = ir.var("x", (2, 3), "float32")
    msg = error_of(lambda: op.nn.celu(x, 0.0, name="act1"))
    assert "nn.celu" in msg and "act1" in msg and "alpha" in msg and "must not be 0" in msg
    msg = error_of(lambda: op.nn.softshrink(x, -0.5))
    assert "nn.softshrink" in msg and "lambd" in msg and ">= 0" in msg
    msg = error_of(lambda: op.nn.softplus(x, beta=0.0))
    assert "beta" in msg and "must not be 0" in msg
    msg = error_of(lambda: op.nn.elu(x, float("nan")))
    assert "alpha" in msg and "NaN" in msg
    msg = error_of(lambda: op.nn.scaled_tanh(x, float("inf")))
    assert "alpha" in msg and "finite" in msg
    msg = error_of(lambda: op.nn.mish(ir.var("i", (2,), "int32")))
    assert "nn.mish" in msg and "float" in msg and "cast" in msg
    msg = error_of(lambda: op.nn.elu(x, 1.0, 2.0))
    assert "nn.elu" in msg and "at most 1" in msg
    msg = error_of(lambda: op.nn.softplus(x, gamma=1.0))
    assert "unknown attribute 'gamma'" in msg and "beta, threshold" in msg
    msg = error_of(lambda: op.nn.hardshrink(x, "big"))
    assert "lambd" in msg and "number" in msg
    msg = error_of(lambda: op.nn.log_sigmoid(ir.var("i", (3, 5), "int64"), name="ls1"))
    assert "nn.log_sigmoid 'ls1'" in msg and "float" in msg and "cast" in msg


def test_instance_norm_errors():
    msg = error_of(lambda: op.nn.instance_norm(ir.var("x", (3, 4), "float32"), name="in1"))
    assert "nn.instance_norm" in msg and "in1" in msg and "spatial" in msg
    x = ir.var("x", (1, 3, 4, 4), "float32")
    g = ir.const(np.ones(4, np.float32))
    msg = error_of(lambda: op.nn.instance_norm(x, g, ir.const(np.zeros(3, np.float32))))
    assert "gamma" in msg and "[3]" in msg and "one value per channel" in msg
    msg = error_of(lambda: op.nn.instance_norm(x, epsilon=-1.0))
    assert "epsilon" in msg and ">= 0" in msg


def test_frontend_rejects_elu_with_input_scale():
    class M(nn.Module):
        def forward(self, x):
            return torch.ops.aten.elu(x, 1.0, 1.0, 2.0)
    msg = error_of(lambda: from_pytorch(M().eval(), (torch.randn(2, 3),)))
    assert "input_scale" in msg and "nn.elu" in msg
