"""Target strings: "llvm [-mcpu=NAME] [-vector-bits=128|256|512]", "cuda [-arch=sm_NN]".

Every vector width builds and runs on any x86-64 host (LLVM splits vectors wider than the
CPU's registers), so the AVX2 and AVX-512 code paths are both checked here whatever the
host has. Wrong options are errors that name the option, never silently ignored.
"""
import re

import numpy as np
import pytest

import ember
from ember import ir, op

WIDTHS = [256, 512]


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
    lib = ember.build(ir.Function([x], op.nn.relu(x)), target=f"llvm -vector-bits={bits}")
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
