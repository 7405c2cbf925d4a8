"""Neural-network operators (layout NCHW, weights OIHW), named as in TVM's relay.nn."""
import numpy as np

from .._ember import EmberError
from ..ir import const
from ._util import _bool, _call, _describe, _expr, _float, _int, _ints, _registered, _unary, schema

__all__ = ["conv2d", "dense", "matmul", "batch_matmul", "bias_add", "relu", "leaky_relu", "gelu",
           "silu", "hardswish", "hardsigmoid", "batch_norm", "layer_norm", "max_pool2d",
           "avg_pool2d", "adaptive_avg_pool2d", "softmax", "log_softmax", "pad", "attention"]

relu = _unary("nn.relu")
silu = _unary("nn.silu", "x * sigmoid(x) of a float tensor")
hardswish = _unary("nn.hardswish", "x * relu6(x + 3) / 6 of a float tensor")
hardsigmoid = _unary("nn.hardsigmoid", "relu6(x + 3) / 6 of a float tensor")


def _str(value, attr, op):
    if not isinstance(value, str):
        raise EmberError(f"op.{op}: '{attr}' must be a string, got {_describe(value)}")
    return value


def leaky_relu(x, alpha=0.01, name=""):
    """x for x > 0, else alpha * x."""
    op = "nn.leaky_relu"
    return _call(op, [_expr(x, "x", op)], {"alpha": _float(alpha, "alpha", op)}, name)


def gelu(x, approximate="none", name=""):
    """GELU as torch computes it: approximate="none" (erf) or "tanh"."""
    op = "nn.gelu"
    return _call(op, [_expr(x, "x", op)],
                 {"approximate": _str(approximate, "approximate", op)}, name)


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
    """a [..., M, K] @ b [K, N] -> [..., M, N], or @ b [K] -> [..., M]."""
    op = "nn.matmul"
    return _call(op, [_expr(a, "a", op), _expr(b, "b", op)], {}, name)


def batch_matmul(a, b, name=""):
    """a [..., M, K] @ b [..., K, N] -> [..., M, N], broadcasting the batch dimensions
    (torch.matmul for operands of rank >= 2; torch.bmm for rank 3)."""
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


def layer_norm(data, gamma=None, beta=None, axis=-1, epsilon=1e-5, name=""):
    """Normalises over the axes from `axis` on (torch's F.layer_norm with normalized_shape =
    data.shape[axis:]); gamma and beta have that shape, and None means ones / zeros."""
    op = "nn.layer_norm"
    data = _expr(data, "data", op)
    axis = _int(axis, "axis", op)
    if gamma is None or beta is None:
        if data.type.is_tuple or not -len(data.shape) <= axis < len(data.shape):
            # Let the type relation report the bad input or axis.
            shape, dtype = (), "float32"
        else:
            shape, dtype = data.shape[axis:], data.dtype
        if gamma is None:
            gamma = const(np.ones(shape, dtype=dtype), name=f"{name}.weight" if name else "")
        if beta is None:
            beta = const(np.zeros(shape, dtype=dtype), name=f"{name}.bias" if name else "")
    return _call(op, [data, _expr(gamma, "gamma", op), _expr(beta, "beta", op)],
                 {"axis": axis, "epsilon": _float(epsilon, "epsilon", op)}, name)


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


def attention(q, k, v, mask=None, scale=None, causal=False, name=""):
    """softmax(q @ k^T * scale + mask) @ v as one op (F.scaled_dot_product_attention):
    q [..., L, E], k [..., S, E], v [..., S, Ev] with the same batch dimensions; mask
    broadcastable to [..., L, S], bool (keeps the True positions) or float (added);
    causal keeps key j <= query i; scale defaults to 1 / sqrt(E). On the CPU it runs as one
    online-softmax kernel that never stores the L x S scores."""
    op = "nn.attention"
    args = [_expr(q, "q", op), _expr(k, "k", op), _expr(v, "v", op)]
    if mask is not None:
        args.append(_expr(mask, "mask", op))
    attrs = {"causal": _bool(causal, "causal", op)}
    if scale is not None:
        attrs["scale"] = _float(scale, "scale", op)
    return _call(op, args, attrs, name)


def log_softmax(data, axis=-1, name=""):
    """log(softmax(data)) along `axis`, computed stably as x - max - log(sum(exp(x - max)))."""
    op = "nn.log_softmax"
    return _call(op, [_expr(data, "data", op)], {"axis": _int(axis, "axis", op)}, name)


def pad(data, pad_width, pad_value=0.0, pad_mode="constant", name=""):
    """Pads each axis with pad_value: pad_width is ((before_0, after_0), (before_1, after_1),
    ...) or the same flattened, one pair per axis from axis 0 (F.pad lists the last axis
    first). Negative widths crop. Only pad_mode="constant"."""
    op = "nn.pad"
    if isinstance(pad_width, (list, tuple)) and all(isinstance(p, (list, tuple))
                                                    for p in pad_width):
        for i, p in enumerate(pad_width):
            if len(p) != 2:
                raise EmberError(f"op.{op}: pad_width[{i}] must be a (before, after) pair, "
                                 f"got {_describe(p)}")
        pad_width = [w for p in pad_width for w in p]
    return _call(op, [_expr(data, "data", op)],
                 {"pad_width": _ints(pad_width, "pad_width", op),
                  "pad_value": _float(pad_value, "pad_value", op),
                  "pad_mode": _str(pad_mode, "pad_mode", op)}, name)


# ------------------------------------------------- DirectML's activations, instance norm
# Each is elementwise (src/ir/ops/activations.cc) with torch's semantics where torch has it.

__all__ += ["elu", "selu", "celu", "softplus", "parametric_softplus", "softsign",
            "thresholded_relu", "hardshrink", "softshrink", "scaled_tanh", "linear_act", "mish",
            "instance_norm"]

selu = _unary("nn.selu", "(torch.selu) of a float tensor")
softsign = _unary("nn.softsign", "x / (1 + |x|) of a float tensor")
mish = _unary("nn.mish", "x * tanh(softplus(x)) of a float tensor")


def _activation(op, doc):
    # The attributes and their defaults are the C++ op's (register_activation), not repeated.
    defaults = {a: spec[1] for a, spec in schema(op)["attrs"].items()}
    names = list(defaults)

    def make(x, *args, name="", **kwargs):
        if len(args) > len(names):
            raise EmberError(f"op.{op}: takes at most {len(names)} attribute(s) ("
                             f"{', '.join(names)}), got {len(args)}")
        values = dict(defaults, **dict(zip(names, args)))
        for key, value in kwargs.items():
            if key not in defaults:
                raise EmberError(f"op.{op}: unknown attribute '{key}'; it takes "
                                 f"{', '.join(names)}")
            values[key] = value
        return _call(op, [_expr(x, "x", op)],
                     {k: _float(v, k, op) for k, v in values.items()}, name)
    make.__name__ = op.split(".")[-1]
    make.__doc__ = doc
    return make


elu = _activation("nn.elu", "x if x > 0 else alpha * (exp(x) - 1) (torch.nn.ELU).")
celu = _activation("nn.celu", "x if x > 0 else alpha * (exp(x / alpha) - 1) (torch.nn.CELU).")
softplus = _activation("nn.softplus", "log(1 + exp(beta * x)) / beta, and x where beta * x > "
                       "threshold (torch.nn.Softplus).")
parametric_softplus = _activation("nn.parametric_softplus", "alpha * log(1 + exp(beta * x)) "
                                  "(DirectML's ParametricSoftplus).")
thresholded_relu = _activation("nn.thresholded_relu", "x if x > alpha else value "
                               "(torch.nn.Threshold(alpha, value); DirectML's ThresholdedRelu "
                               "has value 0).")
hardshrink = _activation("nn.hardshrink", "x if |x| > lambd else 0 (torch.nn.Hardshrink).")
softshrink = _activation("nn.softshrink", "x - lambd if x > lambd, x + lambd if x < -lambd, "
                         "else 0 (torch.nn.Softshrink).")
scaled_tanh = _activation("nn.scaled_tanh", "alpha * tanh(beta * x) (DirectML's ScaledTanh).")
linear_act = _activation("nn.linear_act", "alpha * x + beta (DirectML's Linear activation).")


def instance_norm(data, gamma=None, beta=None, epsilon=1e-5, name=""):
    """Normalises data [N, C, spatial...] over the spatial axes of each (n, c) with its own
    mean and biased variance, then scales by gamma [C] and shifts by beta [C] (None means
    ones / zeros): torch's InstanceNorm without running statistics."""
    op = "nn.instance_norm"
    data = _expr(data, "data", op)
    if gamma is None or beta is None:
        # A bad input is left to the type relation to report.
        shape = data.shape[1:2] if not data.type.is_tuple and len(data.shape) >= 2 else ()
        dtype = data.dtype if not data.type.is_tuple else "float32"
        if gamma is None:
            gamma = const(np.ones(shape, dtype=dtype), name=f"{name}.weight" if name else "")
        if beta is None:
            beta = const(np.zeros(shape, dtype=dtype), name=f"{name}.bias" if name else "")
    return _call(op, [data, _expr(gamma, "gamma", op), _expr(beta, "beta", op)],
                 {"epsilon": _float(epsilon, "epsilon", op)}, name)


def __getattr__(attr):
    return _registered("nn.", attr)
