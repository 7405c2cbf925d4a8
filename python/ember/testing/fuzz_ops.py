"""The fuzzer's op table. For each op: how to pick operands and attributes at random from
the values a graph has so far (`gen`), its constants (`consts`, drawn from the node's own
seed so a case is a small JSON record), and how to build it in Ember and in PyTorch.

A node is {"op": name, "in": [value ids], "a": {attributes}, "seed": int}; value ids count
the graph inputs first, then the nodes. Ops whose result jumps for a tiny change of input
(floor, round, hardshrink, comparisons) are left out: float32 and float64 would pick
different sides of a jump and the difference would say nothing about Ember.
"""
import math

import numpy as np
import torch
import torch.nn.functional as F

from .. import ir, op

MAX_ELEMS = 6144  # per value: small tensors compile and run fast, and still have tails


class Graph:
    """The values so far: shapes, and float64 reference values (some choices depend on
    them: exp only of moderate values, log only of positive ones)."""

    def __init__(self, shapes, values):
        self.shapes = list(shapes)
        self.values = list(values)

    def pick(self, rng, pred=lambda s: True):
        """A value id whose shape satisfies `pred`: the newest half the time (long chains),
        else any (residual branches), or None."""
        ids = [i for i, s in enumerate(self.shapes) if pred(s)]
        if not ids:
            return None
        if ids[-1] == len(self.shapes) - 1 and rng.random() < 0.5:
            return ids[-1]
        return int(rng.choice(ids))


def _normal(rng, shape, scale=1.0):
    return np.asarray(rng.standard_normal(shape) * scale, dtype=np.float32)


def _fits(shape):
    return all(d >= 1 for d in shape) and math.prod(shape) <= MAX_ELEMS


class FuzzOp:
    name = ""
    weight = 1.0

    def gen(self, rng, g):  # -> (inputs, attrs) or None
        raise NotImplementedError

    def consts(self, a, shapes, rng):
        return {}

    def ember(self, xs, a, c):
        raise NotImplementedError

    def torch(self, xs, a, c):
        raise NotImplementedError


OPS = {}


def register(cls):
    OPS[cls.name] = cls()
    return cls


# ------------------------------------------------------------------------- convolution

def _conv_out(size, k, s, d, p0, p1):
    return (size + p0 + p1 - d * (k - 1) - 1) // s + 1


@register
class Conv2d(FuzzOp):
    name, weight = "conv2d", 3.0

    def gen(self, rng, g):
        x = g.pick(rng, lambda s: len(s) == 4 and s[1] <= 32)
        if x is None:
            return None
        n, c, h, w = g.shapes[x]
        divisors = [d for d in range(1, c + 1) if c % d == 0]
        groups = int(rng.choice([1, 1, c] + divisors))
        out = groups * int(rng.integers(1, max(2, 17 // groups) + 1))
        kh, kw = (int(v) for v in rng.choice([1, 2, 3, 3, 5], size=2))
        stride = [int(v) for v in rng.choice([1, 1, 2, 3], size=2)]
        dil = [int(v) for v in rng.choice([1, 1, 1, 2], size=2)]
        if rng.random() < 0.7:  # symmetric (h, w), else (top, left, bottom, right)
            ph, pw = int(rng.integers(0, kh)), int(rng.integers(0, kw))
            pad = [ph, pw, ph, pw]
        else:
            pad = [int(v) for v in rng.integers(0, 3, size=4)]
        oh = _conv_out(h, kh, stride[0], dil[0], pad[0], pad[2])
        ow = _conv_out(w, kw, stride[1], dil[1], pad[1], pad[3])
        if not _fits((n, out, oh, ow)):
            return None
        return [x], {"out": out, "kernel": [kh, kw], "strides": stride, "dilation": dil,
                     "padding": pad, "groups": groups, "bias": bool(rng.random() < 0.6)}

    def consts(self, a, shapes, rng):
        c = shapes[0][1]
        kh, kw = a["kernel"]
        fan_in = c // a["groups"] * kh * kw
        out = {"w": _normal(rng, (a["out"], c // a["groups"], kh, kw), math.sqrt(2 / fan_in))}
        if a["bias"]:
            out["b"] = _normal(rng, (a["out"],), 0.5)
        return out

    def ember(self, xs, a, c):
        y = op.nn.conv2d(xs[0], ir.const(c["w"]), strides=a["strides"], padding=a["padding"],
                         dilation=a["dilation"], groups=a["groups"])
        return op.nn.bias_add(y, ir.const(c["b"])) if a["bias"] else y

    def torch(self, xs, a, c):
        t, l, b, r = a["padding"]
        x = F.pad(xs[0], (l, r, t, b))
        bias = c["b"] if a["bias"] else None
        return F.conv2d(x, c["w"], bias, stride=a["strides"], dilation=a["dilation"],
                        groups=a["groups"])


# ----------------------------------------------------------------------------- pooling

def _pool_out(size, k, s, p, d, ceil):
    span = size + 2 * p - d * (k - 1) - 1
    o = (span + (s - 1 if ceil else 0)) // s + 1
    if ceil and (o - 1) * s >= size + p:  # torch: the last window starts inside
        o -= 1
    return o


def _pool_attrs(rng, g, x, dilation):
    n, c, h, w = g.shapes[x]
    k = [int(v) for v in rng.integers(1, 4, size=2)]
    s = [int(v) for v in rng.integers(1, 4, size=2)]
    p = [int(rng.integers(0, k[0] // 2 + 1)), int(rng.integers(0, k[1] // 2 + 1))]
    d = [int(v) for v in rng.choice([1, 1, 2], size=2)] if dilation else [1, 1]
    ceil = bool(rng.random() < 0.3)
    oh = _pool_out(h, k[0], s[0], p[0], d[0], ceil)
    ow = _pool_out(w, k[1], s[1], p[1], d[1], ceil)
    if oh < 1 or ow < 1:
        return None
    return {"pool": k, "strides": s, "padding": p, "dilation": d, "ceil": ceil}


@register
class MaxPool2d(FuzzOp):
    name = "max_pool2d"

    def gen(self, rng, g):
        x = g.pick(rng, lambda s: len(s) == 4)
        a = None if x is None else _pool_attrs(rng, g, x, dilation=True)
        return None if a is None else ([x], a)

    def ember(self, xs, a, c):
        return op.nn.max_pool2d(xs[0], a["pool"], a["strides"], a["padding"], a["dilation"],
                                ceil_mode=a["ceil"])

    def torch(self, xs, a, c):
        return F.max_pool2d(xs[0], a["pool"], a["strides"], a["padding"], a["dilation"],
                            ceil_mode=a["ceil"])


@register
class AvgPool2d(FuzzOp):
    name = "avg_pool2d"

    def gen(self, rng, g):
        x = g.pick(rng, lambda s: len(s) == 4)
        a = None if x is None else _pool_attrs(rng, g, x, dilation=False)
        if a is None:
            return None
        a["count_include_pad"] = bool(rng.random() < 0.5)
        return [x], a

    def ember(self, xs, a, c):
        return op.nn.avg_pool2d(xs[0], a["pool"], a["strides"], a["padding"],
                                ceil_mode=a["ceil"], count_include_pad=a["count_include_pad"])

    def torch(self, xs, a, c):
        return F.avg_pool2d(xs[0], a["pool"], a["strides"], a["padding"], ceil_mode=a["ceil"],
                            count_include_pad=a["count_include_pad"])


@register
class AdaptiveAvgPool2d(FuzzOp):
    name, weight = "adaptive_avg_pool2d", 0.5

    def gen(self, rng, g):
        x = g.pick(rng, lambda s: len(s) == 4)
        if x is None:
            return None
        h, w = g.shapes[x][2:]
        return [x], {"size": [int(rng.integers(1, h + 1)), int(rng.integers(1, w + 1))]}

    def ember(self, xs, a, c):
        return op.nn.adaptive_avg_pool2d(xs[0], a["size"])

    def torch(self, xs, a, c):
        return F.adaptive_avg_pool2d(xs[0], a["size"])


# ------------------------------------------------------------------- dense and matmul

@register
class Dense(FuzzOp):
    name, weight = "dense", 2.0

    def gen(self, rng, g):
        x = g.pick(rng, lambda s: len(s) >= 1 and s[-1] <= 512)
        if x is None:
            return None
        units = int(rng.integers(1, 48))
        if not _fits(g.shapes[x][:-1] + (units,)):
            return None
        return [x], {"units": units, "bias": bool(rng.random() < 0.6)}

    def consts(self, a, shapes, rng):
        k = shapes[0][-1]
        out = {"w": _normal(rng, (a["units"], k), 1 / math.sqrt(k))}
        if a["bias"]:
            out["b"] = _normal(rng, (a["units"],), 0.5)
        return out

    def ember(self, xs, a, c):
        y = op.nn.dense(xs[0], ir.const(c["w"]))
        return op.nn.bias_add(y, ir.const(c["b"]), axis=-1) if a["bias"] else y

    def torch(self, xs, a, c):
        return F.linear(xs[0], c["w"], c["b"] if a["bias"] else None)


@register
class Matmul(FuzzOp):
    name = "matmul"

    def gen(self, rng, g):
        x = g.pick(rng, lambda s: len(s) >= 2 and s[-1] <= 512)
        if x is None:
            return None
        n = int(rng.integers(1, 40))
        return ([x], {"n": n}) if _fits(g.shapes[x][:-1] + (n,)) else None

    def consts(self, a, shapes, rng):
        k = shapes[0][-1]
        return {"b": _normal(rng, (k, a["n"]), 1 / math.sqrt(k))}

    def ember(self, xs, a, c):
        return op.nn.matmul(xs[0], ir.const(c["b"]))

    def torch(self, xs, a, c):
        return xs[0] @ c["b"]


def _broadcast(*shapes):
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        return None


@register
class BatchMatmul(FuzzOp):
    """a [..., M, K] @ b [..., K, N]: b is another value of the graph when one fits (a
    second path to a common ancestor), else a constant."""
    name = "batch_matmul"

    def gen(self, rng, g):
        x = g.pick(rng, lambda s: len(s) >= 2 and s[-1] <= 256)
        if x is None:
            return None
        sx = g.shapes[x]

        def fits(s):
            batch = _broadcast(sx[:-2], s[:-2]) if len(s) >= 2 else None
            return (len(s) >= 2 and s[-2] == sx[-1] and batch is not None
                    and _fits(batch + (sx[-2], s[-1])))
        y = g.pick(rng, fits)
        if y is not None and rng.random() < 0.7:
            return [x, y], {}
        batch = [d if rng.random() < 0.6 else 1 for d in sx[:-2]][int(rng.integers(0, 2)):]
        n = int(rng.integers(1, 24))
        shape = tuple(batch) + (sx[-1], n)
        return ([x], {"b": list(shape)}) if _fits(sx[:-2] + (sx[-2], n)) else None

    def consts(self, a, shapes, rng):
        return {"b": _normal(rng, a["b"], 1 / math.sqrt(a["b"][-2]))} if "b" in a else {}

    def ember(self, xs, a, c):
        return op.nn.batch_matmul(xs[0], xs[1] if len(xs) > 1 else ir.const(c["b"]))

    def torch(self, xs, a, c):
        return torch.matmul(xs[0], xs[1] if len(xs) > 1 else c["b"])


# ---------------------------------------------------------------- elementwise binary

_BINARY = {
    "add": (op.add, torch.add), "subtract": (op.subtract, torch.sub),
    "multiply": (op.multiply, torch.mul), "maximum": (op.maximum, torch.maximum),
    "minimum": (op.minimum, torch.minimum), "divide": (op.divide, torch.div),
}


@register
class Binary(FuzzOp):
    """x (op) y with NumPy broadcasting; y is another value (a residual join), a constant
    of a broadcastable shape, or a Python number. Division is only by constants away from
    zero."""
    name, weight = "binary", 4.0

    def gen(self, rng, g):
        fn = str(rng.choice(list(_BINARY)))
        x = g.pick(rng)
        sx = g.shapes[x]
        kind = rng.choice(["value", "const", "scalar"], p=[0.5, 0.35, 0.15])
        if fn == "divide" and kind == "value":
            kind = "const"
        if kind == "value":
            y = g.pick(rng, lambda s: (_broadcast(sx, s) is not None
                                       and _fits(_broadcast(sx, s))))
            if y is not None:
                return [x, y], {"fn": fn, "swap": bool(rng.random() < 0.5)}
            kind = "const"
        a = {"fn": fn, "swap": bool(fn != "divide" and rng.random() < 0.3)}
        if kind == "scalar":
            a["scalar"] = float(np.float32(rng.choice([-1, 1]) * rng.uniform(0.5, 2)))
            return [x], a
        shape = [d if rng.random() < 0.5 else 1 for d in sx][int(rng.integers(0, 2)):]
        a["shape"] = shape
        return [x], a

    def consts(self, a, shapes, rng):
        if "shape" not in a:
            return {}
        if a["fn"] == "divide":  # magnitudes in [0.5, 2], random signs
            mag = rng.uniform(0.5, 2, size=a["shape"])
            return {"y": np.asarray(mag * rng.choice([-1, 1], size=a["shape"]), np.float32)}
        return {"y": _normal(rng, a["shape"])}

    def _operands(self, xs, a, c, const):
        x = xs[0]
        y = xs[1] if len(xs) > 1 else a["scalar"] if "scalar" in a else const(c["y"])
        return (y, x) if a["swap"] else (x, y)

    def ember(self, xs, a, c):
        if "scalar" in a:  # a 0-d constant, as the frontend makes of a Python number
            c = dict(c, y=np.float32(a["scalar"]))
            a = {k: v for k, v in a.items() if k != "scalar"}
        x, y = self._operands(xs, a, c, ir.const)
        return _BINARY[a["fn"]][0](x, y)

    def torch(self, xs, a, c):
        x, y = self._operands(xs, a, c, lambda v: v)
        if not torch.is_tensor(x):
            x = torch.tensor(x, dtype=y.dtype)
        if not torch.is_tensor(y):
            y = torch.tensor(y, dtype=x.dtype)
        return _BINARY[a["fn"]][1](x, y)


# ----------------------------------------------------------------- elementwise unary

def _act(ember_fn, torch_fn, when=None):
    return ember_fn, torch_fn, when


_UNARY = {
    "relu": _act(op.nn.relu, F.relu),
    "leaky_relu": _act(lambda x: op.nn.leaky_relu(x, 0.1), lambda x: F.leaky_relu(x, 0.1)),
    "gelu": _act(op.nn.gelu, F.gelu),
    "gelu_tanh": _act(lambda x: op.nn.gelu(x, approximate="tanh"),
                      lambda x: F.gelu(x, approximate="tanh")),
    "silu": _act(op.nn.silu, F.silu),
    "hardswish": _act(op.nn.hardswish, F.hardswish),
    "hardsigmoid": _act(op.nn.hardsigmoid, F.hardsigmoid),
    "sigmoid": _act(op.sigmoid, torch.sigmoid),
    "tanh": _act(op.tanh, torch.tanh),
    "elu": _act(lambda x: op.nn.elu(x, 0.7), lambda x: F.elu(x, 0.7)),
    "selu": _act(op.nn.selu, F.selu),
    "celu": _act(lambda x: op.nn.celu(x, 1.3), lambda x: F.celu(x, 1.3)),
    "softplus": _act(lambda x: op.nn.softplus(x, 2.0, 10.0),
                     lambda x: F.softplus(x, 2.0, 10.0)),
    "softsign": _act(op.nn.softsign, F.softsign),
    "mish": _act(op.nn.mish, F.mish),
    "abs": _act(op.abs, torch.abs),
    "negative": _act(op.negative, torch.neg),
    "erf": _act(op.erf, torch.erf),
    "clip": _act(lambda x: op.clip(x, -0.5, 1.5), lambda x: torch.clamp(x, -0.5, 1.5)),
    "exp": _act(op.exp, torch.exp, lambda v: float(v.abs().max()) < 12),
    "log": _act(op.log, torch.log, lambda v: float(v.min()) > 0.05),
    "sqrt": _act(op.sqrt, torch.sqrt, lambda v: float(v.min()) > 0.05),
    "rsqrt": _act(op.rsqrt, torch.rsqrt, lambda v: float(v.min()) > 0.05),
}


@register
class Unary(FuzzOp):
    name, weight = "unary", 4.0

    def gen(self, rng, g):
        x = g.pick(rng)
        fn = str(rng.choice(list(_UNARY)))
        when = _UNARY[fn][2]
        if when is not None and (g.values[x].numel() == 0 or not when(g.values[x])):
            return None
        return [x], {"fn": fn}

    def ember(self, xs, a, c):
        return _UNARY[a["fn"]][0](xs[0])

    def torch(self, xs, a, c):
        return _UNARY[a["fn"]][1](xs[0])


# ------------------------------------------------------------ normalization, softmax

@register
class Softmax(FuzzOp):
    name = "softmax"

    def gen(self, rng, g):
        x = g.pick(rng, lambda s: len(s) >= 1)
        if x is None:
            return None
        rank = len(g.shapes[x])
        return [x], {"axis": int(rng.integers(-rank, rank)), "log": bool(rng.random() < 0.3)}

    def ember(self, xs, a, c):
        fn = op.nn.log_softmax if a["log"] else op.nn.softmax
        return fn(xs[0], axis=a["axis"])

    def torch(self, xs, a, c):
        fn = F.log_softmax if a["log"] else F.softmax
        return fn(xs[0], dim=a["axis"])


@register
class LayerNorm(FuzzOp):
    name = "layer_norm"

    def gen(self, rng, g):
        x = g.pick(rng, lambda s: len(s) >= 1)
        if x is None:
            return None
        rank = len(g.shapes[x])
        axis = int(rng.integers(max(0, rank - 2), rank))
        if math.prod(g.shapes[x][axis:]) < 2:
            return None  # the variance of one element is 0: the result is all beta
        return [x], {"axis": axis}

    def consts(self, a, shapes, rng):
        shape = shapes[0][a["axis"]:]
        return {"g": _normal(rng, shape, 0.5) + 1, "b": _normal(rng, shape, 0.5)}

    def ember(self, xs, a, c):
        return op.nn.layer_norm(xs[0], ir.const(c["g"]), ir.const(c["b"]), axis=a["axis"])

    def torch(self, xs, a, c):
        return F.layer_norm(xs[0], tuple(c["g"].shape), c["g"], c["b"], 1e-5)


@register
class BatchNorm(FuzzOp):
    name = "batch_norm"

    def gen(self, rng, g):
        x = g.pick(rng, lambda s: len(s) >= 2)
        return None if x is None else ([x], {})

    def consts(self, a, shapes, rng):
        ch = shapes[0][1]
        return {"g": _normal(rng, (ch,), 0.5) + 1, "b": _normal(rng, (ch,), 0.5),
                "m": _normal(rng, (ch,), 0.5),
                "v": np.asarray(rng.uniform(0.5, 2, size=(ch,)), np.float32)}

    def ember(self, xs, a, c):
        k = [ir.const(c[n]) for n in "gbmv"]
        return op.nn.batch_norm(xs[0], *k, axis=1)

    def torch(self, xs, a, c):
        return F.batch_norm(xs[0], c["m"], c["v"], c["g"], c["b"], training=False, eps=1e-5)


# ------------------------------------------------------------------------ reductions

_REDUCE = {"sum": (op.sum, torch.sum), "mean": (op.mean, torch.mean),
           "max": (op.max, torch.amax), "min": (op.min, torch.amin)}


@register
class Reduce(FuzzOp):
    name, weight = "reduce", 1.5

    def gen(self, rng, g):
        x = g.pick(rng, lambda s: len(s) >= 1)
        if x is None:
            return None
        rank = len(g.shapes[x])
        axes = sorted(int(v) for v in rng.choice(rank, size=int(rng.integers(1, rank + 1)),
                                                 replace=False))
        return [x], {"fn": str(rng.choice(list(_REDUCE))), "axes": axes,
                     "keepdims": bool(rng.random() < 0.4)}

    def ember(self, xs, a, c):
        return _REDUCE[a["fn"]][0](xs[0], axis=a["axes"], keepdims=a["keepdims"])

    def torch(self, xs, a, c):
        return _REDUCE[a["fn"]][1](xs[0], dim=a["axes"], keepdim=a["keepdims"])


# ---------------------------------------------------------------- layout and indexing

def _factor(rng, n):
    """A random shape of 1-4 dimensions with n elements."""
    dims = []
    while n > 1 and len(dims) < 3:
        divs = [d for d in range(2, n + 1) if n % d == 0]
        d = int(rng.choice(divs))
        dims.append(d)
        n //= d
    dims.append(n)
    rng.shuffle(dims)
    return [int(d) for d in dims]


@register
class Reshape(FuzzOp):
    name = "reshape"

    def gen(self, rng, g):
        x = g.pick(rng)
        shape = _factor(rng, math.prod(g.shapes[x]))
        if rng.random() < 0.3:
            shape[int(rng.integers(0, len(shape)))] = -1
        return [x], {"shape": shape}

    def ember(self, xs, a, c):
        return op.reshape(xs[0], a["shape"])

    def torch(self, xs, a, c):
        return xs[0].reshape(a["shape"])


@register
class Transpose(FuzzOp):
    name, weight = "transpose", 1.5

    def gen(self, rng, g):
        x = g.pick(rng, lambda s: len(s) >= 2)
        if x is None:
            return None
        return [x], {"perm": [int(v) for v in rng.permutation(len(g.shapes[x]))]}

    def ember(self, xs, a, c):
        return op.transpose(xs[0], a["perm"])

    def torch(self, xs, a, c):
        return xs[0].permute(a["perm"])


@register
class Flatten(FuzzOp):
    name, weight = "flatten", 0.5

    def gen(self, rng, g):
        x = g.pick(rng, lambda s: len(s) >= 2)
        return None if x is None else ([x], {"start": int(rng.integers(0, len(g.shapes[x])))})

    def ember(self, xs, a, c):
        return op.flatten(xs[0], a["start"])

    def torch(self, xs, a, c):
        return torch.flatten(xs[0], a["start"])


@register
class ExpandSqueeze(FuzzOp):
    name, weight = "expand_squeeze", 0.5

    def gen(self, rng, g):
        x = g.pick(rng, lambda s: len(s) <= 4)
        if x is None:
            return None
        s = g.shapes[x]
        ones = [i for i, d in enumerate(s) if d == 1]
        if ones and rng.random() < 0.5:
            return [x], {"squeeze": [int(rng.choice(ones))]}
        return [x], {"expand": int(rng.integers(0, len(s) + 1))}

    def ember(self, xs, a, c):
        if "squeeze" in a:
            return op.squeeze(xs[0], a["squeeze"])
        return op.expand_dims(xs[0], a["expand"])

    def torch(self, xs, a, c):
        if "squeeze" in a:
            return xs[0].squeeze(a["squeeze"][0])
        return xs[0].unsqueeze(a["expand"])


@register
class Slice(FuzzOp):
    name = "strided_slice"

    def gen(self, rng, g):
        x = g.pick(rng, lambda s: len(s) >= 1 and max(s) >= 2)
        if x is None:
            return None
        s = g.shapes[x]
        axis = int(rng.choice([i for i, d in enumerate(s) if d >= 2]))
        begin = int(rng.integers(0, s[axis] - 1))
        end = int(rng.integers(begin + 1, s[axis] + 1))
        return [x], {"axis": axis, "begin": begin, "end": end, "step": int(rng.integers(1, 3))}

    def ember(self, xs, a, c):
        return op.strided_slice(xs[0], [a["begin"]], [a["end"]], [a["step"]], axes=[a["axis"]])

    def torch(self, xs, a, c):
        index = [slice(None)] * xs[0].dim()
        index[a["axis"]] = slice(a["begin"], a["end"], a["step"])
        return xs[0][tuple(index)]


@register
class Concatenate(FuzzOp):
    name = "concatenate"

    def gen(self, rng, g):
        x = g.pick(rng, lambda s: len(s) >= 1)
        if x is None:
            return None
        s = g.shapes[x]
        axis = int(rng.integers(0, len(s)))
        same = [i for i, t in enumerate(g.shapes)
                if len(t) == len(s) and all(t[d] == s[d] for d in range(len(s)) if d != axis)]
        parts = [x] + [int(v) for v in rng.choice(same, size=int(rng.integers(1, 3)))]
        shape = list(s)
        shape[axis] = sum(g.shapes[i][axis] for i in parts)
        return (parts, {"axis": axis}) if _fits(shape) else None

    def ember(self, xs, a, c):
        return op.concatenate(ir.Tuple(list(xs)), axis=a["axis"])

    def torch(self, xs, a, c):
        return torch.cat(list(xs), dim=a["axis"])


@register
class BroadcastTo(FuzzOp):
    name, weight = "broadcast_to", 0.5

    def gen(self, rng, g):
        x = g.pick(rng, lambda s: 1 in s)
        if x is None:
            return None
        shape = [d if d != 1 else int(rng.integers(1, 5)) for d in g.shapes[x]]
        return ([x], {"shape": shape}) if _fits(shape) else None

    def ember(self, xs, a, c):
        return op.broadcast_to(xs[0], a["shape"])

    def torch(self, xs, a, c):
        return xs[0].expand(a["shape"])


@register
class Take(FuzzOp):
    """x[idx] along an axis with constant indices, negative ones included."""
    name, weight = "take", 0.7

    def gen(self, rng, g):
        x = g.pick(rng, lambda s: len(s) >= 1)
        if x is None:
            return None
        s = g.shapes[x]
        axis = int(rng.integers(0, len(s)))
        ishape = [int(v) for v in rng.integers(1, 5, size=int(rng.integers(1, 3)))]
        out = s[:axis] + tuple(ishape) + s[axis + 1:]
        return ([x], {"axis": axis, "indices": ishape}) if _fits(out) else None

    def consts(self, a, shapes, rng):
        n = shapes[0][a["axis"]]
        return {"i": np.asarray(rng.integers(-n, n, size=a["indices"]), np.int64)}

    def ember(self, xs, a, c):
        return op.take(xs[0], ir.const(c["i"]), axis=a["axis"])

    def torch(self, xs, a, c):
        index = [slice(None)] * xs[0].dim()
        index[a["axis"]] = c["i"]
        return xs[0][tuple(index)]
