"""Sizes known only at run time in the importer (issue 44): torch.export's symbolic sizes
(sympy expressions over its s0, s1, ... symbols) made Ember's ir.Dim, and the comparisons
converters make on sizes that may be Dims. A Dim answers a comparison only where the
symbols' ranges decide it; these helpers say what to do when they do not."""
import torch

from .. import ir
from .._ember import EmberError


def is_dim(value):
    return isinstance(value, ir.Dim)


def prod(values):
    """The product of sizes (ints and Dims)."""
    out = 1
    for v in values:
        out = v * out if is_dim(v) else out * int(v)
    return out


def broadcast_shape(a, b):
    """NumPy broadcasting of two shapes whose sizes may be Dims (equal, or one of them 1)."""
    a, b = list(a), list(b)
    n = max(len(a), len(b))
    a, b = [1] * (n - len(a)) + a, [1] * (n - len(b)) + b
    out = []
    for x, y in zip(a, b):
        if x == y or (not is_dim(y) and y == 1):
            out.append(x)
        elif not is_dim(x) and x == 1:
            out.append(y)
        else:
            raise EmberError(f"the shapes {[str(v) for v in a]} and {[str(v) for v in b]} "
                             "do not broadcast")
    return out


def surely(test):
    """test() where the ranges decide it, else False (the converter then takes the general
    path: a slice that may cover the whole axis is still a slice)."""
    try:
        return bool(test())
    except EmberError:
        return False


def smin(a, b):
    """min of two sizes; an EmberError naming both when the ranges do not decide it."""
    return a if a <= b else b


def bind_sizes(values, binding):
    """`values` (nested lists) with every Dim evaluated at `binding` ({symbol: value})."""
    if isinstance(values, (list, tuple)):
        return type(values)(bind_sizes(v, binding) for v in values)
    if is_dim(values):
        out = values.coef
        for name, _, _ in values.symbols:
            out *= binding[name]
        return out + values.offset
    return values


def as_size(value):
    """An argument that is a size: an int, or a Dim where it depends on the run."""
    return value if is_dim(value) else int(value)


class Symbols:
    """torch.export's symbols (sympy) as ir.Dim symbols: named after the user's
    torch.export.Dim where one was given for an input dimension, else after torch's symbol,
    with the range the Dim or the program's range_constraints give."""

    def __init__(self, program, placeholders, dynamic_shapes, arg_names):
        self._dims = {}
        named = _named_dims(dynamic_shapes, arg_names)
        for i, node in enumerate(placeholders):
            for d, size in enumerate(node.meta["val"].shape):
                expr = _expr(size)
                if expr is None or not expr.is_Symbol or expr in self._dims:
                    continue
                spec = named.get((i, d)) or named.get((node.name, d))
                lo, hi = _range(program, expr)
                name = str(expr)
                if spec is not None:
                    name = getattr(spec, "__name__", name)
                    lo = max(lo, _finite(getattr(spec, "min", None)) or lo)
                    spec_hi = _finite(getattr(spec, "max", None))
                    hi = spec_hi if hi is None else min(hi, spec_hi or hi)
                if hi is None:
                    raise EmberError(f"from_pytorch: input '{node.name}' dimension {d} ({name}) "
                                     "has no upper bound; give its torch.export.Dim a max "
                                     "(Ember plans memory for the largest run)")
                self._dims[expr] = ir.symbol(name, max(int(lo), 1), int(hi))

    def size(self, value):
        """A torch size (an int or a SymInt) as an int or an ir.Dim."""
        expr = _expr(value)
        return int(value) if expr is None else self.dim(expr)

    def shape(self, shape):
        return [self.size(s) for s in shape]

    def dim(self, expr):
        if expr.is_Integer:
            return int(expr)
        if expr.is_Symbol:
            if expr not in self._dims:
                raise EmberError(f"from_pytorch: the size {expr} is not an input's dimension")
            return self._dims[expr]
        if expr.is_Mul or expr.is_Add:
            parts = [self.dim(a) for a in expr.args]
            out = parts[0]
            for p in parts[1:]:
                out = out * p if expr.is_Mul else out + p
            return out
        raise EmberError(f"from_pytorch: the size {expr} is not a run-time dimension Ember "
                         "carries (coef * a product of symbols + offset); give the inputs "
                         "involved static sizes")


def _expr(size):
    if isinstance(size, torch.SymInt):
        expr = size.node.expr
        return None if expr.is_Integer else expr
    return None


def _finite(value):
    """An int, or None for a missing or unbounded one (torch's int_oo, sympy's oo)."""
    try:
        value = int(value)
    except Exception:  # noqa: BLE001  (int_oo and oo raise different errors)
        return None
    return value if value < 2 ** 62 else None


def _range(program, expr):
    vr = program.range_constraints.get(expr)
    if vr is None:
        return 1, None
    return _finite(vr.lower) or 1, _finite(vr.upper)


def _named_dims(dynamic_shapes, arg_names):
    """{(input index or name, dim): torch.export.Dim} from torch.export's dynamic_shapes
    (a dict by argument name, or a tuple/list by position; each entry a dict {dim: Dim} or
    a list/tuple with a Dim or None per dimension)."""
    out = {}
    if dynamic_shapes is None:
        return out
    if isinstance(dynamic_shapes, dict):
        entries = [(arg_names.index(k) if k in arg_names else k, v)
                   for k, v in dynamic_shapes.items()]
    else:
        entries = list(enumerate(dynamic_shapes))
    for key, spec in entries:
        if spec is None:
            continue
        items = spec.items() if isinstance(spec, dict) else enumerate(spec)
        for d, dim in items:
            if dim is not None:
                out[(key, d)] = dim
    return out
