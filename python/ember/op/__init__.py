"""Operators, named as in TVM: op.add, op.clip, op.nn.conv2d, ...

Each wrapper checks its Python arguments, turns the attributes into the registry's types
(ints and tuples -> list of int64, floats -> double, bools -> 0/1) and makes one ir.Call;
the op's type relation then checks shapes and dtypes. Every op takes a `name` (source name).
"""
from .. import _ember
from .._ember import EmberError, Expr
from ..ir import dtype_name
from . import nn
from ._util import (_binary, _bool, _call, _describe, _expr, _float, _int, _ints, _registered,
                    _unary, schema)

__all__ = ["add", "subtract", "multiply", "divide", "power", "maximum", "minimum",
           "equal", "not_equal", "less", "less_equal", "greater", "greater_equal",
           "logical_and", "logical_or", "logical_not", "where",
           "sigmoid", "tanh", "exp", "log", "erf", "sqrt", "rsqrt", "abs", "negative", "floor",
           "ceil", "round", "clip", "cast", "logical_xor", "log1p", "expm1", "exp2", "log2",
           "log10", "erfc", "trunc", "sign", "sin", "cos", "tan", "asin", "acos", "atan",
           "atan2", "sinh", "cosh", "asinh", "acosh", "atanh", "isnan", "isinf", "isfinite",
           "fmod", "remainder", "floor_divide", "trunc_divide", "bitwise_and", "bitwise_or",
           "bitwise_xor", "bitwise_not", "left_shift", "right_shift", "sum", "mean", "max", "min",
           "reshape", "flatten", "transpose", "concatenate", "strided_slice", "expand_dims",
           "squeeze", "broadcast_to", "take", "gather", "adv_index", "scatter", "index_put", "topk", "nn", "schema"]


def __getattr__(attr):
    return _registered("", attr)


# ------------------------------------------------------------------------------ operators

def _axes(value, attr, op):
    """None -> [] (every axis), an int -> [int], a list/tuple -> list of ints."""
    return [] if value is None else _ints(value, attr, op)


add = _binary("add")
subtract = _binary("subtract")
multiply = _binary("multiply")
divide = _binary("divide", "of float tensors with NumPy broadcasting")
power = _binary("power", "(torch.pow) of float tensors with NumPy broadcasting")
maximum = _binary("maximum", "with NumPy broadcasting; NaN propagates (torch.maximum)")
minimum = _binary("minimum", "with NumPy broadcasting; NaN propagates (torch.minimum)")
_COMPARE = "with NumPy broadcasting; the dtypes must match; the result is bool"
equal = _binary("equal", _COMPARE)
not_equal = _binary("not_equal", _COMPARE)
less = _binary("less", _COMPARE)
less_equal = _binary("less_equal", _COMPARE)
greater = _binary("greater", _COMPARE)
greater_equal = _binary("greater_equal", _COMPARE)
_LOGICAL = "with NumPy broadcasting; any dtype, nonzero is true; the result is bool"
logical_and = _binary("logical_and", _LOGICAL)
logical_or = _binary("logical_or", _LOGICAL)
logical_not = _unary("logical_not", "of any tensor (nonzero is true); the result is bool")
sigmoid = _unary("sigmoid")
tanh = _unary("tanh")
exp = _unary("exp")
log = _unary("log")
erf = _unary("erf")
sqrt = _unary("sqrt")
rsqrt = _unary("rsqrt")
floor = _unary("floor")
ceil = _unary("ceil")
round = _unary("round", "of a float tensor, halves to even (torch.round)")
abs = _unary("abs", "of a float or integer tensor")
negative = _unary("negative", "of a float or integer tensor")
logical_xor = _binary("logical_xor", _LOGICAL)
log1p = _unary("log1p", "of a float tensor, log(1 + x) accurate for small x")
expm1 = _unary("expm1", "of a float tensor, exp(x) - 1 accurate for small x")
exp2 = _unary("exp2")
log2 = _unary("log2")
log10 = _unary("log10")
erfc = _unary("erfc", "of a float tensor, 1 - erf(x) accurate where it is tiny")
trunc = _unary("trunc", "of a float tensor, rounding toward zero")
sign = _unary("sign", "of a float or integer tensor, as torch.sign (0 for +-0 and NaN)")
sin = _unary("sin", "of a float32 tensor (exact argument reduction)")
cos = _unary("cos", "of a float32 tensor (exact argument reduction)")
tan = _unary("tan", "of a float32 tensor (exact argument reduction)")
asin = _unary("asin")
acos = _unary("acos")
atan = _unary("atan")
atan2 = _binary("atan2", "(y = a, x = b) of float tensors with NumPy broadcasting")
sinh = _unary("sinh")
cosh = _unary("cosh")
asinh = _unary("asinh")
acosh = _unary("acosh")
atanh = _unary("atanh")
isnan = _unary("isnan", "test of a float tensor; the result is bool")
isinf = _unary("isinf", "test of a float tensor; the result is bool")
isfinite = _unary("isfinite", "test of a float tensor (not inf, not NaN); the result is bool")
fmod = _binary("fmod", "(C's fmod: the sign of a) of float32 tensors, exact, or of integer "
               "tensors (a constant divisor with a zero is an error; a zero divisor computed "
               "when the model runs gives 0)")
remainder = _binary("remainder", "(torch.remainder: the sign of b) of float32 or integer "
                    "tensors (integer divisors as fmod's)")
floor_divide = _binary("floor_divide", "(Python's //, torch.floor_divide) of integer tensors "
                       "(divisors as fmod's; x // -1 is -x, wrapping at the minimum)")
trunc_divide = _binary("trunc_divide", "(rounding toward zero, torch.div(rounding_mode="
                       "'trunc')) of integer tensors (divisors as floor_divide's)")
bitwise_and = _binary("bitwise_and", "of integer or bool tensors with NumPy broadcasting")
bitwise_or = _binary("bitwise_or", "of integer or bool tensors with NumPy broadcasting")
bitwise_xor = _binary("bitwise_xor", "of integer or bool tensors with NumPy broadcasting")
bitwise_not = _unary("bitwise_not", "of an integer or bool tensor")
left_shift = _binary("left_shift", "(a << b) of integer tensors, as torch: an amount outside "
                     "[0, bits) gives 0")
right_shift = _binary("right_shift", "(a >> b, arithmetic) of integer tensors, as torch: an "
                      "amount outside [0, bits) gives the sign (0 or -1)")


def where(condition, x, y, name=""):
    """condition ? x : y elementwise, broadcasting all three; condition is bool."""
    return _call("where", [_expr(condition, "condition", "where"), _expr(x, "x", "where"),
                           _expr(y, "y", "where")], {}, name)


def cast(x, dtype, name=""):
    """Converts to `dtype` ("float32", np.int64, torch.bool, ...); float to int truncates."""
    return _call("cast", [_expr(x, "x", "cast")], {"dtype": dtype_name(dtype, "op.cast")}, name)


def _reduce(op):
    def make(data, axis=None, keepdims=False, name=""):
        return _call(op, [_expr(data, "data", op)],
                     {"axis": _axes(axis, "axis", op),
                      "keepdims": _bool(keepdims, "keepdims", op)}, name)
    make.__name__ = op
    make.__doc__ = (f"{op} over `axis` (an int, a list, or None for every axis); keepdims "
                    "keeps the reduced axes with size 1.")
    return make


sum = _reduce("sum")
mean = _reduce("mean")
max = _reduce("max")
min = _reduce("min")
# Fusion-catalog reductions (src/ir/ops/catalog.cc): sum(|x|), sum(x*x), sqrt(sum(x*x)),
# log(sum(x)), log(sum(exp(x))) (stable, as torch.logsumexp); float data only.
l1_norm = _reduce("l1_norm")
sum_squares = _reduce("sum_squares")
l2_norm = _reduce("l2_norm")
log_sum = _reduce("log_sum")
log_sum_exp = _reduce("log_sum_exp")


def clip(x, a_min, a_max, name=""):
    """Clamps x to [a_min, a_max]; on an integer tensor the bounds round inward."""
    return _call("clip", [_expr(x, "x", "clip")],
                 {"a_min": _float(a_min, "a_min", "clip"),
                  "a_max": _float(a_max, "a_max", "clip")}, name)


def reshape(data, newshape, name=""):
    """Same elements in a new shape; one dimension may be -1 (inferred)."""
    return _call("reshape", [_expr(data, "data", "reshape")],
                 {"newshape": _ints(newshape, "newshape", "reshape")}, name)


def flatten(data, start_dim=1, end_dim=-1, name=""):
    """Merges dimensions start_dim..end_dim into one (torch.flatten)."""
    return _call("flatten", [_expr(data, "data", "flatten")],
                 {"start_dim": _int(start_dim, "start_dim", "flatten"),
                  "end_dim": _int(end_dim, "end_dim", "flatten")}, name)


def transpose(data, axes=None, name=""):
    """Permutes the axes; axes=None reverses them all."""
    axes = [] if axes is None else _ints(axes, "axes", "transpose")
    return _call("transpose", [_expr(data, "data", "transpose")], {"axes": axes}, name)


def concatenate(data, axis=0, name=""):
    """Joins a list (or tuple expression) of tensors along `axis`."""
    if isinstance(data, _ember.Tuple):
        data = data.fields
    elif isinstance(data, Expr) and data.type.is_tuple:
        data = [_ember.TupleGetItem(data, i) for i in range(len(data.type.fields))]
    if not isinstance(data, (list, tuple)) or not data:
        raise EmberError("op.concatenate: 'data' must be a non-empty list of expressions, got "
                         f"{_describe(data)}")
    args = [_expr(d, f"data[{i}]", "concatenate") for i, d in enumerate(data)]
    return _call("concatenate", args, {"axis": _int(axis, "axis", "concatenate")}, name)


def strided_slice(data, begin, end, strides=None, axes=None, name=""):
    """data[begin:end:strides] along `axes` (default: the leading axes). Negative indices
    count from the end and out-of-range ones are clamped, as in Python; strides > 0."""
    op = "strided_slice"
    return _call(op, [_expr(data, "data", op)],
                 {"begin": _ints(begin, "begin", op), "end": _ints(end, "end", op),
                  "strides": _axes(strides, "strides", op), "axes": _axes(axes, "axes", op)},
                 name)


def expand_dims(data, axis, num_newaxis=1, name=""):
    """Inserts `num_newaxis` size-1 axes before axis `axis` (torch.unsqueeze)."""
    op = "expand_dims"
    return _call(op, [_expr(data, "data", op)],
                 {"axis": _int(axis, "axis", op),
                  "num_newaxis": _int(num_newaxis, "num_newaxis", op)}, name)


def squeeze(data, axis=None, name=""):
    """Removes the given size-1 axes (None: every size-1 axis)."""
    op = "squeeze"
    return _call(op, [_expr(data, "data", op)], {"axis": _axes(axis, "axis", op)}, name)


def broadcast_to(data, shape, name=""):
    """Broadcasts to `shape` (NumPy rules; -1 keeps the input's size, as torch.expand)."""
    op = "broadcast_to"
    return _call(op, [_expr(data, "data", op)], {"shape": _ints(shape, "shape", op)}, name)


def take(data, indices, axis=0, allow_negative=True, name=""):
    """Rows of `data` along `axis` picked by int32/int64 `indices` (an embedding lookup is
    take(weight, ids)). A negative index counts from the end, as x[idx] in PyTorch (with
    allow_negative=False it is an error, as in torch.index_select). An index out of range
    is an EmberError: when the graph is built for constant indices, else when the model
    runs (the kernel checks every index; the error names the kernel, index and size)."""
    op = "take"
    return _call(op, [_expr(data, "data", op), _expr(indices, "indices", op)],
                 {"axis": _int(axis, "axis", op), "allow_negative": int(bool(allow_negative))},
                 name)


def adv_index(data, indices, axis=0, name=""):
    """PyTorch's advanced indexing by several int32/int64 index tensors on adjacent axes from
    `axis` (x[:, i, j] is adv_index(x, [i, j], axis=1)): the indices broadcast together and
    their shape replaces the indexed axes. Negative indices count from the end; one out of
    range is an EmberError, as take's."""
    op = "adv_index"
    if not isinstance(indices, (list, tuple)) or not indices:
        raise EmberError(f"op.{op}: indices must be a non-empty list of index tensors, got "
                         f"{_describe(indices)}")
    return _call(op, [_expr(data, "data", op)] +
                 [_expr(t, f"indices[{j}]", op) for j, t in enumerate(indices)],
                 {"axis": _int(axis, "axis", op)}, name)


def gather(data, indices, axis=0, name=""):
    """torch.gather: out[i] = data[i with its `axis` coordinate replaced by indices[i]];
    int32/int64 `indices` of data's rank, no larger than it along the other axes, give the
    output's shape. A negative or too large index is an EmberError (as in torch): when the
    graph is built for constant indices, else when the model runs."""
    op = "gather"
    return _call(op, [_expr(data, "data", op), _expr(indices, "indices", op)],
                 {"axis": _int(axis, "axis", op)}, name)


def scatter(data, indices, updates, axis=0, reduce="none", include_self=True, name=""):
    """torch.scatter / scatter_add / scatter_reduce: data with, for every position i of the
    int32/int64 `indices` (data's rank), out[i with its `axis` coordinate replaced by
    indices[i]] set to updates[i] (reduce "none"; among equal indices the last in row-major
    order wins) or combined with it: "sum", "prod", "amax" or "amin". include_self=False
    starts each written element from the reduction's identity. A negative or too large index
    is an EmberError (as gather's)."""
    op = "scatter"
    if not isinstance(reduce, str):
        raise EmberError(f"op.{op}: 'reduce' must be a string, got {_describe(reduce)}")
    return _call(op, [_expr(data, "data", op), _expr(indices, "indices", op),
                      _expr(updates, "updates", op)],
                 {"axis": _int(axis, "axis", op), "reduce": reduce,
                  "include_self": _bool(include_self, "include_self", op)}, name)


def index_put(data, indices, values, axis=0, accumulate=False, allow_negative=True, name=""):
    """data with data[:axis, i0, i1, ...] = values (accumulate=True: +=), the writing form of
    adv_index: the int32/int64 index tensors index adjacent axes from `axis` and broadcast
    together; `values` broadcasts to the indexed shape. Among equal indices the last write
    (row-major order) wins; accumulated ones all add. Negative indices count from the end
    unless allow_negative=False; one out of range is an EmberError, as take's."""
    op = "index_put"
    if not isinstance(indices, (list, tuple)) or not indices:
        raise EmberError(f"op.{op}: indices must be a non-empty list of index tensors, got "
                         f"{_describe(indices)}")
    return _call(op, [_expr(data, "data", op), _expr(values, "values", op)] +
                 [_expr(t, f"indices[{j}]", op) for j, t in enumerate(indices)],
                 {"axis": _int(axis, "axis", op),
                  "accumulate": _bool(accumulate, "accumulate", op),
                  "allow_negative": _bool(allow_negative, "allow_negative", op)}, name)


def topk(data, k, axis=-1, largest=True, sorted=True, name=""):
    """The k largest (or smallest) elements of `data` along `axis` and their int64 indices,
    as torch.topk: a tuple expression (values, indices); take a field with
    ir.TupleGetItem(result, 0 or 1). NaN ranks above every number; ties take the lower
    index; the output is always sorted."""
    op = "topk"
    return _call(op, [_expr(data, "data", op)],
                 {"k": _int(k, "k", op), "axis": _int(axis, "axis", op),
                  "largest": _bool(largest, "largest", op), "sorted": _bool(sorted, "sorted", op)},
                 name)
