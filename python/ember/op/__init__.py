"""Operators, named as in TVM: op.add, op.clip, op.nn.conv2d, ...

Each wrapper checks its Python arguments, turns the attributes into the registry's types
(ints and tuples -> list of int64, floats -> double, bools -> 0/1) and makes one ir.Call;
the op's type relation then checks shapes and dtypes. Every op takes a `name` (source name).
"""
import numbers
import operator

from .. import _ember
from .._ember import EmberError, Expr

__all__ = ["add", "subtract", "multiply", "divide", "sigmoid", "tanh", "exp", "sqrt", "rsqrt",
           "clip", "reshape", "flatten", "transpose", "concatenate", "nn"]


# ------------------------------------------------------------------ argument checking helpers

def _describe(value):
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 60 else text[:57] + '...'}"


def _expr(value, arg, op):
    if not isinstance(value, Expr):
        raise EmberError(f"op.{op}: argument '{arg}' must be an ember.ir expression (made by "
                         f"ir.var, ir.const or an op), got {_describe(value)}")
    return value


def _int(value, attr, op):
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise EmberError(f"op.{op}: '{attr}' must be an integer, got {_describe(value)}")
    return operator.index(value)


def _bool(value, attr, op):
    if isinstance(value, bool) or (hasattr(value, "__index__") and operator.index(value) in (0, 1)):
        return int(value)
    raise EmberError(f"op.{op}: '{attr}' must be True or False, got {_describe(value)}")


def _float(value, attr, op):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise EmberError(f"op.{op}: '{attr}' must be a number, got {_describe(value)}")
    return float(value)


def _ints(value, attr, op, expand=1):
    """A list of ints; a single int is repeated `expand` times (strides=2 -> [2, 2])."""
    if hasattr(value, "__index__") and not isinstance(value, bool):
        return [operator.index(value)] * expand
    if isinstance(value, (list, tuple)):
        return [_int(v, f"{attr}[{i}]", op) for i, v in enumerate(value)]
    raise EmberError(f"op.{op}: '{attr}' must be an integer or a list/tuple of integers, got "
                     f"{_describe(value)}")


def _call(op, args, attrs, name):
    if not isinstance(name, str):
        raise EmberError(f"op.{op}: 'name' must be a string, got {_describe(name)}")
    return _ember.call(op, list(args), attrs, name)


# ------------------------------------------------------------------------------ operators

def _binary(op):
    def make(a, b, name=""):
        return _call(op, [_expr(a, "a", op), _expr(b, "b", op)], {}, name)
    make.__name__ = op
    make.__doc__ = f"Elementwise {op} with NumPy broadcasting; the dtypes must match."
    return make


def _unary(op):
    def make(x, name=""):
        return _call(op, [_expr(x, "x", op)], {}, name)
    make.__name__ = op.split(".")[-1]
    make.__doc__ = f"Elementwise {op} of a float tensor."
    return make


add = _binary("add")
subtract = _binary("subtract")
multiply = _binary("multiply")
divide = _binary("divide")
sigmoid = _unary("sigmoid")
tanh = _unary("tanh")
exp = _unary("exp")
sqrt = _unary("sqrt")
rsqrt = _unary("rsqrt")


def clip(x, a_min, a_max, name=""):
    """Clamps x to [a_min, a_max]."""
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


from . import nn  # noqa: E402  (nn uses the helpers above)
