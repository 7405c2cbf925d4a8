"""docs/core_aten.md is generated from the importer's converter table: it must be current,
and every Core ATen op must be supported, evaluated at import or refused with a reason (none
left without a converter)."""
from pathlib import Path

from ember.frontend import _aten, coverage

DOC = Path(__file__).resolve().parents[2] / "docs" / "core_aten.md"


def test_the_core_aten_list_is_current():
    assert DOC.read_text() == coverage.markdown(), (
        "docs/core_aten.md is stale: run `PYTHONPATH=python python3 -m ember.frontend.coverage "
        "> docs/core_aten.md`")


def test_every_core_aten_op_has_a_status_with_a_reason():
    rows = coverage.coverage()
    assert len(rows) > 150  # torch 2.13 tags about 160 packets core
    for name, _, state, note in rows:
        # Every Core ATen op has a converter, or a refusal that says why and what to do.
        assert state in ("supported", "refused", "evaluated at import"), (name, state)
        assert state == "supported" or note, name


def test_limits_and_refusals_name_real_ops():
    core = {name for name, *_ in coverage.coverage()}
    assert set(coverage.LIMITS) <= set(_aten.CONVERTERS)
    assert not set(_aten.REFUSED) & set(_aten.CONVERTERS)
    assert {"nonzero", "rand", "as_strided"} <= set(_aten.REFUSED) & core
