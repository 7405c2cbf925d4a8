"""Target strings: "llvm [-mcpu=NAME] [-vector-bits=128|256|512]", "cuda [-arch=sm_NN]".

Every vector width builds and runs on any x86-64 host (LLVM splits vectors wider than the
CPU's registers), so the AVX2 and AVX-512 code paths are both checked here whatever the
host has. Wrong options are errors that name the option, never silently ignored.
"""
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import ember
from ember import ir, op

WIDTHS = [256, 512]
PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(ember.__file__)))


def small_model():
    rng = np.random.default_rng(3)
    x = ir.var("x", (1, 5, 13, 13), "float32")
    w = ir.const(rng.standard_normal((7, 5, 3, 3)).astype("float32"), name="w")
    y = op.nn.relu(op.nn.conv2d(x, w, padding=(1, 1)))
    z = op.nn.dense(op.reshape(y, (1, 7 * 13 * 13)),
                    ir.const(rng.standard_normal((10, 7 * 13 * 13)).astype("float32")))
    return ir.Function([x], z), rng.standard_normal((1, 5, 13, 13)).astype("float32")


def run(lib, x):
    m = ember.GraphModule(lib)
    m.set_input(0, x)
    m.run()
    return np.asarray(m.get_output(0)).copy()


@pytest.mark.parametrize("bits", WIDTHS)
def test_vector_width_is_used_and_recorded(bits):
    f, x = small_model()
    lib = ember.build(f, target=f"llvm -vector-bits={bits}")
    assert lib.target == f"llvm -vector-bits={bits}"
    assert f'"prefer-vector-width"="{bits}"' in lib.get_source("ll")
    ref = run(ember.build(f), x)
    np.testing.assert_allclose(run(lib, x), ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("bits", WIDTHS)
def test_vectors_have_the_asked_width(bits):
    x = ir.var("x", (4, 64), "float32")
    # An AVX-512 CPU, where 256-bit code must not widen either (compiled, not run).
    lib = ember.build(ir.Function([x], op.nn.relu(x)),
                      target=f"llvm -mcpu=skylake-avx512 -vector-bits={bits}")
    lanes = bits // 32
    ll = lib.get_source("ll")
    assert re.search(rf"<{lanes} x float>", ll), f"no <{lanes} x float> vectors in the IR"
    other = 512 // 32 if bits == 256 else 256 // 32
    assert not re.search(rf"<{other} x float>", ll)


def test_widths_agree_with_each_other_and_numpy():
    f, x = small_model()
    outs = [run(ember.build(f, target=f"llvm -vector-bits={b}"), x) for b in WIDTHS]
    np.testing.assert_allclose(outs[0], outs[1], rtol=1e-5, atol=1e-5)


def test_export_records_the_target(tmp_path):
    f, x = small_model()
    lib = ember.build(f, target="llvm -vector-bits=256")
    path = str(tmp_path / "m.ember")
    lib.export(path)
    loaded = ember.load(path)
    assert loaded.target == "llvm -vector-bits=256"
    np.testing.assert_allclose(run(loaded, x), run(lib, x), rtol=0, atol=0)


def test_named_cpu_builds():
    f, x = small_model()
    lib = ember.build(f, target="llvm -mcpu=x86-64-v3")
    assert lib.target == "llvm -mcpu=x86-64-v3"
    assert "+avx2" in lib.get_source("ll")  # the CPU's features are spelled out


@pytest.mark.parametrize("target,words", [
    ("llvm -vector-bits=384", ["-vector-bits=384", "256"]),
    ("llvm -vector-bits", ["-vector-bits", "needs a value"]),
    ("llvm -mattr=+avx2", ["unknown option '-mattr'", "-vector-bits"]),
    ("llvm -mcpu=notacpu", ["unknown CPU 'notacpu'"]),
    ("llvmx", ["unknown target 'llvmx'"]),
    ("", ["the target is empty"]),
    ("cuda -vector-bits=256", ["unknown option '-vector-bits'"]),
    ("cuda -arch=80", ["-arch=80", "sm_NN"]),
])
def test_bad_target_options_are_errors(target, words):
    f, _ = small_model()
    with pytest.raises(ember.EmberError) as e:
        ember.build(f, target=target)
    for w in words:
        assert w in str(e.value), str(e.value)


@pytest.mark.parametrize("bits", WIDTHS)
def test_fma_peak_is_measured(bits):
    peak = ember.measure_fma_peak(f"llvm -vector-bits={bits}", seconds=0.05)
    assert 1.0 < peak < 1e4  # GFLOP/s of one core: any real CPU is inside this range


# ------------------------------------------------------------------- machine model per CPU

def test_machine_model_comes_from_the_named_cpu():
    zen1 = ember.target.machine_model("llvm -mcpu=znver1")
    # Zen 1: two 128-bit FMA units, so one 256-bit FMA a cycle, 5 cycles to the result.
    assert (zen1.cpu, zen1.vector_bits, zen1.fma_per_cycle, zen1.fma_latency,
            zen1.fma_datapath_bits) == ("znver1", 256, 1, 5, 128)
    assert (zen1.l1_bytes, zen1.l2_bytes) == (32 << 10, 512 << 10)
    assert "LLVM's scheduling model of znver1" in zen1.source
    assert "128-bit datapath" in str(zen1) and "L2 512 KiB" in str(zen1)
    skx = ember.target.machine_model("llvm -mcpu=skylake-avx512")
    assert (skx.vector_bits, skx.vector_registers, skx.fma_per_cycle, skx.fma_datapath_bits) == (
        512, 32, 2, 512)
    # Asked for 512-bit vectors, Zen 1 issues each as two 256-bit halves.
    wide = ember.target.machine_model("llvm -mcpu=znver1 -vector-bits=512")
    assert (wide.vector_bits, wide.fma_per_cycle, wide.loads_per_cycle) == (512, 1, 1)


def test_host_machine_model_reads_its_caches():
    m = ember.target.machine_model()
    assert m.vector_bits == ember._ember._target_vector_bits("llvm")
    assert 0 < m.l1_bytes < m.l2_bytes < m.l3_bytes
    if (os.path.exists("/sys/devices/system/cpu/cpu0/cache/index0/size")
            and not os.environ.get("EMBER_MODEL_CPU")):
        assert "caches from sysfs" in m.source


def test_schedules_follow_the_cpus_model():
    # The dense's register tile covers the FMA latency times the FMAs a cycle: 8 ymm
    # accumulators on Zen 3 (4 x 2), 10 on Haswell (5 x 2). Compiled only.
    x = ir.var("x", shape=(64, 256))
    w = ir.const(np.ones((256, 256), "float32"), name="w")
    f = ir.Function([x], op.nn.relu(op.nn.dense(x, w)))
    tiles = {}
    for cpu in ("znver3", "haswell"):
        loop = ember.build(f, target=f"llvm -mcpu={cpu} -vector-bits=256").get_source("loop")
        tiles[cpu] = re.search(r"allocate dense: float32\[(\d+)\]", loop).group(1)
    assert tiles == {"znver3": "64", "haswell": "80"}


def test_model_cpu_override_and_errors(tmp_path):
    code = "import ember; m = ember.target.machine_model(); print(m.cpu, m.fma_datapath_bits)"
    env = dict(os.environ, EMBER_MODEL_CPU="znver1", PYTHONPATH=PYTHON_DIR)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["znver1", "128"]
    env["EMBER_MODEL_CPU"] = "notacpu"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode != 0 and "EMBER_MODEL_CPU=notacpu" in out.stderr
    with pytest.raises(ember.EmberError, match="not a CPU target"):
        ember.target.machine_model("cuda")
    with pytest.raises(ember.EmberError, match="notacpu"):
        ember.target.machine_model("llvm -mcpu=notacpu")


def test_target_command_prints_the_model():
    from ember import cli
    out = subprocess.run([sys.executable, "-m", "ember", "target", "--target",
                          "llvm -mcpu=znver1"], env=dict(os.environ, PYTHONPATH=PYTHON_DIR),
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("znver1, 256-bit vectors") and "latency 5" in out.stdout
    assert cli.main(["target", "--target", "cuda"]) == 1
