"""Helpers shared by the op tests: build a graph over NumPy inputs, run it, compare."""
import numpy as np
import pytest
import torch

import ember
from ember import ir

EW = dict(rtol=1e-5, atol=1e-5)    # elementwise / layout / pooling / softmax
GEMM = dict(rtol=1e-4, atol=1e-4)  # conv2d / dense / matmul / batch_matmul (summation order)


def run(make, *inputs):
    """Builds make(*vars) (one expression or a list of them) over one ir.var per input
    array, runs it, and returns the outputs as NumPy arrays (a list when make gave one)."""
    xs = [ir.var(f"in{i}", shape=a.shape, dtype=a.dtype.name) for i, a in enumerate(inputs)]
    out = make(*xs)
    many = isinstance(out, (list, tuple))
    body = ir.Tuple(list(out)) if many else out
    m = ember.GraphModule(ember.build(ir.Function(xs, body), target="llvm"))
    for i, a in enumerate(inputs):
        m.set_input(f"in{i}", a)
    m.run()
    outs = [m.get_output(k).numpy() for k in range(len(out) if many else 1)]
    return outs if many else outs[0]


def build_run(func, inputs, vector_bits, disabled_passes=(), config=None):
    """Builds `func` for `llvm -vector-bits=N` with the passes disabled (and the PassContext
    config given), runs it on the inputs (in order); returns the Library and the outputs as
    NumPy arrays."""
    with ember.transform.PassContext(disabled_passes=list(disabled_passes), config=config):
        lib = ember.build(func, target=f"llvm -vector-bits={vector_bits}")
    m = ember.GraphModule(lib)
    for i, a in enumerate(inputs):
        m.set_input(i, a)
    m.run()
    return lib, [np.asarray(m.get_output(i)).copy() for i in range(m.get_num_outputs())]


# The CPUs that structure assertions at each width are written for: Zen 3 at 256 bits (FMA
# latency 4, 2 a cycle, 512 KB L2), Zen 4 at 512 (its 1 MB L2).
STRUCTURE_CPUS = {256: "znver3", 512: "znver4"}


def build_for(func, cpu, vector_bits, disabled_passes=(), config=None):
    """Builds `func` for the named CPU (`llvm -mcpu=CPU -vector-bits=N`) without running it:
    an assertion on the code's structure (tiles, loops, layouts: the machine model's
    decisions) reads this build, so it holds on every host; numbers come from build_run."""
    with ember.transform.PassContext(disabled_passes=list(disabled_passes), config=config):
        return ember.build(func, target=f"llvm -mcpu={cpu} -vector-bits={vector_bits}")


def t(a):
    return torch.from_numpy(np.ascontiguousarray(a))


def check(got, want, tol):
    want = want.numpy() if isinstance(want, torch.Tensor) else np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    np.testing.assert_allclose(got, want, **tol)


def error_of(fn):
    """The message of the EmberError that fn() raises (the test fails if it raises none)."""
    with pytest.raises(ember.EmberError) as e:
        fn()
    return str(e.value)
