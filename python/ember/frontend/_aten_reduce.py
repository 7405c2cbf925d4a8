"""Reduction converters: sum, mean, amax and amin, max and min (with their indices),
argmax and argmin, any and all, sort and argsort, histc, topk, cumsum, and var and std.
Registered into _aten_registry.CONVERTERS on import."""
import numpy as np

from .. import ir
from .._ember import EmberError, Expr
from ._aten_elementwise import _binary_op
from ._aten_registry import (CONVERTERS, _axes, _axis, _is_float, binary, cast, converts,
                            dtype_name, reshape)


def _reduce(ember_op):
    def convert(cx, a):
        x = a[0]
        dims = a["dim"] if a.has("dim") else None
        axes = _axes(dims, len(x.shape))
        if a["dtype"] is not None:
            x = cast(cx, x, dtype_name(a["dtype"]))
        elif ember_op == "sum" and not _is_float(x.dtype):
            x = cast(cx, x, "int64")  # torch sums integers and bools in int64
        if ember_op == "mean" and not _is_float(x.dtype):
            raise EmberError("mean of an integer tensor: pass dtype=torch.float32")
        return cx.emit(ember_op, [x], axis=axes, keepdims=int(bool(a["keepdim"])))
    return convert


CONVERTERS["sum"] = _reduce("sum")
CONVERTERS["mean"] = _reduce("mean")
CONVERTERS["amax"] = _reduce("max")
CONVERTERS["amin"] = _reduce("min")


def _max_min(ember_op, python_op):
    def convert(cx, a):
        x, other = a[0], a[1]
        if isinstance(other, Expr) or (other is not None and not isinstance(x, Expr)):
            return _binary_op("maximum" if ember_op == "max" else "minimum", python_op)(cx, a)
        if other is None:  # max(x): all elements
            return cx.emit(ember_op, [x], axis=[], keepdims=0)
        axis = _axis(other, len(x.shape))  # max.dim returns (values, indices)
        values = cx.emit(ember_op, [x], axis=[axis], keepdims=int(bool(a["keepdim"])))
        return [values, arg_best(cx, x, axis, a["keepdim"], ember_op == "max")]
    return convert


CONVERTERS["max"] = _max_min("max", max)
CONVERTERS["min"] = _max_min("min", min)


def arg_best(cx, x, dim, keepdim, largest):
    """argmax (largest) or argmin of x along dim (None: of the flattened x), as the index of
    a top-1: among equal values topk gives the lower index, as torch does, and NaN wins
    (argmin is argmax of -x on floats, so NaN wins there too, as in torch)."""
    rank = len(x.shape)
    if x.dtype == "bool":
        x = cast(cx, x, "int32")
    if not largest and _is_float(x.dtype):
        x, largest = cx.emit("negative", [x]), True
    if dim is None or rank == 0:
        flat = reshape(cx, x, [int(np.prod(x.shape, dtype=np.int64))])
        t = cx.emit("topk", [flat], k=1, axis=0, largest=int(largest), sorted=1)
        return reshape(cx, ir.TupleGetItem(t, 1, cx.name), [1] * rank if keepdim else [])
    axis = _axis(dim, rank)
    t = cx.emit("topk", [x], k=1, axis=axis, largest=int(largest), sorted=1)
    index = ir.TupleGetItem(t, 1, cx.name)
    return index if keepdim else reshape(cx, index, x.shape[:axis] + x.shape[axis + 1:])


@converts("argmax", "argmin")
def _argmax(cx, a):
    return arg_best(cx, a[0], a["dim"], bool(a["keepdim"]), a.op == "argmax")


@converts("any", "all")
def _any_all(cx, a):
    """any / all: the max / min of x != 0 (over dims, or every element)."""
    x = a[0]
    if x.dtype != "bool":
        x = cx.emit("not_equal", [x, cx.const(0, x.dtype)])
    dims = a["dim"] if a.has("dim") else None
    axes = _axes(dims, len(x.shape))
    y = cx.emit("max" if a.op == "any" else "min", [cast(cx, x, "int32")], axis=axes,
                keepdims=int(bool(a["keepdim"])))
    return cast(cx, y, "bool")


@converts("sort", "argsort")
def _sort(cx, a):
    """sort / argsort along dim as a top-k of the whole axis. topk keeps equal values in
    index order, so the result is also torch's stable=True order; NaN sorts last ascending
    and first descending, as in torch. The kernel is an insertion sort, O(n^2) per row in
    the worst case: fine for the short rows of routing and beam search, slow for long ones."""
    x = a[0]
    rank = len(x.shape)
    if rank == 0:
        return [x, cx.const(np.array(0), "int64")] if a.op == "sort" else \
            cx.const(np.array(0), "int64")
    axis = _axis(a["dim"] if a["dim"] is not None else -1, rank)
    source = cast(cx, x, "int32") if x.dtype == "bool" else x
    t = cx.emit("topk", [source], k=x.shape[axis], axis=axis,
                largest=int(bool(a["descending"])), sorted=1)
    values, indices = (ir.TupleGetItem(t, i, cx.name) for i in range(2))
    return [cast(cx, values, x.dtype), indices] if a.op == "sort" else indices


@converts("histc")
def _histc(cx, a):
    """torch.histc with a given range: each element's bin, (x - min) * bins / (max - min)
    truncated as torch computes it (x == max goes to the last bin, elements outside the range
    and NaN to none), compared with every bin index and counted. Output in x's dtype."""
    x, bins = a[0], int(a["bins"])
    low, high = float(a["min"]), float(a["max"])
    if low == high:
        raise EmberError("histc without a range (min == max) takes its range from the data; "
                         "pass min and max")
    if not _is_float(x.dtype):
        raise EmberError(f"histc of a {x.dtype} tensor: torch takes floating-point input only")
    flat = reshape(cx, x, [int(np.prod(x.shape, dtype=np.int64)), 1])
    scaled = binary(cx, "divide", binary(cx, "multiply", binary(cx, "subtract", flat, low),
                                         float(bins)), high - low)
    index = binary(cx, "minimum", cast(cx, cx.emit("floor", [scaled]), "int32"), bins - 1)
    inside = binary(cx, "logical_and", binary(cx, "greater_equal", flat, low),
                    binary(cx, "less_equal", flat, high))
    hit = binary(cx, "logical_and", inside,
                 binary(cx, "equal", index, cx.const(np.arange(bins)[None, :], "int32")))
    return cx.emit("sum", [cast(cx, hit, x.dtype)], axis=[0], keepdims=0)


@converts("topk")
def _topk(cx, a):
    """torch.topk -> [values, indices]: the two fields of one topk call."""
    x, k, rank = a[0], int(a["k"]), len(a[0].shape)
    flags = {key: int(True if a[key] is None else bool(a[key])) for key in ("largest", "sorted")}
    if rank == 0:  # torch takes the top 1 of a scalar along dim 0 or -1
        _axis(a["dim"] if a["dim"] is not None else 0, 1)
        t = cx.emit("topk", [reshape(cx, x, [1])], k=k, axis=0, **flags)
        return [reshape(cx, ir.TupleGetItem(t, i, cx.name), []) for i in range(2)]
    axis = _axis(a["dim"] if a["dim"] is not None else -1, rank)
    t = cx.emit("topk", [x], k=k, axis=axis, **flags)
    return [ir.TupleGetItem(t, i, cx.name) for i in range(2)]


@converts("cumsum")
def _cumsum(cx, a):
    """torch.cumsum(x, dim, dtype=None): with a dtype, x is cast to it first, as torch does."""
    x = a[0]
    if a.has("dtype") and a["dtype"] is not None:
        x = cast(cx, x, dtype_name(a["dtype"]))
    rank = len(x.shape)
    if rank == 0:  # torch sums a scalar along dim 0 or -1: itself (integers become int64)
        _axis(a["dim"], 1)
        return reshape(cx, cx.emit("cumsum", [reshape(cx, x, [1])], axis=0), [])
    return cx.emit("cumsum", [x], axis=_axis(a["dim"], rank))


@converts("var", "std")
def _var(cx, a):
    x = a[0]
    axes = _axes(a["dim"], len(x.shape))
    correction = a["correction"] if a.has("correction") else None
    if correction is None:
        unbiased = a["unbiased"] if a.has("unbiased") else None
        correction = 1 if unbiased in (None, True) else 0
    count = int(np.prod([x.shape[i] for i in (axes or range(len(x.shape)))]))
    mean = cx.emit("mean", [x], axis=axes, keepdims=1)
    centered = cx.emit("subtract", [x, mean])
    total = cx.emit("sum", [cx.emit("multiply", [centered, centered])], axis=axes,
                    keepdims=int(bool(a["keepdim"])))
    out = binary(cx, "divide", total, float(max(count - correction, 0)))
    return cx.emit("sqrt", [out]) if a.op == "std" else out
