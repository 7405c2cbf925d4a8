"""ATen neural-network layers to Ember ops: convolution, normalisation, pooling, softmax,
attention, and the fused kernels that TorchScript traces record
(aten::_native_multi_head_attention, aten::_transformer_encoder_layer_fwd, RNN cells),
expanded into Ember ops. Registered into _aten_registry.CONVERTERS on import."""
import math

import numpy as np

from .._ember import EmberError
from ._aten_registry import (CONVERTERS, Args, _axis, _pads, _pair, binary, broadcast_to, cast,
                             converts, dtype_name, matmul, reshape, slice_axis, split, swap_last,
                             take_const, transpose, zero_pad)
from ._sizes import is_dim


def linear(cx, x, weight, bias):
    y = cx.emit("nn.dense", [x, weight])
    if bias is not None:
        y = cx.emit("nn.bias_add", [y, bias], axis=len(y.shape) - 1)
    return y


def layer_norm(cx, x, normalized_rank, gamma, beta, eps):
    shape = list(x.shape[len(x.shape) - normalized_rank:])
    gamma = cx.const(np.ones(shape), x.dtype) if gamma is None else gamma
    beta = cx.const(np.zeros(shape), x.dtype) if beta is None else beta
    return cx.emit("nn.layer_norm", [x, gamma, beta], axis=len(x.shape) - normalized_rank,
                   epsilon=float(eps))


def attention(cx, q, k, v, mask=None, mask_keeps=True, is_causal=False, scale=None):
    """softmax(q @ k^T * scale + mask) @ v for q [..., L, E], k [..., S, E], v [..., S, Ev].
    A bool mask keeps the True positions when mask_keeps (torch's SDPA) and drops them
    otherwise (nn.MultiheadAttention's masks); a float mask is added. Returns (out, probs)."""
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    scores = matmul(cx, q, swap_last(cx, k))
    scores = binary(cx, "multiply", scores, scale)
    length, source = scores.shape[-2:]
    if is_causal:
        # Query i keeps keys j <= i; over run-time sizes, the leading part of the mask made
        # at their maxima (RecognizeAttention reads it as causality).
        rows, cols = (size.max if is_dim(size) else size for size in (length, source))
        keep = cx.const(np.tril(np.ones((rows, cols), dtype=bool)), "bool")
        for axis, size in enumerate((length, source)):
            if is_dim(size):
                keep = slice_axis(cx, keep, axis, 0, size)
        scores = cx.emit("where", [keep, scores, cx.const(-np.inf, scores.dtype)])
    if mask is not None:
        if mask.dtype == "bool":
            masked = cx.const(-np.inf, scores.dtype)
            args = [mask, scores, masked] if mask_keeps else [mask, masked, scores]
            scores = cx.emit("where", args)
        else:
            scores = binary(cx, "add", scores, mask)
    probs = cx.emit("nn.softmax", [scores], axis=-1)
    return matmul(cx, probs, v), probs


@converts("linear")
def _linear(cx, a):
    return linear(cx, a[0], a[1], a[2])


# --------------------------------------------------------------------- neural-net layers

@converts("batch_norm", "native_batch_norm", "_native_batch_norm_legit_no_training",
          "_native_batch_norm_legit", "cudnn_batch_norm")
def _batch_norm(cx, a):
    x, gamma, beta, mean, var = (a["input"], a["weight"], a["bias"], a["running_mean"],
                                 a["running_var"])
    training = a["training"] if a.has("training") else False
    eps = float(a["eps"])
    channels = [x.shape[1]]
    gamma = cx.const(np.ones(channels), x.dtype) if gamma is None else gamma
    beta = cx.const(np.zeros(channels), x.dtype) if beta is None else beta
    if training and mean is None and var is None:
        y = _batch_statistics_norm(cx, x, gamma, beta, eps)
    elif training or mean is None or var is None:
        raise EmberError("batch norm in training mode (batch statistics) is not supported: "
                         "call model.eval() before exporting or tracing")
    else:
        y = cx.emit("nn.batch_norm", [x, gamma, beta, mean, var], axis=1, epsilon=eps)
    return y if a.op == "batch_norm" else [y, None, None]


def _batch_statistics_norm(cx, x, gamma, beta, eps):
    """Batch norm with the batch's statistics and no running ones to update: a plain
    normalization, at inference too (BiT standardizes its conv weights with
    F.batch_norm(w, None, None, training=True)). Each channel is normalized over every other
    axis: an instance norm of x viewed as [1, C, N * spatial]."""
    swap = [1, 0] + list(range(2, len(x.shape)))  # [N, C, ...] <-> [C, N, ...]
    by_channel = transpose(cx, x, swap)
    rows = reshape(cx, by_channel, [1, x.shape[1], int(np.prod(x.shape)) // x.shape[1]])
    y = cx.emit("nn.instance_norm", [rows, gamma, beta], epsilon=eps)
    return transpose(cx, reshape(cx, y, by_channel.shape), swap)


@converts("layer_norm", "native_layer_norm")
def _layer_norm(cx, a):
    y = layer_norm(cx, a[0], len(a[1]), a[2], a[3], a[4] if a[4] is not None else 1e-5)
    return y if a.op == "layer_norm" else [y, None, None]


@converts("softmax", "_softmax")
def _softmax(cx, a):
    x = a[0]
    if a.has("dtype") and a["dtype"] is not None:
        x = cast(cx, x, dtype_name(a["dtype"]))
    return cx.emit("nn.softmax", [x], axis=_axis(a[1], len(x.shape)))


@converts("log_softmax", "_log_softmax")
def _log_softmax(cx, a):
    x = a[0]
    if a.has("dtype") and a["dtype"] is not None:
        x = cast(cx, x, dtype_name(a["dtype"]))
    return cx.emit("nn.log_softmax", [x], axis=_axis(a[1], len(x.shape)))


def _pool_args(a):
    kernel = _pair(a[1])
    stride = _pair(a[2]) if a[2] else kernel  # an empty stride means the kernel size
    return kernel, stride, _pads(a[3] if a[3] is not None else 0)


@converts("max_pool2d", "max_pool2d_with_indices")
def _max_pool2d(cx, a):
    kernel, stride, pads = _pool_args(a)
    y = cx.emit("nn.max_pool2d", [a[0]], pool_size=kernel, strides=stride, padding=pads,
                dilation=_pair(a[4] if a[4] is not None else 1), ceil_mode=int(bool(a[5])))
    return [y, None] if a.op == "max_pool2d_with_indices" else y


@converts("avg_pool2d")
def _avg_pool2d(cx, a):
    if a["divisor_override"] is not None:
        raise EmberError("avg_pool2d with divisor_override is not supported")
    kernel, stride, pads = _pool_args(a)
    count_include_pad = a["count_include_pad"]
    return cx.emit("nn.avg_pool2d", [a[0]], pool_size=kernel, strides=stride, padding=pads,
                   ceil_mode=int(bool(a["ceil_mode"])),
                   count_include_pad=int(count_include_pad in (None, True)))


@converts("adaptive_avg_pool2d", "_adaptive_avg_pool2d")
def _adaptive_avg_pool2d(cx, a):
    x = a[0]
    size = [x.shape[2 + i] if s is None else s for i, s in enumerate(_pair(a[1]))]
    return cx.emit("nn.adaptive_avg_pool2d", [x], output_size=size)


def _one_row(x):
    """[N, C, L] (or unbatched [C, L]) as the [N, C, 1, L] images 2-D pooling takes."""
    return [1] * (3 - len(x.shape)) + list(x.shape[:-1]) + [1, x.shape[-1]]


@converts("avg_pool1d", "max_pool1d", "max_pool1d_with_indices", "adaptive_avg_pool1d")
def _pool1d(cx, a):
    """1-D pooling as 2-D pooling of one-row images: window, stride, padding and dilation
    (1, k), the rest as given."""
    x = a[0]
    if len(x.shape) not in (2, 3):
        raise EmberError(f"{a.op} takes a 2-D or 3-D input, got {len(x.shape)}-D")
    image = reshape(cx, x, _one_row(x))
    if a.op == "adaptive_avg_pool1d":
        y = cx.emit("nn.adaptive_avg_pool2d", [image], output_size=[1, _pair(a[1])[0]])
    else:
        kernel = _pair(a[1])[0]
        stride = _pair(a[2])[0] if a[2] else kernel
        names = list(a.names)
        values = [image, [1, kernel], [1, stride], [0, _pair(a[3] or 0)[0]]] + a.values[4:]
        if a.op.startswith("max_pool1d"):
            values[4] = [1, _pair(a[4] if a[4] is not None else 1)[0]]
            y = _max_pool2d(cx, Args("max_pool2d", names, values))
            y = y[0] if isinstance(y, list) else y
        else:
            y = _avg_pool2d(cx, Args("avg_pool2d", names, values))
    out = reshape(cx, y, list(x.shape[:-1]) + [y.shape[-1]])
    return [out, None] if a.op == "max_pool1d_with_indices" else out


@converts("col2im")
def _col2im(cx, a):
    """nn.Fold: column l of x [N, C * kh * kw, L] is patch l, summed into its place in the
    output [N, C, H, W]. Patches that tile the output (stride == kernel, MobileViTV2) are a
    reshape and transpose. Otherwise each kernel offset (i, j) puts its [N, C, Hb, Wb]
    values on a grid: spread by the stride (zeros between) and shifted by the offset; the
    kh * kw grids are summed, so overlapping patches add up without a scatter."""
    x = a[0]
    unbatched = len(x.shape) == 2
    if unbatched:
        x = reshape(cx, x, [1] + list(x.shape))
    (h, w), (kh, kw) = _pair(a["output_size"]), _pair(a["kernel_size"])
    (dh, dw), (ph, pw), (sh, sw) = _pair(a["dilation"]), _pair(a["padding"]), _pair(a["stride"])
    rows, cols = h + 2 * ph, w + 2 * pw  # the padded output
    nh, nw = (rows - dh * (kh - 1) - 1) // sh + 1, (cols - dw * (kw - 1) - 1) // sw + 1
    n, c = x.shape[0], x.shape[1] // (kh * kw)
    if x.shape[1] != c * kh * kw or x.shape[2] != nh * nw:
        raise EmberError(f"col2im: input {list(x.shape)} does not hold {nh} x {nw} patches "
                         f"of {kh} x {kw}")
    patches = reshape(cx, x, [n, c, kh, kw, nh, nw])
    if (sh, sw) == (kh, kw) and (dh, dw) == (1, 1):
        y = reshape(cx, transpose(cx, patches, [0, 1, 4, 2, 5, 3]), [n, c, nh * kh, nw * kw])
        y = zero_pad(cx, y, [(0, 0), (0, 0), (0, rows - nh * kh), (0, cols - nw * kw)])
    else:
        y = None
        for i in range(kh):
            for j in range(kw):
                grid = slice_axis(cx, slice_axis(cx, patches, 2, i, i + 1), 3, j, j + 1)
                grid = zero_pad(cx, reshape(cx, grid, [n, c, nh, 1, nw, 1]),
                                 [(0, 0)] * 3 + [(0, sh - 1), (0, 0), (0, sw - 1)])
                grid = reshape(cx, grid, [n, c, nh * sh, nw * sw])
                top, left = i * dh, j * dw  # (the spread's last zeros may pass the end)
                grid = slice_axis(cx, slice_axis(cx, grid, 2, 0, rows - top), 3, 0, cols - left)
                grid = zero_pad(cx, grid, [(0, 0), (0, 0), (top, rows - top - grid.shape[2]),
                                            (left, cols - left - grid.shape[3])])
                y = grid if y is None else cx.emit("add", [y, grid])
    y = slice_axis(cx, slice_axis(cx, y, 2, ph, ph + h), 3, pw, pw + w)
    return reshape(cx, y, y.shape[1:]) if unbatched else y


@converts("scaled_dot_product_attention")
def _sdpa(cx, a):
    q, k, v = a["query"], a["key"], a["value"]
    if a["enable_gqa"]:
        heads = q.shape[-3] // k.shape[-3]
        k, v = (_repeat_heads(cx, t, heads) for t in (k, v))
    out, _ = attention(cx, q, k, v, mask=a["attn_mask"], mask_keeps=True,
                       is_causal=bool(a["is_causal"]), scale=a["scale"])
    return out


@converts("_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_attention_math")
def _sdpa_internal(cx, a):
    out, probs = attention(cx, a["query"], a["key"], a["value"], mask=a["attn_mask"],
                           mask_keeps=True, is_causal=bool(a["is_causal"]), scale=a["scale"])
    return [out, probs]


def _repeat_heads(cx, t, times):
    """[..., H, S, E] -> [..., H * times, S, E], each head repeated (repeat_interleave)."""
    shape = list(t.shape)
    x = reshape(cx, t, shape[:-2] + [1] + shape[-2:])
    x = broadcast_to(cx, x, shape[:-2] + [times] + shape[-2:])
    return reshape(cx, x, shape[:-3] + [shape[-3] * times] + shape[-2:])


# -------------------------------------------- fused ops that TorchScript traces record

def _split_rows(cx, w, parts):
    n = w.shape[0] // parts
    return [slice_axis(cx, w, 0, i * n, (i + 1) * n) for i in range(parts)]


def multi_head_attention(cx, query, key, value, heads, qkv_w, qkv_b, proj_w, proj_b, mask=None,
                         mask_type=None):
    """nn.MultiheadAttention's computation on batch-first [B, L, E] inputs; a bool mask
    marks the positions to drop. Returns (out, per-head probabilities [B, H, L, S])."""
    batch, length, dim = query.shape
    head_dim = dim // heads
    ws, bs = _split_rows(cx, qkv_w, 3), _split_rows(cx, qkv_b, 3)

    def project(x, i):
        y = linear(cx, x, ws[i], bs[i])
        y = reshape(cx, y, [batch, x.shape[1], heads, head_dim])
        return transpose(cx, y, [0, 2, 1, 3])

    q, k, v = project(query, 0), project(key, 1), project(value, 2)
    if mask is not None and mask_type == 1:  # key padding mask [B, S]
        mask = reshape(cx, mask, [batch, 1, 1, mask.shape[-1]])
    elif mask is not None and len(mask.shape) == 3:  # [B * H, L, S]
        mask = reshape(cx, mask, [batch, heads] + list(mask.shape[1:]))
    out, probs = attention(cx, q, k, v, mask=mask, mask_keeps=False)
    out = reshape(cx, transpose(cx, out, [0, 2, 1, 3]), [batch, length, dim])
    return linear(cx, out, proj_w, proj_b), probs


@converts("_native_multi_head_attention")
def _native_mha(cx, a):
    out, probs = multi_head_attention(cx, a["query"], a["key"], a["value"], a["num_head"],
                                      a["qkv_weight"], a["qkv_bias"], a["proj_weight"],
                                      a["proj_bias"], a["mask"], a["mask_type"])
    if not a["need_weights"]:
        return [out, None]
    if a["average_attn_weights"] in (None, True):
        probs = cx.emit("mean", [probs], axis=[1], keepdims=0)
    return [out, probs]


@converts("_transformer_encoder_layer_fwd")
def _encoder_layer(cx, a):
    x, eps = a["src"], a["eps"]

    def attend(y):
        return multi_head_attention(cx, y, y, y, a["num_heads"], a["qkv_weight"],
                                    a["qkv_bias"], a["proj_weight"], a["proj_bias"],
                                    a["mask"], a["mask_type"])[0]

    def ffn(y):
        y = linear(cx, y, a["ffn_weight_1"], a["ffn_bias_1"])
        y = cx.emit("nn.gelu", [y], approximate="none") if a["use_gelu"] else cx.emit(
            "nn.relu", [y])
        return linear(cx, y, a["ffn_weight_2"], a["ffn_bias_2"])

    def norm(y, i):
        return layer_norm(cx, y, 1, a[f"norm_weight_{i}"], a[f"norm_bias_{i}"], eps)

    if a["norm_first"]:
        x = cx.emit("add", [x, attend(norm(x, 1))])
        return cx.emit("add", [x, ffn(norm(x, 2))])
    x = norm(cx.emit("add", [x, attend(x)]), 1)
    return norm(cx.emit("add", [x, ffn(x)]), 2)


def _gates(cx, a):
    x, hx = a["input"], a["hx"]
    h = hx[0] if isinstance(hx, (list, tuple)) else hx
    gates = linear(cx, x, a["w_ih"], a["b_ih"])
    return cx.emit("add", [gates, linear(cx, h, a["w_hh"], a["b_hh"])]), hx


@converts("lstm_cell")
def _lstm_cell(cx, a):
    gates, (h, c) = _gates(cx, a)
    i, f, g, o = split(cx, gates, [gates.shape[1] // 4] * 4, 1)
    sig = lambda t: cx.emit("sigmoid", [t])  # noqa: E731
    c = cx.emit("add", [cx.emit("multiply", [sig(f), c]),
                        cx.emit("multiply", [sig(i), cx.emit("tanh", [g])])])
    return [cx.emit("multiply", [sig(o), cx.emit("tanh", [c])]), c]


@converts("rnn_tanh_cell")
def _rnn_tanh_cell(cx, a):
    return cx.emit("tanh", [_gates(cx, a)[0]])


@converts("rnn_relu_cell")
def _rnn_relu_cell(cx, a):
    return cx.emit("nn.relu", [_gates(cx, a)[0]])


@converts("gru_cell")
def _gru_cell(cx, a):
    x, h = a["input"], a["hx"]
    gi = split(cx, linear(cx, x, a["w_ih"], a["b_ih"]), [h.shape[1]] * 3, 1)
    gh = split(cx, linear(cx, h, a["w_hh"], a["b_hh"]), [h.shape[1]] * 3, 1)
    r = cx.emit("sigmoid", [cx.emit("add", [gi[0], gh[0]])])
    z = cx.emit("sigmoid", [cx.emit("add", [gi[1], gh[1]])])
    n = cx.emit("tanh", [cx.emit("add", [gi[2], cx.emit("multiply", [r, gh[2]])])])
    # h' = (1 - z) * n + z * h = n + z * (h - n)
    return cx.emit("add", [n, cx.emit("multiply", [z, cx.emit("subtract", [h, n])])])


@converts("_cdist_forward")
def _cdist(cx, a):
    """cdist(x1 [.., P, M], x2 [.., R, M]): the p-norm of every difference x1[i] - x2[j], as
    a vector norm over the broadcast [.., P, R, M] differences (torch itself uses a matrix
    product for p=2 on large inputs; the two agree to rounding)."""
    x1, x2, p = a[0], a[1], float(a["p"])
    if x1.shape[-1] != x2.shape[-1]:
        raise EmberError(f"cdist: x1 has {x1.shape[-1]} columns and x2 {x2.shape[-1]}")
    rows1 = cx.emit("expand_dims", [x1], axis=len(x1.shape) - 1, num_newaxis=1)
    rows2 = cx.emit("expand_dims", [x2], axis=len(x2.shape) - 2, num_newaxis=1)
    diff = binary(cx, "subtract", rows1, rows2)
    return CONVERTERS["linalg_vector_norm"](cx, Args(
        "linalg_vector_norm", ["self", "ord", "dim", "keepdim", "dtype"],
        [diff, p, [-1], False, None]))


@converts("_pdist_forward")
def _pdist(cx, a):
    """pdist(x [N, M]): cdist(x, x) at the pairs i < j, in row order."""
    x = a[0]
    n = x.shape[0]
    full = _cdist(cx, Args("_cdist_forward", ["x1", "x2", "p"], [x, x, a["p"]]))
    i, j = np.triu_indices(n, k=1)
    return take_const(cx, reshape(cx, full, [n * n]), 0, i * n + j)
