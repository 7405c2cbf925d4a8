"""Lesson 06: the GPU target.

    PYTHONPATH=python python3 tutorials/06_gpu_target.py

The same graph that lesson 01 compiled for the CPU compiles for an NVIDIA GPU with
target="cuda". Ember lowers each kernel with a GPU schedule (loops bound to blockIdx.x and
threadIdx.x), generates LLVM IR through the same code generator as the CPU, and lets
LLVM's NVPTX back end print PTX, the GPU's portable assembly. Building needs no GPU and no
CUDA: this lesson prints the PTX anywhere, saves and reloads it, and runs it only where a
GPU exists.
"""
import os
import tempfile

import numpy as np

import ember
from ember import ir, op
from ember.runtime import cuda_available


def conv_relu():
    """conv2d + ReLU: FuseOps makes them one kernel, the ReLU applied before the store."""
    rs = np.random.RandomState(0)
    x = ir.var("x", shape=(1, 8, 16, 16), dtype="float32")
    w = rs.randn(16, 8, 3, 3).astype("float32") * 0.1
    y = op.nn.conv2d(x, ir.const(w, name="conv.weight"), padding=(1, 1), name="conv")
    y = op.nn.relu(y, name="relu")
    return ir.Function([x], y), w


def numpy_reference(x, w):
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    y = np.zeros((1, w.shape[0], 16, 16), dtype=np.float64)
    for i in range(3):
        for j in range(3):
            y += np.einsum("nchw,oc->nohw", xp[:, :, i:i + 16, j:j + 16], w[:, :, i, j])
    return np.maximum(y, 0).astype(np.float32)


def main():
    f, w = conv_relu()

    # 1. Build for the GPU. The default architecture is sm_80 (Ampere); "cuda -arch=sm_90"
    #    targets Hopper. Nothing here touches a GPU.
    lib = ember.build(f, target="cuda")

    # 2. The loop IR shows the GPU schedule: one block per output tile (blockIdx.x). Inside
    #    it, loops bound to threadIdx.x run one after the other as phases: zero the tile's
    #    accumulator, then per chunk of input channels copy the input and weight tiles the
    #    block needs and let each thread accumulate its 4 x 4 register tile, and finally
    #    apply the ReLU to the accumulator and store. The code generator makes the buffers
    #    the phases share block-wide shared memory, with a barrier after each phase.
    print(lib.get_source("loop"))

    # 3. The PTX: one `.entry` per kernel. Thread and block indices are the special
    #    registers %tid.x and %ctaid.x; `.shared` holds the tiles, `bar.sync` separates the
    #    phases, and `max` is the ReLU, just before each `st.global`.
    ptx = lib.get_source("ptx")
    print(ptx[:3000])
    assert ".entry" in ptx and "%tid.x" in ptx and "st.global" in ptx
    assert ".shared" in ptx and "bar.sync" in ptx

    # 4. Save it for a GPU machine that has no compiler: the artifact holds the PTX, its
    #    architecture and each kernel's launch dimensions. ember.load needs no GPU (only
    #    running does), and a runtime-only install (EMBER_RUNTIME_ONLY=ON, no LLVM) loads
    #    and runs it; benchmarks/gpu_families.py with scripts/gpu_run.sh does this for the
    #    whole model zoo.
    with tempfile.TemporaryDirectory() as d:
        lib.export(os.path.join(d, "conv_relu.ember"))
        loaded = ember.load(os.path.join(d, "conv_relu.ember"))  # read whole: d may go
    assert loaded.target == "cuda" and loaded.get_source("ptx") == ptx

    # 5. Run it, where a GPU exists. Inputs may be NumPy arrays (copied to the GPU) or CUDA
    #    torch tensors (read in place through DLPack); the output lives on the GPU, and
    #    .numpy() copies it back.
    if not cuda_available():
        print("no CUDA GPU here: skipping the run (ember.GraphModule(lib) would raise "
              "EmberError: no CUDA driver found)")
        return None
    m = ember.GraphModule(loaded)  # runs like ember.GraphModule(lib)
    data = np.random.RandomState(1).randn(1, 8, 16, 16).astype("float32")
    m.set_input("x", data)
    m.run()
    out = m.get_output(0).numpy()
    err = float(np.abs(out - numpy_reference(data, w)).max())
    print(f"max abs error vs NumPy: {err:.2e}")
    assert err < 1e-4, err
    # 6. GPU time comes from CUDA events. From the second run on, the module replays the
    #    whole run recorded as one CUDA graph (one launch instead of one per kernel);
    #    ember.GraphModule(lib, cuda_graph=False) launches every kernel each time.
    print(m.benchmark(number=10, repeat=20))
    return err


def tensor_cores():
    """7. Tensor cores: a GEMM built with cuda.matmul_precision "tf32" (or "bf16", "fp16")
    runs as warp-level mma.sync tiles, the operands copied into shared memory with cp.async
    while the previous chunk multiplies; the sums and the fused bias and ReLU stay float32."""
    rs = np.random.RandomState(2)
    x = ir.var("x", shape=(256, 128))
    w, b = rs.randn(192, 128).astype("float32") * 0.1, rs.randn(192).astype("float32")
    y = op.nn.relu(op.nn.bias_add(op.nn.dense(x, ir.const(w)), ir.const(b)))
    with ember.transform.PassContext(config={"cuda.matmul_precision": "tf32"}):
        lib = ember.build(ir.Function([x], y), target="cuda -arch=sm_90")
    ptx = lib.get_source("ptx")
    assert "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32" in ptx
    assert "cp.async" in ptx
    if not cuda_available():
        return None
    data = rs.randn(256, 128).astype("float32")
    m = ember.GraphModule(lib)
    m.set_input("x", data)
    m.run()
    ref = np.maximum(data.astype(np.float64) @ w.T + b, 0)
    err = float(np.abs(m.get_output(0).numpy() - ref).max() / np.abs(ref).max())
    print(f"TF32 tensor cores: max error {err:.1e} of the output scale (float32: ~1e-7)")
    assert err < 1e-2, err
    return err


def test_lesson_06():
    err = main()
    assert err is None or err < 1e-4
    tensor_cores()


if __name__ == "__main__":
    main()
    tensor_cores()
