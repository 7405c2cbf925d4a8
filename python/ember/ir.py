"""The graph IR: immutable, typed expression nodes.

    x = ir.var("x", shape=(1, 3, 32, 32), dtype="float32")
    w = ir.const(weight_array, name="conv1.weight")
    f = ir.Function([x], op.nn.relu(op.nn.conv2d(x, w)))
    print(f)

Every node is typed when it is made, so a mistake is an EmberError at the line that makes it.
"""
import numbers

import numpy as np

from . import _ember
from ._ember import (Call, Constant, EmberError, Expr, Function, Op, Tuple, TupleGetItem,
                     TensorType, Type, Var, get_op, list_ops, structural_equal)
from .runtime import DTYPES, as_array

__all__ = ["Expr", "Var", "Constant", "Call", "Tuple", "TupleGetItem", "Function", "Op",
           "TensorType", "Type", "var", "const", "call", "get_op", "list_ops",
           "structural_equal"]


def dtype_name(dtype, what):
    """"float32" for "float32", np.float32, np.dtype("float32") or torch.float32."""
    if isinstance(dtype, str):
        name = dtype
    elif type(dtype).__module__ == "torch":  # torch.dtype, without importing torch
        name = str(dtype).replace("torch.", "")
    else:
        try:
            name = np.dtype(dtype).name
        except TypeError:
            name = repr(dtype)
    if name not in DTYPES:
        raise EmberError(f"{what}: unsupported dtype {name!r}; use one of {', '.join(DTYPES)}")
    return name


def var(name, shape, dtype="float32"):
    """A function input of a fixed shape and dtype."""
    if not isinstance(name, str):
        raise EmberError(f"ir.var: name must be a string, got {type(name).__name__} {name!r}")
    if not isinstance(shape, (list, tuple)):
        raise EmberError(f"ir.var('{name}'): shape must be a list or tuple of integers, got "
                         f"{type(shape).__name__} {shape!r}")
    return _ember.var(name, list(shape), dtype_name(dtype, f"ir.var('{name}')"))


def const(value, name=""):
    """A constant holding a copy of `value` (a NumPy array or a CPU torch tensor), in the
    array's own dtype (float32, float64, int32, int64 or bool)."""
    if not isinstance(name, str):
        raise EmberError(f"ir.const: name must be a string, got {type(name).__name__} {name!r}")
    what = f"ir.const('{name}'): the value" if name else "ir.const: the value"
    return _ember.const(as_array(value, what), name)


def call(op_name, args, attrs=None, name=""):
    """A call of a registered op (see list_ops) with attributes as a dict."""
    return _ember.call(op_name, args, attrs, name)


def _binary(op_name, a, b):
    # A Python number next to an expression becomes a scalar constant of its dtype.
    if isinstance(a, numbers.Number) and isinstance(b, Expr):
        a = const(np.asarray(a, dtype=b.dtype))
    if isinstance(b, numbers.Number) and isinstance(a, Expr):
        b = const(np.asarray(b, dtype=a.dtype))
    return _ember.call(op_name, [a, b], None, "")


def _operator(op_name, reflected=False):
    if reflected:
        return lambda self, other: _binary(op_name, other, self)
    return lambda self, other: _binary(op_name, self, other)


for _name, _op in (("add", "add"), ("sub", "subtract"), ("mul", "multiply"),
                   ("truediv", "divide")):
    setattr(Expr, f"__{_name}__", _operator(_op))
    setattr(Expr, f"__r{_name}__", _operator(_op, reflected=True))
# NumPy must not broadcast itself over an expression: `array + expr` goes to __radd__.
Expr.__array_ufunc__ = None
