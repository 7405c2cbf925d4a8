"""Small GPU cases for tests/gpu: built and exported here (full Ember), run on the GPU
machine by test_gpu_artifacts.py with the runtime-only install. Each case is a graph, its
inputs and the reference outputs computed here (by the CPU target or by PyTorch on the CPU).

    export(dir)   # writes dir/<case>.ember, <case>.in<i>.npy, <case>.ref<i>.npy, cases.json
"""
import json
import pathlib

import numpy as np


def _conv_bn_relu(rs):
    """One fused kernel (conv + batch norm + ReLU) through shared memory."""
    from ember import ir, op
    x = ir.var("x", shape=(2, 3, 20, 20))
    w = rs.randn(8, 3, 3, 3).astype("float32") * 0.2
    g, b = rs.rand(8).astype("float32") + 0.5, rs.randn(8).astype("float32")
    m, v = rs.randn(8).astype("float32"), rs.rand(8).astype("float32") + 0.5
    y = op.nn.conv2d(x, ir.const(w), padding=(1, 1), name="conv1")
    y = op.nn.batch_norm(y, ir.const(g), ir.const(b), ir.const(m), ir.const(v), name="bn1")
    y = op.nn.relu(y, name="relu1")
    data = rs.randn(2, 3, 20, 20).astype("float32")
    return ir.Function([x], y), [data], None


def _softmax_dense_pool(rs):
    """Max pooling, a dense and a softmax (a row reduction) against PyTorch."""
    import torch
    from ember import ir, op
    x = ir.var("x", shape=(4, 8, 12, 12))
    w = rs.randn(10, 8 * 6 * 6).astype("float32") * 0.1
    y = op.nn.max_pool2d(x, pool_size=(2, 2), strides=(2, 2))
    y = op.nn.softmax(op.nn.dense(op.reshape(y, newshape=(4, -1)), ir.const(w)))
    data = rs.randn(4, 8, 12, 12).astype("float32")
    t = torch.nn.functional.max_pool2d(torch.from_numpy(data), 2)
    ref = torch.softmax(t.reshape(4, -1) @ torch.from_numpy(w).T, dim=-1).numpy()
    return ir.Function([x], y), [data], [ref]


def _relu(rs):
    """A plain elementwise kernel (benchmark and profile)."""
    from ember import ir, op
    x = ir.var("x", shape=(256, 256))
    data = rs.randn(256, 256).astype("float32")
    return ir.Function([x], op.nn.relu(x)), [data], [np.maximum(data, 0)]


def round_operands(x, precision):
    """float32 values rounded as the tensor cores' operand conversion rounds them: TF32 by
    cvt.rna (to nearest, ties away from zero, 10 mantissa bits), BF16 and FP16 to nearest
    even."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    if precision == "fp16":
        return x.astype(np.float16).astype(np.float32)
    bits = x.view(np.uint32).astype(np.uint64)
    if precision == "tf32":
        bits = (bits + 0x1000) & 0xFFFFE000
    elif precision == "bf16":
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return bits.astype(np.uint32).view(np.float32)


def _tensor_core_dense(precision, m=128, n=192, k=256):
    """dense + bias + ReLU on tensor cores: the reference rounds the operands as the mma's
    conversion does and sums in float64, so only the float32 accumulation order differs; a
    fragment placed at the wrong lane would be off by the operands' own size."""
    def make(rs):
        from ember import ir, op
        x = ir.var("x", shape=(m, k))
        w = rs.randn(n, k).astype("float32") * 0.1
        b = rs.randn(n).astype("float32")
        y = op.nn.relu(op.nn.bias_add(op.nn.dense(x, ir.const(w)), ir.const(b)))
        data = rs.randn(m, k).astype("float32")
        xr, wr = (round_operands(t, precision).astype(np.float64) for t in (data, w))
        ref = np.maximum(xr @ wr.T + b, 0).astype(np.float32)
        return ir.Function([x], y), [data], [ref]
    make.precision = precision
    return make


def _tensor_core_bmm(precision):
    """A batched matmul whose B runs along N in memory (the other operand layout)."""
    def make(rs):
        from ember import ir, op
        a, b = ir.var("a", shape=(4, 64, 128)), ir.var("b", shape=(4, 128, 96))
        da = rs.randn(4, 64, 128).astype("float32")
        db = rs.randn(4, 128, 96).astype("float32")
        ar, br = (round_operands(t, precision).astype(np.float64) for t in (da, db))
        ref = np.matmul(ar, br).astype(np.float32)
        return ir.Function([a, b], op.nn.batch_matmul(a, b)), [da, db], [ref]
    make.precision = precision
    return make


def _tensor_core_conv(precision, stride, size=20):
    """A 3x3 convolution + bias + ReLU on tensor cores (output channels as the mma's rows,
    strips of 8 pixel columns as its columns), against float64 on the rounded operands."""
    def make(rs):
        import torch
        from ember import ir, op
        x = ir.var("x", shape=(2, 32, size, size))
        w = rs.randn(64, 32, 3, 3).astype("float32") * 0.1
        b = rs.randn(64).astype("float32")
        y = op.nn.conv2d(x, ir.const(w), strides=(stride, stride), padding=(1, 1))
        y = op.nn.relu(op.nn.bias_add(y, ir.const(b), axis=1))
        data = rs.randn(2, 32, size, size).astype("float32")
        xr, wr = (torch.from_numpy(round_operands(t, precision)).double() for t in (data, w))
        ref = torch.nn.functional.conv2d(xr, wr, torch.from_numpy(b).double(), stride, 1)
        return ir.Function([x], y), [data], [torch.relu(ref).float().numpy()]
    make.precision = precision
    return make


CASES = {"conv_bn_relu": _conv_bn_relu, "softmax_dense_pool": _softmax_dense_pool,
         "relu": _relu}
for _p in ("tf32", "bf16", "fp16"):
    CASES[f"tc_dense_{_p}"] = _tensor_core_dense(_p)
    # 100 x 50: the last block tiles are shifted back over the ones before
    CASES[f"tc_dense_edges_{_p}"] = _tensor_core_dense(_p, 100, 50, 80)
    CASES[f"tc_conv_{_p}"] = _tensor_core_conv(_p, 1)
    CASES[f"tc_conv_s2_{_p}"] = _tensor_core_conv(_p, 2)
    # 7 x 7 pixels: one strip of 8 columns past the edge, its stores guarded
    CASES[f"tc_conv_7x7_{_p}"] = _tensor_core_conv(_p, 1, 7)
    CASES[f"tc_bmm_{_p}"] = _tensor_core_bmm(_p)


def export(dest, target="cuda"):
    """Builds every case for `target` and writes it with inputs and references to dest."""
    import ember
    dest = pathlib.Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    index = {}
    for i, (name, make) in enumerate(sorted(CASES.items())):
        precision = getattr(make, "precision", "highest")
        if precision != "highest" and not target.startswith("cuda"):
            continue  # tensor cores are a CUDA build's
        func, inputs, refs = make(np.random.RandomState(i))
        if refs is None:  # the CPU target is the reference
            cpu = ember.GraphModule(ember.build(func, target="llvm"))
            for j, x in enumerate(inputs):
                cpu.set_input(j, x)
            cpu.run()
            refs = [cpu.get_output(j).numpy() for j in range(cpu.get_num_outputs())]
        with ember.transform.PassContext(config={"cuda.matmul_precision": precision}):
            lib = ember.build(func, target=target)
        lib.export(dest / f"{name}.ember")
        for j, x in enumerate(inputs):
            np.save(dest / f"{name}.in{j}.npy", x)
        for j, r in enumerate(refs):
            np.save(dest / f"{name}.ref{j}.npy", r)
        index[name] = {"inputs": len(inputs), "outputs": len(refs),
                       "kernels": list(lib.kernel_names), "precision": precision,
                       "mma": lib.get_source("ptx").count("mma.sync")
                       if target.startswith("cuda") else 0}
    (dest / "cases.json").write_text(json.dumps(index, indent=1))
    return index


def load(dest, name):
    """(ember.LoadedLibrary, inputs, references) of an exported case."""
    import ember
    dest = pathlib.Path(dest)
    entry = json.loads((dest / "cases.json").read_text())[name]
    inputs = [np.load(dest / f"{name}.in{j}.npy") for j in range(entry["inputs"])]
    refs = [np.load(dest / f"{name}.ref{j}.npy") for j in range(entry["outputs"])]
    return ember.load(dest / f"{name}.ember"), inputs, refs
