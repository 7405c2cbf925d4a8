"""The GPU target from Python, on any machine: PTX out of ember.build(target="cuda") (every
model family of models.py assembles with ptxas for sm_80 and sm_90), what FuseOps does
differently for the GPU, and the clear error when no GPU is present. Runs on a GPU (against
PyTorch, DLPack in and out, benchmark and profile) are tests/gpu's, on the GPU machine; the
numerics of the GPU schedules without a GPU are checked in C++
(tests/cpp/codegen/nvptx_test.cc, "GPU emulation")."""
import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

import ember
import models
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "gpu"))
import cases  # noqa: E402  (tests/gpu/cases.py: the cases the GPU suite runs)
from ember import ir, op
from ember.runtime import cuda_available

PTXAS = "/usr/local/cuda/bin/ptxas"


def conv_bn_relu(rs):
    """conv + batch norm + ReLU: the case tests/gpu runs on the GPU."""
    return cases.CASES["conv_bn_relu"](rs)[0]


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
        # One entry per distinct loop nest (kernels with the same one share it).
        funcs = {k["func"] for k in lib._kernels()}
        assert set(re.findall(r"\.entry\s+(\w+)", ptx)) == funcs and funcs
        if not os.access(PTXAS, os.X_OK):
            pytest.skip(f"{PTXAS} not found: PTX not assembled")
        result = assemble(ptx, arch, tmp_path)
        assert result.returncode == 0, f"{family} for {arch}:\n{result.stderr[:2000]}"


def dense_add_layer_norm(rs, rows=16, width=64):
    x = ir.var("x", shape=(rows, width))
    w = ir.const(rs.randn(width, width).astype("float32") * 0.1)
    y = op.add(op.nn.dense(x, w, name="fc"), x, name="residual")
    return ir.Function([x], op.nn.layer_norm(y, name="norm"))


def test_gpu_runs_a_reduction_of_a_gemm_as_its_own_kernel():
    """On the CPU the layer norm computes the dense's row tiles inside its reduction; the GPU
    has no such schedule (its fallback ran a whole GEMM row on one thread: a BERT layer at seq
    128 took 248 ms on an H200), so there the norm is a block-per-row kernel and the report
    says why."""
    f = dense_add_layer_norm(np.random.RandomState(3))
    cpu = ember.build(f, target="llvm")
    assert cpu.kernel_names == ["fc + residual + norm"]
    gpu = ember.build(f, target="cuda")
    assert gpu.kernel_names == ["fc + residual", "norm"]
    (why,) = [w for p, c, w in gpu.fusion_report().unfused if "'norm'" in c]
    assert "GPU target has no schedule" in why and "nn.dense" in why, why
    ptx = gpu.get_source("ptx")
    assert ptx.count("bar.sync") >= 2  # the GEMM's shared tiles and the norm's tree


def test_gpu_runs_the_second_of_two_anchors_as_its_own_kernel():
    """A depthwise conv then a pointwise conv (MobileNetV2's blocks) is one kernel on the CPU.
    The GPU has no such schedule: its fallback recomputed the depthwise conv per output of
    the pointwise one (MobileNetV2 on an H200: 5.7 ms fused, 1.8 ms apart), so there each is
    its own kernel and the report says why. A small conv then a max pooling (a few taps)
    stays one kernel on both; a conv with outputs enough for the GPU's tiled template (ResNet-50's
    stem at batch 32: 6.8 ms as one untiled kernel) runs apart from its pooling there."""
    rs = np.random.RandomState(4)
    x = ir.var("x", shape=(1, 16, 12, 12))
    dw = op.nn.conv2d(x, ir.const(rs.randn(16, 1, 3, 3).astype("float32")), padding=(1, 1),
                      groups=16, name="dw")
    pw = op.nn.conv2d(op.clip(dw, 0.0, 6.0, name="relu6"),
                      ir.const(rs.randn(24, 16, 1, 1).astype("float32")), name="pw")
    conv = op.nn.conv2d(x, ir.const(rs.randn(8, 16, 3, 3).astype("float32")), name="conv")
    pool = op.nn.max_pool2d(conv, (2, 2), name="pool")
    big_x = ir.var("x", shape=(2, 3, 128, 128))  # 2 x 64 x 128 x 128 conv outputs
    big = op.nn.max_pool2d(
        op.nn.conv2d(big_x, ir.const(rs.randn(64, 3, 3, 3).astype("float32")), padding=(1, 1),
                     name="stem"), (2, 2), name="big_pool")
    gpu = {}
    for f, key, pattern, gpu_kernels in (
            (ir.Function([x], pw), "pointwise conv", "pointwise conv", 2),
            (ir.Function([x], pool), "pooling", "pooling", 1),
            (ir.Function([big_x], big), "big pooling", "pooling", 2)):
        # Plain layout, and whatever the CPU cost rule says at this host's vector width.
        with ember.transform.PassContext(disabled_passes=["AlterOpLayout"],
                                         config={"FuseOps.cost_model": "none"}):
            cpu = ember.build(f, target="llvm")
        assert len(cpu.kernel_names) == 1 and any(
            pattern in p for k in cpu.fusion_report() for p in k.patterns), cpu.fusion_report()
        gpu[key] = ember.build(f, target="cuda")
        assert len(gpu[key].kernel_names) == gpu_kernels, gpu[key].fusion_report()
    (why,) = [w for p, c, w in gpu["pointwise conv"].fusion_report().unfused if "'pw'" in c]
    assert "on the GPU target one kernel would recompute" in why and "nn.conv2d" in why, why
    (why,) = [w for p, c, w in gpu["big pooling"].fusion_report().unfused if "'big_pool'" in c]
    assert "without tiles" in why and "nn.max_pool2d" in why, why


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


def test_cuda_graph_keyword_on_a_cpu_module_is_accepted_and_ignored(tmp_path):
    """GraphModule(lib, cuda_graph=...) takes a bool (NumPy's too) for a Library and a
    loaded model; a CPU module has no CUDA graph (cuda_graph is False) and runs as before."""
    x = ir.var("x", shape=(4, 5))
    lib = ember.build(ir.Function([x], op.nn.relu(x)), target="llvm")
    lib.export(tmp_path / "relu.ember")
    data = np.random.RandomState(0).randn(4, 5).astype("float32")
    for model in (lib, ember.load(tmp_path / "relu.ember")):
        for flag in (True, False, np.bool_(True)):
            m = ember.GraphModule(model, cuda_graph=flag)
            assert m.cuda_graph is False
            for _ in range(3):  # the runs a GPU module would launch, record and replay
                np.testing.assert_array_equal(m(x=data).numpy(), np.maximum(data, 0))
            assert m.benchmark(number=2, repeat=2, warmup=0).mean > 0
    assert ember.GraphModule(lib).cuda_graph is False  # the default (True) is ignored too


def test_cuda_graph_must_be_a_bool():
    x = ir.var("x", shape=(3,))
    lib = ember.build(ir.Function([x], op.nn.relu(x)), target="llvm")
    for bad in ("yes", 1, None, 0.0):
        with pytest.raises(ember.EmberError, match="cuda_graph must be True or False"):
            ember.GraphModule(lib, cuda_graph=bad)
        with pytest.raises(ember.EmberError, match="cuda_graph must be True or False"):
            lib._create_executor(cuda_graph=bad)  # the binding checks it too
    with pytest.raises(TypeError):
        ember.GraphModule(lib, True)  # keyword only
    with pytest.raises(AttributeError):
        ember.GraphModule(lib).cuda_graph = True  # read-only


@pytest.mark.skipif(cuda_available(), reason="a GPU is present")
def test_cuda_graph_off_without_a_gpu_is_the_same_clear_error():
    x = ir.var("x", shape=(5,))
    lib = ember.build(ir.Function([x], op.nn.relu(x)), target="cuda")
    for flag in (True, False):
        with pytest.raises(ember.EmberError, match=r"no CUDA (driver|GPU) found"):
            ember.GraphModule(lib, cuda_graph=flag)


# Runs on a GPU: tests/gpu (the runtime-only suite, run by scripts/gpu_run.sh on the GPU
# machine with artifacts that benchmarks/gpu_families.py exports here) checks the exported
# zoo, the full-size models and these kernels' cases there: DLPack in and out, softmax,
# dense and pooling against PyTorch, benchmark and profile, and CUDA graph replays (the
# same outputs as launching every kernel, new inputs read, benchmark replaying).


@pytest.mark.parametrize("precision,shape", [("tf32", "m16n8k8.row.col.f32.tf32.tf32.f32"),
                                             ("bf16", "m16n8k16.row.col.f32.bf16.bf16.f32"),
                                             ("fp16", "m16n8k16.row.col.f32.f16.f16.f32")])
def test_matmul_precision_puts_a_transformer_layer_on_tensor_cores(precision, shape, tmp_path):
    """PassContext config cuda.matmul_precision: a transformer layer's GEMMs (dense layers
    over [batch, tokens, hidden]) become mma.sync of that precision, fed by cp.async; the
    float32 build has none; the PTX assembles."""
    import torch
    torch.manual_seed(0)
    model = torch.nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, batch_first=True).eval()
    with torch.no_grad():
        mod, params = ember.frontend.from_pytorch(model, [torch.randn(2, 64, 64)])
    with ember.transform.PassContext(config={"cuda.matmul_precision": precision}):
        lib = ember.build(mod, target="cuda -arch=sm_90", params=params)
    ptx = lib.get_source("ptx")
    assert f"mma.sync.aligned.{shape}" in ptx
    assert "cp.async.ca.shared.global" in ptx
    assert "mma.sync" not in ember.build(mod, target="cuda -arch=sm_90",
                                         params=params).get_source("ptx")
    if os.path.exists(PTXAS):
        done = assemble(ptx, "sm_90", tmp_path)
        assert done.returncode == 0, done.stdout + done.stderr


def test_matmul_precision_errors_say_what_to_do():
    x, w = ir.var("x", shape=(64, 64)), ir.var("w", shape=(64, 64))
    f = ir.Function([x, w], op.nn.dense(x, w))
    with ember.transform.PassContext(config={"cuda.matmul_precision": "tf32"}):
        with pytest.raises(ember.EmberError, match="is for target \"cuda\""):
            ember.build(f, target="llvm")
        with pytest.raises(ember.EmberError, match="sm_80 or newer"):
            ember.build(f, target="cuda -arch=sm_75")
    with ember.transform.PassContext(config={"cuda.matmul_precision": "half"}):
        with pytest.raises(ember.EmberError, match="unknown matmul precision 'half'"):
            ember.build(f, target="cuda")
