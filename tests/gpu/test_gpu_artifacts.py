"""Exported models and cases run on the GPU with the runtime-only install: every entry of
the manifest (the narrow zoo with its weights, the full-size models with their weights bound
by name) agrees with PyTorch on the GPU (TF32 off) and with the CPU reference; CUDA tensors go
in and out through DLPack; benchmark and profile time the GPU; replaying the CUDA graph gives
what launching every kernel gives and reads new inputs."""
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


def _case(artifacts, name, cuda_graph=True):
    lib, inputs, refs = cases.load(artifacts / "cases", name)
    return ember.GraphModule(lib, cuda_graph=cuda_graph), inputs, refs


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


# ------------------------------------------------------------------------------ CUDA graphs
def _outputs(m):
    return [m.get_output(i).numpy() for i in range(m.get_num_outputs())]


def test_cuda_graph_replays_give_what_kernel_launches_give(artifacts):
    """Every case, with and without the CUDA graph: run 1 launches the kernels, run 2
    records and replays the graph, run 3 replays it; all bit for bit the same as launching
    every kernel, and close to the reference."""
    names = sorted(json.loads((artifacts / "cases" / "cases.json").read_text()))
    assert {"relu", "conv_bn_relu", "softmax_dense_pool"} <= set(names)
    for name in names:
        graph, inputs, refs = _case(artifacts, name, cuda_graph=True)
        eager, _, _ = _case(artifacts, name, cuda_graph=False)
        assert graph.cuda_graph and not eager.cuda_graph
        for m in (graph, eager):
            for i, x in enumerate(inputs):
                m.set_input(i, x)
        eager.run()
        want = _outputs(eager)
        for run in range(3):
            graph.run()
            for got, w, ref in zip(_outputs(graph), want, refs):
                np.testing.assert_array_equal(got, w, err_msg=f"{name}, run {run + 1}")
                if not name.startswith("tc_"):  # tensor cores: their own test's tolerance
                    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5, err_msg=name)


def test_cuda_graph_replay_reads_new_inputs(artifacts):
    """After the graph is recorded, set_input with new data (NumPy, then a CUDA torch tensor
    through DLPack, then a call with inputs) and a replay give the new data's result."""
    m, (data,), (ref,) = _case(artifacts, "relu")
    assert m.cuda_graph
    m.set_input("x", data)
    for _ in range(3):  # launch, record + replay, replay
        m.run()
    np.testing.assert_array_equal(m.get_output(0).numpy(), ref)
    rs = np.random.RandomState(46)
    fresh = rs.randn(*data.shape).astype("float32")
    m.set_input("x", fresh)  # NumPy: copied into the input buffer the graph reads
    m.run()
    np.testing.assert_array_equal(m.get_output(0).numpy(), np.maximum(fresh, 0))
    fresh = rs.randn(*data.shape).astype("float32")
    m.set_input("x", torch.from_numpy(fresh).cuda())  # a CUDA tensor, through DLPack
    m.run()
    out = torch.from_dlpack(m.get_output(0))
    np.testing.assert_array_equal(out.cpu().numpy(), np.maximum(fresh, 0))
    fresh = rs.randn(*data.shape).astype("float32")
    np.testing.assert_array_equal(m(x=fresh).numpy(), np.maximum(fresh, 0))


def test_benchmark_and_profile_with_the_cuda_graph(artifacts):
    """benchmark replays the graph (recorded before timing, even with warmup=0 on a module
    that never ran); profile launches kernels one by one; a replay afterwards still reads new
    inputs."""
    m, (data,), (ref,) = _case(artifacts, "conv_bn_relu")
    m.set_input("x", data)
    r = m.benchmark(number=5, repeat=3, warmup=0)
    assert len(r.results) == 3 and r.mean > 0
    np.testing.assert_allclose(m.get_output(0).numpy(), ref, rtol=1e-5, atol=1e-5)
    assert "Total" in m.profile(repeat=2)
    graph_ms = m.benchmark(number=20, repeat=3).median
    eager, _, _ = _case(artifacts, "conv_bn_relu", cuda_graph=False)
    eager.set_input("x", data)
    eager_ms = eager.benchmark(number=20, repeat=3).median
    print(f"conv_bn_relu: {graph_ms:.4f} ms replaying the graph, {eager_ms:.4f} ms launching")
    assert graph_ms > 0 and eager_ms > 0  # speed is the benchmarks' business, not asserted
    m2, (data,), _ = _case(artifacts, "relu")
    m2.set_input("x", data)
    m2.benchmark(number=3, repeat=2)
    fresh = np.random.RandomState(7).randn(*data.shape).astype("float32")
    m2.set_input("x", fresh)
    m2.run()
    np.testing.assert_array_equal(m2.get_output(0).numpy(), np.maximum(fresh, 0))
