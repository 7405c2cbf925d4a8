"""User mistakes raise ember.EmberError with a message naming the problem; nothing crashes."""
import numpy as np
import pytest

import ember
from ember import EmberError, ir, op


@pytest.fixture
def module():
    x = ir.var("x", shape=(1, 3, 4, 4))
    return ember.GraphModule(ember.build(ir.Function([x], op.nn.relu(x))))


def test_wrong_input_shape(module):
    with pytest.raises(EmberError, match="x") as e:
        module.set_input("x", np.zeros((1, 3, 5, 4), dtype=np.float32))
    assert "4" in str(e.value) and "5" in str(e.value)


def test_wrong_input_dtype_is_not_cast(module):
    with pytest.raises(EmberError, match="float64"):
        module.set_input("x", np.zeros((1, 3, 4, 4), dtype=np.float64))


def test_unsupported_dtype(module):
    with pytest.raises(EmberError, match="float16"):
        module.set_input("x", np.zeros((1, 3, 4, 4), dtype=np.float16))
    with pytest.raises(EmberError, match="float16"):
        ir.const(np.zeros(3, dtype=np.float16))
    with pytest.raises(EmberError, match="complex64"):
        ir.var("v", (2,), "complex64")


def test_unknown_input_name(module):
    with pytest.raises(EmberError, match="nope"):
        module.set_input("nope", np.zeros((1, 3, 4, 4), dtype=np.float32))


def test_input_and_output_index_out_of_range(module):
    with pytest.raises(EmberError, match="out of range"):
        module.set_input(3, np.zeros((1, 3, 4, 4), dtype=np.float32))
    with pytest.raises(EmberError, match="out of range"):
        module.set_input(-1, np.zeros((1, 3, 4, 4), dtype=np.float32))
    with pytest.raises(EmberError, match="out of range"):
        module.get_output(1)


def test_bad_input_values(module):
    with pytest.raises(EmberError, match="NumPy array"):
        module.set_input("x", "abc")
    with pytest.raises(EmberError, match="NumPy array"):
        module.set_input("x", [[1.0, 2.0]])
    with pytest.raises(EmberError, match="name|index"):
        module.set_input(1.5, np.zeros((1, 3, 4, 4), dtype=np.float32))


def test_conv_channel_mismatch_names_the_node():
    x = ir.var("x", shape=(1, 3, 8, 8))
    w = ir.const(np.zeros((4, 2, 3, 3), dtype=np.float32))
    with pytest.raises(EmberError, match="conv2d") as e:
        op.nn.conv2d(x, w, name="layer1.conv")
    assert "layer1.conv" in str(e.value)


def test_broadcast_and_dtype_mismatch():
    a = ir.var("a", shape=(2, 3))
    with pytest.raises(EmberError, match="add"):
        op.add(a, ir.var("b", shape=(4,)))
    with pytest.raises(EmberError, match="add"):
        op.add(a, ir.var("c", shape=(2, 3), dtype="int32"))


def test_bad_argument_types():
    x = ir.var("x", shape=(1, 3, 8, 8))
    with pytest.raises(EmberError, match="'x'.*expression"):
        op.nn.relu("x")
    with pytest.raises(EmberError, match="shape"):
        ir.var("x", shape="abc")
    with pytest.raises(EmberError, match="shape"):
        ir.var("x", shape=(1, "a"))
    with pytest.raises(EmberError, match="name"):
        ir.var(3, shape=(1,))
    with pytest.raises(EmberError, match="strides"):
        op.nn.conv2d(x, x, strides="a")
    with pytest.raises(EmberError, match="a_min"):
        op.clip(x, "low", 1.0)
    with pytest.raises(EmberError, match="name"):
        op.nn.relu(x, name=5)
    with pytest.raises(EmberError, match="expression"):
        x + "y"
    with pytest.raises(EmberError, match="NumPy array"):
        ir.const("abc")
    with pytest.raises(EmberError, match="fields"):
        ir.Tuple(x)
    with pytest.raises(EmberError, match="index"):
        ir.TupleGetItem(ir.Tuple([x]), "0")
    with pytest.raises(EmberError, match="body"):
        ir.Function([x], "y")
    with pytest.raises(EmberError, match="ir.Function"):
        ember.build("model")
    with pytest.raises(EmberError, match="Library"):
        ember.GraphModule(5)
    with pytest.raises(EmberError, match="thread"):
        ember.set_num_threads("many")
    with pytest.raises(EmberError, match="thread"):
        ember.set_num_threads(0)


def test_graph_mistakes():
    x = ir.var("x", shape=(2, 3))
    y = ir.var("y", shape=(2, 3))
    with pytest.raises(EmberError, match="nn.nope"):
        ir.call("nn.nope", [x])
    with pytest.raises(EmberError, match="y"):
        ir.Function([x], x + y)  # y is not a parameter
    t = ir.Tuple([x, y])
    with pytest.raises(EmberError):
        ir.TupleGetItem(t, 2)
    with pytest.raises(EmberError, match="tuple"):
        t.shape


def test_build_mistakes():
    x = ir.var("x", shape=(2, 3))
    w = ir.var("w", shape=(3,))
    f = ir.Function([x, w], x * w)
    with pytest.raises(EmberError, match="'v'.*x, w"):
        ember.build(f, params={"v": np.ones(3, dtype=np.float32)})
    with pytest.raises(EmberError, match="'w'"):
        ember.build(f, params={"w": np.ones(4, dtype=np.float32)})
    # Checked once, by the C++ pass bind_params: each error names the param and the fix.
    with pytest.raises(EmberError, match=r"param 'w' is float32\[4\] but the function "
                                         r"declares it as float32\[3\]; pass an array"):
        ember.build(f, params={"w": np.ones(4, dtype=np.float32)})
    with pytest.raises(EmberError, match=r"param 'w' is int64\[3\].*float32\[3\]"):
        ember.build(f, params={"w": np.ones(3, dtype=np.int64)})
    with pytest.raises(EmberError, match="'v', which is not a parameter.*no parameters"):
        ember.build(ir.Function([], ir.const(np.ones(3, dtype=np.float32))),
                    params={"v": np.ones(3, dtype=np.float32)})
    with pytest.raises(EmberError, match="params must be a dict"):
        ember.build(f, params=[np.ones(3, dtype=np.float32)])
    with pytest.raises(EmberError, match="param 'w' must be a NumPy array"):
        ember.build(f, params={"w": [1.0, 2.0, 3.0]})
    lib = ember.build(f, params={"w": np.ones(3, dtype=np.float32)})
    with pytest.raises(EmberError, match="pdf"):
        lib.get_source("pdf")
