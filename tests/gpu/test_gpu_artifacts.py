"""Exported models and cases run on the GPU with the runtime-only install: every entry of
the manifest (the narrow zoo with its weights, the full-size models with their weights bound
by name) agrees with PyTorch on the GPU (TF32 off) and with the CPU reference; CUDA tensors go
in and out through DLPack; benchmark and profile time the GPU."""
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
    checked = gpu_families.check_entry(ember, torch, artifacts, entry_key, entry)
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
