"""Converters of values rather than computations: identities (clone, contiguous, eval-mode
dropout) and casts, the Python scalars of TorchScript traces (size, dim, numel, item, list
indexing) and constant-like tensors (zeros_like, new_full, ...). Registered into
_aten_registry.CONVERTERS on import."""
import numpy as np
import torch

from .._ember import Constant, EmberError, Expr
from ._aten_registry import (CONVERTERS, _SCALAR_TYPES, _axis, cast, converts, dtype_name,
                            scalar_dtype)


# ----------------------------------------------------------------- identities and casts

def _identity(cx, a):
    return a[0]


for _name in ("contiguous", "clone", "detach", "alias", "lift_fresh_copy", "lift_fresh",
              "resolve_conj", "resolve_neg", "positive"):
    CONVERTERS[_name] = _identity


def _check_eval_dropout(a):
    train = a["train"] if a.has("train") else None
    if train:
        raise EmberError(f"{a.op} in training mode (random) is not supported: call "
                         "model.eval() first")


@converts("dropout", "feature_dropout", "alpha_dropout", "feature_alpha_dropout")
def _dropout(cx, a):
    _check_eval_dropout(a)
    return a[0]


@converts("native_dropout")
def _native_dropout(cx, a):
    _check_eval_dropout(a)
    return [a[0], None]


@converts("_assert_tensor_metadata", "_assert_scalar", "sym_constrain_range_for_size",
          "_assert_async")
def _no_op(cx, a):
    return None


@converts("to", "_to_copy", "type_as", "_to_dim_order_copy")
def _to(cx, a):
    x = a[0]
    dtype = a["dtype"]
    if a.has("other") and isinstance(a["other"], Expr):
        dtype = a["other"].dtype
    if dtype is None:
        for v in a.values[1:]:  # TorchScript's aten::to overloads put the dtype anywhere
            if isinstance(v, torch.dtype):
                dtype = v
                break
    if dtype is None:
        return x
    if not isinstance(x, Expr):
        return torch.tensor(x, dtype=_SCALAR_TYPES.get(dtype, dtype)).item()
    return cast(cx, x, dtype if isinstance(dtype, str) else dtype_name(dtype))


# ------------------------------------------------------------- scalars (TorchScript traces)

@converts("size", "sym_size")
def _size(cx, a):
    shape = list(a[0].shape)
    return shape if a[1] is None else shape[_axis(a[1], len(shape))]


@converts("is_contiguous", "sym_is_contiguous")
def _is_contiguous(cx, a):
    return True  # an Ember tensor is a value: always laid out densely


@converts("dim")
def _dim(cx, a):
    return len(a[0].shape)


@converts("numel", "sym_numel")
def _numel(cx, a):
    return int(np.prod(a[0].shape))


@converts("Int", "Float", "ScalarImplicit", "item", "Bool", "_local_scalar_dense")
def _scalar(cx, a):
    x = a[0]
    if isinstance(x, Constant):
        return np.asarray(x.value).item()
    if isinstance(x, Expr):
        raise EmberError("a tensor value is read as a Python number (.item(), int(tensor)): "
                         "the graph would depend on data; keep it a tensor")
    return x


@converts("__getitem__")
def _list_getitem(cx, a):
    return a[0][a[1]]


@converts("len")
def _len(cx, a):
    return len(a[0])


# ------------------------------------------------------------------ constant-like tensors

def _fill(shape, value, dtype, cx, like=None):
    if dtype is None:
        dtype = like.dtype if like is not None else scalar_dtype(value)
    elif not isinstance(dtype, str):
        dtype = dtype_name(dtype)
    return cx.const(np.full([int(s) for s in shape], value), dtype)


@converts("zeros_like")
def _zeros_like(cx, a):
    return _fill(a[0].shape, 0, a["dtype"], cx, a[0])


@converts("ones_like")
def _ones_like(cx, a):
    return _fill(a[0].shape, 1, a["dtype"], cx, a[0])


@converts("full_like")
def _full_like(cx, a):
    return _fill(a[0].shape, a[1], a["dtype"], cx, a[0])


@converts("new_zeros")
def _new_zeros(cx, a):
    return _fill(a[1], 0, a["dtype"], cx, a[0])


@converts("new_ones")
def _new_ones(cx, a):
    return _fill(a[1], 1, a["dtype"], cx, a[0])


@converts("new_full")
def _new_full(cx, a):
    return _fill(a[1], a[2], a["dtype"], cx, a[0])
