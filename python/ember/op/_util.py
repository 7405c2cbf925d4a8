"""What the op wrappers of ember.op and ember.op.nn share: the argument checks (each failure an
EmberError naming the op and the argument), the registry's schema of an op and the check that
a wrapper agrees with it, _call (which makes the ir.Call), the wrappers made from a schema
for ops without a hand-written one, and the factories of the elementwise wrappers."""
import numbers
import operator

from .. import _ember
from .._ember import EmberError, Expr


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


_KINDS = {"int": int, "float": float, "str": str, "ints": list}
_SCHEMAS = {}


def schema(op):
    """The registry's schema of `op` (exported from C++): {"num_inputs": n (-1: variadic),
    "pattern": fusion kind, "attrs": {name: (kind, default, required, doc)}} with kind "int",
    "float", "str" or "ints" and default None where the op computes it. Ops that declare no
    attributes read what they need in their type relation."""
    if op not in _SCHEMAS:
        o = _ember.get_op(op)
        _SCHEMAS[op] = {"num_inputs": o.num_inputs, "pattern": o.pattern,
                        "attrs": {a[0]: tuple(a[1:]) for a in o.attrs}}
    return _SCHEMAS[op]


def _check_schema(op, args, attrs):
    """The wrappers must agree with the C++ op: a wrapper that passes an attribute the op does
    not declare, or of another kind, is a bug in Ember (the wrapper drifted)."""
    s = schema(op)
    if s["num_inputs"] >= 0 and len(args) != s["num_inputs"]:
        raise AssertionError(f"op.{op} passes {len(args)} inputs; {op} takes {s['num_inputs']}")
    if not s["attrs"]:
        return
    for key, value in attrs.items():
        if key not in s["attrs"]:
            raise AssertionError(f"op.{op} passes attribute '{key}', which {op} does not declare "
                                 f"(it declares {', '.join(s['attrs'])})")
        kind = s["attrs"][key][0]
        if not isinstance(value, _KINDS[kind]) or isinstance(value, bool):
            raise AssertionError(f"op.{op} passes attribute '{key}' as {_describe(value)}; {op} "
                                 f"declares it {kind}")


def _attr(value, kind, attr, op):
    if kind == "int":
        return _bool(value, attr, op) if isinstance(value, bool) else _int(value, attr, op)
    if kind == "float":
        return _float(value, attr, op)
    if kind == "ints":
        return _ints(value, attr, op)
    if not isinstance(value, str):
        raise EmberError(f"op.{op}: '{attr}' must be a string, got {_describe(value)}")
    return value


def _generic(op):
    """The wrapper of an op that has no hand-written one, made from its schema: the inputs
    positional, the attributes as keywords (so a new C++ op needs no Python to be called)."""
    declared = schema(op)["attrs"]

    def make(*inputs, name="", **attrs):
        values = {}
        for key, value in attrs.items():
            # Every attribute an op reads is declared (C++ checks its reads), so one it does
            # not declare would be ignored: say so rather than drop it.
            if key not in declared:
                raise EmberError(f"op.{op}: unknown attribute '{key}'; it takes "
                                 f"{', '.join(declared) or 'no attributes'}")
            values[key] = _attr(value, declared[key][0], key, op)
        return _call(op, [_expr(x, f"input {i}", op) for i, x in enumerate(inputs)], values, name)
    make.__name__ = op.split(".")[-1]
    make.__doc__ = f"{op}, called as registered (inputs, then attributes as keywords)."
    return make


def _registered(prefix, attr):
    """ember.op.<attr> (prefix "") or ember.op.nn.<attr> (prefix "nn.") for a registered op
    without a hand-written wrapper; AttributeError otherwise."""
    if not attr.startswith("_") and prefix + attr in _ember.list_ops():
        return _generic(prefix + attr)
    module = "ember.op" + (".nn" if prefix else "")
    raise AttributeError(f"module '{module}' has no attribute '{attr}'")


def _call(op, args, attrs, name):
    if not isinstance(name, str):
        raise EmberError(f"op.{op}: 'name' must be a string, got {_describe(name)}")
    _check_schema(op, args, attrs)
    return _ember.call(op, list(args), attrs, name)


# ------------------------------------------------------------------ wrapper factories

def _binary(op, doc="with NumPy broadcasting; the dtypes must match"):
    def make(a, b, name=""):
        return _call(op, [_expr(a, "a", op), _expr(b, "b", op)], {}, name)
    make.__name__ = op
    make.__doc__ = f"Elementwise {op} {doc}."
    return make


def _unary(op, doc="of a float tensor"):
    def make(x, name=""):
        return _call(op, [_expr(x, "x", op)], {}, name)
    make.__name__ = op.split(".")[-1]
    make.__doc__ = f"Elementwise {op} {doc}."
    return make
