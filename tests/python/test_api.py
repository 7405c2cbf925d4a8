"""Round trips through the Python API: IR construction and printing, build, run, outputs
shared zero-copy with NumPy and torch, benchmark and thread settings."""
import gc

import numpy as np
import pytest
import torch

import ember
from ember import ir, op

DTYPES = ["float32", "float64", "int32", "int64", "bool"]


def run(f, inputs, params=None):
    m = ember.GraphModule(ember.build(f, params=params))
    for name, value in inputs.items():
        m.set_input(name, value)
    m.run()
    return m


# ---------------------------------------------------------------------------- graph IR

@pytest.mark.parametrize("dtype", DTYPES)
def test_var_and_const_keep_dtype(dtype):
    x = ir.var("x", shape=(2, 3), dtype=dtype)
    assert isinstance(x, ir.Var)
    assert (x.name, x.shape, x.dtype) == ("x", (2, 3), dtype)
    array = (np.arange(6).reshape(2, 3) % 2).astype(dtype)
    c = ir.const(array, name="c")
    assert isinstance(c, ir.Constant)
    assert (c.name, c.shape, c.dtype) == ("c", (2, 3), dtype)
    np.testing.assert_array_equal(np.asarray(c.value), array)


def test_var_accepts_numpy_and_torch_dtypes():
    assert ir.var("a", (1,), np.float64).dtype == "float64"
    assert ir.var("b", [4], np.dtype("int32")).dtype == "int32"
    assert ir.var("c", (1, 2), torch.int64).dtype == "int64"


def test_const_from_torch_and_noncontiguous_arrays():
    t = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    c = ir.const(t, name="t")
    assert c.dtype == "float32" and c.shape == (2, 3)
    np.testing.assert_array_equal(np.asarray(c.value), t.numpy())
    a = np.arange(12, dtype=np.int64).reshape(3, 4).T  # not C-contiguous
    np.testing.assert_array_equal(np.asarray(ir.const(a).value), a)


def test_const_is_a_copy():
    a = np.ones(3, dtype=np.float32)
    c = ir.const(a)
    a[:] = 5
    np.testing.assert_array_equal(np.asarray(c.value), np.ones(3, dtype=np.float32))


def test_call_attributes_and_printing():
    x = ir.var("x", shape=(1, 3, 8, 8))
    w = ir.const(np.zeros((4, 3, 3, 3), dtype=np.float32), name="conv1.weight")
    y = op.nn.conv2d(x, w, strides=(1, 1), padding=(1, 1), groups=1, name="conv1")
    assert isinstance(y, ir.Call)
    assert y.op.name == "nn.conv2d"
    assert y.shape == (1, 4, 8, 8) and y.dtype == "float32"
    assert y.attrs["strides"] == [1, 1]
    assert y.attrs["padding"] == [1, 1, 1, 1]  # normalised to (top, left, bottom, right)
    assert y.attrs["groups"] == 1
    assert [a.name for a in y.args] == ["x", "conv1.weight"]
    f = ir.Function([x], op.nn.relu(y, name="relu"))
    text = str(f)
    for word in ("nn.conv2d", "nn.relu", "conv1", "float32"):
        assert word in text, text
    assert isinstance(f, ir.Function) and [p.name for p in f.params] == ["x"]


def test_every_spec_op_is_registered():
    spec = ["nn.conv2d", "nn.dense", "nn.matmul", "nn.batch_matmul", "nn.bias_add", "add",
            "subtract", "multiply", "divide", "nn.relu", "sigmoid", "tanh", "exp", "sqrt",
            "rsqrt", "clip", "nn.batch_norm", "nn.max_pool2d", "nn.avg_pool2d",
            "nn.adaptive_avg_pool2d", "reshape", "flatten", "transpose", "concatenate",
            "nn.softmax"]
    assert set(spec) <= set(ir.list_ops())
    assert ir.get_op("reshape").is_view
    assert ir.get_op("concatenate").num_inputs == -1


def test_wrapper_shapes():
    x = ir.var("x", shape=(2, 4, 6, 6))
    assert op.nn.max_pool2d(x, pool_size=2).shape == (2, 4, 3, 3)  # strides default to 2
    assert op.nn.avg_pool2d(x, (3, 3), strides=1, padding=1).shape == (2, 4, 6, 6)
    assert op.nn.adaptive_avg_pool2d(x, output_size=(1, 1)).shape == (2, 4, 1, 1)
    assert op.flatten(x).shape == (2, 144)
    assert op.reshape(x, (-1, 36)).shape == (8, 36)
    assert op.transpose(x).shape == (6, 6, 4, 2)
    assert op.transpose(x, axes=(0, 2, 3, 1)).shape == (2, 6, 6, 4)
    assert op.concatenate([x, x], axis=1).shape == (2, 8, 6, 6)
    assert op.concatenate(ir.Tuple([x, x]), axis=0).shape == (4, 4, 6, 6)
    assert op.nn.softmax(x).shape == x.shape
    assert op.clip(x, 0.0, 6).attrs == {"a_min": 0.0, "a_max": 6.0}
    d = ir.var("d", shape=(3, 5, 7))
    assert op.nn.dense(d, ir.var("w", (4, 7))).shape == (3, 5, 4)
    assert op.nn.matmul(d, ir.var("b", (7, 2))).shape == (3, 5, 2)
    assert op.nn.batch_matmul(d, ir.var("e", (3, 7, 2))).shape == (3, 5, 2)


def test_python_operators_make_calls():
    a = ir.var("a", shape=(2, 3))
    b = ir.var("b", shape=(3,))
    for expr, name in ((a + b, "add"), (a - b, "subtract"), (a * b, "multiply"),
                       (a / b, "divide"), (2.0 * a, "multiply"), (a - 1, "subtract")):
        assert isinstance(expr, ir.Call) and expr.op.name == name
        assert expr.shape == (2, 3) and expr.dtype == "float32"


def test_structural_equal():
    def graph(eps):
        x = ir.var("x", shape=(1, 2, 4, 4))
        ones = np.ones(2, dtype=np.float32)
        consts = [ir.const(ones) for _ in range(4)]
        return ir.Function([x], op.nn.batch_norm(x, *consts, epsilon=eps))
    assert ir.structural_equal(graph(1e-5), graph(1e-5))
    assert not ir.structural_equal(graph(1e-5), graph(1e-3))


def test_tuple_and_tuple_get_item():
    x = ir.var("x", shape=(2, 3))
    t = ir.Tuple([op.exp(x), op.reshape(x, (3, 2))])
    assert t.type.is_tuple and len(t.type.fields) == 2
    item = ir.TupleGetItem(t, 1)
    assert item.shape == (3, 2) and item.index == 1
    assert [f.shape for f in t.fields] == [(2, 3), (3, 2)]


# ------------------------------------------------------------------------ build and run

def test_build_and_run_matches_numpy():
    rng = np.random.default_rng(0)
    scale = rng.standard_normal((4, 1)).astype(np.float32)
    shift = rng.standard_normal(5).astype(np.float32)
    x = ir.var("x", shape=(4, 5))
    f = ir.Function([x], op.nn.relu(x * ir.const(scale) + ir.const(shift)))
    data = rng.standard_normal((4, 5)).astype(np.float32)
    m = run(f, {"x": data})
    np.testing.assert_allclose(np.asarray(m.get_output(0)),
                               np.maximum(data * scale + shift, 0), rtol=1e-6, atol=1e-6)


def test_conv_batch_norm_relu_matches_torch():
    rng = np.random.default_rng(1)
    weight = rng.standard_normal((8, 3, 3, 3)).astype(np.float32)
    gamma, beta, mean = (rng.standard_normal(8).astype(np.float32) for _ in range(3))
    var = rng.uniform(0.5, 2, 8).astype(np.float32)
    x = ir.var("x", shape=(2, 3, 10, 10))
    w = ir.var("w", shape=(8, 3, 3, 3))
    y = op.nn.conv2d(x, w, strides=2, padding=1)
    y = op.nn.batch_norm(y, *(ir.const(a) for a in (gamma, beta, mean, var)), epsilon=1e-5)
    f = ir.Function([x, w], op.nn.relu(y))
    data = rng.standard_normal((2, 3, 10, 10)).astype(np.float32)
    m = run(f, {"x": data}, params={"w": torch.from_numpy(weight)})
    assert m.get_num_inputs() == 1 and m.get_input_names() == ["x"]
    t = torch.nn.functional.conv2d(torch.from_numpy(data), torch.from_numpy(weight),
                                   stride=2, padding=1)
    t = torch.nn.functional.batch_norm(t, torch.from_numpy(mean), torch.from_numpy(var),
                                       torch.from_numpy(gamma), torch.from_numpy(beta),
                                       eps=1e-5)
    expected = torch.relu(t).numpy()
    np.testing.assert_allclose(m.get_output(0).numpy(), expected, rtol=1e-4, atol=1e-4)


def test_tuple_outputs():
    x = ir.var("x", shape=(3, 4))
    f = ir.Function([x], ir.Tuple([op.exp(x), op.nn.relu(x)]))
    data = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)
    m = run(f, {"x": data})
    assert m.get_num_outputs() == 2
    np.testing.assert_allclose(np.asarray(m.get_output(0)), np.exp(data), rtol=1e-5)
    np.testing.assert_array_equal(np.asarray(m.get_output(1)), np.maximum(data, 0))


def two_input_module():
    a = ir.var("a", shape=(2, 3))
    b = ir.var("b", shape=(2, 3))
    return ember.GraphModule(ember.build(ir.Function([a, b], a - b)))


def test_set_input_by_name_index_and_keyword():
    m = two_input_module()
    assert m.get_num_inputs() == 2 and m.get_input_names() == ["a", "b"]
    ones = np.ones((2, 3), dtype=np.float32)
    m.set_input("a", ones * 5)
    m.set_input(1, ones * 2)
    m.run()
    np.testing.assert_array_equal(np.asarray(m.get_output(0)), ones * 3)
    m.set_input(a=torch.full((2, 3), 7.0), b=ones)  # torch tensors are accepted too
    m.run()
    np.testing.assert_array_equal(np.asarray(m.get_output(0)), ones * 6)
    np.testing.assert_array_equal(np.asarray(m.get_input("b")), ones)


def test_set_input_makes_noncontiguous_arrays_contiguous():
    m = two_input_module()
    a = np.arange(6, dtype=np.float32).reshape(3, 2).T  # a transposed view
    m.set_input("a", a)
    m.set_input("b", np.zeros((2, 3), dtype=np.float32))
    m.run()
    np.testing.assert_array_equal(np.asarray(m.get_output(0)), a)


def test_outputs_are_zero_copy_and_overwritten_by_the_next_run():
    m = two_input_module()
    ones = np.ones((2, 3), dtype=np.float32)
    m.set_input("a", ones)
    m.set_input("b", ones)
    m.run()
    out = m.get_output(0)
    assert out.shape == (2, 3) and out.dtype == "float32"
    view = np.asarray(out)
    copy = out.numpy()
    t = torch.from_dlpack(out)
    assert view.ctypes.data == t.data_ptr() == np.asarray(m.get_output(0)).ctypes.data
    assert copy.ctypes.data != view.ctypes.data
    m.set_input("a", ones * 4)
    m.run()
    np.testing.assert_array_equal(view, ones * 3)  # the view sees the new result
    assert torch.equal(t, torch.full((2, 3), 3.0))
    np.testing.assert_array_equal(copy, ones * 0)  # the copy does not


def test_output_keeps_its_memory_after_the_module_is_gone():
    m = two_input_module()
    m.set_input("a", np.full((2, 3), 3, dtype=np.float32))
    m.set_input("b", np.ones((2, 3), dtype=np.float32))
    m.run()
    out = m.get_output(0)
    t = torch.from_dlpack(out)
    del m
    gc.collect()
    np.testing.assert_array_equal(np.asarray(out), np.full((2, 3), 2, dtype=np.float32))
    assert torch.equal(t, torch.full((2, 3), 2.0))


def test_dlpack_protocol():
    m = two_input_module()
    out = m.get_output(0)
    assert out.__dlpack_device__() == (1, 0)
    capsule = out.__dlpack__(stream=None, max_version=(1, 0), dl_device=None, copy=None)
    assert "dltensor" in repr(capsule)
    del capsule  # not consumed: its destructor frees the export
    copied = torch.from_dlpack(out, copy=True)
    assert copied.data_ptr() != np.asarray(out).ctypes.data
    for dtype in ("int32", "int64", "bool", "float64"):
        x = ir.var("x", shape=(1, 3), dtype=dtype)
        mm = ember.GraphModule(ember.build(ir.Function([x], op.transpose(x))))
        data = np.array([[1, 0, 1]]).astype(dtype)
        mm.set_input("x", data)
        mm.run()
        t = torch.from_dlpack(mm.get_output(0))
        assert str(t.dtype) == f"torch.{dtype}" and t.shape == (3, 1)
        np.testing.assert_array_equal(t.numpy().ravel(), data.ravel())


def test_benchmark_and_profile(capsys):
    m = two_input_module()
    r = m.benchmark(number=2, repeat=5)
    assert len(r.results) == 5
    assert 0 < r.min <= r.median <= r.max and r.min <= r.mean <= r.max and r.std >= 0
    assert "Execution time summary" in str(r)
    table = m.profile(repeat=3)
    assert isinstance(table, str) and table in capsys.readouterr().out


def test_set_num_threads():
    old = ember.get_num_threads()
    try:
        ember.set_num_threads(1)
        assert ember.get_num_threads() == 1
        x = ir.var("x", shape=(64, 64))
        data = np.random.default_rng(2).standard_normal((64, 64)).astype(np.float32)
        m = run(ir.Function([x], op.nn.relu(x)), {"x": data})
        np.testing.assert_array_equal(np.asarray(m.get_output(0)), np.maximum(data, 0))
    finally:
        ember.set_num_threads(old)
    assert ember.get_num_threads() == old


def test_library_source():
    x = ir.var("x", shape=(16,))
    lib = ember.build(ir.Function([x], op.exp(x)), target="llvm")
    assert "define" in lib.get_source("ll")
    assert len(lib.get_source("asm")) > 0
    assert isinstance(lib.function, ir.Function)
    assert ember.native_vector_lanes("float32") >= 1
