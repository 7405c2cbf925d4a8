"""Threads and processes: one GraphModule shared by threads (calling it is one step per
caller, so each thread gets the outputs of its own inputs), outputs never alias the model's
weights writably, and the runtime's thread pool (bounded, and usable after fork)."""
import threading

import numpy as np
import pytest

import ember
from ember import EmberError, ir, op


@pytest.fixture(scope="module")
def two_layer():
    """x (8, 64) -> dense -> relu -> dense: two kernels with an intermediate between them."""
    rng = np.random.RandomState(0)
    w1 = rng.rand(32, 64).astype(np.float32) - 0.5
    w2 = rng.rand(16, 32).astype(np.float32) - 0.5
    x = ir.var("x", (8, 64))
    y = op.nn.dense(op.nn.relu(op.nn.dense(x, ir.const(w1, "w1"))), ir.const(w2, "w2"))
    lib = ember.build(ir.Function([x], y))
    return lib, lambda a: np.maximum(a @ w1.T, 0) @ w2.T


def test_threads_sharing_one_module_get_their_own_results(two_layer):
    lib, reference = two_layer
    m = ember.GraphModule(lib)
    errors = []

    def worker(t):
        rng = np.random.RandomState(t)
        for _ in range(100):
            x = rng.rand(8, 64).astype(np.float32)
            got = m(x=x).numpy()  # set, run and copy the output as one step
            if not np.allclose(got, reference(x), rtol=1e-4, atol=1e-4):
                errors.append(t)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, f"wrong results in threads {sorted(set(errors))}"


def test_calling_a_module(two_layer):
    lib, reference = two_layer
    m = ember.GraphModule(lib)
    x = np.random.RandomState(1).rand(8, 64).astype(np.float32)
    for out in (m(x), m(x=x), m.run(x=x)):
        assert isinstance(out, ember.Tensor)
        np.testing.assert_allclose(out.numpy(), reference(x), rtol=1e-4, atol=1e-4)
    a = m(x=x)
    m(x=np.zeros_like(x))
    np.testing.assert_allclose(a.numpy(), reference(x), rtol=1e-4, atol=1e-4)  # a copy
    assert m.run() is None
    with pytest.raises(EmberError, match="missing: x"):
        m()
    with pytest.raises(EmberError, match="unknown input 'y'.*\\(x\\)"):
        m(x=x, y=x)
    with pytest.raises(EmberError, match="'x' was given twice"):
        m(x, x=x)
    with pytest.raises(EmberError, match="1 input"):
        m(x, x)
    with pytest.raises(EmberError, match="'x' expects float32"):
        m(x=x.astype(np.float64))


def test_several_outputs_are_a_tuple():
    x = ir.var("x", (4,))
    m = ember.GraphModule(ember.build(ir.Function([x], ir.Tuple([op.nn.relu(x), op.negative(x)]))))
    a = np.array([-1, 2, -3, 4], np.float32)
    relu, neg = m(x=a)
    np.testing.assert_array_equal(relu.numpy(), np.maximum(a, 0))
    np.testing.assert_array_equal(neg.numpy(), -a)


def test_an_output_that_is_a_weight_is_not_writable_through(tmp_path):
    w = np.arange(6, dtype=np.float32)
    x = ir.var("x", (6,))
    wc = ir.const(w, "w")
    lib = ember.build(ir.Function([x], ir.Tuple([op.add(x, wc), wc])))
    for library in (lib, _exported(lib, tmp_path)):
        m1, m2 = ember.GraphModule(library), ember.GraphModule(library)
        m1.run()
        np.asarray(m1.get_output(1))[:] = -100  # the caller's copy, not the weight
        np.testing.assert_array_equal(m1.get_output(1).numpy(), w)
        m2.set_input("x", np.ones(6, np.float32))
        m2.run()
        np.testing.assert_array_equal(m2.get_output(0).numpy(), w + 1)
        np.testing.assert_array_equal(m2.get_output(1).numpy(), w)


def _exported(lib, tmp_path):
    path = tmp_path / "weights.ember"
    lib.export(path)
    return ember.load(path)


# ------------------------------------------------------------------ the runtime's thread pool
# Each runs in a fresh interpreter: the pool is process-wide state.
_SCRIPT_HEAD = """
import os, sys, threading
import numpy as np
import ember
from ember import ir, op
x = ir.var("x", (64, 512))
m = ember.GraphModule(ember.build(ir.Function([x], op.tanh(op.nn.relu(x)))))
a = np.random.RandomState(0).randn(64, 512).astype(np.float32)
want = np.tanh(np.maximum(a, 0))
def check(module):
    out = module(x=a).numpy()
    return bool(np.allclose(out, want, atol=1e-6))
"""


def _run_script(body, timeout=120):
    import os
    import subprocess
    import sys
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([os.path.join(os.path.dirname(ember.__file__), ".."),
                                         env.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, "-c", _SCRIPT_HEAD + body], env=env, timeout=timeout,
                          capture_output=True, text=True)


def test_a_forked_child_runs_models():
    result = _run_script("""
ember.set_num_threads(4)
assert check(m)              # the parent's pool is running
pid = os.fork()
if pid == 0:
    ok = check(m) and check(ember.GraphModule(m.lib))   # must not hang
    os._exit(0 if ok else 1)
_, status = os.waitpid(pid, 0)
assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
assert check(m)              # the parent's pool still works
print("ok")
""", timeout=60)
    assert result.returncode == 0 and "ok" in result.stdout, result.stdout + result.stderr


def test_threads_running_models_share_one_pool():
    result = _run_script("""
ember.set_num_threads(8)
modules = [ember.GraphModule(m.lib) for _ in range(6)]
before = len(os.listdir("/proc/self/task"))
peak, bad = [0], []
def worker(module):
    for _ in range(30):
        if not check(module):
            bad.append(1)
        peak[0] = max(peak[0], len(os.listdir("/proc/self/task")))
threads = [threading.Thread(target=worker, args=(mod,)) for mod in modules]
for t in threads: t.start()
for t in threads: t.join()
print(before, peak[0], len(bad))
# At most the 6 Python threads, the pool's 7 workers and (EMBER_THREADING=openmp, where the
# first thread's loops run on OpenMP) one OpenMP team's 7 on top of what was there: not a
# team per calling thread.
assert not bad and peak[0] <= before + 6 + 7 + 7, (before, peak[0])
print("ok")
""")
    assert result.returncode == 0 and "ok" in result.stdout, result.stdout + result.stderr


@pytest.mark.parametrize("threads", [1, 3])
def test_runs_are_bitwise_identical(threads):
    """One build at one thread count gives the same bits run after run, and so does a second
    GraphModule of the library: each output's reduction (GEMM, convolution, norm, softmax)
    is summed by one thread in a fixed order, whichever thread that is (a reduction split
    across threads and combined in arrival order would fail here)."""
    rng = np.random.default_rng(threads)
    x = ir.var("x", (48, 96))
    img = ir.var("img", (1, 8, 20, 20))
    w = ir.const(rng.standard_normal((80, 96)).astype(np.float32))
    k = ir.const(rng.standard_normal((16, 8, 3, 3)).astype(np.float32))
    rows = op.nn.softmax(op.nn.layer_norm(op.nn.dense(x, w)))
    conv = op.sum(op.nn.relu(op.nn.conv2d(img, k, padding=(1, 1))), axis=(2, 3))
    lib = ember.build(ir.Function([x, img], ir.Tuple([rows, conv])))
    inputs = {"x": rng.standard_normal((48, 96)).astype(np.float32),
              "img": rng.standard_normal((1, 8, 20, 20)).astype(np.float32)}
    old = ember.get_num_threads()
    try:
        ember.set_num_threads(threads)
        first = [t.numpy().copy() for t in ember.GraphModule(lib)(**inputs)]
        for m in [ember.GraphModule(lib)] * 4 + [ember.GraphModule(lib)]:
            for a, b in zip(m(**inputs), first):
                assert np.array_equal(a.numpy().view(np.uint32), b.view(np.uint32))
    finally:
        ember.set_num_threads(old)
