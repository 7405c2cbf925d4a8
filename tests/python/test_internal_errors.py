"""A compiler bug is ember.InternalError, which is not an ember.EmberError (the user's
mistake): `except EmberError` never swallows one, its message asks for a report, and the
CLI exits with status 3 for it. Float to int casts are defined for NaN and out-of-range
values (they saturate, never LLVM poison)."""
import platform
import re

import numpy as np
import pytest

import ember
from ember import EmberError, InternalError, _ember, cli, ir, op


def test_internal_error_is_its_own_class():
    assert issubclass(InternalError, RuntimeError)
    assert not issubclass(InternalError, EmberError)
    assert not issubclass(EmberError, InternalError)
    assert InternalError.__module__ == "ember" and "InternalError" in ember.__all__


def test_cpp_errors_become_their_python_classes():
    with pytest.raises(EmberError, match="raised for testing"):
        _ember._raise_for_testing("user")
    with pytest.raises(InternalError, match="raised for testing") as e:
        try:
            _ember._raise_for_testing("internal")
        except EmberError:
            pytest.fail("an internal error was caught as EmberError")
    assert "please report" in str(e.value)


def test_cli_exits_with_3_on_an_internal_error(monkeypatch, capsys, tmp_path):
    def broken(path, load_code=True):
        _ember._raise_for_testing("internal")
    monkeypatch.setattr(cli, "_load", broken)
    assert cli.main(["inspect", str(tmp_path / "m.ember")]) == 3
    err = capsys.readouterr().err
    assert "internal error" in err and "please report" in err and "Traceback" not in err


@pytest.mark.parametrize("src", ["float32", "float64"])
@pytest.mark.parametrize("dtype", ["int32", "int64"])
@pytest.mark.parametrize("n", [7, 64])  # 64: the vectorized loop (clamp, convert, select)
def test_float_to_int_casts_saturate(src, dtype, n):
    info = np.iinfo(dtype)
    # The edges of every int range, and the floats just inside them (2147483520 is the
    # largest float32 below 2^31).
    special = np.array([np.nan, np.inf, -np.inf, 1e30, -1e30, 3.7, -3.7, 0.0, 2.0**31,
                        -2.0**31, 2147483520.0, 2.0**63, -2.0**63, 127.9, -128.9, 40000.0,
                        -40000.0, 2.0**31 - 1, 9.2233715e18], dtype=src)
    x = np.resize(special, n).astype(src)
    v = ir.var("x", (n,), src)
    m = ember.GraphModule(ember.build(ir.Function([v], op.cast(v, dtype))))
    m.set_input("x", x)
    m.run()
    got = m.get_output(0).numpy()

    def saturate(v):  # llvm.fptosi.sat: NaN -> 0, out of range -> the int's min or max
        return 0 if np.isnan(v) else info.max if v >= info.max else info.min if v <= info.min \
            else int(v)
    np.testing.assert_array_equal(got, np.array([saturate(float(v)) for v in x], dtype))


# A clip into the int32 range (0..255: a quantize's), one whose top is past it (3e9: the
# saturating cast), int8's range and a clip whose bounds are given the other way round.
CLIPS = [("uint8", 0.0, 255.0), ("int8", -128.0, 127.0), ("int32", -1e9, 2147483520.0),
         ("int32", 0.0, 3e9), ("uint8", 255.0, 0.0)]


@pytest.mark.parametrize("dtype,lo,hi", CLIPS)
@pytest.mark.parametrize("n", [7, 64])
def test_float_to_int_casts_of_clipped_values(dtype, lo, hi, n):
    """A cast of a value clipped into the int32 range (a quantize: clip(round(x / s) + z, 0,
    255) cast to uint8) converts without the saturating cast's clamp and compares, with the
    same results: NaN gives 0, the rest the clipped value truncated."""
    special = np.array([np.nan, np.inf, -np.inf, 1e30, -1e30, 3.7, -3.7, 0.0, -0.0, 254.6,
                        255.0, 255.5, 127.9, -128.9, 2.0**31, 2147483520.0, -2.0**31, 1e9],
                       np.float32)
    x = np.resize(special, n)
    v = ir.var("x", (n,), "float32")
    f = ir.Function([v], op.cast(op.clip(v, a_min=lo, a_max=hi), dtype))
    got = ember.GraphModule(ember.build(f))(x).numpy()
    info = np.iinfo(np.int32)

    def cast(v):  # torch.clamp (a_min > a_max: a_max), then the saturating cast
        if np.isnan(v):
            return 0
        v = min(max(v, lo), hi)
        return info.max if v >= 2.0**31 else int(v)
    want = np.array([cast(float(v)) for v in x], np.int64).astype(dtype)
    np.testing.assert_array_equal(got, want)


@pytest.mark.skipif(platform.machine() != "x86_64", reason="checks x86 assembly")
@pytest.mark.parametrize("cpu", ["znver4", "x86-64-v3", "x86-64"])
def test_a_clipped_cast_is_one_conversion(cpu):
    """Compiled for named CPUs (not run): a quantize's clip to 0..255 cast to uint8 takes one
    max and one min per conversion (the clip's: no clamp into the int range, no compare for
    its top); a clip past the int32 range keeps the saturating cast's."""
    def counts(hi):
        v = ir.var("x", (1024,), "float32")
        f = ir.Function([v], op.cast(op.clip(v, a_min=0.0, a_max=hi), "uint8"))
        asm = ember.build(f, target=f"llvm -mcpu={cpu}").get_source("asm")
        ins = re.findall(r"^\s+v?([a-z0-9]+)\s", asm, re.M)
        return ins.count("maxps"), ins.count("cvttps2dq"), ins.count("cmpleps")
    maxes, conversions, top = counts(255.0)
    assert conversions > 0 and maxes == conversions and top == 0, (cpu, maxes, conversions)
    maxes, conversions, top = counts(3e9)
    assert maxes == 2 * conversions and top == conversions, (cpu, maxes, conversions)


@pytest.mark.skipif(platform.machine() != "x86_64", reason="checks x86 assembly")
def test_row_sum_of_exp_converts_as_vectors():
    # The row sum is a scalar loop in the loop IR that LLVM's vectorizer widens; exp's
    # float -> int cast in it must widen to one vector conversion, not one per lane
    # (llvm.fptosi.sat did: log_sum_exp was 1.14x its unfused kernels). log_sum_exp now takes
    # the short exp (no conversion); a plain row sum of exp still converts.
    # Compiled (not run) for named CPUs: the vectorizer's choices are the CPU's.
    v = ir.var("x", (16, 256), "float32")
    for cpu in ("znver1", "znver3", "znver4", "skylake-avx512"):
        lib = ember.build(ir.Function([v], op.sum(op.exp(v), axis=[1])), target=f"llvm -mcpu={cpu}")
        assert len(lib.fusion_report()) == 1, lib.fusion_report()
        asm = lib.get_source("asm")
        assert "cvttps2dq" in asm and "cvttss2si" not in asm, cpu
        asm = ember.build(ir.Function([v], op.log_sum_exp(v, axis=[1])),
                          target=f"llvm -mcpu={cpu}").get_source("asm")
        assert "cvttss2si" not in asm, cpu
