"""Writes the seed corpus of the model-file fuzzer (tests/fuzz/model_file_fuzz.cc): a few
small exported models (CPU and PTX code, parameters, views, several inputs and outputs) and
.npy files of each dtype Ember reads. Usage: make_corpus.py OUT_DIR"""
import os
import sys

import numpy as np

import ember
from ember import ir, op


def models():
    rng = np.random.RandomState(0)
    x = ir.var("x", (4, 8))
    w = ir.const(np.arange(8, dtype=np.float32), "w")
    yield "add_relu", ir.Function([x], op.nn.relu(op.add(x, w))), "llvm"

    x = ir.var("x", (4, 8))
    w = ir.const(np.arange(8, dtype=np.float32), "w")
    yield "add_relu_ptx", ir.Function([x], op.nn.relu(op.add(x, w))), "cuda -arch=sm_80"

    img = ir.var("img", (1, 3, 8, 8))
    k = ir.const(rng.rand(4, 3, 3, 3).astype(np.float32), "conv.weight")
    y = op.nn.relu(op.nn.conv2d(img, k, strides=(1, 1), padding=(1, 1), name="conv"))
    y = op.nn.max_pool2d(y, pool_size=(2, 2), strides=(2, 2))
    dw = ir.const(rng.rand(5, 64).astype(np.float32), "fc.weight")
    yield "conv_pool_dense", ir.Function([img], op.nn.dense(op.reshape(y, (1, 64)), dw)), "llvm"

    a = ir.var("a", (2, 6))
    b = ir.var("b", (2, 6), dtype="int64")
    flat = op.reshape(a, (3, 4))
    total = op.add(op.cast(b, "float32"), a)
    yield "two_inputs_two_outputs", ir.Function([a, b], ir.Tuple([flat, total])), "llvm"


def arrays():
    yield "f32", np.arange(6, dtype=np.float32).reshape(2, 3)
    yield "f64_empty", np.zeros((0, 4), dtype=np.float64)
    yield "i32", np.array([1, -2, 3], dtype=np.int32)
    yield "i64_scalar", np.array(7, dtype=np.int64)
    yield "bool", np.array([True, False, True])


def main(out):
    os.makedirs(out, exist_ok=True)
    for name, fn, target in models():
        ember.build(fn, target=target).export(os.path.join(out, name + ".ember"))
    for name, a in arrays():
        with open(os.path.join(out, name + ".npy"), "wb") as f:
            np.save(f, a)


if __name__ == "__main__":
    main(sys.argv[1])
