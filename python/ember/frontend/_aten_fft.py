"""Discrete Fourier transforms (torch.fft) to Ember ops. Ember has no complex dtype, so a
complex tensor exists only inside the importer, as a `Complex` pair of float32 tensors (its
real and imaginary parts); the graph sees only real ops. A transform along an axis of length
n is a product with constant n x n cosine and sine matrices (a DFT, O(n^2) but a GEMM, which
Ember runs fast at the sizes FNet's token mixing and spectrogram frames use). With
theta = 2 pi jk / n, C = cos theta, S = sin theta (S negated for an inverse):

    X_k = sum_j (re_j + i im_j) e^(-i theta):   Re X = C re + S im,   Im X = C im - S re

A complex value may flow into another transform, `real`, `imag`, `abs`, `view_as_real`, a
cast, a conjugate, a product with a real tensor or an op that only moves elements (slices,
views, padding, negation: applied part by part); any other op that receives one is refused
with a reason (_aten_registry.COMPLEX_OPS). Covers fft/ifft/fft2/ifft2/fftn/ifftn, rfft/rfft2/rfftn,
irfft/irfft2/irfftn and their decomposed forms (_fft_c2c, _fft_r2c, _fft_c2r), every norm.
Registered into _aten_registry.CONVERTERS on import."""
import math

import numpy as np

from .._ember import EmberError, Expr
from ._aten_registry import (COMPLEX_OPS, CONVERTERS, Args, Complex, _axes, binary, cast, converts,
                             dtype_name, matmul, transpose, zero_pad)


def _complex(cx, x, op):
    if isinstance(x, Complex):
        return x
    if not isinstance(x, Expr):
        raise EmberError(f"{op} takes a tensor")
    return Complex(cast(cx, x, "float32"))


def _along(cx, x, axis, matrix):
    """matrix [m, n] (constant) applied along x's axis `axis` (of length n)."""
    rank = len(x.shape)
    order = [d for d in range(rank) if d != axis] + [axis]
    y = matmul(cx, transpose(cx, x, order), cx.const(np.ascontiguousarray(matrix.T), "float32"))
    return transpose(cx, y, [order.index(d) for d in range(rank)])


def _resize(cx, x, axis, n):
    """x along `axis` cut or zero-padded to n (the transforms' n and s arguments)."""
    if x is None:
        return x
    widths = [(0, 0)] * len(x.shape)
    widths[axis] = (0, n - x.shape[axis])
    return zero_pad(cx, x, widths)


def _dft(cx, z, axis, n, inverse, scale, bins=None):
    """The DFT of z along `axis` (resized to n), keeping the first `bins` outputs (all)."""
    re, im = _resize(cx, z.re, axis, n), _resize(cx, z.im, axis, n)
    theta = 2 * np.pi * ((np.arange(bins or n)[:, None] * np.arange(n)[None, :]) % n) / n
    c, s = np.cos(theta) * scale, np.sin(theta) * scale * (-1.0 if inverse else 1.0)
    out_re, out_im = _along(cx, re, axis, c), _along(cx, re, axis, -s)
    if im is not None:
        out_re = cx.emit("add", [out_re, _along(cx, im, axis, s)])
        out_im = cx.emit("add", [out_im, _along(cx, im, axis, c)])
    return Complex(out_re, out_im)


def _scale(norm, n, inverse):
    """The factor of a transform over n points: torch's norm names ("backward", "ortho",
    "forward") say which direction is scaled; the decomposed ops' normalization codes (0:
    none, 1: 1/sqrt(n), 2: 1/n) apply to the op itself."""
    if isinstance(norm, str) or norm is None:
        norm = {"backward": 2 if inverse else 0, "ortho": 1,
                "forward": 0 if inverse else 2}.get(norm or "backward")
        if norm is None:
            raise EmberError("fft norm must be 'backward', 'ortho' or 'forward'")
    return {0: 1.0, 1: 1.0 / math.sqrt(n), 2: 1.0 / n}[int(norm)]


def _plan(x, a):
    """The axes a torch.fft call transforms and their lengths: (dims, sizes)."""
    rank = len(x.shape)
    if a.has("n"):  # fft, ifft, rfft, irfft: one axis
        dims = [_axes(a["dim"] if a["dim"] is not None else -1, rank)[0]]
        return dims, [int(a["n"]) if a["n"] is not None else None]
    sizes = list(a["s"]) if a["s"] is not None else None
    if a["dim"] is not None:
        dims = _axes(a["dim"], rank)
    elif a.op.endswith("2"):
        dims = [rank - 2, rank - 1]
    else:
        dims = list(range(rank - len(sizes), rank)) if sizes else list(range(rank))
    return dims, sizes or [None] * len(dims)


def _transform(cx, z, dims, sizes, inverse, norm):
    for axis, n in zip(dims, sizes):
        n = n or z.shape[axis]
        z = _dft(cx, z, axis, n, inverse, _scale(norm, n, inverse))
    return z


@converts("fft_fft", "fft_fft2", "fft_fftn", "fft_ifft", "fft_ifft2", "fft_ifftn")
def _fft(cx, a):
    z = _complex(cx, a[0], a.op)
    dims, sizes = _plan(z, a)
    return _transform(cx, z, dims, sizes, a.op.startswith("fft_i"), a["norm"])


@converts("fft_rfft", "fft_rfft2", "fft_rfftn")
def _rfft(cx, a):
    """A real input's transform, the last axis keeping its n // 2 + 1 bins."""
    if isinstance(a[0], Complex):
        raise EmberError(f"{a.op} takes a real tensor")
    z = _complex(cx, a[0], a.op)
    dims, sizes = _plan(z, a)
    n = sizes[-1] or z.shape[dims[-1]]
    z = _dft(cx, z, dims[-1], n, False, _scale(a["norm"], n, False), n // 2 + 1)
    return _transform(cx, z, dims[:-1], sizes[:-1], False, a["norm"])


def _hermitian_inverse(cx, z, axis, n, scale):
    """The real signal of length n whose half spectrum (n // 2 + 1 bins) z holds along axis:
    x_j = sum_k w_k (Re_k cos - Im_k sin)(2 pi jk / n), w_k = 2 but at 0 and n / 2 (the
    imaginary parts there are ignored, as PyTorch does: their sines are zero)."""
    bins = n // 2 + 1
    k = np.arange(bins)
    w = np.where((k == 0) | ((n % 2 == 0) & (k == n // 2)), 1.0, 2.0) * scale
    theta = 2 * np.pi * ((np.arange(n)[:, None] * k[None, :]) % n) / n
    out = _along(cx, _resize(cx, z.re, axis, bins), axis, np.cos(theta) * w)
    if z.im is not None:
        sine = _along(cx, _resize(cx, z.im, axis, bins), axis, np.sin(theta) * w)
        out = cx.emit("subtract", [out, sine])
    return out


@converts("fft_irfft", "fft_irfft2", "fft_irfftn")
def _irfft(cx, a):
    z = _complex(cx, a[0], a.op)
    dims, sizes = _plan(z, a)
    n = sizes[-1] or 2 * (z.shape[dims[-1]] - 1)
    z = _transform(cx, z, dims[:-1], sizes[:-1], True, a["norm"])
    return _hermitian_inverse(cx, z, dims[-1], n, _scale(a["norm"], n, True))


# -------------------------------------------------- decomposed forms (run_decompositions)

@converts("_fft_c2c")
def _fft_c2c(cx, a):
    z = _complex(cx, a[0], a.op)
    dims = _axes(a["dim"], len(z.shape))
    return _transform(cx, z, dims, [None] * len(dims), not a["forward"],
                      int(a["normalization"]))


@converts("_fft_r2c")
def _fft_r2c(cx, a):
    z = _complex(cx, a[0], a.op)
    dims = _axes(a["dim"], len(z.shape))
    norm, n = int(a["normalization"]), z.shape[dims[-1]]
    z = _dft(cx, z, dims[-1], n, False, _scale(norm, n, False),
             n // 2 + 1 if a["onesided"] else None)
    return _transform(cx, z, dims[:-1], [None] * (len(dims) - 1), False, norm)


@converts("_fft_c2r")
def _fft_c2r(cx, a):
    z = _complex(cx, a[0], a.op)
    dims = _axes(a["dim"], len(z.shape))
    norm, n = int(a["normalization"]), int(a["last_dim_size"])
    z = _transform(cx, z, dims[:-1], [None] * (len(dims) - 1), True, norm)
    return _hermitian_inverse(cx, z, dims[-1], n, _scale(norm, n, True))


# ------------------------------------------------------------ leaving the complex domain

def _zeros_like(cx, x):
    return binary(cx, "multiply", x, 0.0)


@converts("real")
def _real(cx, a):
    return a[0].re if isinstance(a[0], Complex) else a[0]


@converts("imag")
def _imag(cx, a):
    if not isinstance(a[0], Complex):
        raise EmberError("imag of a real tensor is not defined (torch refuses it too)")
    return a[0].im if a[0].im is not None else _zeros_like(cx, a[0].re)


@converts("view_as_real")
def _view_as_real(cx, a):
    z = _complex(cx, a[0], a.op)
    im = z.im if z.im is not None else _zeros_like(cx, z.re)
    parts = [cx.emit("reshape", [p], newshape=list(z.shape) + [1]) for p in (z.re, im)]
    return cx.emit("concatenate", parts, axis=len(z.shape))


def _complex_or(previous, complex_fn):
    """An existing converter, with complex_fn for a Complex first argument."""
    def convert(cx, a):
        return complex_fn(cx, a) if isinstance(a[0], Complex) else previous(cx, a)
    return convert


def _magnitude(cx, a):
    z = a[0]
    if z.im is None:
        return cx.emit("abs", [z.re])
    squares = cx.emit("add", [cx.emit("multiply", [z.re, z.re]),
                              cx.emit("multiply", [z.im, z.im])])
    return cx.emit("sqrt", [squares])


def _to(previous):
    """Casts: to a complex dtype a real tensor becomes a Complex; a Complex stays one, or
    casting it to a real dtype keeps its real part (as torch does, with a warning)."""
    def convert(cx, a):
        dtype = a["dtype"]
        wants_complex = dtype is not None and "complex" in str(dtype)
        if isinstance(a[0], Complex):
            return a[0] if wants_complex or dtype is None else cast(cx, a[0].re,
                                                                    dtype_name(dtype))
        return _complex(cx, a[0], a.op) if wants_complex else previous(cx, a)
    return convert


def _mul(previous):
    """A complex tensor times a real tensor or number (either order): both parts scaled."""
    def convert(cx, a):
        z, y = a[0], a[1]
        if isinstance(y, Complex):
            z, y = y, z
        if not isinstance(z, Complex):
            return previous(cx, a)
        if isinstance(y, Complex):
            raise EmberError("a product of two complex tensors is not supported")
        return Complex(binary(cx, "multiply", z.re, y),
                       None if z.im is None else binary(cx, "multiply", z.im, y))
    return convert


def _parts(previous):
    """An op that moves or copies elements (slicing, views, padding, negation), applied to
    a Complex part by part."""
    def convert(cx, a):
        z = a[0]
        if not isinstance(z, Complex):
            return previous(cx, a)
        im = z.im if z.im is not None else _zeros_like(cx, z.re)
        re, im = (previous(cx, Args(a.op, a.names, [p] + a.values[1:])) for p in (z.re, im))
        return Complex(re, im)
    return convert


def _negate(cx, a):
    return cx.emit("negative", [a[0]])


@converts("conj", "_conj", "conj_physical")
def _conj(cx, a):
    z = a[0]
    if not isinstance(z, Complex) or z.im is None:
        return z
    return Complex(z.re, cx.emit("negative", [z.im]))


_MOVES = ("slice", "select", "view", "reshape", "_unsafe_view", "permute", "transpose",
          "unsqueeze", "squeeze", "expand", "clone", "contiguous", "constant_pad_nd", "flip",
          "narrow", "alias", "detach", "resolve_conj", "resolve_neg", "neg", "t", "flatten")
CONVERTERS["_neg_view"] = _negate
for _name in _MOVES + ("_neg_view",):
    CONVERTERS[_name] = _parts(CONVERTERS[_name])
CONVERTERS["abs"] = _complex_or(CONVERTERS["abs"], _magnitude)
for _name in ("to", "_to_copy"):
    CONVERTERS[_name] = _to(CONVERTERS[_name])
CONVERTERS["mul"] = _mul(CONVERTERS["mul"])
COMPLEX_OPS.update({"fft_fft", "fft_fft2", "fft_fftn", "fft_ifft", "fft_ifft2", "fft_ifftn",
                    "fft_rfft", "fft_rfft2", "fft_rfftn", "fft_irfft", "fft_irfft2",
                    "fft_irfftn", "_fft_c2c", "_fft_r2c", "_fft_c2r", "real", "imag",
                    "view_as_real", "abs", "to", "_to_copy", "mul", "conj", "_conj",
                    "conj_physical", "_neg_view"} | set(_MOVES))
