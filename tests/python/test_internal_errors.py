"""A compiler bug is ember.InternalError, which is not an ember.EmberError (the user's
mistake): `except EmberError` never swallows one, its message asks for a report, and the
CLI exits with status 3 for it. Float to int casts are defined for NaN and out-of-range
values (they saturate, never LLVM poison)."""
import platform

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
