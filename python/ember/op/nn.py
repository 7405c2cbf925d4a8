"""Neural-network operators (layout NCHW, weights OIHW), named as in TVM's relay.nn."""
from . import _bool, _call, _expr, _float, _int, _ints, _unary

__all__ = ["conv2d", "dense", "matmul", "batch_matmul", "bias_add", "relu", "batch_norm",
           "max_pool2d", "avg_pool2d", "adaptive_avg_pool2d", "softmax"]

relu = _unary("nn.relu")


def conv2d(data, weight, strides=(1, 1), padding=(0, 0, 0, 0), dilation=(1, 1), groups=1,
           name=""):
    """2-D convolution. weight is [O, C/groups, KH, KW]; padding has 1, 2 (h, w) or 4
    (top, left, bottom, right) values."""
    op = "nn.conv2d"
    return _call(op, [_expr(data, "data", op), _expr(weight, "weight", op)],
                 {"strides": _ints(strides, "strides", op, 2),
                  "padding": _ints(padding, "padding", op, 2),
                  "dilation": _ints(dilation, "dilation", op, 2),
                  "groups": _int(groups, "groups", op)}, name)


def dense(data, weight, name=""):
    """data [..., K] times weight [N, K] transposed -> [..., N] (torch's linear, no bias)."""
    op = "nn.dense"
    return _call(op, [_expr(data, "data", op), _expr(weight, "weight", op)], {}, name)


def matmul(a, b, name=""):
    """a [..., M, K] @ b [K, N] -> [..., M, N]."""
    op = "nn.matmul"
    return _call(op, [_expr(a, "a", op), _expr(b, "b", op)], {}, name)


def batch_matmul(a, b, name=""):
    """a [B, M, K] @ b [B, K, N] -> [B, M, N] (torch.bmm)."""
    op = "nn.batch_matmul"
    return _call(op, [_expr(a, "a", op), _expr(b, "b", op)], {}, name)


def bias_add(data, bias, axis=1, name=""):
    """Adds bias [C] along `axis` of data."""
    op = "nn.bias_add"
    return _call(op, [_expr(data, "data", op), _expr(bias, "bias", op)],
                 {"axis": _int(axis, "axis", op)}, name)


def batch_norm(data, gamma, beta, moving_mean, moving_var, axis=1, epsilon=1e-5, name=""):
    """Inference batch norm: (x - mean) / sqrt(var + epsilon) * gamma + beta along `axis`."""
    op = "nn.batch_norm"
    args = [_expr(data, "data", op), _expr(gamma, "gamma", op), _expr(beta, "beta", op),
            _expr(moving_mean, "moving_mean", op), _expr(moving_var, "moving_var", op)]
    return _call(op, args, {"axis": _int(axis, "axis", op),
                            "epsilon": _float(epsilon, "epsilon", op)}, name)


def max_pool2d(data, pool_size, strides=None, padding=(0, 0, 0, 0), dilation=(1, 1),
               ceil_mode=False, name=""):
    """2-D max pooling; strides default to pool_size; padded elements are -inf."""
    op = "nn.max_pool2d"
    pool_size = _ints(pool_size, "pool_size", op, 2)
    strides = pool_size if strides is None else _ints(strides, "strides", op, 2)
    return _call(op, [_expr(data, "data", op)],
                 {"pool_size": pool_size, "strides": strides,
                  "padding": _ints(padding, "padding", op, 2),
                  "dilation": _ints(dilation, "dilation", op, 2),
                  "ceil_mode": _bool(ceil_mode, "ceil_mode", op)}, name)


def avg_pool2d(data, pool_size, strides=None, padding=(0, 0, 0, 0), ceil_mode=False,
               count_include_pad=True, name=""):
    """2-D average pooling with torch.nn.functional.avg_pool2d's semantics; strides default
    to pool_size."""
    op = "nn.avg_pool2d"
    pool_size = _ints(pool_size, "pool_size", op, 2)
    strides = pool_size if strides is None else _ints(strides, "strides", op, 2)
    return _call(op, [_expr(data, "data", op)],
                 {"pool_size": pool_size, "strides": strides,
                  "padding": _ints(padding, "padding", op, 2),
                  "ceil_mode": _bool(ceil_mode, "ceil_mode", op),
                  "count_include_pad": _bool(count_include_pad, "count_include_pad", op)},
                 name)


def adaptive_avg_pool2d(data, output_size, name=""):
    """Averages torch-style adaptive windows down to output_size (oh, ow)."""
    op = "nn.adaptive_avg_pool2d"
    return _call(op, [_expr(data, "data", op)],
                 {"output_size": _ints(output_size, "output_size", op, 2)}, name)


def softmax(data, axis=-1, name=""):
    """Softmax along `axis`."""
    op = "nn.softmax"
    return _call(op, [_expr(data, "data", op)], {"axis": _int(axis, "axis", op)}, name)
