"""Linear-algebra converters: the matrix products (addmm, mm/matmul/bmm, baddbmm and the
grouped matmul of mixture-of-experts layers) and the axis permutations (t, transpose,
permute, movedim). Registered into _aten_registry.CONVERTERS on import."""
from .._ember import EmberError
from ._aten_registry import CONVERTERS, _axes, _axis, binary, cast, converts, matmul, transpose


@converts("addmm")
def _addmm(cx, a):
    bias, beta, alpha = a[0], a["beta"], a["alpha"]
    y = matmul(cx, a[1], a[2])
    if alpha not in (None, 1):
        y = binary(cx, "multiply", y, alpha)
    if beta not in (None, 1):
        bias = binary(cx, "multiply", bias, beta)
    if len(bias.shape) == 1 and bias.shape[0] == y.shape[-1]:
        return cx.emit("nn.bias_add", [y, bias], axis=len(y.shape) - 1)
    return binary(cx, "add", y, bias)


@converts("mm", "matmul", "bmm")
def _matmul(cx, a):
    return matmul(cx, a[0], a[1])


@converts("_grouped_mm", "transformers::grouped_mm_fallback")
def _grouped_mm(cx, a):
    """Grouped matmul (mixture-of-experts layers) -> nn.grouped_matmul: rows
    offs[g-1]:offs[g] of x [S, K] times w[g] [K, N]; rows past the last offset are zero.
    Each row is multiplied by its own group's matrix only (the op reads the offsets at run
    time). Offsets that torch would reject (unsorted, outside [0, S]) are clamped by the op:
    each group ends at the running maximum of the offsets, within [0, S]."""
    x, w, offs = a[0], a[1], a[2]
    if len(x.shape) != 2 or len(w.shape) != 3 or offs is None:
        raise EmberError("grouped matmul is supported for a 2-D input, 3-D weights and "
                         "offsets (the mixture-of-experts form) only")
    if a["bias"] is not None or a["out_dtype"] is not None:
        raise EmberError("grouped matmul with a bias or out_dtype is not supported")
    if offs.dtype not in ("int32", "int64"):
        offs = cast(cx, offs, "int64")
    return cx.emit("nn.grouped_matmul", [x, w, offs])


@converts("baddbmm")
def _baddbmm(cx, a):
    return CONVERTERS["addmm"](cx, a)


@converts("t", "numpy_T")
def _t(cx, a):
    x = a[0]
    return x if len(x.shape) < 2 else transpose(cx, x, list(range(len(x.shape)))[::-1])


@converts("transpose", "swapaxes", "swapdims")
def _transpose(cx, a):
    x = a[0]
    axes = list(range(len(x.shape)))
    i, j = _axis(a[1], len(axes)), _axis(a[2], len(axes))
    axes[i], axes[j] = axes[j], axes[i]
    return transpose(cx, x, axes)


@converts("permute")
def _permute(cx, a):
    return transpose(cx, a[0], _axes(a[1], len(a[0].shape)))


@converts("movedim")
def _movedim(cx, a):
    x = a[0]
    rank = len(x.shape)
    src, dst = _axes(a[1], rank), _axes(a[2], rank)
    rest = [d for d in range(rank) if d not in src]
    order = [None] * rank
    for s, d in zip(src, dst):
        order[d] = s
    it = iter(rest)
    return transpose(cx, x, [o if o is not None else next(it) for o in order])
