"""The `ember` command (python -m ember): compile, inspect, run, bench; exit codes 0 (ok),
1 (user error: one line on stderr, no traceback) and 2 (usage)."""
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))

import ember  # noqa: E402
from ember import ir, op  # noqa: E402


def ember_cli(*args, cwd=None):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "python"), env.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, "-m", "ember", *map(str, args)], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=300)


def assert_user_error(result, *words):
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    for word in words:
        assert word in result.stderr, result.stderr


@pytest.fixture(scope="module")
def artifact(tmp_path_factory):
    """A two-input, two-output model, exported, with its inputs and in-memory outputs."""
    d = tmp_path_factory.mktemp("cli")
    rng = np.random.RandomState(0)
    x = ir.var("x", shape=(2, 16))
    s = ir.var("scale", shape=(2, 8))
    w = ir.const(rng.rand(8, 16).astype("float32"), name="fc.weight")
    h = op.nn.relu(op.nn.dense(x, w, name="fc"), name="relu")
    lib = ember.build(ir.Function([x, s], ir.Tuple([op.multiply(h, s), op.tanh(x)])))
    inputs = {"x": rng.rand(2, 16).astype("float32"), "scale": rng.rand(2, 8).astype("float32")}
    m = ember.GraphModule(lib)
    m.set_input(**inputs)
    m.run()
    expected = [m.get_output(i).numpy() for i in range(2)]
    lib.export(d / "m.ember")
    for name, value in inputs.items():
        np.save(d / f"{name}.npy", value)
    return d, expected


def test_help_and_usage_errors():
    top = ember_cli("--help")
    assert top.returncode == 0
    for command in ("compile", "inspect", "run", "bench"):
        assert command in top.stdout
    sub = ember_cli("compile", "--help")
    assert sub.returncode == 0 and "--disable-pass" in sub.stdout and "--opt-level" in sub.stdout
    assert ember_cli().returncode == 2
    assert ember_cli("frobnicate").returncode == 2
    assert ember_cli("bench", "m.ember", "--repeat", "many").returncode == 2


def test_inspect(artifact):
    d, _ = artifact
    result = ember_cli("inspect", d / "m.ember")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    for text in ("input    x: float32[2, 16]", "input    scale: float32[2, 8]",
                 "output   0: float32[2, 8]", "output   1: float32[2, 16]", "cpu.so",
                 "nn.dense_packed -> nn.relu -> multiply", "params   1 tensors",
                 "schedule", " gemm."):  # the template; its path may differ by CPU
        assert text in out, out


def test_run_matches_in_memory_outputs(artifact, tmp_path):
    d, expected = artifact
    # Inputs by name, in any order.
    result = ember_cli("run", d / "m.ember", "--input", f"scale={d / 'scale.npy'}",
                       "--input", f"x={d / 'x.npy'}", "--output", tmp_path / "y0.npy",
                       "--output", tmp_path / "y1.npy")
    assert result.returncode == 0, result.stderr
    assert "output 0: float32[2, 8]" in result.stdout
    for i in range(2):
        assert np.load(tmp_path / f"y{i}.npy").tobytes() == expected[i].tobytes()
    # --no-cuda-graph (a GPU switch) is accepted and changes nothing on the CPU.
    result = ember_cli("run", d / "m.ember", "--no-cuda-graph", "--input", d / "x.npy",
                       "--input", d / "scale.npy", "--output", tmp_path / "z0.npy")
    assert result.returncode == 0, result.stderr
    assert np.load(tmp_path / "z0.npy").tobytes() == expected[0].tobytes()


def test_run_errors(artifact, tmp_path):
    d, _ = artifact
    m = d / "m.ember"
    assert_user_error(ember_cli("run", tmp_path / "none.ember", "--input", d / "x.npy"),
                      "no such file")
    assert_user_error(ember_cli("run", m, "--input", d / "x.npy"), "missing: scale")
    assert_user_error(ember_cli("run", m, "--input", f"y={d / 'x.npy'}"),
                      "no input 'y'", "x, scale")
    # A wrong shape is the executor's message, naming the input.
    assert_user_error(ember_cli("run", m, "--input", d / "scale.npy", "--input", d / "x.npy"),
                      "input 'x' expects float32(2, 16)")
    (tmp_path / "junk.ember").write_bytes(b"junk")
    assert_user_error(ember_cli("inspect", tmp_path / "junk.ember"), "not an Ember artifact")


def test_bench(artifact):
    d, _ = artifact
    result = ember_cli("bench", d / "m.ember", "--repeat", "5", "--input", f"x={d / 'x.npy'}")
    assert result.returncode == 0, result.stderr
    assert "Execution time summary" in result.stdout and "mean (ms)" in result.stdout
    result = ember_cli("bench", d / "m.ember", "--repeat", "2", "--no-cuda-graph")
    assert result.returncode == 0 and "Execution time summary" in result.stdout, result.stderr
    assert_user_error(ember_cli("bench", d / "m.ember", "--repeat", "0"), "at least 1")


def test_compile_a_saved_torch_program(tmp_path):
    torch = pytest.importorskip("torch")
    try:
        from ember.frontend import from_pytorch  # noqa: F401
    except ImportError as e:
        pytest.skip(f"the PyTorch frontend is not available: {e}")

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
            self.fc = torch.nn.Linear(8, 4)

        def forward(self, image):
            return self.fc(torch.relu(self.conv(image)).mean((2, 3)))

    torch.manual_seed(0)
    net = Net().eval()
    x = torch.randn(1, 3, 12, 12)
    torch.export.save(torch.export.export(net, (x,)), tmp_path / "net.pt2")
    np.save(tmp_path / "x.npy", x.numpy())

    result = ember_cli("compile", tmp_path / "net.pt2", "-o", tmp_path / "net.ember",
                       "--input-name", "pixels", "--disable-pass", "FuseOps", "--opt-level", "2")
    assert result.returncode == 0, result.stderr
    inspect = ember_cli("inspect", tmp_path / "net.ember").stdout
    assert "input    pixels: float32[1, 3, 12, 12]" in inspect
    assert "FuseOps is disabled" in inspect  # the pass options reached ember.build

    result = ember_cli("run", tmp_path / "net.ember", "--input", tmp_path / "x.npy",
                       "--output", tmp_path / "y.npy")
    assert result.returncode == 0, result.stderr
    with torch.no_grad():
        want = net(x).numpy()
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), want, rtol=1e-4, atol=1e-5)

    assert_user_error(ember_cli("compile", tmp_path / "net.pt2", "--disable-pass", "NoSuch"),
                      "unknown pass 'NoSuch'")
    (tmp_path / "bad.pt2").write_text("not a program")
    assert_user_error(ember_cli("compile", tmp_path / "bad.pt2"), "cannot read")


def test_tune_then_compile_with_the_log(tmp_path):
    torch = pytest.importorskip("torch")
    net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU()).eval()
    x = torch.randn(4, 16)
    torch.export.save(torch.export.export(net, (x,)), tmp_path / "mlp.pt2")
    log = tmp_path / "mlp.tune.json"
    result = ember_cli("tune", tmp_path / "mlp.pt2", "--trials", "3", "--log", log,
                       "--threads", "1")
    assert result.returncode == 0, result.stderr
    assert "default ms" in result.stdout and "3/" in result.stdout, result.stdout
    assert sum('"final"' not in line for line in log.read_text().splitlines()) == 3
    result = ember_cli("compile", tmp_path / "mlp.pt2", "--tuning-log", log, "-o",
                       tmp_path / "mlp.ember")
    assert result.returncode == 0, result.stderr
    assert "(1 tuned)" in result.stdout, result.stdout
    assert_user_error(ember_cli("tune", tmp_path / "mlp.pt2", "--trials", "0"), "--trials")
