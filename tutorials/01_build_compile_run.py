"""Lesson 01: build a graph, compile it, run it.

    PYTHONPATH=python python3 tutorials/01_build_compile_run.py

Ember compiles a dataflow graph of tensor operators into native code. This lesson builds a
small network by hand — convolution, batch norm, ReLU — compiles it for this CPU, runs it
with the graph executor, and checks the result against NumPy. (Lesson 03 and later start
from a PyTorch model instead; the graph underneath is the same.)
"""
import numpy as np

import ember
from ember import ir, op


def numpy_reference(x, w, gamma, beta, mean, var, eps=1e-5):
    """The same network written directly in NumPy, to check Ember's answer."""
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    y = np.zeros((n, o, h, wd), dtype=np.float64)
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, :, i:i + h, j:j + wd]  # n, c, h, w
            y += np.einsum("nchw,oc->nohw", patch, w[:, :, i, j])
    scale = gamma / np.sqrt(var + eps)
    y = (y - mean[None, :, None, None]) * scale[None, :, None, None] + beta[None, :, None, None]
    return np.maximum(y, 0).astype(np.float32)


def main():
    rs = np.random.RandomState(0)
    # 1. Inputs are variables with a name, a shape and a dtype. Weights are constants: they
    #    keep their NumPy array (and its dtype).
    x = ir.var("x", shape=(1, 3, 32, 32), dtype="float32")
    w = rs.randn(8, 3, 3, 3).astype("float32")
    gamma, beta = rs.rand(8).astype("float32") + 0.5, rs.randn(8).astype("float32")
    mean, var = rs.randn(8).astype("float32"), rs.rand(8).astype("float32") + 0.5

    # 2. Operators build the graph. Each call checks its inputs right away, so a mistake
    #    (say, a weight with the wrong number of channels) is reported here, at the node.
    y = op.nn.conv2d(x, ir.const(w, name="conv.weight"), padding=(1, 1), name="conv")
    y = op.nn.batch_norm(y, ir.const(gamma), ir.const(beta), ir.const(mean), ir.const(var),
                         name="bn")
    y = op.nn.relu(y, name="relu")
    f = ir.Function([x], y)
    print(f)  # the graph in text form

    # 3. Compile for the host CPU. `lib` holds the generated code; you can read it.
    lib = ember.build(f, target="llvm")
    print(lib.get_source("loop")[:1500])  # the loop IR of the kernels (first lines)

    # 4. Run it with the graph executor: set the input, run, read the output. The output
    #    is a view of the executor's buffer; np.asarray does not copy it.
    m = ember.GraphModule(lib)
    data = rs.randn(1, 3, 32, 32).astype("float32")
    m.set_input("x", data)
    m.run()
    out = np.asarray(m.get_output(0))

    # 5. Check against NumPy (float32 sums in a different order: allow 1e-4).
    ref = numpy_reference(data, w, gamma, beta, mean, var)
    err = float(np.abs(out - ref).max())
    print(f"max abs error vs NumPy: {err:.2e}")
    assert err < 1e-4, err

    # 6. Time it: the TVM-style table of mean/median/max/min/std in milliseconds.
    print(m.benchmark(number=10, repeat=20))
    return err


def test_lesson_01():
    assert main() < 1e-4


if __name__ == "__main__":
    main()
