"""Interpolation (F.interpolate, nn.Upsample) to Ember ops: aten.upsample_nearest1d/2d/3d,
_upsample_nearest_exact1d/2d/3d, upsample_linear1d, upsample_bilinear2d,
upsample_trilinear3d, upsample_bicubic2d and the antialiased _upsample_bilinear2d_aa and
_upsample_bicubic2d_aa, each in its .default (sizes and per-axis scales) and .vec (sizes or
scale factors) form. Registered into _aten_registry.CONVERTERS on import.

Shapes are static, so every source index and weight is a constant computed here, per
spatial axis, with the formulas of PyTorch's CPU kernels (ATen/native/UpSample.h and
cpu/UpSampleKernel.cpp) in the input's float type, so that the same source pixels are
picked. Each mode is separable: along one axis, output[i] = sum_k w_k[i] * x[idx_k[i]]
for a few taps k (1 for nearest, 2 for linear, 4 for cubic, more for antialiased
downsampling), so the resampling is a `take` per tap times a constant weight vector,
summed; the axes are resampled last first, the order in which PyTorch nests its sums.
"""
import math

import numpy as np

from .._ember import EmberError
from ._aten_registry import Args, cast, converts, take_const

_LINEAR = ("upsample_linear1d", "upsample_bilinear2d", "upsample_trilinear3d")
_NEAREST = ("upsample_nearest1d", "upsample_nearest2d", "upsample_nearest3d")
_NEAREST_EXACT = ("_upsample_nearest_exact1d", "_upsample_nearest_exact2d",
                  "_upsample_nearest_exact3d")
_SPATIAL = {name: int(name[-2]) for name in _LINEAR + _NEAREST + _NEAREST_EXACT}
_SPATIAL.update({"upsample_bicubic2d": 2, "_upsample_bilinear2d_aa": 2,
                 "_upsample_bicubic2d_aa": 2})


# ----------------------------------------------------------------- sizes and scales

def _sizes_and_scales(a, x, spatial):
    """The output size of each spatial axis and the scale factor PyTorch maps coordinates
    with (None: the size ratio). The .vec overloads take sizes or scale factors; the output
    size is then floor(input * factor) and the factor itself, not the size ratio, is the
    scale (F.interpolate passes sizes instead when recompute_scale_factor=True)."""
    if len(x.shape) != 2 + spatial:
        raise EmberError(f"it takes a {2 + spatial}-D input (batch, channels and {spatial} "
                         f"spatial dimensions), got a {len(x.shape)}-D one")
    inputs = list(x.shape[2:])
    size = a["output_size"]
    if a.has("scale_factors"):
        factors = a["scale_factors"]
        if (size is None) == (factors is None):
            raise EmberError("give exactly one of output_size and scale_factors")
        if size is None:
            if len(factors) != spatial:
                raise EmberError(f"scale_factors has {len(factors)} values for {spatial} "
                                 "spatial dimensions")
            size = [int(n * float(f)) for n, f in zip(inputs, factors)]
            scales = [float(f) for f in factors]
        else:
            scales = [None] * spatial
    else:
        scales = [a[name] for name in a.names if name.startswith("scales")]
    size = [int(s) for s in size]
    if len(size) != spatial or min(size) <= 0:
        raise EmberError(f"the output size {size} must be {spatial} positive numbers")
    return size, scales


def _step(in_size, out_size, align_corners, scale, real):
    """area_pixel_compute_scale: how far the source coordinate moves per output pixel.
    With align_corners the corner pixels' centres meet; otherwise the given scale factor
    (1 / factor) or the size ratio."""
    if align_corners:
        return real(in_size - 1) / real(out_size - 1) if out_size > 1 else real(0)
    if scale is not None and scale > 0:
        return real(1.0 / scale)
    return real(in_size) / real(out_size)


def _source(step, out_size, align_corners, real, clamp_negative):
    """area_pixel_compute_source_index: each output pixel's coordinate in the input.
    Without align_corners pixel centres map to centres (half-pixel offsets); linear modes
    clamp a negative coordinate to 0, cubic keeps it (its taps are clamped instead)."""
    i = np.arange(out_size).astype(real)
    if align_corners:
        return step * i
    src = step * (i + real(0.5)) - real(0.5)
    return np.maximum(src, real(0)) if clamp_negative else src


def _floor_and_fraction(src, in_size, real):
    """guard_index_and_lambda: the source pixel at or left of each coordinate (at most the
    last one) and the distance past it, within [0, 1]."""
    index = np.minimum(np.floor(src).astype(np.int64), in_size - 1)
    return index, np.clip(src - index.astype(real), real(0), real(1))


# ------------------------------------------------------------------ taps per mode
# Each returns the taps of one axis: a list of (source index vector, weight vector or
# None for weight 1), one entry per output pixel in each vector.

def _nearest_taps(in_size, out_size, scale, exact, real, shortcuts=False):
    """The legacy mode picks floor(i * step) (OpenCV's INTER_NEAREST); nearest-exact rounds
    the centre-aligned coordinate, floor((i + 0.5) * step) (Pillow, scikit-image).
    `shortcuts`: PyTorch's other kernel (upsample_nearest2d on small outputs) copies an
    unchanged size and halves the index for a doubled one whatever the scale factor."""
    if shortcuts and out_size in (in_size, 2 * in_size):
        return [(np.arange(out_size) // (out_size // in_size), None)]
    step = _step(in_size, out_size, False, scale, real)
    if exact:
        src = _source(step, out_size, False, real, clamp_negative=True) + real(0.5)
    else:
        src = step * np.arange(out_size).astype(real)
    return [(np.minimum(np.floor(src).astype(np.int64), in_size - 1), None)]


def _linear_taps(in_size, out_size, align_corners, scale, real):
    if out_size == in_size:  # PyTorch copies an axis whose size is unchanged
        return [(np.arange(in_size), None)]
    step = _step(in_size, out_size, align_corners, scale, real)
    src = _source(step, out_size, align_corners, real, clamp_negative=True)
    index, frac = _floor_and_fraction(src, in_size, real)
    right = np.minimum(index + 1, in_size - 1)
    return [(index, real(1) - frac), (right, frac)]


def _near(x, a):  # Keys' cubic convolution kernel for |x| <= 1
    return ((a + 2) * x - (a + 3)) * x * x + 1


def _far(x, a):  # and for 1 < |x| < 2
    return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a


def _cubic_taps(in_size, out_size, align_corners, scale, real):
    """Bicubic with A = -0.75 (OpenCV's) over the four pixels around each coordinate, the
    ones past a border replaced by the border pixel. (PyTorch's x86 build contracts the
    polynomials into FMAs: its weights differ from these in the last bits, up to 7e-7.)"""
    step = _step(in_size, out_size, align_corners, scale, real)
    src = _source(step, out_size, align_corners, real, clamp_negative=False)
    index, t = _floor_and_fraction(src, in_size, real)
    a, one = real(-0.75), real(1)
    weights = [_far(t + one, a), _near(t, a), _near(one - t, a), _far(one - t + one, a)]
    return [(np.clip(index + k - 1, 0, in_size - 1), w) for k, w in enumerate(weights)]


def _triangle(x):  # the linear filter
    x = np.abs(x)
    return np.where(x < 1, 1 - x, 0).astype(x.dtype)


def _keys(x):  # the cubic filter with A = -0.5 (Pillow's), for antialiased bicubic
    x, a = np.abs(x), x.dtype.type(-0.5)
    return np.where(x < 1, _near(x, a), np.where(x < 2, _far(x, a), 0)).astype(x.dtype)


def _antialias_taps(in_size, out_size, align_corners, scale, real, filter_fn, radius):
    """Pillow's resampling: when downsampling the filter is stretched by the step, so each
    output pixel averages every input pixel under it; the weights of the pixels inside the
    input are normalised to sum to 1 (no border clamping)."""
    if out_size == in_size:  # PyTorch skips an axis whose size is unchanged
        return [(np.arange(in_size), None)]
    step = _step(in_size, out_size, align_corners, scale, real)
    support = real(radius * step) if step >= 1 else real(radius)
    taps = int(math.ceil(support)) * 2 + 1
    # As PyTorch computes them: centre and 1/step rounded to the float type, the rest in
    # double (Python floats) where its C++ mixes a double constant in.
    centre = (float(step) * (np.arange(out_size) + 0.5)).astype(real)
    inverse = real(1.0 / float(step)) if step >= 1 else real(1)
    first = np.maximum((centre - support).astype(np.float64) + 0.5, 0).astype(np.int64)
    count = np.clip(np.minimum(((centre + support).astype(np.float64) + 0.5).astype(
        np.int64), in_size) - first, 0, taps)
    offsets = np.arange(taps)[:, None]
    distance = (((offsets + first).astype(real) - centre).astype(np.float64) + 0.5) * float(
        inverse)
    weights = np.where(offsets < count, filter_fn(distance.astype(real)), real(0))
    total = weights.sum(axis=0, dtype=real)
    weights = np.where(total != 0, weights / np.where(total != 0, total, 1), weights)
    index = np.minimum(first + offsets, in_size - 1)
    return [(index[k], weights[k].astype(real)) for k in range(taps)]


# ------------------------------------------------------------------------ resampling

def _resample_axis(cx, x, axis, taps):
    """sum_k take(x, idx_k, axis) * w_k, the weights broadcast along `axis`. A tap whose
    weights are all 0 is left out (a border's clamped taps, an antialiased tap past every
    pixel's support), a weight of 1 is no multiply, and an axis copied whole no op. The
    ops after the takes are elementwise: FuseOps makes one kernel of each axis."""
    taps = [(index, None if weight is None or np.all(weight == 1) else weight)
            for index, weight in taps if weight is None or np.any(weight)]
    out = None
    for index, weight in taps:
        y = take_const(cx, x, axis, index)
        if weight is not None:
            shape = [len(weight)] + [1] * (len(x.shape) - 1 - axis)
            y = cx.emit("multiply", [y, cx.const(weight.reshape(shape), x.dtype)])
        out = y if out is None else cx.emit("add", [out, y])
    return out


def _resample(cx, x, taps_per_axis):
    """Resamples the spatial axes (2, 3, ...) one after another, the last first: PyTorch
    nests the sums the same way (the innermost over the last axis), so the products add up
    in its order."""
    for offset in reversed(range(len(taps_per_axis))):
        x = _resample_axis(cx, x, 2 + offset, taps_per_axis[offset])
    return x


def _in_float32(convert):
    """A resampling converter on a bfloat16 image: computed in float32 and rounded once, as
    PyTorch's CPU kernels compute it (float32 weights and sums)."""
    def wrapped(cx, a):
        if a[0].dtype != "bfloat16":
            return convert(cx, a)
        values = [cast(cx, a[0], "float32")] + list(a.values[1:])
        return cast(cx, convert(cx, Args(a.op, a.names, values)), "bfloat16")
    return wrapped


def _float_type(x, op):
    if not (x.dtype.startswith("float") or x.dtype == "bfloat16"):
        raise EmberError(f"{op} interpolates {x.dtype} values; cast the input to float32 "
                         "first (PyTorch's CPU kernels take float tensors too)")
    return np.dtype(x.dtype).type


# ------------------------------------------------------------------------- converters

@converts(*_NEAREST, *_NEAREST_EXACT)
def _upsample_nearest(cx, a):
    x = a[0]
    size, scales = _sizes_and_scales(a, x, _SPATIAL[a.op])
    # The indices are computed in float32 as PyTorch does for every input dtype but
    # float64 (a take, so integer tensors resample too).
    real = np.float64 if x.dtype == "float64" else np.float32
    exact = a.op in _NEAREST_EXACT
    # 2-D legacy nearest runs PyTorch's channels-last kernel (its index shortcuts) when the
    # output is small (height + width <= 128, UpSampleKernel.cpp), its generic one otherwise.
    shortcuts = a.op == "upsample_nearest2d" and sum(size) <= 128
    taps = [_nearest_taps(n, m, s, exact, real, shortcuts)
            for n, m, s in zip(x.shape[2:], size, scales)]
    return _resample(cx, x, taps)


@converts(*_LINEAR)
@_in_float32
def _upsample_linear(cx, a):
    x = a[0]
    size, scales = _sizes_and_scales(a, x, _SPATIAL[a.op])
    real, corners = _float_type(x, a.op), bool(a["align_corners"])
    return _resample(cx, x, [_linear_taps(n, m, corners, s, real)
                             for n, m, s in zip(x.shape[2:], size, scales)])


@converts("upsample_bicubic2d")
@_in_float32
def _upsample_bicubic(cx, a):
    x = a[0]
    size, scales = _sizes_and_scales(a, x, 2)
    real, corners = _float_type(x, a.op), bool(a["align_corners"])
    return _resample(cx, x, [_cubic_taps(n, m, corners, s, real)
                             for n, m, s in zip(x.shape[2:], size, scales)])


@converts("_upsample_bilinear2d_aa", "_upsample_bicubic2d_aa")
@_in_float32
def _upsample_antialias(cx, a):
    """F.interpolate(..., antialias=True): bilinear (a triangle filter of radius 1) or
    bicubic (Keys' with A = -0.5, radius 2), stretched when downsampling."""
    x = a[0]
    size, scales = _sizes_and_scales(a, x, 2)
    real, corners = _float_type(x, a.op), bool(a["align_corners"])
    filter_fn, radius = (_triangle, 1) if "bilinear" in a.op else (_keys, 2)
    return _resample(cx, x, [_antialias_taps(n, m, corners, s, real, filter_fn, radius)
                             for n, m, s in zip(x.shape[2:], size, scales)])
