"""Saved models: Library.export and ember.load.

A model exported here is loaded in a FRESH process (and by the C++ lesson, and by a
runtime-only build) and must give the in-memory outputs bit for bit. Damaged or foreign
files must give clear EmberErrors, and one loaded model must run from 4 threads at once.

This file is also a helper script (no pytest needed):
    python test_deploy.py --lesson-files DIR   writes model.ember, x.npy, expected.npy for
                                               tutorials/04_deploy_cpp.cc (its ctest fixture)
    python test_deploy.py --run-dir DIR        loads every DIR/*.ember, runs it on its saved
                                               inputs and saves the outputs (the fresh process)
"""
import json
import os
import pathlib
import re
import shutil
import struct
import subprocess
import sys
import threading

import numpy as np
import pytest

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "python"))

import ember  # noqa: E402
from ember import EmberError  # noqa: E402


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "python"), env.get("PYTHONPATH", "")])
    return env


# ------------------------------------------------------------------------------ models
def _rand(*shape, seed=0):
    return np.random.RandomState(seed).uniform(-1, 1, shape).astype("float32")


def conv_bn_relu():
    from ember import ir, op
    x = ir.var("x", shape=(1, 3, 16, 16))
    w = ir.var("conv1.weight", shape=(8, 3, 3, 3))
    stats = [ir.var(f"bn1.{n}", shape=(8,)) for n in ("weight", "bias", "mean", "var")]
    y = op.nn.conv2d(x, w, strides=(1, 1), padding=(1, 1), name="conv1")
    y = op.nn.relu(op.nn.batch_norm(y, *stats, name="bn1"), name="relu")
    params = {"conv1.weight": _rand(8, 3, 3, 3, seed=1), "bn1.weight": _rand(8, seed=2) + 1.5,
              "bn1.bias": _rand(8, seed=3), "bn1.mean": _rand(8, seed=4),
              "bn1.var": _rand(8, seed=5) + 1.5}
    lib = ember.build(ir.Function([x, w] + stats, y), params=params)
    return lib, [_rand(1, 3, 16, 16, seed=6)]


def mlp_two_outputs():
    from ember import ir, op
    a = ir.var("a", shape=(4, 32))
    b = ir.var("b", shape=(4, 32))
    w1 = ir.const(_rand(64, 32, seed=1), name="fc1.weight")
    w2 = ir.const(_rand(10, 64, seed=2), name="fc2.weight")
    h = op.nn.gelu(op.nn.dense(a, w1, name="fc1"))
    out1 = op.nn.softmax(op.nn.dense(h, w2, name="fc2"))
    out2 = op.reshape(op.multiply(b, op.sigmoid(b)), (2, 2, 32))
    lib = ember.build(ir.Function([a, b], ir.Tuple([out1, out2])))
    return lib, [_rand(4, 32, seed=3), _rand(4, 32, seed=4)]


def ints_and_bools():
    from ember import ir, op
    idx = ir.var("idx", shape=(5,), dtype="int64")
    x = ir.var("x", shape=(5, 8))
    table = ir.const(_rand(10, 8, seed=1), name="embedding.weight")
    out = ir.Tuple([op.add(op.take(table, idx), x), op.greater(x, ir.const(np.float32(0)))])
    lib = ember.build(ir.Function([idx, x], out))
    return lib, [np.array([3, 0, 9, 3, 1], dtype="int64"), _rand(5, 8, seed=2)]


HAND_BUILT = {"conv_bn_relu": conv_bn_relu, "mlp_two_outputs": mlp_two_outputs,
              "ints_and_bools": ints_and_bools}


def _zoo():
    """The frontend's model families (tests/python/models.py), when that file exists."""
    if not (HERE / "models.py").exists():
        return {}
    try:
        import torch  # noqa: F401
    except ImportError:
        return {}
    sys.path.insert(0, str(HERE))
    import models

    def case(family):
        def make():
            import torch
            from ember.frontend import from_pytorch
            model, inputs = models.make(family)
            with torch.no_grad():
                mod, params = from_pytorch(model, inputs)
            arrays = [t.numpy() for t in inputs]
            return ember.build(mod, params=params), arrays
        return make
    return {f"zoo_{family}": case(family) for family in models.FAMILIES}


def _run(module, inputs):
    for i, value in enumerate(inputs):
        module.set_input(i, value)
    module.run()
    return [module.get_output(i).numpy() for i in range(module.get_num_outputs())]


# ------------------------------------------------------------------------------ round trips
@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """Builds every case, runs it in memory, exports it, then runs all the artifacts in ONE
    fresh Python process. Returns (dir, {name: skip reason or None})."""
    d = tmp_path_factory.mktemp("deploy")
    status = {}
    for name, make in {**HAND_BUILT, **_zoo()}.items():
        try:
            lib, inputs = make()
        except Exception as e:  # a model the frontend cannot import yet is not ours to test
            if name in HAND_BUILT:
                raise
            status[name] = f"{type(e).__name__}: {str(e)[:200]}"
            continue
        outputs = _run(ember.GraphModule(lib), inputs)
        lib.export(d / f"{name}.ember")
        for i, value in enumerate(inputs):
            np.save(d / f"{name}.in{i}.npy", value)
        for i, value in enumerate(outputs):
            np.save(d / f"{name}.expected{i}.npy", value)
        status[name] = None
    done = subprocess.run([sys.executable, __file__, "--run-dir", str(d)], env=_env(),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return d, status


ALL_CASES = list(HAND_BUILT) + list(_zoo())


LESSON = ROOT / "build" / "tutorial_04_deploy_cpp"


@pytest.mark.parametrize("name", ALL_CASES)
def test_cpp_lesson_matches_bit_for_bit(exported, name):
    """The same artifacts, loaded and run by the C++ lesson (linked only with ember_runtime)."""
    d, status = exported
    if status[name] is not None:
        pytest.skip(f"the model does not build yet: {status[name]}")
    if not LESSON.exists():
        pytest.skip(f"{LESSON} is not built (bash scripts/build.sh builds it)")
    inputs = ",".join(str(p) for p in sorted(d.glob(f"{name}.in*.npy")))
    expected = ",".join(str(p) for p in sorted(d.glob(f"{name}.expected*.npy")))
    done = subprocess.run([str(LESSON), str(d / f"{name}.ember"), inputs, expected],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "bit for bit" in done.stdout


@pytest.mark.parametrize("name", ALL_CASES)
def test_fresh_process_matches_bit_for_bit(exported, name):
    d, status = exported
    if status[name] is not None:
        pytest.skip(f"the model does not build yet: {status[name]}")
    error = d / f"{name}.error.txt"
    assert not error.exists(), error.read_text()
    expected = sorted(d.glob(f"{name}.expected*.npy"))
    assert expected
    for path in expected:
        got = np.load(str(path).replace(".expected", ".out"))
        want = np.load(path)
        assert got.dtype == want.dtype and got.shape == want.shape
        # Bit for bit: the artifact holds the very code the JIT ran.
        assert got.tobytes() == want.tobytes(), f"{path.name}: max diff {np.abs(got - want).max()}"


def test_loaded_library_reports(tmp_path):
    lib, inputs = conv_bn_relu()
    lib.export(tmp_path / "m.ember")
    loaded = ember.load(str(tmp_path / "m.ember"))
    assert isinstance(loaded, ember.LoadedLibrary)
    assert loaded.target == "llvm" and loaded.input_names == lib.input_names
    assert loaded.kernel_names == lib.kernel_names
    assert loaded._kernels() == lib._kernels()
    assert loaded._fusion_decisions() == lib._fusion_decisions()
    info = loaded._info()
    assert info["inputs"] == [("x", ((1, 3, 16, 16), "float32"))]
    assert info["outputs"] == [((1, 8, 16, 16), "float32")]
    assert [kind for kind, _ in info["sections"]] == ["graph", "params", "cpu.so"]
    assert info["file_bytes"] == os.path.getsize(tmp_path / "m.ember")
    with pytest.raises(EmberError, match="no 'll' source"):
        loaded.get_source("ll")
    # A wrong input is still the executor's clear error.
    m = ember.GraphModule(loaded)
    with pytest.raises(EmberError, match=r"input 'x' expects float32\(1, 3, 16, 16\)"):
        m.set_input("x", np.zeros((1, 3, 8, 8), "float32"))


def test_four_threads_on_one_loaded_model(tmp_path):
    lib, _ = mlp_two_outputs()
    lib.export(tmp_path / "m.ember")
    loaded = ember.load(tmp_path / "m.ember")  # os.PathLike works too
    inputs = [[_rand(4, 32, seed=10 + t), _rand(4, 32, seed=20 + t)] for t in range(4)]
    expected = [_run(ember.GraphModule(lib), x) for x in inputs]
    failures = []

    def worker(t):
        m = ember.GraphModule(loaded)  # own buffers; parameters and code are shared
        for _ in range(30):
            for got, want in zip(_run(m, inputs[t]), expected[t]):
                if got.tobytes() != want.tobytes():
                    failures.append(t)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert failures == []


# ------------------------------------------------------------------------------ bad files
@pytest.fixture(scope="module")
def good_bytes(tmp_path_factory):
    path = tmp_path_factory.mktemp("good") / "m.ember"
    conv_bn_relu()[0].export(path)
    return path.read_bytes()


def _load_bytes(tmp_path, data):
    path = tmp_path / "bad.ember"
    path.write_bytes(data)
    return ember.load(path)


def test_missing_and_foreign_files(tmp_path, good_bytes):
    with pytest.raises(EmberError, match="cannot open artifact .*no such file"):
        ember.load(tmp_path / "nope.ember")
    with pytest.raises(EmberError, match="not an Ember artifact"):
        _load_bytes(tmp_path, b"PK\x03\x04 a zip file, say a torch .pt2")
    with pytest.raises(EmberError, match="not an Ember artifact"):
        _load_bytes(tmp_path, b"")
    with pytest.raises(EmberError, match="path must be a str"):
        ember.load(42)
    with pytest.raises(EmberError, match="cannot read"):
        ember.load(tmp_path)  # a directory


def test_truncated_corrupted_and_other_version(tmp_path, good_bytes):
    for cut in (10, 40, len(good_bytes) // 2, len(good_bytes) - 1):
        with pytest.raises(EmberError, match="truncated"):
            _load_bytes(tmp_path, good_bytes[:cut])
    version = bytearray(good_bytes)
    version[8:12] = struct.pack("<I", 2)
    with pytest.raises(EmberError, match="format version 2, but this Ember reads version 1"):
        _load_bytes(tmp_path, bytes(version))
    for offset, section in ((17, "header"), (len(good_bytes) - 50, "cpu.so")):
        damaged = bytearray(good_bytes)
        damaged[offset] ^= 0x04
        with pytest.raises(EmberError, match=f"corrupted.*{section}"):
            _load_bytes(tmp_path, bytes(damaged))
    # Damage inside the params section: the checksum names it.
    params_at = good_bytes.index(b"EMBERLIB") + 16 + 32 + 8  # second table entry's offset
    offset = struct.unpack("<Q", good_bytes[params_at:params_at + 8])[0]
    damaged = bytearray(good_bytes)
    damaged[offset + 3] ^= 0x80
    with pytest.raises(EmberError, match="checksum of section 'params'"):
        _load_bytes(tmp_path, bytes(damaged))


def test_export_errors(tmp_path):
    lib, _ = conv_bn_relu()
    with pytest.raises(EmberError, match="cannot write the artifact"):
        lib.export(tmp_path / "no" / "such" / "dir" / "m.ember")
    with pytest.raises(EmberError, match="path must be a str"):
        lib.export(3)


def test_export_without_a_compiler_is_a_clear_error(tmp_path, monkeypatch):
    lib, _ = conv_bn_relu()
    monkeypatch.setenv("PATH", str(tmp_path))  # no c++ here
    with pytest.raises(EmberError, match="no 'c\\+\\+' on PATH"):
        lib.export(tmp_path / "m.ember")


def _gpu_lib():
    from ember import ir, op
    x = ir.var("x", shape=(4, 32))
    w = ir.const(_rand(16, 32, seed=1), name="fc.weight")
    f = ir.Function([x], op.nn.softmax(op.nn.relu(op.nn.dense(op.exp(x), w, name="fc"))))
    try:
        return ember.build(f, target="cuda"), ember.build(f, target="llvm")
    except EmberError as e:
        pytest.skip(f"target cuda does not build here: {e}")


def test_gpu_artifact_loads_without_a_gpu(tmp_path, capsys):
    """A target="cuda" artifact loads anywhere (the runtime keeps its PTX and launch dims);
    only running it needs a GPU."""
    lib, _ = _gpu_lib()
    lib.export(tmp_path / "gpu.ember")
    loaded = ember.load(tmp_path / "gpu.ember")
    assert isinstance(loaded, ember.LoadedLibrary)
    assert loaded.target == "cuda"
    assert loaded.input_names == ["x"] and loaded.kernel_names == lib.kernel_names
    assert len(loaded.kernel_names) >= 2
    assert loaded._kernels() == lib._kernels()
    info = loaded._info()
    assert info["code"] == "ptx" and info["cpu"] == ""
    assert [kind for kind, _ in info["sections"]] == ["graph", "params", "ptx"]
    assert loaded.get_source("ptx") == lib.get_source("ptx")
    with pytest.raises(EmberError, match="no 'll' source.*only the PTX"):
        loaded.get_source("ll")
    from ember import cli
    assert cli.main(["inspect", str(tmp_path / "gpu.ember")]) == 0
    out = capsys.readouterr().out
    assert "target   cuda (PTX for sm_80" in out and "ptx " in out


@pytest.mark.skipif(ember.cuda_available(), reason="a GPU is present")
def test_running_a_gpu_artifact_without_a_gpu_is_the_clear_error(tmp_path):
    lib, _ = _gpu_lib()
    lib.export(tmp_path / "gpu.ember")
    loaded = ember.load(tmp_path / "gpu.ember")
    with pytest.raises(EmberError) as built:
        ember.GraphModule(lib)
    with pytest.raises(EmberError) as from_file:
        ember.GraphModule(loaded)
    # The very error a fresh build gives: no driver (or no GPU), and what to do instead.
    assert str(from_file.value) == str(built.value)
    assert re.search(r"no CUDA (driver|GPU) found.*target=\"llvm\"", str(from_file.value))


@pytest.mark.skipif(not ember.cuda_available(), reason="no CUDA GPU: kernels not run")
def test_loaded_gpu_artifact_matches_the_cpu_build(tmp_path):
    lib, cpu = _gpu_lib()
    lib.export(tmp_path / "gpu.ember")
    m = ember.GraphModule(ember.load(tmp_path / "gpu.ember"))
    assert m.device == "cuda:0"
    x = _rand(4, 32, seed=7)
    (want,) = _run(ember.GraphModule(cpu), [x])
    (got,) = _run(m, [x])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------------------ runtime only
def _commands(build, target):
    return subprocess.run(["ninja", "-C", str(build), "-t", "commands", target], check=True,
                          capture_output=True, text=True).stdout


@pytest.mark.skipif(shutil.which("cmake") is None or shutil.which("ninja") is None,
                    reason="needs cmake and ninja")
def test_runtime_only_build_runs_saved_models(tmp_path):
    """EMBER_RUNTIME_ONLY=ON from a clean build dir: ember_runtime, the C++ lesson and the
    _ember_runtime module build with no LLVM, Boost or PyTorch, the lesson runs an exported
    model bit for bit, and `import ember` works in runtime-only mode. (~1-2 minutes on 2
    cores without a compiler cache; it builds only those three targets.)"""
    build, pkg = tmp_path / "build", tmp_path / "pkg" / "ember"
    pkg.mkdir(parents=True)
    # nlohmann/json as a machine without a package manager gets it: shipped by the export.
    shipped = ember.deploy.ship_runtime_headers(tmp_path / "ship")
    configure = subprocess.run(
        ["cmake", "-S", str(ROOT), "-B", str(build), "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
         "-DEMBER_RUNTIME_ONLY=ON", "-DEMBER_BUILD_TESTS=OFF", f"-DEMBER_PYTHON_OUTPUT_DIR={pkg}",
         f"-DEMBER_NLOHMANN_JSON_DIR={shipped}"],
        check=True, capture_output=True, text=True, timeout=120)
    assert f"nlohmann/json from {shipped}" in configure.stdout
    subprocess.run(["ninja", "-C", str(build), "-j2", "ember_runtime", "tutorial_04_deploy_cpp",
                    "_ember_runtime"], check=True, capture_output=True, timeout=600)
    for target in ("tutorial_04_deploy_cpp", "_ember_runtime"):
        commands = _commands(build, target).lower()
        for dependency in ("llvm", "boost", "torch", "fmt/", "-lfmt"):
            assert dependency not in commands, f"{target} builds with {dependency}"
        assert str(shipped).lower() in commands

    files = tmp_path / "lesson"
    make_lesson_files(files)
    lesson = subprocess.run([str(build / "tutorial_04_deploy_cpp"), str(files / "model.ember"),
                             str(files / "x.npy"), str(files / "expected.npy")],
                            capture_output=True, text=True, timeout=60)
    assert lesson.returncode == 0, lesson.stdout + lesson.stderr
    assert "bit for bit" in lesson.stdout and "Execution time summary" in lesson.stdout

    # The Python package with only the runtime module in it.
    for py in (ROOT / "python" / "ember").rglob("*.py"):
        dest = pkg / py.relative_to(ROOT / "python" / "ember")
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(py, dest)
    script = f"""
import numpy as np, ember
assert ember.RUNTIME_ONLY
for graph in (True, False):  # CUDA graphs: the keyword is there, a CPU model ignores it
    m = ember.GraphModule(ember.load({str(files / 'model.ember')!r}), cuda_graph=graph)
    assert m.cuda_graph is False
    m.set_input(0, np.load({str(files / 'x.npy')!r}))
    m.run()
    expected = np.load({str(files / 'expected.npy')!r}).tobytes()
    assert m.get_output(0).numpy().tobytes() == expected
try:
    ember.build(None)
except ember.EmberError as e:
    assert "runtime-only install" in str(e), e
else:
    raise AssertionError("ember.build worked in runtime-only mode")
print("runtime-only ok")
"""
    env = dict(os.environ, PYTHONPATH=str(pkg.parent))
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0 and "runtime-only ok" in done.stdout, done.stderr


# ------------------------------------------------------------------------------ zoo elsewhere
GPU_FAMILIES = ROOT / "benchmarks" / "gpu_families.py"


def _package_env():
    """The environment for a subprocess that imports the ember package this test imported."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(pathlib.Path(ember.__file__).parent.parent),
                                         env.get("PYTHONPATH", "")])
    return env


def _families(*args, env=None, timeout=180):
    return subprocess.run([sys.executable, str(GPU_FAMILIES), *map(str, args)],
                          env=env or _package_env(), capture_output=True, text=True,
                          timeout=timeout)


def _table(stdout):
    """{entry: {batch, kernels, err_torch, err_ref (None for a full-size entry), scale,
    ember_ms, graph_ms, torch_ms, ratio, graph_ratio, compile_ms, compile_ratio, mismatch}}
    from the tables (None for "-": graph_ms and graph_ratio on the CPU, the torch.compile
    columns without --torch-compile)."""
    rows = {}
    names = ["batch", "kernels", "err_torch", "err_ref", "scale", "ember_ms", "graph_ms",
             "torch_ms", "ratio", "graph_ratio", "compile_ms", "compile_ratio"]
    for line in stdout.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 13 and re.fullmatch(r"[0-9]+", cells[1]):
            mismatch = cells[12].endswith("MISMATCH")
            cells[12] = cells[12].replace("MISMATCH", "").strip()
            row = {k: None if c == "-" else float(c) for k, c in zip(names, cells[1:])}
            rows[cells[0]] = dict(row, mismatch=mismatch)
    return rows


@pytest.fixture(scope="module")
def zoo_llvm(tmp_path_factory):
    """Two small families of models.py and the full-size MLP at batch 2 (weights left as
    inputs, bound by name when run), exported by gpu_families.py for the CPU."""
    if not (HERE / "models.py").exists():
        pytest.skip("tests/python/models.py is missing")
    pytest.importorskip("torch")
    d = tmp_path_factory.mktemp("zoo") / "llvm"
    done = _families("export", d, "--target", "llvm", "--families", "mlp,rnn_cell",
                     "--full", "mlp", "--batches", "2")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "exported 3 entries for target 'llvm'" in done.stdout
    return d


def test_gpu_families_exports_an_unfused_build(zoo_llvm, tmp_path):
    """--disabled-passes FuseOps: the same entries as one kernel per op, recorded in the
    manifest and named in the run's tables, with the same numbers."""
    d = tmp_path / "unfused"
    done = _families("export", d, "--target", "llvm", "--families", "mlp", "--full", "",
                     "--disabled-passes", "FuseOps")
    assert done.returncode == 0, done.stdout + done.stderr
    manifest = json.loads((d / "manifest.json").read_text())
    fused = json.loads((zoo_llvm / "manifest.json").read_text())
    assert manifest["disabled_passes"] == ["FuseOps"] and not fused["disabled_passes"]
    assert manifest["entries"]["mlp"]["kernels"] > fused["entries"]["mlp"]["kernels"]
    done = _families("run", d, "--no-time")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "built without FuseOps" in done.stdout
    assert _table(done.stdout)["mlp"]["err_ref"] <= 1e-5, done.stdout


def test_gpu_families_export_and_run_on_the_cpu(zoo_llvm, tmp_path):
    """The compile-here, run-there script on llvm artifacts: it matches the saved reference
    and PyTorch, times both, and fails when the reference disagrees."""
    manifest = json.loads((zoo_llvm / "manifest.json").read_text())
    assert set(manifest["entries"]) == {"mlp", "rnn_cell", "mlp_b2"}
    for family in ("mlp", "rnn_cell"):
        for suffix in (".ember", ".in0.npy", ".ref0.npy", ".pt"):
            assert (zoo_llvm / f"{family}{suffix}").exists(), family + suffix
    full = manifest["entries"]["mlp_b2"]
    assert full["batch"] == 2 and "net.0.weight" in full["weights"]
    assert not list(zoo_llvm.glob("mlp_b2.*.npy"))  # rebuilt from the seed where it runs
    assert (zoo_llvm / "include" / "nlohmann" / "json.hpp").is_file()
    assert (zoo_llvm / "cases" / "cases.json").is_file()  # for tests/gpu
    done = _families("run", zoo_llvm, "--repeat", "3", "--budget-s", "0.05")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "target 'llvm'" in done.stdout
    rows = _table(done.stdout)
    assert set(rows) == {"mlp", "rnn_cell", "mlp_b2"}, done.stdout
    for key, r in rows.items():
        assert r["err_torch"] <= 1e-5 and not r["mismatch"], (key, r)
        assert (r["err_ref"] is None) == (key == "mlp_b2"), (key, r)
        assert r["ember_ms"] > 0 and r["torch_ms"] > 0, done.stdout
        assert abs(r["ratio"] - r["ember_ms"] / r["torch_ms"]) <= 0.01, done.stdout
        assert r["graph_ms"] is None and r["graph_ratio"] is None, done.stdout  # no CPU graph
        assert r["compile_ms"] is None, done.stdout  # only with --torch-compile
    # --cuda-graph names a GPU timing; on the CPU any choice times the one way there is.
    done = _families("run", zoo_llvm, "--only", "mlp", "--cuda-graph", "on", "--repeat", "2",
                     "--budget-s", "0.02")
    assert done.returncode == 0, done.stdout + done.stderr
    r = _table(done.stdout)["mlp"]
    assert r["ember_ms"] > 0 and r["graph_ms"] is None, done.stdout
    done = _families("run", zoo_llvm, "--cuda-graph", "sometimes")
    assert done.returncode == 2 and "--cuda-graph" in done.stderr, done.stderr
    # --torch-compile adds PyTorch's compiled model, timed the same way.
    done = _families("run", zoo_llvm, "--only", "mlp", "--torch-compile", "default",
                     "--repeat", "2", "--budget-s", "0.02")
    assert done.returncode == 0, done.stdout + done.stderr
    r = _table(done.stdout)["mlp"]
    assert r["compile_ms"] > 0, done.stdout
    assert abs(r["compile_ratio"] - r["compile_ms"] / r["torch_ms"]) <= 0.01, done.stdout

    # A reference that disagrees is reported and fails the run.
    bad = tmp_path / "bad"
    shutil.copytree(zoo_llvm, bad)
    np.save(bad / "mlp.ref0.npy", np.load(bad / "mlp.ref0.npy") + 0.5)
    done = _families("run", bad, "--no-time")
    assert done.returncode == 1, done.stdout + done.stderr
    assert abs(_table(done.stdout)["mlp"]["err_ref"] - 0.5) < 1e-5
    assert _table(done.stdout)["mlp"]["mismatch"]
    assert "disagreeing with the reference: mlp" in done.stdout

    # Weights that the seed no longer rebuilds are refused, naming the weight.
    entries = json.loads((bad / "manifest.json").read_text())
    entries["entries"]["mlp_b2"]["fingerprint"]["weights"]["net.0.weight"] += 1.0
    (bad / "manifest.json").write_text(json.dumps(entries))
    done = _families("run", bad, "--no-time", "--only", "mlp_b2")
    assert done.returncode == 1
    assert "rebuilds another mlp: weight net.0.weight" in done.stdout
    done = _families("run", bad, "--no-time", "--only", "resnet99")
    assert done.returncode == 2 and "--only names resnet99" in done.stderr, done.stderr


@pytest.mark.skipif(ember.cuda_available(), reason="a GPU is present")
def test_gpu_families_run_of_cuda_artifacts_without_a_gpu(tmp_path):
    if not (HERE / "models.py").exists():
        pytest.skip("tests/python/models.py is missing")
    pytest.importorskip("torch")
    done = _families("export", tmp_path, "--target", "cuda -arch=sm_90", "--families",
                     "rnn_cell", "--full", "")
    assert done.returncode == 0, done.stdout + done.stderr
    assert ember.load(tmp_path / "rnn_cell.ember").target == "cuda -arch=sm_90"
    done = _families("run", tmp_path)
    assert done.returncode == 1
    assert "no CUDA GPU" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.skipif(shutil.which("cmake") is None or shutil.which("ninja") is None,
                    reason="needs cmake and ninja")
def test_gpu_run_script_uses_the_runtime_only_build(zoo_llvm, tmp_path):
    """scripts/gpu_run.sh, the command for the GPU machine, on llvm artifacts: it builds the
    runtime-only module (no LLVM), runs the GPU suite (tests/gpu), which fails here naming
    the missing GPU rather than skipping, and runs the table with it. (Seconds with a
    compiler cache, a minute or two without.)"""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["EMBER_GPU_BUILD"] = str(tmp_path / "build")
    done = subprocess.run(["bash", str(ROOT / "scripts" / "gpu_run.sh"), str(zoo_llvm),
                           "--repeat", "2", "--budget-s", "0.05"], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "ember.cuda_available() is False" in done.stdout, done.stdout
    assert "skipped" not in done.stdout
    assert "Ember runtime-only install" in done.stdout
    # The runtime took nlohmann/json from what the export shipped, as the GPU machine must.
    configured = (tmp_path / "build" / "configure.log").read_text()
    assert f"nlohmann/json from {zoo_llvm / 'include'}" in configured
    rows = _table(done.stdout)
    assert set(rows) == {"mlp", "rnn_cell", "mlp_b2"}, done.stdout
    assert all(r["err_torch"] <= 1e-5 for r in rows.values())


# ------------------------------------------------------------------------------ script modes
def make_lesson_files(d):
    d = pathlib.Path(d)
    d.mkdir(parents=True, exist_ok=True)
    lib, (x,) = conv_bn_relu()
    (y,) = _run(ember.GraphModule(lib), [x])
    lib.export(d / "model.ember")
    np.save(d / "x.npy", x)
    np.save(d / "expected.npy", y)


def run_dir(d):
    for path in sorted(pathlib.Path(d).glob("*.ember")):
        stem = str(path)[:-len(".ember")]
        try:
            m = ember.GraphModule(ember.load(path))
            inputs = [np.load(f"{stem}.in{i}.npy") for i in range(m.get_num_inputs())]
            for i, value in enumerate(_run(m, inputs)):
                np.save(f"{stem}.out{i}.npy", value)
        except Exception as e:  # reported by the test that owns this model
            pathlib.Path(f"{stem}.error.txt").write_text(f"{type(e).__name__}: {e}")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--lesson-files":
        make_lesson_files(sys.argv[2])
    elif len(sys.argv) == 3 and sys.argv[1] == "--run-dir":
        run_dir(sys.argv[2])
    else:
        sys.exit(f"usage: {sys.argv[0]} --lesson-files DIR | --run-dir DIR")
