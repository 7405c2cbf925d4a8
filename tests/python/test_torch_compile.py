"""torch.compile(model, backend="ember"): the entry point, partitioning with fallback to
PyTorch, frozen weights, one build for Dynamo's symbolic sizes (dynamic=True) or one per
shape, gradients, options. Numbers are checked against eager PyTorch (float32; tolerances as
in test_frontend: 1e-4 relative to the output's scale)."""
import os
import random
import subprocess
import sys
import tomllib

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import ember
import models

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
PYTHON_DIR = os.path.abspath(os.path.join(ROOT, "python"))


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def close(got, want, rtol=1e-4):
    scale = want.abs().max().item() or 1.0
    error = (got - want).abs().max().item()
    assert error <= rtol * scale, f"max error {error} vs scale {scale}"


def compiled(model, **kwargs):
    return torch.compile(model, backend="ember", **kwargs)


class CumprodNet(nn.Module):
    """conv -> relu -> cumprod (PyTorch) -> linear -> sigmoid, with logcumsumexp in the middle
    too."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.fc = nn.Linear(4, 6)

    def forward(self, x):
        y = torch.relu(self.conv(x)).mean((2, 3))
        y = torch.cumprod(y, dim=1)
        y = torch.logcumsumexp(self.fc(y), dim=-1)
        return torch.sigmoid(y) * 2


# ------------------------------------------------------------------------- entry point

def test_entry_point_declared_in_pyproject():
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        project = tomllib.load(f)["project"]
    target = project["entry-points"]["torch_dynamo_backends"]["ember"]
    assert target == "ember.torch_compile:ember_backend"
    module, _, name = target.partition(":")
    assert getattr(__import__(module, fromlist=[name]), name) is ember.torch_compile.ember_backend


SCRIPT = """
import sys
{imports}
print("ember imported" if "ember" in sys.modules else "ember not imported")
from torch._dynamo import lookup_backend
assert lookup_backend("ember").__module__ == "ember.torch_compile"
if {compile}:
    run()
print("ok")
"""

COMPILE = """
def run():
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU()).eval()
    x = torch.randn(4, 8)
    with torch.no_grad():
        got = torch.compile(model, backend="ember")(x)
        error = (got - model(x)).abs().max().item()
    assert error < 1e-5, error
    import ember
    report = ember.last_compile_report()
    assert report is not None and report.partitions and report.reason is None, report
"""


def run_script(imports, extra_path=(), compile=False):
    """Looks the backend up by name in a fresh process (and compiles a model with it)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([*extra_path, PYTHON_DIR])
    script = COMPILE + SCRIPT.format(imports=imports, compile=compile)
    result = subprocess.run([sys.executable, "-c", script], env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip().endswith("ok")
    return result.stdout


def test_installed_entry_point_needs_no_import(tmp_path):
    """What `pip install .` gives Dynamo: the package metadata with pyproject's entry point,
    here written by hand; the script never imports ember before torch.compile."""
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        project = tomllib.load(f)["project"]
    version = ember.__version__  # pyproject.toml takes it from CMakeLists.txt (dynamic)
    info = tmp_path / f"ember-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: ember\nVersion: {version}\n")
    group = project["entry-points"]["torch_dynamo_backends"]
    (info / "entry_points.txt").write_text(
        "[torch_dynamo_backends]\n" + "".join(f"{k} = {v}\n" for k, v in group.items()))
    out = run_script("import torch", extra_path=[str(tmp_path)], compile=True)
    assert "ember not imported" in out


@pytest.mark.parametrize("imports", ["import ember\nimport torch",
                                     "import torch._dynamo\nimport ember\nimport torch"])
def test_import_ember_registers_the_backend(imports):
    run_script(imports)


# ----------------------------------------------------------------------------- numerics

@pytest.mark.parametrize("family", ["resnet18", "mobilenet_v2", "encoder"])
def test_zoo_matches_eager(family):
    model, inputs = models.make(family, batch=2)
    with torch.no_grad():
        want = model(*inputs)
        got = compiled(model)(*inputs)
    close(got, want)
    report = ember.last_compile_report()
    assert report.reason is None and not report.fallbacks, report
    assert all(p.error is None for p in report.partitions), report


def test_unsupported_ops_stay_in_pytorch_and_are_reported(caplog):
    torch.manual_seed(0)
    model = CumprodNet().eval()
    x = torch.randn(2, 3, 8, 8)
    with torch.no_grad(), caplog.at_level("INFO", logger="ember"):
        got = compiled(model)(x)
        want = model(x)
    close(got, want)
    report = ember.last_compile_report()
    fallen = {op: reason for _, op, reason in report.fallbacks}
    assert "does not support aten.cumprod" in fallen["aten.cumprod"]
    assert "does not support aten.logcumsumexp" in fallen["aten.logcumsumexp"]
    ember_ops = [op for p in report.partitions for op in p.ops]
    for op in ("aten.conv2d", "aten.relu", "aten.mean", "aten.linear", "aten.sigmoid"):
        assert op in ember_ops, report
    assert len(report.partitions) == 3  # conv..mean | linear | sigmoid*2
    assert "PyTorch runs aten.cumprod" in caplog.text


class StridedView(nn.Module):
    """torch.as_strided of a computed, transposed value (Longformer's sliding windows do
    this): it reads the value's storage as eager lays it out."""

    def forward(self, a):
        y = (a * 2 + 1).transpose(1, 2)
        return torch.relu(torch.as_strided(y, (4, 3), (1, 4))) * 3


def test_a_strided_view_of_a_computed_value_runs_the_graph_in_pytorch():
    """An Ember partition returns (a * 2 + 1).transpose(1, 2) as a fresh contiguous tensor,
    so the as_strided after it read other elements than eager (a silent wrong answer, max
    error 14 here). The graph now runs in PyTorch, and the report says why."""
    a = torch.randn(1, 3, 4)
    with torch.no_grad():
        got = compiled(StridedView())(a)
    close(got, StridedView()(a))
    report = ember.last_compile_report()
    assert not report.partitions and "reads the memory layout" in report.reason, report


class Rejected(nn.Module):
    """Ops Ember has, with arguments it rejects: an average pool with a divisor override and
    sin of a float64 tensor. They run in PyTorch; the rest in Ember."""

    def forward(self, x):
        y = F.avg_pool2d(torch.relu(x), 2, divisor_override=3)
        z = torch.sin(y.double()).float()
        return torch.tanh(z) + 1


def test_rejected_attributes_fall_back():
    torch.manual_seed(0)
    model = Rejected().eval()
    x = torch.randn(1, 4, 5, 5)
    with torch.no_grad():
        got = compiled(model)(x)
        want = model(x)
    close(got, want)
    report = ember.last_compile_report()
    fallen = {op: reason for _, op, reason in report.fallbacks}
    assert "divisor_override" in fallen["aten.avg_pool2d"], report
    assert "float32 only" in fallen["aten.sin"], report
    assert any("aten.tanh" in p.ops for p in report.partitions), report


def test_results_are_never_overwritten():
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU()).eval()
    x1, x2 = torch.randn(3, 8), torch.randn(3, 8)
    with torch.no_grad():
        fast = compiled(model)
        y1 = fast(x1)
        y2 = fast(x2)
        close(y1, model(x1))
        close(y2, model(x2))
    assert y1.data_ptr() != y2.data_ptr()


def test_new_shapes_build_new_modules():
    """Automatic dynamic shapes: Dynamo recompiles the second shape with symbolic sizes.
    Ember cannot yet build a convolution over run-time spatial sizes, so after that one
    try the graph is built per concrete shape, and the report says why."""
    torch.manual_seed(0)
    model = CumprodNet().eval()
    fast = compiled(model, dynamic=None)
    shapes = []
    with torch.no_grad():
        for size in (8, 9, 11):
            x = torch.randn(2, 3, size, size)
            close(fast(x), model(x))
            report = ember.last_compile_report()
            assert report.reason is None and not report.symbols
            shapes.append(report.shapes[-1])
    assert shapes == [(2, 3, 8, 8), (2, 3, 9, 9), (2, 3, 11, 11)]
    assert "the build for run-time sizes (build 1) is not used" in report.note, report
    assert "conv2d" in report.note, report
    tried = report.builds[0]  # the build for ranges, whose conv2d partition failed
    assert len(report.builds) == 3 and tried.symbols and tried.partitions[0].error, report


# --------------------------------------------------------- symbolic sizes (issue 44)

class SeqMLP(nn.Module):
    """[batch, seq, hidden] -> linear, LayerNorm, GELU, linear, softmax over hidden."""

    def __init__(self, hidden=32):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(hidden, 2 * hidden), nn.Linear(2 * hidden, hidden)
        self.norm = nn.LayerNorm(2 * hidden)

    def forward(self, x):
        return torch.softmax(self.fc2(F.gelu(self.norm(self.fc1(x)))), dim=-1)


class TinyBlock(nn.Module):
    """A pre-norm transformer block over [batch, seq, hidden]: two-head attention written
    with matmul and softmax (its scores are [batch, heads, seq, seq]), then an MLP."""

    def __init__(self, hidden=32, heads=2):
        super().__init__()
        self.heads = heads
        self.qkv, self.proj = nn.Linear(hidden, 3 * hidden), nn.Linear(hidden, hidden)
        self.norm1, self.norm2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)
        self.mlp = nn.Sequential(nn.Linear(hidden, 2 * hidden), nn.GELU(),
                                 nn.Linear(2 * hidden, hidden))

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).reshape(b, n, 3, self.heads, d // self.heads) \
            .permute(2, 0, 3, 1, 4).unbind(0)
        scores = q @ k.transpose(-1, -2) / (d // self.heads) ** 0.5
        attended = (torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(b, n, d)
        x = x + self.proj(attended)
        return x + self.mlp(self.norm2(x))


def random_lengths(count, seed=0, longest=64):
    rng = random.Random(seed)
    return [(rng.randint(2, 4), rng.randint(2, longest)) for _ in range(count)]


@pytest.mark.parametrize("make", [SeqMLP, TinyBlock])
def test_dynamic_true_builds_once_for_twenty_lengths(make):
    """dynamic=True: Dynamo passes symbolic batch and sequence sizes (and the sizes as int
    inputs); Ember builds the graph once for their ranges and runs every length with it."""
    torch.manual_seed(0)
    model = make().eval()
    fast = compiled(model, dynamic=True)
    with torch.no_grad():
        for i, (batch, seq) in enumerate(random_lengths(20)):
            x = torch.randn(batch, seq, 32)
            close(fast(x), model(x))
            if i == 0:
                first = ember.last_compile_report()
    report = ember.last_compile_report()
    assert report is first and len(report.builds) == 1, report  # one graph, one build
    assert report.reason is None and report.note is None and not report.fallbacks, report
    assert all(p.error is None for p in report.partitions), report
    sources = sorted(source for _, _, source in report.symbols.values())
    assert sources == ["L['x'].size(0)", "L['x'].size(1)"], report
    assert all((lo, hi) == (2, 256) for lo, hi, _ in report.symbols.values()), report
    assert "run-time sizes" in str(report) and "build 1 of 1" in str(report)


def test_a_size_past_the_range_rebuilds_wider():
    """An unbounded size is built up to dynamic_max; a longer one rebuilds the graph with
    that symbol's maximum doubled until it fits. Sizes inside the ranges reuse the build."""
    torch.manual_seed(0)
    model = SeqMLP().eval()
    fast = compiled(model, dynamic=True, options={"dynamic_max": 16})
    with torch.no_grad():
        for seq in (5, 12, 40, 16, 64, 3):
            x = torch.randn(3, seq, 32)
            close(fast(x), model(x))
    report = ember.last_compile_report()
    assert len(report.builds) == 2, report
    ranges = sorted((lo, hi) for lo, hi, _ in report.symbols.values())
    assert ranges == [(2, 16), (2, 64)], report  # batch, then seq: 16 -> 32 -> 64
    assert sorted(hi for _, hi, _ in report.builds[0].symbols.values()) == [16, 16]


def test_mark_dynamic_gives_the_range():
    """Dynamo's own bound (mark_dynamic's max) is the build's range; other sizes stay
    static."""
    torch.manual_seed(0)
    model = SeqMLP().eval()
    fast = compiled(model)
    with torch.no_grad():
        for seq in (10, 30):
            x = torch.randn(3, seq, 32)
            torch._dynamo.mark_dynamic(x, 1, min=2, max=48)
            close(fast(x), model(x))
    report = ember.last_compile_report()
    assert list(report.symbols.values()) == [(2, 48, "L['x'].size(1)")], report
    assert len(report.builds) == 1 and report.shapes[-1][0] == 3, report


def test_dynamic_false_builds_per_shape():
    """dynamic=False: Dynamo compiles each shape as its own static graph; Ember builds each
    for its concrete shapes, as before."""
    torch.manual_seed(0)
    model = SeqMLP().eval()
    fast = compiled(model, dynamic=False)
    graphs = set()
    with torch.no_grad():
        for seq in (5, 9, 17):
            x = torch.randn(2, seq, 32)
            close(fast(x), model(x))
            report = ember.last_compile_report()
            assert report.shapes == [(2, seq, 32)] and not report.symbols, report
            assert len(report.builds) == 1 and report.note is None, report
            graphs.add(report.graph_id)
    assert len(graphs) == 3


def test_a_build_that_disagrees_with_pytorch_is_not_used(monkeypatch):
    """The first call of a build for ranges is checked against PyTorch: one that differs
    (here made to, as FuseOps with run-time sizes still does for nn.MultiheadAttention) is
    replaced by builds per shape, and the note says why."""
    from ember.torch_compile import _runner
    forward = _runner.EmberPartition.forward
    monkeypatch.setattr(_runner.EmberPartition, "forward",
                        lambda self, *args: forward(self, *args) + 1)
    fast = compiled(SeqMLP().eval(), dynamic=True)
    with torch.no_grad():
        fast(torch.randn(2, 5, 32))
    report = ember.last_compile_report()
    assert "differs from PyTorch's" in report.note and not report.symbols, report
    assert len(report.builds) == 2 and report.builds[0].symbols, report


def test_multihead_attention_builds_once():
    """nn.MultiheadAttention with a run-time batch: a dense over a [S*B, E] view, reshaped and
    transposed, in one kernel (a view inside a group indexes by the run's shapes)."""
    model, _ = models.make("mha_encoder", 2)
    fast = compiled(model.eval(), dynamic=True)
    with torch.no_grad():
        for batch in (2, 3):
            x = models.make("mha_encoder", batch)[1][0]
            close(fast(x), model(x))
    assert ember.last_compile_report().symbols, ember.last_compile_report()


class Clipped(nn.Module):
    """ReLU6-like bounds as module floats: under dynamic=True Dynamo passes them as 0-d
    tensors read with .item() and does not recompile when they change."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.act = nn.Hardtanh(0.0, 6.0)

    def forward(self, x):
        return self.act(self.fc(x) * 4)


def test_numbers_passed_as_tensors_are_constants_of_a_build():
    torch.manual_seed(0)
    model = Clipped().eval()
    fast = compiled(model, dynamic=True)
    with torch.no_grad():
        for seq, bound in ((5, 6.0), (7, 6.0), (6, 1.5)):
            model.act.max_val = bound
            x = torch.randn(3, seq, 8)
            close(fast(x), model(x))
    report = ember.last_compile_report()
    assert report.symbols and report.reason is None and not report.fallbacks, report
    assert len(report.builds) == 2, report  # the second for max_val = 1.5


class Prefix(nn.Module):
    """Takes an int: under dynamic=True Dynamo makes it a symbolic size of no tensor."""

    def forward(self, x, n):
        return torch.relu(x[:, :n]) * 2


def test_an_int_argument_builds_per_value():
    x = torch.randn(3, 10)
    fast = compiled(Prefix(), dynamic=True)
    with torch.no_grad():
        for n in (4, 6):
            close(fast(x, n), Prefix()(x, n))
    report = ember.last_compile_report()
    assert "no tensor input's dimension" in report.note, report
    assert len(report.builds) == 2 and not report.symbols, report


def test_gradients_fall_back_to_pytorch():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.Tanh())
    reference = nn.Sequential(nn.Linear(4, 4), nn.Tanh())
    reference.load_state_dict(model.state_dict())
    x = torch.randn(2, 4)
    compiled(model)(x).sum().backward()
    reference(x).sum().backward()
    report = ember.last_compile_report()
    assert "inference only" in report.reason and "torch.no_grad" in report.reason
    close(model[0].weight.grad, reference[0].weight.grad)


def test_weights_are_frozen_until_reset():
    model = nn.Linear(4, 4).eval()
    x = torch.randn(2, 4)
    with torch.no_grad():
        before = model(x)
        fast = compiled(model)
        close(fast(x), before)
        model.weight.mul_(2)
        close(fast(x), before)  # documented: the build holds the old weights
        torch._dynamo.reset()
        close(compiled(model)(x), model(x))


def test_each_instance_gets_its_own_weights():
    """Dynamo runs one graph for every nn.Linear (its weights are graph inputs): each
    instance must still compute with its own frozen weights."""
    torch.manual_seed(0)
    a, b = nn.Linear(4, 4).eval(), nn.Linear(4, 4).eval()
    x = torch.randn(2, 4)
    with torch.no_grad():
        close(compiled(a)(x), a(x))
        close(compiled(b)(x), b(x))
        close(compiled(a)(x), a(x))


def test_options_reach_the_pass_context():
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU()).eval()
    x = torch.randn(2, 8)
    threads = ember.get_num_threads()
    kernels = {}
    try:
        for disabled in ([], ["FuseOps"]):
            torch._dynamo.reset()
            with torch.no_grad():
                got = compiled(model, options={"opt_level": 3, "disabled_passes": disabled,
                                               "num_threads": 1})(x)
            close(got, model(x))
            kernels[bool(disabled)] = ember.last_compile_report().partitions[0].kernels
            assert ember.get_num_threads() == 1
    finally:
        ember.set_num_threads(threads)
    assert len(kernels[False]) == 1 and len(kernels[True]) > 1, kernels


@pytest.mark.parametrize("options, message", [
    ({"opt_levle": 3}, "unknown option"),
    ({"tuning_log": 42}, "tuning_log"),
    ({"num_threads": 0}, "num_threads"),
    ({"dynamic_max": 1}, "dynamic_max"),
    ({"disabled_passes": ["NoSuchPass"]}, "unknown pass"),
])
def test_bad_options_are_clear_errors(options, message):
    gm = torch.fx.symbolic_trace(nn.ReLU())
    with pytest.raises(ember.EmberError, match=message):
        ember.torch_compile.ember_backend(gm, [torch.randn(2)], options=options)
    with pytest.raises(Exception, match=message):
        with torch.no_grad():
            compiled(nn.ReLU(), options=options)(torch.randn(2))
