"""The fusion catalog (issue 5): every case of every tests/python/catalog_cases_*.py module.

A case is a dict:
    name      str, unique within its module
    model     callable -> torch.nn.Module (eval mode)
    inputs    callable -> tuple of torch tensors
    kernels   the kernel count of the build with every pass on
    pattern   a substring expected in some kernel's patterns (None for negative cases)
    negative  True when the pattern must NOT fire (the graph is left alone)
  optional:
    absent    a substring that must appear in no kernel's patterns (for negative cases)
    rtol/atol tolerances against the unfused build and PyTorch (default 1e-4 / 1e-5)
    disabled_passes, config  for the fused build's PassContext (a pattern that needs a pass
              off, or the FuseOps cost rule off to test a schedule the rule declines here)
    bench_inputs  callable -> larger inputs for benchmarks/catalog.py
    real      the case at real size, for benchmarks/catalog.py --size real (catalog_real.py)

Each case is built twice: "fused" (the default PassContext, every pass on) and "unfused"
(FuseOps and every catalog pass disabled: all known passes except the base ones below, so
a new catalog pass is covered without editing this file). Both must match PyTorch within the
case's tolerance (NaN where PyTorch has NaN, inf where it has inf), and each other. Where
AlterOpLayout applies (the fused build has a blocked conv, or the case disables the pass),
the fused build is made a third time with AlterOpLayout flipped, and must match PyTorch too.
"""
import glob
import importlib.util
import os
import traceback

import numpy as np
import pytest
import torch

import ember
from ember.transform import PassContext, known_passes

HERE = os.path.dirname(os.path.abspath(__file__))
# Passes that are not part of the fusion catalog: they stay on in the reference build.
BASE_PASSES = ("SimplifyInference", "FoldConstant", "FoldScaleAxis")
REQUIRED_KEYS = ("name", "model", "inputs", "kernels", "pattern", "negative")


def catalog_modules():
    """(module name, module or the traceback of its import failure), sorted by name."""
    out = []
    for path in sorted(glob.glob(os.path.join(HERE, "catalog_cases_*.py"))):
        name = os.path.splitext(os.path.basename(path))[0]
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
        except Exception:  # reported by the test of that module, not at collection
            module = traceback.format_exc()
        out.append((name, module))
    return out


def all_cases():
    """(id, case or an error string) for every case of every catalog module."""
    out = []
    for name, module in catalog_modules():
        if isinstance(module, str):
            out.append((f"{name}:import", f"importing {name} failed:\n{module}"))
            continue
        cases = getattr(module, "CASES", None)
        if not isinstance(cases, list) or not cases:
            out.append((f"{name}:CASES", f"{name} has no non-empty CASES list"))
            continue
        for i, case in enumerate(cases):
            label = case.get("name", f"#{i}") if isinstance(case, dict) else f"#{i}"
            out.append((f"{name}:{label}", case))
    return out


def unfused_context():
    catalog = [n for n, _ in known_passes() if n not in BASE_PASSES]
    return PassContext(disabled_passes=catalog)


def compile_case(case, fused, disabled=None):
    """(library, outputs as a list of NumPy arrays) of one build of the case; a fused build
    disables the case's `disabled_passes`, or `disabled` when given."""
    model, inputs = case["model"](), case["inputs"]()
    mod, params = ember.frontend.from_pytorch(model, inputs)
    if fused:
        # A case may name passes its pattern needs off (a plain-layout kernel: AlterOpLayout).
        disabled = case.get("disabled_passes", []) if disabled is None else disabled
        # The cost rule prices kernels on AVX2 whatever the host (EMBER_VECTOR_BITS included),
        # so the kernel counts below hold everywhere.
        config = {"FuseOps.cost_model": "avx2", **case.get("config", {})}
        with PassContext(disabled_passes=disabled, config=config):
            lib = ember.build(mod, target="llvm", params=params)
    else:
        with unfused_context():
            lib = ember.build(mod, target="llvm", params=params)
    m = ember.GraphModule(lib)
    for i, x in enumerate(inputs):
        m.set_input(i, x.numpy())
    m.run()
    return lib, [np.asarray(m.get_output(i)).copy() for i in range(m.get_num_outputs())]


def torch_outputs(case):
    model, inputs = case["model"](), case["inputs"]()
    with torch.no_grad():
        out = model(*inputs)
    out = out if isinstance(out, (tuple, list)) else (out,)
    return [o.detach().numpy() for o in out]


def patterns_of(lib):
    return [p for k in lib.fusion_report() for p in k.patterns]


def layout_flipped(case, report):
    """The fused build's disabled passes with AlterOpLayout flipped, or None where the pass
    does not apply (no blocked conv, and the case does not disable it)."""
    disabled = list(case.get("disabled_passes", []))
    if "AlterOpLayout" in disabled:
        return [p for p in disabled if p != "AlterOpLayout"]
    if any(k.anchor == "nn.conv2d_blocked" for k in report):
        return disabled + ["AlterOpLayout"]
    return None


CASES = all_cases()


@pytest.mark.parametrize("case_id,case", CASES, ids=[c[0] for c in CASES])
def test_catalog_case(case_id, case):
    if isinstance(case, str):
        pytest.fail(case)
    missing = [k for k in REQUIRED_KEYS if k not in case]
    assert not missing, f"{case_id}: case lacks {missing}"
    rtol, atol = case.get("rtol", 1e-4), case.get("atol", 1e-5)

    fused_lib, fused = compile_case(case, fused=True)
    _, unfused = compile_case(case, fused=False)
    expected = torch_outputs(case)
    report = fused_lib.fusion_report()
    patterns = patterns_of(fused_lib)

    assert len(fused) == len(expected) == len(unfused)
    for i, (f, u, e) in enumerate(zip(fused, unfused, expected)):
        assert f.shape == e.shape, f"output {i}: fused shape {f.shape}, torch {e.shape}"
        np.testing.assert_allclose(u, e, rtol=rtol, atol=atol, equal_nan=True,
                                   err_msg=f"{case_id} output {i}: unfused vs PyTorch")
        np.testing.assert_allclose(f, e, rtol=rtol, atol=atol, equal_nan=True,
                                   err_msg=f"{case_id} output {i}: fused vs PyTorch\n{report}")
        np.testing.assert_allclose(f, u, rtol=rtol, atol=atol, equal_nan=True,
                                   err_msg=f"{case_id} output {i}: fused vs unfused")
    flipped = layout_flipped(case, report)
    if flipped is not None:
        _, other = compile_case(case, fused=True, disabled=flipped)
        for i, (o, e) in enumerate(zip(other, expected)):
            np.testing.assert_allclose(o, e, rtol=rtol, atol=atol, equal_nan=True,
                                       err_msg=f"{case_id} output {i}: AlterOpLayout flipped "
                                               f"(disabled {flipped}) vs PyTorch")
    assert len(report) == case["kernels"], f"{case_id}: expected {case['kernels']} kernels\n{report}"
    if case["pattern"] is not None:
        assert any(case["pattern"] in p for p in patterns), \
            f"{case_id}: no kernel has pattern '{case['pattern']}'\n{report}"
    if case.get("absent"):
        assert not any(case["absent"] in p for p in patterns), \
            f"{case_id}: pattern '{case['absent']}' fired on a negative case\n{report}"


def test_runner_finds_the_catalog_modules():
    names = [n for n, _ in catalog_modules()]
    assert "catalog_cases_rewrites" in names, names


def test_unfused_context_keeps_the_base_passes_and_disables_fusion():
    ctx = unfused_context()
    assert "FuseOps" in ctx.disabled_passes
    assert not set(BASE_PASSES) & set(ctx.disabled_passes)


def test_simplify_keeps_the_sign_of_zero():
    """x + 0.0 is not erased (it turns -0.0 into +0.0); x - 0.0 and x * 1 are, and keep it."""
    class M(torch.nn.Module):
        def forward(self, x):
            return x + 0.0, (x - 0.0) * 1.0
    x = torch.tensor([-0.0, 0.0, -1.0, 2.0])
    mod, params = ember.frontend.from_pytorch(M().eval(), (x,))
    lib = ember.build(mod, target="llvm", params=params)
    m = ember.GraphModule(lib)
    m.set_input(0, x.numpy())
    m.run()
    with torch.no_grad():
        expected = M()(x)
    for i in range(2):
        got = np.asarray(m.get_output(i))
        np.testing.assert_array_equal(np.signbit(got), np.signbit(expected[i].numpy()))
