"""ATen activations of DirectML's fused-activation list, and instance norm, to Ember ops
(src/ir/ops/activations.cc, nn.instance_norm). nn.Identity leaves no op in the graph, and
nn.Softsign and nn.Tanhshrink are exported as abs/add/div and tanh/sub, which the generic
converters handle. Registered into _aten.CONVERTERS on import."""
import numpy as np

from .._ember import EmberError
from ._aten import converts


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
