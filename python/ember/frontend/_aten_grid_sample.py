"""F.grid_sample (aten.grid_sampler_2d) to Ember ops. Unlike interpolation, the sampling
positions are data (deformable attention computes them: Mask2Former, Deformable DETR,
RT-DETR), so indices and weights are computed in the graph with PyTorch's CPU formulas
(ATen/native/GridSampler.h): each output pixel reads its 4 neighbours (bilinear) or 1
(nearest) with a `gather` over the flattened image. Neighbour indices are clamped into the
image and out-of-image neighbours get weight 0 (padding_mode="zeros"), so no index is ever
out of range. Registered into _aten_registry.CONVERTERS on import."""
from .._ember import EmberError
from ._aten_registry import binary, broadcast_to, cast, converts, reshape, slice_axis

_MODES = {0: "bilinear", 1: "nearest", 2: "bicubic"}
_PADDING = {0: "zeros", 1: "border", 2: "reflection"}


def _source_index(cx, coord, size, align_corners, padding):
    """grid coordinates in [-1, 1] -> pixel coordinates, padded as PyTorch does."""
    if align_corners:  # -1 and 1 are the centres of the corner pixels
        pixel = binary(cx, "multiply", binary(cx, "add", coord, 1.0), (size - 1) / 2)
    else:  # -1 and 1 are the corner pixels' outer edges
        pixel = binary(cx, "multiply", binary(cx, "add", coord, 1.0), size / 2)
        pixel = binary(cx, "subtract", pixel, 0.5)
    if padding == "reflection":
        low, high = (0.0, 2.0 * (size - 1)) if align_corners else (-1.0, 2.0 * size - 1)
        pixel = _reflect(cx, pixel, low, high)
    if padding != "zeros":
        pixel = cx.emit("clip", [pixel], a_min=0.0, a_max=float(size - 1))
    return pixel


def _reflect(cx, x, twice_low, twice_high):
    """Reflects x into [twice_low / 2, twice_high / 2] about its ends, as often as needed."""
    if twice_low == twice_high:
        return binary(cx, "multiply", x, 0.0)
    low, span = twice_low / 2, (twice_high - twice_low) / 2
    x = cx.emit("abs", [binary(cx, "subtract", x, low)])
    extra = cx.emit("fmod", [x, cx.const(span, x.dtype)])
    flips = cx.emit("floor", [binary(cx, "divide", x, span)])
    even = binary(cx, "equal", cx.emit("fmod", [flips, cx.const(2.0, x.dtype)]), 0.0)
    return cx.emit("where", [even, binary(cx, "add", extra, low),
                             binary(cx, "add", binary(cx, "subtract", span, extra), low)])


def _inside(cx, index, size):
    return cx.emit("logical_and", [binary(cx, "greater_equal", index, 0.0),
                                   binary(cx, "less_equal", index, float(size - 1))])


def _pick(cx, flat, xi, yi, height, width):
    """flat [N, C, H * W] at pixel (yi, xi) [N, P] (float, whole numbers): [N, C, P], and
    whether the pixel is inside the image [N, 1, P]."""
    n, channels, points = flat.shape[0], flat.shape[1], xi.shape[1]
    inside = cx.emit("logical_and", [_inside(cx, xi, width), _inside(cx, yi, height)])
    xc = cx.emit("clip", [xi], a_min=0.0, a_max=float(width - 1))
    yc = cx.emit("clip", [yi], a_min=0.0, a_max=float(height - 1))
    position = cast(cx, binary(cx, "add", binary(cx, "multiply", yc, float(width)), xc), "int64")
    position = broadcast_to(cx, reshape(cx, position, [n, 1, points]), [n, channels, points])
    values = cx.emit("gather", [flat, position], axis=2)
    return values, reshape(cx, inside, [n, 1, points])


@converts("grid_sampler_2d")
def _grid_sampler_2d(cx, a):
    x, grid = a[0], a[1]
    mode, padding = _MODES.get(a[2]), _PADDING.get(a[3])
    align_corners = bool(a[4])
    if mode not in ("bilinear", "nearest"):
        raise EmberError(f"grid_sample with mode='{mode}' is not supported; Ember samples "
                         "with 'bilinear' and 'nearest'")
    if padding is None or len(x.shape) != 4 or len(grid.shape) != 4 or grid.shape[3] != 2:
        raise EmberError(f"grid_sample takes a 4-D input and an [N, H, W, 2] grid, got "
                         f"{list(x.shape)} and {list(grid.shape)}")
    if x.dtype != "float32" or grid.dtype != "float32":
        raise EmberError("grid_sample takes float32 input and grid tensors")
    n, channels, height, width = x.shape
    out_h, out_w = grid.shape[1:3]
    points = out_h * out_w
    coords = reshape(cx, grid, [n, points, 2])
    gx = reshape(cx, slice_axis(cx, coords, 2, 0, 1), [n, points])
    gy = reshape(cx, slice_axis(cx, coords, 2, 1, 2), [n, points])
    ix = _source_index(cx, gx, width, align_corners, padding)
    iy = _source_index(cx, gy, height, align_corners, padding)
    flat = reshape(cx, x, [n, channels, height * width])
    zero = cx.const(0.0, x.dtype)
    if mode == "nearest":  # round half to even, as nearbyint
        values, inside = _pick(cx, flat, cx.emit("round", [ix]), cx.emit("round", [iy]),
                               height, width)
        out = cx.emit("where", [inside, values, zero])
    else:
        x0, y0 = cx.emit("floor", [ix]), cx.emit("floor", [iy])
        east = binary(cx, "subtract", ix, x0)  # the weight of the right-hand neighbours
        south = binary(cx, "subtract", iy, y0)
        west = binary(cx, "subtract", cx.const(1.0, x.dtype), east)
        north = binary(cx, "subtract", cx.const(1.0, x.dtype), south)
        x1, y1 = binary(cx, "add", x0, 1.0), binary(cx, "add", y0, 1.0)
        out = None
        for xi, yi, weight in ((x0, y0, binary(cx, "multiply", north, west)),
                               (x1, y0, binary(cx, "multiply", north, east)),
                               (x0, y1, binary(cx, "multiply", south, west)),
                               (x1, y1, binary(cx, "multiply", south, east))):
            values, inside = _pick(cx, flat, xi, yi, height, width)
            term = binary(cx, "multiply", values, reshape(cx, weight, [n, 1, points]))
            term = cx.emit("where", [inside, term, zero])
            out = term if out is None else cx.emit("add", [out, term])
    return reshape(cx, out, [n, channels, out_h, out_w])
