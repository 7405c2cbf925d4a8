"""The differential fuzzer (ember.testing.fuzz): a fixed-seed slice of random graphs must
match PyTorch float64, and the fuzzer itself must catch wrong numbers, survive crashes and
minimize what fails."""
import importlib.util

import numpy as np
import pytest
import torch

from ember.testing import fuzz, fuzz_ops

SLICE_SEED, SLICE_COUNT = 20240611, 30


def test_fixed_seed_slice_matches_pytorch():
    """30 random graphs at opt levels 0 and 3, alternating the vector width per case
    (~20 s on a quiet machine)."""
    bad = []
    for index in range(SLICE_COUNT):
        case = fuzz.generate(SLICE_SEED, index)
        configs = [(o, 256 if index % 2 else 512) for o in (0, 3)]
        for config, out in fuzz.check_case(case, configs).items():
            if out["status"] not in ("ok", "unsupported"):
                bad.append((index, config, out))
    assert not bad, bad


def test_generation_is_deterministic_and_covers_the_ops():
    assert fuzz.generate(5, 17) == fuzz.generate(5, 17)
    seen = {n["op"] for i in range(60) for n in fuzz.generate(3, i)["nodes"]}
    assert seen == set(fuzz_ops.OPS), set(fuzz_ops.OPS) - seen


# A case whose sigmoid sits between other nodes, for the tests that break the reference.
CASE = {"seed": 0, "index": 0, "input_seed": 11, "inputs": [[3, 20]], "outputs": None,
        "nodes": [
            {"op": "unary", "in": [0], "a": {"fn": "tanh"}, "seed": 1},
            {"op": "unary", "in": [1], "a": {"fn": "sigmoid"}, "seed": 2},
            {"op": "dense", "in": [2], "a": {"units": 7, "bias": True}, "seed": 3},
            {"op": "binary", "in": [3], "a": {"fn": "add", "swap": False, "shape": [7]},
             "seed": 4},
            {"op": "reduce", "in": [1], "a": {"fn": "sum", "axes": [1], "keepdims": False},
             "seed": 5}]}


@pytest.fixture
def wrong_sigmoid(monkeypatch):
    """The reference's sigmoid off by 1e-3: every case using it must be a mismatch."""
    table = dict(fuzz_ops._UNARY)
    ember_fn, torch_fn, when = table["sigmoid"]
    table["sigmoid"] = (ember_fn, lambda x: torch_fn(x) + 1e-3, when)
    monkeypatch.setattr(fuzz_ops, "_UNARY", table)


class InProcessRunner:
    def __init__(self):
        self.runs = 0

    def run(self, case, configs):
        self.runs += 1
        return fuzz.check_case(case, configs)


def test_a_wrong_result_is_a_mismatch_and_is_minimized(wrong_sigmoid, tmp_path):
    out = fuzz.check_case(CASE, [(3, 256)])["O3/v256"]
    assert out["status"] == "mismatch" and "elements off" in out["detail"]
    small = fuzz.minimize(CASE, "O3/v256", "mismatch", InProcessRunner())
    assert [n["a"].get("fn") for n in small["nodes"]] == ["sigmoid"]
    assert small["nodes"][0]["in"] == [0] and small["outputs"] == [1]
    path = fuzz.write_test(small, "O3/v256", out, str(tmp_path))
    spec = importlib.util.spec_from_file_location("written", path)
    written = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(written)
    test = next(getattr(written, k) for k in dir(written) if k.startswith("test_"))
    with pytest.raises(AssertionError, match="elements off"):
        test()  # still fails: the reference is still wrong


def test_tolerance_scales_with_the_output_and_its_conditioning():
    ref = np.array([1000.0, 0.0, -1.0])
    assert fuzz.compare(np.float32(ref + [0.1, 0.1, 0.0]), ref, ref) is None  # 2e-4 * 1000
    assert fuzz.compare(np.float32(ref + [0.0, 0.5, 0.0]), ref, ref) is not None
    # PyTorch's own float32 result is 0.1 off: 10x that is allowed.
    assert fuzz.compare(np.float32(ref + [0.0, 0.9, 0.0]), ref, ref + [0, 0.1, 0]) is None
    assert "non-finite" in fuzz.compare(np.float32([np.nan, 0, 0]), ref, ref)
    assert "shape" in fuzz.compare(np.zeros((2,), np.float32), ref, ref)


def test_a_crash_is_reported_and_the_rest_still_runs(monkeypatch):
    monkeypatch.setenv("EMBER_FUZZ_CRASH_OP", "reduce")
    runner = fuzz.Runner(timeout_s=300)
    try:
        crashed = runner.run(CASE, [(0, 256)])
        assert crashed["O0/v256"]["status"] == "crash"
        assert "exited with" in crashed["O0/v256"]["detail"]
        no_reduce = dict(CASE, nodes=CASE["nodes"][:4])
        assert runner.run(no_reduce, [(0, 256)])["O0/v256"]["status"] == "ok"
    finally:
        runner.stop()


def test_cli_refuses_bad_options():
    for argv in (["--vector-bits", "128"], ["--opt-levels", "4"]):
        with pytest.raises(SystemExit):
            fuzz.main(argv)


def test_reference_matches_torch_modules():
    """The reference interpreter is plain PyTorch: a conv node equals nn.Conv2d's output."""
    case = {"seed": 0, "index": 0, "input_seed": 5, "inputs": [[1, 4, 6, 6]], "outputs": None,
            "nodes": [{"op": "conv2d", "in": [0], "seed": 9,
                       "a": {"out": 6, "kernel": [3, 3], "strides": [2, 1],
                             "dilation": [1, 2], "padding": [1, 1, 1, 1], "groups": 2,
                             "bias": True}}]}
    consts = fuzz.node_consts(case["nodes"][0], [(1, 4, 6, 6)])
    conv = torch.nn.Conv2d(4, 6, 3, stride=(2, 1), padding=1, dilation=(1, 2), groups=2)
    conv.weight.data = torch.from_numpy(consts["w"])
    conv.bias.data = torch.from_numpy(consts["b"])
    x = torch.from_numpy(fuzz.input_arrays(case)[0])
    np.testing.assert_allclose(fuzz.reference(case)[0], conv(x).detach().numpy(), atol=1e-5)
