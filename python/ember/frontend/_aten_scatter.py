"""ATen's scatter family to Ember ops: scatter, scatter_add and scatter_reduce become Ember's
scatter; index_put, index_add, index_copy, index_fill and the slice assignments of
functionalized graphs (slice_scatter, select_scatter: x[1:3] = y) its index_put; a bool
mask index (x[mask] = v) and masked_scatter are where, cumsum and take; copy is a
broadcast. Registered into _aten_registry.CONVERTERS on import."""
import numpy as np

from .._ember import EmberError, Expr
from ._aten_registry import _axis, binary, broadcast_to, cast, converts, reshape, transpose

# torch's names for scatter's reductions (scatter.reduce says "add" and "multiply").
_REDUCE = {"sum": "sum", "add": "sum", "prod": "prod", "multiply": "prod", "amax": "amax",
           "amin": "amin", "mean": "mean"}


def _values(cx, value, dtype, shape=None):
    """A Python number or a tensor as an expression of `dtype` (a number filled to `shape`)."""
    if isinstance(value, Expr):
        return cast(cx, value, dtype)
    return cx.const(np.full(shape if shape is not None else [], value), dtype)


def _scatter_axis(a, x, index):
    if len(x.shape) == 0 or len(index.shape) != len(x.shape):
        raise EmberError(f"{a.op}: index {index.dtype}{list(index.shape)} must have the rank of "
                         f"self {x.dtype}{list(x.shape)} (scalars are not supported; reshape "
                         "them to (1,))")
    return _axis(a[1], len(x.shape))


def scatter(cx, x, axis, index, src, reduce, include_self=True):
    """torch.scatter_reduce (reduce "none": torch.scatter) of x by index along axis."""
    if reduce != "mean":
        return cx.emit("scatter", [x, index, src], axis=axis, reduce=reduce,
                       include_self=int(bool(include_self)))
    # The mean: the sum over the elements written to, divided by how many there are (the
    # element itself counts when include_self), as torch; integers floor-divide.
    total = scatter(cx, x, axis, index, src, "sum", include_self)
    start = np.ones if include_self else np.zeros
    count = scatter(cx, cx.const(start(x.shape), x.dtype), axis, index,
                    cx.const(np.ones(index.shape), x.dtype), "sum")
    count = cx.emit("maximum", [count, cx.const(1, x.dtype)])  # never written: itself
    return cx.emit("divide" if (x.dtype.startswith("float") or x.dtype == "bfloat16") else "floor_divide", [total, count])


@converts("scatter", "scatter_add", "scatter_reduce")
def _scatter(cx, a):
    x, index = a[0], a[2]
    axis = _scatter_axis(a, x, index)
    reduce = "sum" if a.op == "scatter_add" else a["reduce"] or "none"
    if reduce not in _REDUCE and reduce != "none":
        raise EmberError(f"{a.op}: reduce={reduce!r} is not supported; use 'sum', 'prod', "
                         "'mean', 'amax' or 'amin'")
    src = _values(cx, a[3], x.dtype, index.shape)
    include_self = a["include_self"] if a.has("include_self") else True
    return scatter(cx, x, axis, index, src, _REDUCE.get(reduce, reduce), include_self)


def _index_1d(a, x, index, source=None):
    """index_add/index_copy/index_fill's axis and index (a 0-d index as (1,)); the source
    must be x's shape with the axis' size the index's length, as torch requires."""
    axis = _axis(a[1], max(len(x.shape), 1))
    if len(index.shape) > 1:
        raise EmberError(f"{a.op}: index {index.dtype}{list(index.shape)} must be 1-D")
    if source is not None and len(x.shape) > 0:
        want = list(x.shape)
        want[axis] = int(np.prod(index.shape))
        if list(source.shape) != want and not (len(index.shape) == 0 and
                                               list(source.shape) == want[:axis] + want[axis + 1:]):
            raise EmberError(f"{a.op}: source {source.dtype}{list(source.shape)} must have "
                             f"shape {want} (self's, with dimension {axis} the index's length)")
    return axis


def index_put(cx, x, values, index, axis, accumulate=False, allow_negative=True):
    index = reshape(cx, index, [1]) if len(index.shape) == 0 else index
    return cx.emit("index_put", [x, cast(cx, values, x.dtype), index], axis=axis,
                   accumulate=int(bool(accumulate)), allow_negative=int(allow_negative))


@converts("index_add", "index_copy")
def _index_add(cx, a):
    x, index, source = a[0], a[2], a[3]
    axis = _index_1d(a, x, index, source)
    if len(index.shape) == 0:  # the source lacks the axis then
        source = reshape(cx, source, list(x.shape[:axis]) + [1] + list(x.shape[axis + 1:]))
    alpha = a["alpha"]
    if alpha not in (None, 1):
        source = binary(cx, "multiply", source, alpha)
    # torch's index_add and index_copy refuse negative indices (index_fill wraps them)
    return index_put(cx, x, source, index, axis, a.op == "index_add", allow_negative=False)


@converts("index_fill")
def _index_fill(cx, a):
    x, index = a[0], a[2]
    axis = _index_1d(a, x, index)
    return index_put(cx, x, _values(cx, a[3], x.dtype), index, axis)


def _mask_put(cx, x, mask, start, values, accumulate):
    """x[..., mask] = values (+= with accumulate) for a bool mask over x's axes from `start`:
    a where, when the values broadcast over the masked elements (one row per True would
    need the count of Trues, which the data decides)."""
    m = len(mask.shape)
    if list(mask.shape) != list(x.shape[start:start + m]):
        raise EmberError(f"index_put: the bool mask {list(mask.shape)} must match self's "
                         f"dimensions {list(x.shape[start:start + m])}")
    rest = list(x.shape[start + m:])
    shape = list(values.shape)
    while len(shape) > len(rest) and shape[0] == 1:
        shape = shape[1:]
    if len(shape) > len(rest) or any(s not in (1, r) for s, r in zip(shape, rest[-len(shape):]
                                                                       if shape else [])):
        raise EmberError(f"index_put: x[mask] = values with values of shape "
                         f"{list(values.shape)} (one row per True element) is not supported: "
                         "the number of Trues depends on the data; use values that broadcast "
                         f"over {rest or 'the masked elements'}, or masked_scatter")
    values = cast(cx, reshape(cx, values, shape), x.dtype)
    mask = reshape(cx, mask, [1] * start + list(mask.shape) + [1] * len(rest))
    new = binary(cx, "add", x, values) if accumulate else values
    return cx.emit("where", [mask, new, x])


@converts("index_put")
def _index_put(cx, a):
    x, indices, values, accumulate = a[0], list(a[1]), a[2], bool(a[3])
    used = [i for i, t in enumerate(indices) if t is not None]
    masks = [i for i in used if indices[i].dtype == "bool"]
    if masks:
        if len(used) != 1:
            raise EmberError("index_put with a bool mask and other index tensors is not "
                             "supported; index with the mask alone")
        return _mask_put(cx, x, indices[used[0]], used[0], values, accumulate)
    tensors = [indices[i] for i in used]
    if used == list(range(used[0], used[0] + len(used))):  # adjacent: the indexed dims there
        return cx.emit("index_put", [x, cast(cx, values, x.dtype), *tensors], axis=used[0],
                       accumulate=int(accumulate))
    # Apart, PyTorch puts the indices' broadcast dims first: index the axes moved to the front.
    rest = [d for d in range(len(x.shape)) if d not in used]
    order = used + rest
    out = cx.emit("index_put", [transpose(cx, x, order), cast(cx, values, x.dtype), *tensors],
                  axis=0, accumulate=int(accumulate))
    return transpose(cx, out, list(np.argsort(order)))


@converts("copy")
def _copy(cx, a):
    """self.copy_(src) as a value: src broadcast to self's shape, in self's dtype."""
    x, src = a[0], a[1]
    if not isinstance(src, Expr):
        return _values(cx, src, x.dtype, list(x.shape))
    if len(src.shape) < len(x.shape):
        src = reshape(cx, src, [1] * (len(x.shape) - len(src.shape)) + list(src.shape))
    return broadcast_to(cx, cast(cx, src, x.dtype), list(x.shape))


@converts("masked_scatter")
def _masked_scatter(cx, a):
    """The True elements of the mask (broadcast to self) take the source's elements in
    order: element i takes source[cumsum(mask)[i] - 1], a take whose index check reports a
    source with fewer elements than Trues."""
    x, mask, source = a[0], a[1], a[2]
    n, total = int(np.prod(x.shape)), int(np.prod(source.shape))
    if total == 0:
        raise EmberError("masked_scatter with an empty source is not supported")
    if list(mask.shape) != list(x.shape):
        mask = cx.emit("broadcast_to", [reshape(cx, mask, [1] * (len(x.shape) - len(
            mask.shape)) + list(mask.shape))], shape=list(x.shape))
    flat = reshape(cx, mask, [n])
    position = binary(cx, "subtract", cx.emit("cumsum", [flat], axis=0), 1)
    # Before the first True the position is -1, which wraps to a valid (unused) element.
    taken = cx.emit("take", [reshape(cx, cast(cx, source, x.dtype), [total]), position], axis=0)
    return reshape(cx, cx.emit("where", [flat, taken, reshape(cx, x, [n])]), list(x.shape))
