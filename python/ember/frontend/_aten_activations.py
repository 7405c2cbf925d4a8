"""ATen activations of DirectML's fused-activation list, and instance norm, group norm (as an
instance norm over the channel groups) and vector norms, to Ember ops
(src/ir/ops/activations.cc, nn.instance_norm). nn.Identity leaves no op in the graph, and
nn.Softsign and nn.Tanhshrink are exported as abs/add/div and tanh/sub, which the generic
converters handle. Registered into _aten_registry.CONVERTERS on import."""
import numpy as np

from .._ember import EmberError
from ._aten_registry import _axes, cast, converts, dtype_name, reshape


def _number(a, key, default):
    value = a[key]
    return float(default if value is None else value)


@converts("elu")
def _elu(cx, a):
    scale, input_scale = _number(a, "scale", 1.0), _number(a, "input_scale", 1.0)
    if scale != 1.0 or input_scale != 1.0:
        raise EmberError(f"elu with scale={scale} and input_scale={input_scale} is not "
                         "supported; Ember's nn.elu has only alpha (use nn.ELU, nn.SELU or "
                         "nn.CELU)")
    return cx.emit("nn.elu", [a[0]], alpha=_number(a, "alpha", 1.0))


@converts("selu")
def _selu(cx, a):
    return cx.emit("nn.selu", [a[0]])


@converts("celu")
def _celu(cx, a):
    alpha = _number(a, "alpha", 1.0)
    if alpha == 0:
        raise EmberError("celu with alpha = 0 is undefined (it divides by alpha); use a "
                         "nonzero alpha")
    return cx.emit("nn.celu", [a[0]], alpha=alpha)


@converts("softplus")
def _softplus(cx, a):
    beta = _number(a, "beta", 1.0)
    if beta == 0:
        raise EmberError("softplus with beta = 0 divides by zero; use a nonzero beta")
    return cx.emit("nn.softplus", [a[0]], beta=beta, threshold=_number(a, "threshold", 20.0))


@converts("threshold")
def _threshold(cx, a):
    return cx.emit("nn.thresholded_relu", [a[0]], alpha=float(a[1]), value=float(a[2]))


@converts("hardshrink")
def _hardshrink(cx, a):
    return cx.emit("nn.hardshrink", [a[0]], lambd=_number(a, "lambd", 0.5))


@converts("softshrink")
def _softshrink(cx, a):
    lambd = _number(a, "lambd", 0.5)
    if lambd < 0:
        raise EmberError(f"softshrink needs lambd >= 0, got {lambd}")
    return cx.emit("nn.softshrink", [a[0]], lambd=lambd)


@converts("mish")
def _mish(cx, a):
    return cx.emit("nn.mish", [a[0]])


@converts("group_norm", "native_group_norm")
def _group_norm(cx, a):
    # Each group's channels and positions normalised together: an instance norm over the
    # groups of x viewed as [N, G, C/G * spatial], then the per-channel scale and shift.
    x = a["input"]
    groups = a["num_groups"] if a.op == "group_norm" else a["group"]
    eps = float(a["eps"])
    n, c = x.shape[0], x.shape[1]
    if groups <= 0 or c % groups:
        raise EmberError(f"group_norm: {c} channels do not split into {groups} groups")
    flat = int(np.prod(x.shape[2:], dtype=np.int64)) * (c // groups)
    grouped = reshape(cx, x, [n, groups, flat])
    y = cx.emit("nn.instance_norm", [grouped, cx.const(np.ones(groups), x.dtype),
                                     cx.const(np.zeros(groups), x.dtype)], epsilon=eps)
    y = reshape(cx, y, list(x.shape))
    per_channel = [c] + [1] * (len(x.shape) - 2)
    if a["weight"] is not None:
        y = cx.emit("multiply", [y, reshape(cx, a["weight"], per_channel)])
    if a["bias"] is not None:
        y = cx.emit("add", [y, reshape(cx, a["bias"], per_channel)])
    return y if a.op == "group_norm" else [y, None, None]


@converts("linalg_vector_norm")
def _vector_norm(cx, a):
    x, order = a[0], float(a["ord"])
    axes = _axes(a["dim"], len(x.shape))
    keep = int(bool(a["keepdim"]))
    if a["dtype"] is not None:
        x = cast(cx, x, dtype_name(a["dtype"]))
    magnitude = cx.emit("abs", [x])
    if order == float("inf"):
        return cx.emit("max", [magnitude], axis=axes, keepdims=keep)
    if order == -float("inf"):
        return cx.emit("min", [magnitude], axis=axes, keepdims=keep)
    if order == 0:
        nonzero = cast(cx, cx.emit("not_equal", [x, cx.const(0.0, x.dtype)]), x.dtype)
        return cx.emit("sum", [nonzero], axis=axes, keepdims=keep)
    if order == 1:
        return cx.emit("sum", [magnitude], axis=axes, keepdims=keep)
    if order == 2:
        squares = cx.emit("multiply", [x, x])
        return cx.emit("sqrt", [cx.emit("sum", [squares], axis=axes, keepdims=keep)])
    powered = cx.emit("power", [magnitude, cx.const(order, x.dtype)])
    total = cx.emit("sum", [powered], axis=axes, keepdims=keep)
    return cx.emit("power", [total, cx.const(1.0 / order, x.dtype)])


@converts("instance_norm")
def _instance_norm(cx, a):
    x, gamma, beta = a["input"], a["weight"], a["bias"]
    mean, var, eps = a["running_mean"], a["running_var"], float(a["eps"])
    channels = [x.shape[1]]
    gamma = cx.const(np.ones(channels), x.dtype) if gamma is None else gamma
    beta = cx.const(np.zeros(channels), x.dtype) if beta is None else beta
    if not a["use_input_stats"]:
        # Running statistics (track_running_stats=True in eval mode): a batch norm.
        if mean is None or var is None:
            raise EmberError("instance_norm without input statistics needs running_mean "
                             "and running_var")
        return cx.emit("nn.batch_norm", [x, gamma, beta, mean, var], axis=1, epsilon=eps)
    return cx.emit("nn.instance_norm", [x, gamma, beta], epsilon=eps)
