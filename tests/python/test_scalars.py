"""0-d arrays stay 0-d (as constants and as inputs), and a Python number next to a tensor
follows PyTorch's type promotion: an int tensor times 0.5 is a float32 tensor, not zeros;
a number that does not fit in the tensor's dtype is an EmberError, not an OverflowError."""
import numpy as np
import pytest
import torch

import ember
from ember import EmberError, ir, op


def run(function, **inputs):
    return ember.GraphModule(ember.build(function))(**inputs)


@pytest.mark.parametrize("value", [np.float32(2), np.array(2.0, np.float32), np.int64(3),
                                   torch.tensor(1.5)])
def test_zero_dim_constants_stay_zero_dim(value):
    c = ir.const(value)
    assert tuple(c.shape) == ()
    x = ir.var("x", (3,), c.dtype)
    out = run(ir.Function([x], op.multiply(x, c)), x=np.arange(3).astype(c.dtype)).numpy()
    np.testing.assert_array_equal(out, np.arange(3).astype(c.dtype) * np.asarray(value))


def test_zero_dim_inputs_and_outputs():
    x = ir.var("x", ())
    m = ember.GraphModule(ember.build(ir.Function([x], op.nn.relu(x))))
    for value in (np.float32(-2.5), np.array(3.5, np.float32), torch.tensor(4.0)):
        out = m(x=value).numpy()
        assert out.shape == ()
        assert out == max(float(value), 0.0)
    m.set_input("x", np.array(7.0, np.float32))
    m.run()
    assert m.get_output(0).numpy().shape == ()
    with pytest.raises(EmberError, match=r"float32\(\)"):
        m.set_input("x", np.zeros(1, np.float32))


# (tensor dtype, Python number, the result dtype torch gives)
PROMOTIONS = [("int32", 0.5, "float32"), ("int64", 2.5, "float32"), ("bool", 1.5, "float32"),
              ("bool", 3, "int64"), ("int32", 3, "int32"), ("float64", 0.5, "float64"),
              ("float32", 2, "float32"), ("int64", True, "int64")]


@pytest.mark.parametrize("dtype,number,want", PROMOTIONS)
@pytest.mark.parametrize("name,fn", [("mul", lambda a, b: a * b), ("radd", lambda a, b: b + a),
                                     ("sub", lambda a, b: a - b),
                                     ("rsub", lambda a, b: b - a)])
def test_python_numbers_promote_like_torch(dtype, number, want, name, fn):
    data = np.array([0, 1, 3, 7], dtype=dtype)
    x = ir.var("x", (4,), dtype)
    if (dtype == "bool" or isinstance(number, bool)) and name in ("sub", "rsub"):
        pytest.skip("torch has no subtraction with bools")
    got = run(ir.Function([x], fn(x, number)), x=data).numpy()
    expected = fn(torch.from_numpy(data), number).numpy()
    assert str(got.dtype) == want == str(expected.dtype)
    np.testing.assert_allclose(got, expected)


def test_numbers_that_do_not_fit_are_ember_errors():
    xi = ir.var("xi", (4,), "int32")
    with pytest.raises(EmberError, match="does not fit in int32"):
        xi * 2**40
    with pytest.raises(EmberError, match="does not fit in int64"):
        ir.var("xl", (4,), "int64") + 2**70
    with pytest.raises(EmberError, match="does not fit in float32"):
        ir.var("xf", (4,)) * 2**2000
    with pytest.raises(EmberError, match="complex"):
        xi * 1j
