"""ATen convolutions and 3-D pooling to Ember ops. Ember's kernels are 2-D (nn.conv2d and
the 2-D pools); the other forms are rewritten exactly in terms of them:

- 1-D: an image one row high.
- 3-D convolution: the depth taps become input channels. Output depth t reads input depths
  t * stride + k * dilation for k < KD; those KD slices stacked after each channel make a
  2-D convolution over [N * D_out, C * KD, H, W] whose weight is the 3-D one viewed as
  [O, C / groups * KD, KH, KW] (channel-major, so each group's channels stay together).
- Transposed convolution: the input spread by the stride (zeros between elements), padded
  by dilation * (k - 1) - padding (+ output_padding after; negative pads crop) and
  convolved with the weight flipped and its in/out channels swapped. A kernel equal to its
  stride, unpadded (DPT's and UNet's upsampling) is instead a 1x1 convolution to
  O * k^d channels whose results are laid side by side: no zeros are multiplied.
- 3-D max and average pooling: separable, a 2-D pool over (H, W) then one over D. The
  average's divisor is a product of per-axis counts in every mode PyTorch defines
  (count_include_pad, ceil_mode), so the two averages make the 3-D one.
Registered into _aten_registry.CONVERTERS on import."""
import numpy as np

from .._ember import EmberError
from ._aten_registry import converts, reshape, slice_axis, take_const, transpose, zero_pad


def _per_axis(value, rank, name):
    value = [value] if isinstance(value, int) else [int(v) for v in value]
    if len(value) == 1:
        value = value * rank
    if len(value) != rank:
        raise EmberError(f"a {rank}-D convolution takes {rank} {name} values, got {value}")
    return value


class _Conv:
    """One convolution's arguments, batched and per spatial axis."""

    def __init__(self, a):
        x, w = a[0], a[1]
        self.rank = len(w.shape) - 2
        if self.rank not in (1, 2, 3):
            raise EmberError(f"a {self.rank}-D convolution is not supported (Ember "
                             "convolves 1-, 2- and 3-D inputs)")
        if len(x.shape) not in (self.rank + 1, self.rank + 2):
            raise EmberError(f"a {self.rank}-D convolution takes a {self.rank + 2}-D input "
                             f"(or {self.rank + 1}-D unbatched), got shape {list(x.shape)}")
        self.unbatched = len(x.shape) == self.rank + 1
        self.x, self.w, self.bias = x, w, a["bias"]
        self.transposed = bool(a["transposed"]) or a.op.startswith("conv_transpose")
        self.groups = int(a["groups"] or 1)
        self.stride = _per_axis(a["stride"] or 1, self.rank, "stride")
        self.dilation = _per_axis(a["dilation"] or 1, self.rank, "dilation")
        self.output_padding = _per_axis(a["output_padding"] or 0, self.rank, "output_padding")
        padding = a["padding"] if a["padding"] is not None else 0
        if isinstance(padding, str):  # "valid" or "same" (stride 1)
            self.pads = [(0, 0)] * self.rank
            if padding == "same":
                total = [d * (k - 1) for d, k in zip(self.dilation, w.shape[2:])]
                self.pads = [(t // 2, t - t // 2) for t in total]
        else:
            self.pads = [(p, p) for p in _per_axis(padding, self.rank, "padding")]


@converts("conv1d", "conv2d", "conv3d", "convolution", "_convolution", "conv_transpose1d",
          "conv_transpose2d", "conv_transpose3d")
def _conv(cx, a):
    c = _Conv(a)
    x = reshape(cx, c.x, [1] + list(c.x.shape)) if c.unbatched else c.x
    if c.transposed:
        y = _transposed(cx, c, x)
    else:
        y = _convolve(cx, x, c.w, c.stride, c.pads, c.dilation, c.groups)
    if c.bias is not None:
        y = cx.emit("nn.bias_add", [y, c.bias], axis=1)
    return reshape(cx, y, y.shape[1:]) if c.unbatched else y


def _convolve(cx, x, w, stride, pads, dilation, groups):
    """A forward convolution of any rank 1-3 through nn.conv2d."""
    rank = len(w.shape) - 2
    if rank == 1:  # [N, C, L] as [N, C, 1, L]
        y = _conv2d(cx, reshape(cx, x, list(x.shape[:2]) + [1, x.shape[2]]),
                    reshape(cx, w, list(w.shape[:2]) + [1, w.shape[2]]),
                    [1] + stride, [(0, 0)] + pads, [1] + dilation, groups)
        return reshape(cx, y, list(y.shape[:2]) + [y.shape[3]])
    if rank == 2:
        return _conv2d(cx, x, w, stride, pads, dilation, groups)
    return _conv3d(cx, x, w, stride, pads, dilation, groups)


def _conv2d(cx, x, w, stride, pads, dilation, groups):
    (top, bottom), (left, right) = pads
    return cx.emit("nn.conv2d", [x, w], strides=stride, padding=[top, left, bottom, right],
                   dilation=dilation, groups=groups)


def _conv3d(cx, x, w, stride, pads, dilation, groups):
    """The depth taps as input channels (see the module's comment)."""
    n, channels = x.shape[:2]
    out, _, taps = w.shape[:3]
    x = zero_pad(cx, x, [(0, 0), (0, 0), pads[0], (0, 0), (0, 0)])
    depth = (x.shape[2] - dilation[0] * (taps - 1) - 1) // stride[0] + 1
    if depth < 1:
        raise EmberError(f"conv3d: the input's depth {x.shape[2]} (padded) is smaller than "
                         f"the kernel's {taps} taps (dilation {dilation[0]})")
    index = (np.arange(taps)[:, None] * dilation[0] + np.arange(depth)[None, :] * stride[0])
    slices = take_const(cx, x, 2, index.reshape(-1))  # [N, C, KD * D_out, H, W]
    h, wd = x.shape[3:]
    slices = reshape(cx, slices, [n, channels, taps, depth, h, wd])
    images = reshape(cx, transpose(cx, slices, [0, 3, 1, 2, 4, 5]),
                     [n * depth, channels * taps, h, wd])
    weight = reshape(cx, w, [out, w.shape[1] * taps] + list(w.shape[3:]))
    y = _conv2d(cx, images, weight, stride[1:], pads[1:], dilation[1:], groups)
    y = reshape(cx, y, [n, depth, out] + list(y.shape[2:]))
    return transpose(cx, y, [0, 2, 1, 3, 4])


def _transposed(cx, c, x):
    w, rank, groups = c.w, c.rank, c.groups  # w: [C_in, O / groups, k...]
    kernel = list(w.shape[2:])
    n, spatial = x.shape[0], list(x.shape[2:])
    out = w.shape[1] * groups
    if (groups == 1 and c.stride == kernel and c.dilation == [1] * rank
            and not any(b or e for b, e in c.pads) and not any(c.output_padding)):
        # Each input pixel writes its own k^d block: a 1x1 convolution, then interleave.
        taps = int(np.prod(kernel))
        weight = reshape(cx, transpose(cx, w, [1] + list(range(2, rank + 2)) + [0]),
                         [out * taps, w.shape[0], 1, 1])
        flat = reshape(cx, x, [n, x.shape[1], 1, int(np.prod(spatial))])
        y = reshape(cx, _conv2d(cx, flat, weight, [1, 1], [(0, 0)] * 2, [1, 1], 1),
                    [n, out] + kernel + spatial)
        axes = [0, 1] + [i for s in range(rank) for i in (2 + rank + s, 2 + s)]
        return reshape(cx, transpose(cx, y, axes),
                       [n, out] + [s * k for s, k in zip(spatial, kernel)])
    # Spread the input by the stride: [.., L] -> [.., L, 1] -> pad -> [.., L * s] -> cut.
    for axis, s in enumerate(c.stride):
        if s == 1:
            continue
        axis += 2
        length = x.shape[axis]
        x = reshape(cx, x, list(x.shape[:axis + 1]) + [1] + list(x.shape[axis + 1:]))
        widths = [(0, 0)] * len(x.shape)
        widths[axis + 1] = (0, s - 1)
        x = zero_pad(cx, x, widths)
        x = reshape(cx, x, list(x.shape[:axis]) + [length * s] + list(x.shape[axis + 2:]))
        x = slice_axis(cx, x, axis, 0, (length - 1) * s + 1)
    widths = [(0, 0), (0, 0)] + [
        (d * (k - 1) - before, d * (k - 1) - after + extra) for d, k, (before, after), extra
        in zip(c.dilation, kernel, c.pads, c.output_padding)]
    x = zero_pad(cx, x, widths)
    # The forward weight [O, C_in / groups, k...], flipped: group g's in/out blocks swapped.
    per_in = w.shape[0] // groups
    weight = reshape(cx, w, [groups, per_in, w.shape[1]] + kernel)
    weight = transpose(cx, weight, [0, 2, 1] + list(range(3, rank + 3)))
    weight = reshape(cx, weight, [out, per_in] + kernel)
    for axis in range(2, rank + 2):
        weight = take_const(cx, weight, axis, np.arange(weight.shape[axis] - 1, -1, -1))
    return _convolve(cx, x, weight, [1] * rank, [(0, 0)] * rank, c.dilation, groups)


# ------------------------------------------------------------------------- 3-D pooling

def _pool_window(a, rank):
    kernel = _per_axis(a[1], rank, "kernel_size")
    stride = _per_axis(a[2], rank, "stride") if a[2] else kernel  # empty: the kernel size
    padding = _per_axis(a[3] if a[3] is not None else 0, rank, "padding")
    return kernel, stride, padding


def _as_volumes(cx, x, op):
    """[N, C, D, H, W] (or unbatched [C, D, H, W]) as [N, C, D, H, W]."""
    if len(x.shape) not in (4, 5):
        raise EmberError(f"{op} takes a 4-D or 5-D input, got {len(x.shape)}-D")
    return reshape(cx, x, [1] * (5 - len(x.shape)) + list(x.shape))


def _separable_pool(cx, x, op, hw_attrs, depth_attrs):
    """A 2-D pool over (H, W) with hw_attrs, then one over D with depth_attrs (each an
    attribute dict given the axis' own values; depth's second axis is the flat H * W)."""
    n, c, d, h, w = x.shape
    y = cx.emit(op, [reshape(cx, x, [n, c * d, h, w])], **hw_attrs)
    oh, ow = y.shape[2:]
    y = cx.emit(op, [reshape(cx, y, [n * c, 1, d, oh * ow])], **depth_attrs)
    return reshape(cx, y, [n, c, y.shape[2], oh, ow])


def _window_attrs(kernel, stride, padding, extra):
    return dict(pool_size=kernel, strides=stride, padding=[padding[0], padding[1]] * 2,
                **extra)


@converts("max_pool3d", "max_pool3d_with_indices", "avg_pool3d")
def _pool3d(cx, a):
    x = _as_volumes(cx, a[0], a.op)
    kernel, stride, padding = _pool_window(a, 3)
    if a.op == "avg_pool3d":
        if a["divisor_override"] is not None:
            raise EmberError("avg_pool3d with divisor_override is not supported")
        op = "nn.avg_pool2d"
        extra = dict(ceil_mode=int(bool(a["ceil_mode"])),
                     count_include_pad=int(a["count_include_pad"] in (None, True)))
        per_axis = [extra, extra]
    else:
        op = "nn.max_pool2d"
        dilation = _per_axis(a[4] if a[4] is not None else 1, 3, "dilation")
        ceil = int(bool(a[5]))
        per_axis = [dict(dilation=dilation[1:], ceil_mode=ceil),
                    dict(dilation=[dilation[0], 1], ceil_mode=ceil)]
    y = _separable_pool(cx, x, op,
                        _window_attrs(kernel[1:], stride[1:], padding[1:], per_axis[0]),
                        _window_attrs([kernel[0], 1], [stride[0], 1], [padding[0], 0],
                                      per_axis[1]))
    y = reshape(cx, y, list(a[0].shape[:-3]) + list(y.shape[2:]))
    return [y, None] if a.op == "max_pool3d_with_indices" else y


@converts("adaptive_avg_pool3d", "_adaptive_avg_pool3d")
def _adaptive_avg_pool3d(cx, a):
    x = _as_volumes(cx, a[0], a.op)
    size = [a[1]] * 3 if a[1] is None or isinstance(a[1], int) else list(a[1])
    size = size * 3 if len(size) == 1 else size
    size = [x.shape[2 + i] if s is None else int(s) for i, s in enumerate(size)]
    op = "nn.adaptive_avg_pool2d"
    y = _separable_pool(cx, x, op, dict(output_size=size[1:]),
                        dict(output_size=[size[0], size[1] * size[2]]))
    return reshape(cx, y, list(a[0].shape[:-3]) + size)

