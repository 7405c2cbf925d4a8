"""Elementwise converters: unary math (integer inputs computed in float32 where torch does),
round, the float tests, atan2, gelu and the clamps, arithmetic with torch's type promotion,
division and remainders, powers, comparisons, logic and bit operations, where and
masked_fill. Registered into _aten_registry.CONVERTERS on import."""
import math
import numbers

import numpy as np

from .._ember import Constant, EmberError, Expr
from ._aten_registry import (CONVERTERS, Args, _is_float, _promote, binary, cast, promoted,
                            converts, number_in_float32, scalar_dtype)

_UNARY = {"relu": "nn.relu", "sigmoid": "sigmoid", "tanh": "tanh", "exp": "exp",
          "sqrt": "sqrt", "rsqrt": "rsqrt", "erf": "erf", "log": "log", "abs": "abs",
          "neg": "negative", "floor": "floor", "ceil": "ceil", "round": "round",
          "silu": "nn.silu", "hardswish": "nn.hardswish", "hardsigmoid": "nn.hardsigmoid",
          "log_sigmoid": "nn.log_sigmoid", "logical_not": "logical_not", "sign": "sign"}
# Math functions of one float argument: integer inputs are computed in float32, as torch's
# default dtype. (Core ATen's pointwise float ops; sin, cos and tan take float32 only.)
_MATH = ("log1p", "expm1", "exp2", "log2", "log10", "erfc", "trunc", "sin", "cos", "tan",
         "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh")
_UNARY.update({name: name for name in _MATH})
_FLOAT_ONLY = {"sigmoid", "tanh", "exp", "sqrt", "rsqrt", "erf", "log", "silu", "hardswish",
               "hardsigmoid"} | set(_MATH) - {"trunc"}


def _unary(torch_name, ember_op):
    def convert(cx, a):
        x = a[0]
        if torch_name in _FLOAT_ONLY and not _is_float(x.dtype):
            x = cast(cx, x, "float32")  # torch computes these in the default float dtype
        return cx.emit(ember_op, [x])
    return convert


for _name, _op in _UNARY.items():
    CONVERTERS[_name] = _unary(_name, _op)


@converts("round")
def _round(cx, a):
    x, decimals = a[0], a["decimals"] or 0
    if not isinstance(x, Expr):  # round.int / round.float of a traced Python number
        return round(x, decimals) if decimals else round(x)
    if not _is_float(x.dtype):
        return x  # integers are already round
    if decimals == 0:
        return cx.emit("round", [x])
    scale = 10.0 ** decimals  # torch: round(x * 10^d) / 10^d
    return binary(cx, "divide", cx.emit("round", [binary(cx, "multiply", x, scale)]), scale)


def _float_test(ember_op, integer_answer):
    """isnan / isinf / isfinite: an Ember op on floats; on integers and bools the answer is
    the same for every element (x == x is True, x != x False)."""
    def convert(cx, a):
        x = a[0]
        if _is_float(x.dtype):
            return cx.emit(ember_op, [x])
        return cx.emit("equal" if integer_answer else "not_equal", [x, x])
    return convert


CONVERTERS["isnan"] = _float_test("isnan", False)
CONVERTERS["isinf"] = _float_test("isinf", False)
CONVERTERS["isfinite"] = _float_test("isfinite", True)


@converts("atan2", "arctan2")
def _atan2(cx, a):
    y, x = _promote(cx, a[0], a[1])
    if not _is_float(y.dtype):
        y, x = cast(cx, y, "float32"), cast(cx, x, "float32")
    return cx.emit("atan2", [y, x])


@converts("bitwise_not")
def _bitwise_not(cx, a):
    x = a[0]
    if not isinstance(x, Expr):
        return not x if isinstance(x, bool) else ~x
    # On bools the logical op, which the pattern passes know (an attention mask's ~mask).
    return cx.emit("logical_not" if x.dtype == "bool" else "bitwise_not", [x])


@converts("gelu")
def _gelu(cx, a):
    return cx.emit("nn.gelu", [a[0]], approximate=a["approximate"] or "none")


@converts("leaky_relu")
def _leaky_relu(cx, a):
    return cx.emit("nn.leaky_relu", [a[0]], alpha=float(a[1]))


@converts("hardtanh")
def _hardtanh(cx, a):
    return cx.emit("clip", [a[0]], a_min=float(a[1]), a_max=float(a[2]))


@converts("relu6")
def _relu6(cx, a):
    return cx.emit("clip", [a[0]], a_min=0.0, a_max=6.0)


@converts("clamp", "clip", "clamp_min", "clamp_max")
def _clamp(cx, a):
    x, low, high = a[0], a["min"], a["max"]
    if isinstance(low, Expr) or isinstance(high, Expr):  # clamp.Tensor
        if low is not None:
            x = binary(cx, "maximum", x, low)
        return x if high is None else binary(cx, "minimum", x, high)
    bounds = [b for b in (low, high) if b is not None]
    if x.dtype == "bool":
        raise EmberError("clamp of a bool tensor is not supported; cast it to int64")
    if not _is_float(x.dtype) and any(isinstance(b, float) for b in bounds):
        x = cast(cx, x, "float32")  # torch promotes an integer tensor clamped by a float
    if not _is_float(x.dtype) and any(abs(b) > 2 ** 53 for b in bounds):
        # clip's bounds are doubles, exact to 2^53; larger int64 bounds stay exact as tensors
        if low is not None:
            x = binary(cx, "maximum", x, int(low))
        return x if high is None else binary(cx, "minimum", x, int(high))
    if x.dtype in ("int8", "uint8"):  # torch wraps integer bounds into the 8-bit type
        low, high = (None if b is None else int(np.asarray(b).astype(x.dtype)) for b in (low, high))
    low = -math.inf if low is None else float(low)
    high = math.inf if high is None else float(high)
    return cx.emit("clip", [x], a_min=low, a_max=high)


def _arith(ember_op, python_op):
    @number_in_float32
    def convert(cx, a):
        x, y = a[0], a[1]
        alpha = a["alpha"]
        if not isinstance(x, Expr) and not isinstance(y, Expr):
            return python_op(x, y if alpha in (None, 1) else alpha * y)
        if alpha not in (None, 1):
            y = binary(cx, "multiply", y, alpha) if isinstance(y, Expr) else alpha * y
        x, y = _promote(cx, x, y)
        if x.dtype == "bool":  # torch: bool * bool is and, bool + bool is or
            if ember_op == "subtract":
                raise EmberError("subtracting bool tensors is not defined (torch refuses it "
                                 "too); use logical_xor or cast to an integer type")
            return cx.emit({"multiply": "logical_and", "add": "logical_or"}[ember_op], [x, y])
        return cx.emit(ember_op, [x, y])
    return convert


CONVERTERS["add"] = _arith("add", lambda x, y: x + y)
CONVERTERS["sub"] = CONVERTERS["subtract"] = _arith("subtract", lambda x, y: x - y)
CONVERTERS["mul"] = CONVERTERS["multiply"] = _arith("multiply", lambda x, y: x * y)


@converts("rsub")
def _rsub(cx, a):
    return CONVERTERS["sub"](cx, Args("sub", ["self", "other", "alpha"],
                                      [a[1], a[0], a["alpha"]]))


def _integer_divisor(cx, op, y, dtype):
    """The divisor `y` of an integer division, fmod or remainder as a `dtype` constant: torch
    raises for a zero divisor and a kernel cannot, so the divisor must be known when the
    model is imported (a zero in it is then an error naming the node). Made anew rather
    than cast, so that the op's check sees the constant."""
    if isinstance(y, numbers.Number):
        return cx.const(np.array(y), dtype)
    if not isinstance(y, Constant):
        raise EmberError(f"integer {op} by a tensor computed when the model runs is not "
                         "supported (a zero divisor has no value); cast both to float32")
    return cx.const(np.asarray(y.value), dtype)


def _integer_operands(x, y):
    """Whether torch's result of a binary op on x and y is an integer (or bool) tensor."""
    return all(isinstance(v, numbers.Integral) or (isinstance(v, Expr) and not _is_float(v.dtype))
               for v in (x, y))


@converts("div", "divide", "true_divide", "floor_divide", "floordiv")
@number_in_float32
def _div(cx, a):
    x, y = a[0], a[1]
    mode = "floor" if a.op in ("floor_divide", "floordiv") else a["rounding_mode"]
    if not isinstance(x, Expr) and not isinstance(y, Expr):
        return x // y if mode == "floor" else (int(x / y) if mode == "trunc" else x / y)
    if _integer_operands(x, y) and mode is not None:  # integer quotients stay integers
        x, _ = _promote(cx, x, y)
        x = cast(cx, x, "int64") if x.dtype == "bool" else x
        y = _integer_divisor(cx, f"division (rounding_mode={mode!r})", y, x.dtype)
        return cx.emit("floor_divide" if mode == "floor" else "trunc_divide", [x, y])
    x, y = _promote(cx, x, y)
    if not _is_float(x.dtype):  # torch's true division of integers gives floats
        x, y = cast(cx, x, "float32"), cast(cx, y, "float32")
    out = cx.emit("divide", [x, y])
    if mode == "floor":
        return cx.emit("floor", [out])
    if mode == "trunc":  # trunc(q) = sign(q) * floor(|q|)
        floor = cx.emit("floor", [cx.emit("abs", [out])])
        return cx.emit("where", [binary(cx, "less", out, 0.0), cx.emit("negative", [floor]),
                                 floor])
    return out


@converts("remainder", "fmod")
def _remainder(cx, a):
    x, y = a[0], a[1]
    if not isinstance(x, Expr) and not isinstance(y, Expr):
        return x % y if a.op == "remainder" else math.fmod(x, y)
    integer = _integer_operands(x, y)
    x, other = _promote(cx, x, y)
    y = _integer_divisor(cx, a.op, y, x.dtype) if integer else other
    if x.dtype in ("float64", "bool"):
        raise EmberError(f"{a.op} of {x.dtype} tensors is not supported; Ember's {a.op} takes "
                         "float32 and integer tensors")
    return cx.emit(a.op, [x, y])


@converts("pow")
def _pow(cx, a):
    x, y = a[0], a[1]
    if not isinstance(x, Expr) and not isinstance(y, Expr):
        return x ** y
    if isinstance(x, Expr) and isinstance(y, numbers.Number):
        if y == 1:
            return x
        if y == 2:
            return cx.emit("multiply", [x, x])
        if y == 0.5:
            return cx.emit("sqrt", [x])
        if y == -0.5:
            return cx.emit("rsqrt", [x])
    x, y = _promote(cx, x, y)
    return cx.emit("power", [x, y])


@converts("square")
def _square(cx, a):
    return cx.emit("multiply", [a[0], a[0]])


@converts("reciprocal")
def _reciprocal(cx, a):
    return binary(cx, "divide", 1.0, a[0])


def _binary_op(ember_op, python_op):
    """A binary op of tensors or Python scalars (both scalars: computed here); on bool
    tensors the bitwise and/or/xor are the logical ones."""
    def convert(cx, a):
        x, y = a[0], a[1]
        if not isinstance(x, Expr) and not isinstance(y, Expr):
            return python_op(x, y)
        x, y = _promote(cx, x, y)
        if x.dtype == "bool" and ember_op in _LOGICAL:
            return cx.emit(_LOGICAL[ember_op], [x, y])  # as bitwise_not: the logical op
        return cx.emit(ember_op, [x, y])
    return convert


_LOGICAL = {"bitwise_and": "logical_and", "bitwise_or": "logical_or",
            "bitwise_xor": "logical_xor"}


for _names, _op, _py in (
        (("maximum", "fmax"), "maximum", max),
        (("minimum", "fmin"), "minimum", min),
        (("eq",), "equal", lambda x, y: x == y), (("ne",), "not_equal", lambda x, y: x != y),
        (("lt",), "less", lambda x, y: x < y), (("le",), "less_equal", lambda x, y: x <= y),
        (("gt",), "greater", lambda x, y: x > y),
        (("ge",), "greater_equal", lambda x, y: x >= y),
        (("logical_and",), "logical_and", lambda x, y: x and y),
        (("logical_or",), "logical_or", lambda x, y: x or y),
        (("logical_xor",), "logical_xor", lambda x, y: bool(x) != bool(y))):
    for _name in _names:
        CONVERTERS[_name] = _binary_op(_op, _py)


for _names, _op, _py in ((("bitwise_and", "__and__"), "bitwise_and", lambda x, y: x & y),
                         (("bitwise_or", "__or__"), "bitwise_or", lambda x, y: x | y),
                         (("bitwise_xor", "__xor__"), "bitwise_xor", lambda x, y: x ^ y),
                         (("bitwise_left_shift", "__lshift__"), "left_shift",
                          lambda x, y: x << y),
                         (("bitwise_right_shift", "__rshift__"), "right_shift",
                          lambda x, y: x >> y)):
    for _name in _names:
        CONVERTERS[_name] = _binary_op(_op, _py)


@converts("where")
def _where(cx, a):
    cond, x, y = a[0], a[1], a[2]
    if x is None:
        raise EmberError("torch.where(condition) with one argument (nonzero) has a "
                         "data-dependent shape and is not supported")
    if not isinstance(x, Expr) and not isinstance(y, Expr):
        # where(mask, 0.0, -1e10) (LongT5's local attention mask): two numbers become
        # tensors of the wider of their dtypes
        dtype = promoted((scalar_dtype(x), scalar_dtype(y)))
        x, y = cx.const(x, dtype), cx.const(y, dtype)
    x, y = _promote(cx, x, y)
    if cond.dtype != "bool":
        cond = cx.emit("not_equal", [cond, cx.const(0, cond.dtype)])
    return cx.emit("where", [cond, x, y])


@converts("masked_fill")
def _masked_fill(cx, a):
    x, mask, value = a[0], a[1], a[2]
    if isinstance(value, Expr):
        value = cast(cx, value, x.dtype)
    else:
        value = cx.const(value, x.dtype)
    return cx.emit("where", [mask, value, x])
