"""Sizes never wrap around: a shape whose element or byte count does not fit in 64 bits is an
EmberError naming the input or op (it used to wrap to 0 bytes and crash in run()), and
memory that cannot be had is a clear EmberError."""
import numpy as np
import pytest

import ember
from ember import EmberError, ir, op


@pytest.mark.parametrize("shape", [(2**62,), (2**31, 2**31, 4)])
def test_shapes_past_64_bits_are_errors(shape):
    with pytest.raises(EmberError, match=r"input 'x'.*64 bits"):
        ir.var("x", shape)


def test_padding_past_64_bits_names_the_conv():
    x = ir.var("x", (1, 1, 8, 8))
    w = ir.const(np.ones((1, 1, 3, 3), np.float32))
    with pytest.raises(EmberError, match="conv1.*padding") as e:
        op.nn.conv2d(x, w, padding=(2**62, 2**62), name="conv1")
    assert "-9" not in str(e.value)  # no wrapped-around negative height


def test_memory_that_cannot_be_had_is_a_clear_error():
    x = ir.var("x", (2**40, 2**20))  # 2^62 bytes: representable, but no machine has it
    lib = ember.build(ir.Function([x], op.nn.relu(x)))
    with pytest.raises(EmberError, match="out of memory"):
        ember.GraphModule(lib)
