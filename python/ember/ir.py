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
from ._ember import (Call, Constant, Dim, EmberError, Expr, Function, Op, Tuple, TupleGetItem,
                     TensorType, Type, Var, get_op, list_ops, structural_equal, symbol)
from .runtime import DTYPES, as_array

__all__ = ["Expr", "Var", "Constant", "Call", "Tuple", "TupleGetItem", "Function", "Op",
           "TensorType", "Type", "Dim", "symbol", "var", "const", "scalar_const", "call", "get_op", "list_ops",
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
    """A function input of a shape and dtype; a size may be known only at run time
    (ir.symbol("seq", 1, 512), or arithmetic on one: batch * seq)."""
    if not isinstance(name, str):
        raise EmberError(f"ir.var: name must be a string, got {type(name).__name__} {name!r}")
    if not isinstance(shape, (list, tuple)):
        raise EmberError(f"ir.var('{name}'): shape must be a list or tuple of integers, got "
                         f"{type(shape).__name__} {shape!r}")
    return _ember.var(name, list(shape), dtype_name(dtype, f"ir.var('{name}')"))


def const(value, name=""):
    """A constant holding a copy of `value` (a NumPy array or scalar, or a CPU torch
    tensor), in the array's own dtype (float32, float64, int32, int64, bool, int8, uint8, or
    bfloat16 for a torch tensor: NumPy has none) and shape (a 0-d array or np.float32(2)
    stays 0-d)."""
    if not isinstance(name, str):
        raise EmberError(f"ir.const: name must be a string, got {type(name).__name__} {name!r}")
    what = f"ir.const('{name}'): the value" if name else "ir.const: the value"
    return _ember.const(as_array(value, what), name)


def call(op_name, args, attrs=None, name=""):
    """A call of a registered op (see list_ops) with attributes as a dict."""
    return _ember.call(op_name, args, attrs, name)


_INT_RANGES = {"int32": (-2**31, 2**31 - 1), "int64": (-2**63, 2**63 - 1), "int8": (-128, 127),
               "uint8": (0, 255)}


def scalar_const(value, dtype, what):
    """A 0-d constant of `dtype` holding the Python number `value`; EmberError naming `what`
    when the number does not fit in the dtype (an int past its range, a float too large)."""
    if dtype in _INT_RANGES:
        lo, hi = _INT_RANGES[dtype]
        if not lo <= int(value) <= hi:
            raise EmberError(f"{what}: the number {value!r} does not fit in {dtype} (from {lo} "
                             f"to {hi}); use a smaller number or cast the tensor to a wider "
                             "dtype first")
        return const(np.asarray(int(value), dtype=dtype))
    if dtype == "bfloat16":  # NumPy has no bfloat16: a float32 constant's cast (folded)
        return _ember.call("cast", [scalar_const(value, "float32", what)], {"dtype": dtype}, "")
    try:
        with np.errstate(over="ignore"):  # a float too large for float32 is inf, as in torch
            return const(np.asarray(float(value) if dtype != "bool" else bool(value),
                                    dtype=dtype))
    except OverflowError:  # an int past the float64 range
        raise EmberError(f"{what}: the number {value!r} does not fit in {dtype}") from None


def _scalar_operands(op_name, expr, number):
    """`expr` and the Python number `number` as operands of one dtype, as PyTorch promotes a
    tensor with a Python scalar: the number takes the tensor's dtype, except that a float
    next to an int or bool tensor makes both float32 (the tensor is cast: 3 * 0.5 is 1.5,
    not 0), and an int next to a bool tensor makes both int64."""
    what = f"{op_name}({expr.dtype} tensor, {type(number).__name__} {number!r})"
    if isinstance(number, (complex, np.complexfloating)) or not isinstance(number,
                                                                          numbers.Real):
        raise EmberError(f"{what}: Ember has no complex numbers; use an int, float or bool")
    dtype = expr.dtype
    if isinstance(number, (bool, np.bool_)):
        kind = "bool"
    elif isinstance(number, numbers.Integral):
        kind = "int"
    else:
        kind = "float"
    if kind == "float" and dtype not in ("float32", "float64", "bfloat16"):
        dtype = "float32"
    elif kind == "int" and dtype == "bool":
        dtype = "int64"
    if dtype != expr.dtype:
        expr = _ember.call("cast", [expr], {"dtype": dtype}, "")
    return expr, scalar_const(number, dtype, what)


def _binary(op_name, a, b):
    # A Python number next to an expression becomes a 0-d constant (PyTorch's promotion).
    if isinstance(a, numbers.Number) and isinstance(b, Expr):
        b, a = _scalar_operands(op_name, b, a)
    elif isinstance(b, numbers.Number) and isinstance(a, Expr):
        a, b = _scalar_operands(op_name, a, b)
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
