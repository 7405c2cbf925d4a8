"""Shape and indexing converters: views and reshapes, flatten, squeeze and unsqueeze, expand
and repeat, cat and stack, split, chunk and unbind, slicing (slice, narrow, select),
indexing (index_select, gather, index, embedding), flip, tril/triu, unfold, diagonal, fill,
slice_scatter and select_scatter, and padding (constant, reflect, replicate, circular).
Registered into _aten_registry.CONVERTERS on import."""
import numpy as np
import torch

from .._ember import EmberError, Expr
from ._sizes import as_size, is_dim, prod, smin
from ._aten_registry import (CONVERTERS, Args, _axes, _axis, broadcast_to, cast, promoted,
                            converts, reshape, slice_axis, split, take_const, transpose)


def _infer_shape(shape, total):
    shape = [as_size(s) for s in shape]
    if any(is_dim(s) for s in shape) or is_dim(total):
        return shape  # reshape's relation finds a -1 of run-time size at every size
    if -1 in shape:
        known = int(np.prod([s for s in shape if s != -1]))
        shape[shape.index(-1)] = total // known if known else 0
    return shape


@converts("view", "reshape", "_unsafe_view", "view_copy", "_reshape_alias", "view_as",
          "reshape_as")
def _reshape(cx, a):
    x, shape = a[0], a[1]
    if isinstance(shape, Expr):  # view_as / reshape_as
        shape = shape.shape
    if isinstance(shape, torch.dtype):
        raise EmberError("view(dtype) reinterprets memory and is not supported")
    return reshape(cx, x, _infer_shape(shape, prod(x.shape)))


@converts("flatten")
def _flatten(cx, a):
    x = a[0]
    rank = len(x.shape)
    if rank == 0:
        return reshape(cx, x, [1])
    start, end = _axis(a[1] if a[1] is not None else 0, rank), _axis(
        a[2] if a[2] is not None else -1, rank)
    shape = list(x.shape[:start]) + [int(np.prod(x.shape[start:end + 1]))] + list(
        x.shape[end + 1:])
    return reshape(cx, x, shape)


@converts("unflatten")
def _unflatten(cx, a):
    x = a[0]
    axis = _axis(a[1], len(x.shape))
    sizes = _infer_shape(a[2], x.shape[axis])
    return reshape(cx, x, list(x.shape[:axis]) + sizes + list(x.shape[axis + 1:]))


@converts("unsqueeze")
def _unsqueeze(cx, a):
    x = a[0]
    axis = _axis(a[1], len(x.shape) + 1)
    return reshape(cx, x, list(x.shape[:axis]) + [1] + list(x.shape[axis:]))


@converts("squeeze")
def _squeeze(cx, a):
    x = a[0]
    dims = _axes(a[1], len(x.shape)) if a[1] is not None else range(len(x.shape))
    return reshape(cx, x, [s for i, s in enumerate(x.shape) if not (i in dims and s == 1)])


@converts("expand", "expand_as", "broadcast_to")
def _expand(cx, a):
    x, shape = a[0], a[1]
    shape = list(shape.shape if isinstance(shape, Expr) else shape)
    lead = len(shape) - len(x.shape)
    shape = [x.shape[i - lead] if s == -1 else s for i, s in enumerate(shape)]
    if lead > 0:
        x = reshape(cx, x, [1] * lead + list(x.shape))
    return broadcast_to(cx, x, shape)


@converts("repeat")
def _repeat(cx, a):
    x, repeats = a[0], list(a[1])
    shape = [1] * (len(repeats) - len(x.shape)) + list(x.shape)
    # [s0, s1] repeated [r0, r1]: view as [1, s0, 1, s1], broadcast to [r0, s0, r1, s1],
    # and merge each pair.
    x = reshape(cx, x, [d for s in shape for d in (1, s)])
    x = broadcast_to(cx, x, [d for r, s in zip(repeats, shape) for d in (r, s)])
    return reshape(cx, x, [r * s for r, s in zip(repeats, shape)])


@converts("cat", "concat", "concatenate")
def _cat(cx, a):
    tensors = [t for t in a[0] if not (len(t.shape) == 1 and t.shape[0] == 0)]
    if not tensors:
        raise EmberError("cat of only empty tensors")
    dtype = promoted(t.dtype for t in tensors)
    tensors = [cast(cx, t, dtype) for t in tensors]
    if len(tensors) == 1:
        return tensors[0]
    return cx.emit("concatenate", tensors, axis=_axis(a[1] or 0, len(tensors[0].shape)))


@converts("stack")
def _stack(cx, a):
    tensors = list(a[0])
    axis = _axis(a[1] or 0, len(tensors[0].shape) + 1)
    tensors = [reshape(cx, t, list(t.shape[:axis]) + [1] + list(t.shape[axis:]))
               for t in tensors]
    return tensors[0] if len(tensors) == 1 else cx.emit("concatenate", tensors, axis=axis)


@converts("split", "unsafe_split", "split_with_sizes", "unsafe_split_with_sizes")
def _split_op(cx, a):
    x = a[0]
    axis = _axis(a[2] if a[2] is not None else 0, len(x.shape))
    length = x.shape[axis]
    size = a[1]
    if isinstance(size, int):
        sizes = [min(size, length - i) for i in range(0, length, size)] if size else [0]
    else:
        sizes = list(size)
    return split(cx, x, sizes, axis)


@converts("chunk", "unsafe_chunk")
def _chunk(cx, a):
    x = a[0]
    axis = _axis(a[2] if a[2] is not None else 0, len(x.shape))
    length = x.shape[axis]
    size = -(-length // a[1])  # torch: every chunk but the last has ceil(length / chunks)
    return split(cx, x, [min(size, length - i) for i in range(0, length, size)], axis)


@converts("unbind")
def _unbind(cx, a):
    x = a[0]
    axis = _axis(a[1] or 0, len(x.shape))
    shape = list(x.shape[:axis]) + list(x.shape[axis + 1:])
    return [reshape(cx, s, shape) for s in split(cx, x, [1] * x.shape[axis], axis)]


def _bound(index, length, default):
    if index is None:
        return default
    index = as_size(index)
    if not is_dim(index) and index < 0:
        index = length + index
    return smin(index if is_dim(index) else max(index, 0), length)


@converts("slice")
def _slice(cx, a):
    x = a[0]
    if not isinstance(x, Expr):  # a Python list (TorchScript list slicing)
        return x[a[1]:a[2]:a[3]]
    axis = _axis(a[1] or 0, len(x.shape))
    length = x.shape[axis]
    begin = _bound(a[2], length, 0)
    end = max(_bound(a[3], length, length), begin)
    step = a[4] or 1
    return slice_axis(cx, x, axis, begin, end, step)


@converts("narrow")
def _narrow(cx, a):
    x = a[0]
    axis = _axis(a[1], len(x.shape))
    begin = _bound(a[2], x.shape[axis], 0)
    return slice_axis(cx, x, axis, begin, begin + a[3])


@converts("select")
def _select(cx, a):
    x = a[0]
    axis = _axis(a[1], len(x.shape))
    index = int(a[2]) % x.shape[axis]
    y = slice_axis(cx, x, axis, index, index + 1)
    return reshape(cx, y, list(x.shape[:axis]) + list(x.shape[axis + 1:]))


@converts("index_select")
def _index_select(cx, a):
    # torch's index_select refuses negative indices (x[idx] wraps them: see _index)
    return cx.emit("take", [a[0], a[2]], axis=_axis(a[1], len(a[0].shape)), allow_negative=0)


@converts("gather")
def _gather(cx, a):
    if len(a[0].shape) == 0:
        raise EmberError("gather of a 0-dimensional tensor is not supported; reshape it to (1,)")
    return cx.emit("gather", [a[0], a[2]], axis=_axis(a[1], len(a[0].shape)))


@converts("index")
def _index(cx, a):
    x, indices = a[0], list(a[1])
    used = [i for i, t in enumerate(indices) if t is not None]
    if any(indices[i].dtype == "bool" for i in used):
        raise EmberError("boolean mask indexing (x[mask]) has a data-dependent shape and "
                         "is not supported; use torch.where or masked_fill instead")
    tensors = [indices[i] for i in used]
    if len(used) == 1:
        return cx.emit("take", [x, tensors[0]], axis=used[0])
    if used == list(range(used[0], used[0] + len(used))):  # adjacent: the result's dims there
        return cx.emit("adv_index", [x, *tensors], axis=used[0])
    # Apart, PyTorch puts the indices' broadcast dims first: index the axes moved to the front.
    rest = [d for d in range(len(x.shape)) if d not in used]
    return cx.emit("adv_index", [cx.emit("transpose", [x], axes=used + rest), *tensors], axis=0)


@converts("embedding")
def _embedding(cx, a):
    return cx.emit("take", [a[0], a[1]], axis=0, allow_negative=0)  # as torch: no wrapping


@converts("flip")
def _flip(cx, a):
    x = a[0]
    for axis in _axes(a["dims"], len(x.shape)):
        x = take_const(cx, x, axis, np.arange(x.shape[axis] - 1, -1, -1))
    return x


@converts("tril", "triu")
def _triangle(cx, a):
    """The lower (tril) or upper (triu) triangle of the last two dimensions, counted from
    diagonal `diagonal`; the rest zero."""
    x, diagonal = a[0], int(a[1] or 0)
    if len(x.shape) < 2:
        raise EmberError(f"{a.op} takes a tensor of at least 2 dimensions, got {list(x.shape)}")
    rows, cols = x.shape[-2:]
    offset = np.arange(cols)[None, :] - np.arange(rows)[:, None]
    keep = offset <= diagonal if a.op == "tril" else offset >= diagonal
    zero = cx.const(False if x.dtype == "bool" else 0, x.dtype)
    return cx.emit("where", [cx.const(keep, "bool"), x, zero])


@converts("unfold")
def _unfold(cx, a):
    """Tensor.unfold(dim, size, step): the windows x[.., i * step : i * step + size, ..] along
    dim, which becomes the window count, each window's elements a new last axis."""
    x, size, step = a[0], int(a[2]), int(a[3])
    rank = max(len(x.shape), 1)
    x = reshape(cx, x, [1]) if not x.shape else x
    axis = _axis(a[1], rank)
    if size > x.shape[axis] or step < 1:
        raise EmberError(f"unfold: a window of {size} with step {step} does not fit in "
                         f"dimension {axis} of size {x.shape[axis]}")
    windows = (x.shape[axis] - size) // step + 1
    index = np.arange(windows)[:, None] * step + np.arange(size)[None, :]
    y = take_const(cx, x, axis, index.reshape(-1))
    shape = list(x.shape)
    y = reshape(cx, y, shape[:axis] + [windows, size] + shape[axis + 1:])
    order = list(range(axis + 1)) + list(range(axis + 2, rank + 1)) + [axis + 1]
    return transpose(cx, y, order)


@converts("diagonal")
def _diagonal(cx, a):
    """The diagonal of the dim1 x dim2 matrices, last: take of the flattened matrices."""
    x, offset = a[0], int(a["offset"] or 0)
    rank = len(x.shape)
    d1, d2 = _axis(a["dim1"] or 0, rank), _axis(1 if a["dim2"] is None else a["dim2"], rank)
    if d1 == d2:
        raise EmberError(f"diagonal: dim1 and dim2 are both dimension {d1}")
    rest = [d for d in range(rank) if d not in (d1, d2)]
    n, m = x.shape[d1], x.shape[d2]
    row, col = max(0, -offset), max(0, offset)
    length = min(n - row, m - col)
    if length <= 0:
        raise EmberError(f"diagonal {offset} of a {n}x{m} matrix is empty")
    flat = reshape(cx, transpose(cx, x, rest + [d1, d2]), [x.shape[d] for d in rest] + [n * m])
    steps = np.arange(length)
    return take_const(cx, flat, len(rest), (steps + row) * m + steps + col)


@converts("fill")
def _fill_op(cx, a):
    x, value = a[0], a[1]
    return CONVERTERS["copy"](cx, Args("copy", ["self", "src"], [x, value]))


@converts("slice_scatter")
def _slice_scatter(cx, a):
    """self with self[..., start:end:step, ...] (along dim) replaced by src."""
    x, src = a[0], a[1]
    axis = _axis(a["dim"] or 0, len(x.shape))
    n = x.shape[axis]
    begin = _bound(a["start"], n, 0)
    positions = np.arange(begin, max(_bound(a["end"], n, n), begin), a["step"] or 1)
    expected = list(x.shape[:axis]) + [len(positions)] + list(x.shape[axis + 1:])
    if list(src.shape) != expected:
        raise EmberError(f"slice_scatter: src has shape {list(src.shape)}, the slice "
                         f"{expected}")
    src = cast(cx, src, x.dtype)
    if len(positions) == 0:
        return x
    if len(positions) == n:
        return src
    # Every position reads src at its slot in the slice (0 outside it), then picks.
    slot = np.zeros(n, np.int64)
    slot[positions] = np.arange(len(positions))
    inside = np.zeros([n] + [1] * (len(x.shape) - axis - 1), bool)
    inside[positions] = True
    spread = take_const(cx, src, axis, slot)
    return cx.emit("where", [cx.const(inside, "bool"), spread, x])


@converts("select_scatter")
def _select_scatter(cx, a):
    x, src = a[0], a[1]
    axis = _axis(a["dim"], len(x.shape))
    index = int(a["index"]) % x.shape[axis]
    src = reshape(cx, src, list(x.shape[:axis]) + [1] + list(x.shape[axis + 1:]))
    return _slice_scatter(cx, Args("slice_scatter", ["self", "src", "dim", "start", "end"],
                                   [x, src, axis, index, index + 1]))


def _pad_index(n, before, after, mode):
    """The source position of each padded position along one axis. A negative width crops
    first, as torch does, and the rest pads the cropped axis."""
    if before < 0 or after < 0:
        kept = np.arange(max(-before, 0), n - max(-after, 0))
        return kept[_pad_index(len(kept), max(before, 0), max(after, 0), mode)]
    if mode == "reflect" and (before >= n or after >= n):
        raise EmberError(f"reflect padding ({before}, {after}) must be smaller than the "
                         f"dimension it pads ({n})")
    if mode == "circular" and (before > n or after > n):
        raise EmberError(f"circular padding ({before}, {after}) must not exceed the "
                         f"dimension it pads ({n})")
    i = np.arange(-before, n + after)
    if mode == "replicate":
        return np.clip(i, 0, n - 1)
    if mode == "circular":
        return i % n
    period = 2 * (n - 1)  # reflect: ... 2 1 | 0 1 2 ... n-1 | n-2 n-3 ...
    i = np.abs(i) % period if period else np.zeros_like(i)
    return np.where(i >= n, period - i, i)


@converts("constant_pad_nd", "pad", "reflection_pad1d", "reflection_pad2d",
          "reflection_pad3d", "replication_pad1d", "replication_pad2d", "replication_pad3d",
          "_pad_circular")
def _pad(cx, a):
    x, pad = a[0], list(a[1])
    mode = a["mode"] if a.has("mode") else "constant"
    mode = {"reflection": "reflect", "replication": "replicate", "_pad": "circular"}.get(
        a.op.rsplit("_", 1)[0], mode or "constant")
    if mode not in ("constant", "reflect", "replicate", "circular"):
        raise EmberError(f"padding mode '{mode}' is not supported; Ember pads with "
                         "constant, reflect, replicate and circular")
    rank = len(x.shape)
    width = [0] * (2 * rank)
    for i in range(len(pad) // 2):  # torch lists (before, after) pairs from the last dim
        axis = rank - 1 - i
        width[2 * axis], width[2 * axis + 1] = pad[2 * i], pad[2 * i + 1]
    if mode != "constant":
        for axis in range(rank):
            before, after = width[2 * axis], width[2 * axis + 1]
            if before or after:
                x = take_const(cx, x, axis, _pad_index(x.shape[axis], before, after, mode))
        return x
    value = a["value"] or 0.0
    return cx.emit("nn.pad", [x], pad_width=width, pad_value=float(value),
                   pad_mode="constant")
