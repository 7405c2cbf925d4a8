"""The GPU target from Python: PTX out of ember.build(target="cuda") on any machine (every
model family of models.py assembles with ptxas for sm_80 and sm_90), the clear error when no
GPU is present, and (only where a GPU exists) runs compared with the CPU target, CUDA torch
tensors in and out through DLPack, benchmark and profile. The numerics of the GPU schedules
without a GPU are checked in C++ (tests/cpp/codegen/nvptx_test.cc, "GPU emulation")."""
import os
import re
import subprocess

import numpy as np
import pytest
import torch

import ember
import models
from ember import ir, op
from ember.runtime import cuda_available

PTXAS = "/usr/local/cuda/bin/ptxas"
needs_gpu = pytest.mark.skipif(not cuda_available(), reason="no CUDA GPU: kernels not run")


def conv_bn_relu(rs):
    x = ir.var("x", shape=(2, 3, 20, 20))
    w = rs.randn(8, 3, 3, 3).astype("float32") * 0.2
    g, b = rs.rand(8).astype("float32") + 0.5, rs.randn(8).astype("float32")
    m, v = rs.randn(8).astype("float32"), rs.rand(8).astype("float32") + 0.5
    y = op.nn.conv2d(x, ir.const(w), padding=(1, 1), name="conv1")
    y = op.nn.batch_norm(y, ir.const(g), ir.const(b), ir.const(m), ir.const(v), name="bn1")
    y = op.nn.relu(y, name="relu1")
    return ir.Function([x], y)


def assemble(ptx, arch, tmp_path):
    path = tmp_path / f"kernel_{arch}.ptx"
    path.write_text(ptx)
    return subprocess.run([PTXAS, f"-arch={arch}", "-o", os.devnull, str(path)],
                          capture_output=True, text=True)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_network_compiles_to_ptx_that_ptxas_accepts(arch, tmp_path):
    lib = ember.build(conv_bn_relu(np.random.RandomState(0)), target=f"cuda -arch={arch}")
    ptx = lib.get_source("ptx")
    assert f".target {arch}" in ptx
    assert "%tid.x" in ptx and "%ctaid.x" in ptx
    assert "tanh.approx" not in ptx and "ex2.approx" not in ptx  # Ember's own expansions
    assert "define" in lib.get_source("ll")
    if not os.access(PTXAS, os.X_OK):
        pytest.skip(f"{PTXAS} not found: PTX not assembled")
    result = assemble(ptx, arch, tmp_path)
    assert result.returncode == 0, result.stderr


def relu_before_every_global_store(ptx):
    """Every value stored to global memory is defined by a max (the ReLU applied in
    registers), and nothing else is stored: the epilogue is fused into the conv's kernel."""
    stores = list(re.finditer(r"st\.global\.f32\s+\[[^\]]*\],\s*(%f\d+);", ptx))
    assert stores and len(stores) == len(re.findall(r"st\.global", ptx)), ptx
    for m in stores:
        defs = re.findall(r"\n\s*([a-z][A-Za-z0-9.]*)\s+" + re.escape(m.group(1)) + ",",
                          ptx[:m.start()])
        assert defs and defs[-1].startswith("max."), \
            f"{m.group(1)} is stored but defined by {defs[-1:]}, not by the ReLU's max"


def test_conv_bn_relu_is_one_kernel_with_max_before_each_store():
    lib = ember.build(conv_bn_relu(np.random.RandomState(0)), target="cuda")
    assert lib.kernel_names == ["conv1 + bn1 + relu1"]
    ptx = lib.get_source("ptx")
    assert len(re.findall(r"\.entry\s", ptx)) == 1, ptx
    assert ".shared" in ptx and "bar.sync" in ptx  # tiled through shared memory
    relu_before_every_global_store(ptx)


def test_conv_relu_is_one_kernel_with_max_before_the_store():
    x = ir.var("x", shape=(1, 4, 10, 10))
    w = ir.const(np.ones((6, 4, 3, 3), dtype="float32"))
    f = ir.Function([x], op.nn.relu(op.nn.conv2d(x, w, padding=(1, 1))))
    ptx = ember.build(f, target="cuda").get_source("ptx")
    assert len(re.findall(r"\.entry\s", ptx)) == 1, ptx
    relu_before_every_global_store(ptx)


@pytest.mark.parametrize("family", sorted(models.FAMILIES))
def test_every_model_family_assembles_for_sm80_and_sm90(family, tmp_path):
    """Every fused kernel of every family: the frontend's graph built for both archs, and
    the whole PTX module assembled by ptxas."""
    model, inputs = models.make(family, batch=2)
    func, params = ember.frontend.from_pytorch(model, inputs)
    for arch in ("sm_80", "sm_90"):
        lib = ember.build(func, target=f"cuda -arch={arch}", params=params)
        ptx = lib.get_source("ptx")
        assert len(re.findall(r"\.entry\s", ptx)) == len(lib.kernel_names) > 0
        if not os.access(PTXAS, os.X_OK):
            pytest.skip(f"{PTXAS} not found: PTX not assembled")
        result = assemble(ptx, arch, tmp_path)
        assert result.returncode == 0, f"{family} for {arch}:\n{result.stderr[:2000]}"


def test_sources_and_unknown_formats():
    x = ir.var("x", shape=(5,))
    lib = ember.build(ir.Function([x], op.nn.relu(x)), target="cuda")
    with pytest.raises(ember.EmberError, match="'ptx' and 'll'"):
        lib.get_source("asm")
    with pytest.raises(ember.EmberError, match="sm_7"):
        ember.build(ir.Function([x], op.nn.relu(x)), target="cuda -arch=sm_7")


@pytest.mark.skipif(cuda_available(), reason="a GPU is present")
def test_running_without_a_gpu_is_a_clear_error():
    x = ir.var("x", shape=(5,))
    lib = ember.build(ir.Function([x], op.nn.relu(x)), target="cuda")
    with pytest.raises(ember.EmberError, match=r"no CUDA (driver|GPU) found.*target=\"llvm\""):
        ember.GraphModule(lib)


# ----------------------------------------------------------------- with a GPU only

@needs_gpu
def test_gpu_matches_cpu_with_numpy_and_torch_inputs():
    rs = np.random.RandomState(1)
    f = conv_bn_relu(rs)
    data = rs.randn(2, 3, 20, 20).astype("float32")
    cpu = ember.GraphModule(ember.build(f, target="llvm"))
    cpu.set_input("x", data)
    cpu.run()
    ref = cpu.get_output(0).numpy()

    gpu = ember.GraphModule(ember.build(f, target="cuda"))
    assert gpu.device == "cuda:0"
    gpu.set_input("x", data)  # NumPy: copied to the GPU
    gpu.run()
    out = gpu.get_output(0)
    assert out.device == "cuda:0"
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-5, atol=1e-5)
    with pytest.raises(BufferError):
        np.asarray(out)  # device memory is never read from the host by accident

    gpu.set_input("x", torch.from_numpy(data).cuda())  # a CUDA tensor: read on the GPU
    gpu.run()
    t = torch.from_dlpack(gpu.get_output(0))  # shares the GPU buffer
    assert t.is_cuda
    np.testing.assert_allclose(t.cpu().numpy(), ref, rtol=1e-5, atol=1e-5)


@needs_gpu
def test_gpu_softmax_dense_and_pooling_match_torch():
    rs = np.random.RandomState(2)
    x = ir.var("x", shape=(4, 8, 12, 12))
    w = rs.randn(10, 8 * 6 * 6).astype("float32") * 0.1
    y = op.nn.max_pool2d(x, pool_size=(2, 2), strides=(2, 2))
    y = op.nn.softmax(op.nn.dense(op.reshape(y, newshape=(4, -1)), ir.const(w)))
    m = ember.GraphModule(ember.build(ir.Function([x], y), target="cuda"))
    data = rs.randn(4, 8, 12, 12).astype("float32")
    m.set_input("x", data)
    m.run()
    t = torch.nn.functional.max_pool2d(torch.from_numpy(data), 2)
    ref = torch.softmax(t.reshape(4, -1) @ torch.from_numpy(w).T, dim=-1).numpy()
    np.testing.assert_allclose(m.get_output(0).numpy(), ref, rtol=1e-4, atol=1e-6)


@needs_gpu
def test_gpu_benchmark_and_profile_use_events():
    x = ir.var("x", shape=(256, 256))
    m = ember.GraphModule(ember.build(ir.Function([x], op.nn.relu(x)), target="cuda"))
    m.set_input("x", np.ones((256, 256), dtype="float32"))
    r = m.benchmark(number=5, repeat=3)
    assert len(r.results) == 3 and r.mean > 0
    assert "Total" in m.profile(repeat=2)
