"""Exported models and cases run on the GPU with the runtime-only install: every entry of
the manifest (the narrow zoo with its weights, the full-size models with their weights bound
by name) agrees with PyTorch on the GPU (TF32 off) and with the CPU reference; CUDA tensors go
in and out through DLPack; benchmark and profile time the GPU."""
import json

import numpy as np
import pytest
import torch

import cases
import ember
import gpu_families


@pytest.fixture(scope="session", autouse=True)
def _float32_torch():
    gpu_families.torch_reference_mode(torch)


def test_artifacts_hold_gpu_code(manifest):
    assert manifest["target"].startswith("cuda"), manifest["target"]


def test_entry_matches_pytorch_on_the_gpu(artifacts, manifest, entry_key):
    entry = manifest["entries"][entry_key]
    precision = manifest.get("precision", "highest")
    gpu_families.torch_reference_mode(torch, precision)
    checked = gpu_families.check_entry(ember, torch, artifacts, entry_key, entry, precision)
    gpu_families.torch_reference_mode(torch)
    row = checked.row
    assert row["device"] == "cuda"
    assert checked.module.device == "cuda:0"
    assert row["ok"], (f"{entry_key}: max abs error {row['err_torch']:.3g} against PyTorch, "
                       f"{row.get('err_ref', float('nan')):.3g} against the CPU reference "
                       f"(output scale {row['scale']:.3g})")


def _case(artifacts, name):
    lib, inputs, refs = cases.load(artifacts / "cases", name)
    return ember.GraphModule(lib), inputs, refs


def test_numpy_and_cuda_tensors_in_and_out(artifacts):
    m, (data,), (ref,) = _case(artifacts, "conv_bn_relu")
    assert m.device == "cuda:0"
    m.set_input("x", data)  # NumPy: copied to the GPU
    m.run()
    out = m.get_output(0)
    assert out.device == "cuda:0"
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-5, atol=1e-5)
    with pytest.raises(BufferError):
        np.asarray(out)  # device memory is never read from the host by accident
    m.set_input("x", torch.from_numpy(data).cuda())  # a CUDA tensor: read on the GPU
    m.run()
    t = torch.from_dlpack(m.get_output(0))  # shares the GPU buffer
    assert t.is_cuda
    np.testing.assert_allclose(t.cpu().numpy(), ref, rtol=1e-5, atol=1e-5)


def test_softmax_dense_and_pooling_match_torch(artifacts):
    m, (data,), (ref,) = _case(artifacts, "softmax_dense_pool")
    m.set_input("x", data)
    m.run()
    np.testing.assert_allclose(m.get_output(0).numpy(), ref, rtol=1e-4, atol=1e-6)


def test_benchmark_and_profile_time_the_gpu(artifacts):
    m, (data,), (ref,) = _case(artifacts, "relu")
    m.set_input("x", data)
    r = m.benchmark(number=5, repeat=3)
    assert len(r.results) == 3 and r.mean > 0
    assert "Total" in m.profile(repeat=2)
    np.testing.assert_array_equal(m.get_output(0).numpy(), ref)


def test_wrong_input_shape_is_a_clear_error(artifacts):
    m, (data,), _ = _case(artifacts, "relu")
    with pytest.raises(ember.EmberError, match="x"):
        m.set_input("x", np.zeros((3, 3), dtype="float32"))


@pytest.mark.parametrize("name", sorted(n for n in cases.CASES if n.startswith("tc_")))
def test_tensor_core_gemms_match_the_rounded_operands(artifacts, name):
    """mma.sync tiles (TF32, BF16, FP16 operands, float32 sums) against float64 sums of the
    same rounded operands: only the accumulation order differs (1e-4 of the output scale),
    while a fragment at the wrong lane or an unrounded operand would be far off."""
    index = json.loads((artifacts / "cases" / "cases.json").read_text())
    assert index[name]["mma"] > 0, f"{name}: the PTX has no mma.sync"
    m, inputs, (ref,) = _case(artifacts, name)
    for i, x in enumerate(inputs):
        m.set_input(i, x)
    m.run()
    got = m.get_output(0).numpy()
    scale = float(np.abs(ref).max())
    err = float(np.abs(got - ref).max())
    assert err <= 1e-4 * scale, f"{name}: max abs error {err:.3g} (scale {scale:.3g})"
