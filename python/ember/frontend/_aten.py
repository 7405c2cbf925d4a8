"""ATen operators to Ember ops: one converter per aten op, shared by the torch.export and the
TorchScript importers (both speak ATen; they differ only in how a graph is walked).

A converter gets the Converter `cx` (which names every node it makes after the PyTorch
module being converted) and the call's arguments `a`, by schema name or position, with
defaults filled in. Tensors arrive as Ember expressions, everything else as Python values.
It returns an expression, a Python value (shape arithmetic in traced graphs), or a list for
ops with several outputs. Shapes are static, so shape logic runs here in Python.
"""
import math
import numbers

import numpy as np
import torch

from .. import _ember, ir
from .._ember import Constant, EmberError, Expr

CONVERTERS = {}

# TorchScript passes a dtype as its ScalarType code.
_SCALAR_TYPES = {0: torch.uint8, 1: torch.int8, 2: torch.int16, 3: torch.int32, 4: torch.int64,
                 5: torch.float16, 6: torch.float32, 7: torch.float64, 11: torch.bool,
                 15: torch.bfloat16}
# Type promotion order of Ember's dtypes (torch's, restricted to them).
_PROMOTION = ["bool", "int32", "int64", "float32", "float64"]


# Operators Ember refuses, with the reason the importer gives and docs/core_aten.md lists.
# Such an op whose tensor inputs are all constants is still evaluated at import, except the
# random ones: a value drawn once at build time would be wrong on every run after the first.
_TRAINING = ("a training (backward) op: export the model in eval mode under torch.no_grad() "
             "for inference")
REFUSED = {
    "nonzero": "its output shape depends on the data; use a mask with torch.where instead",
    "as_strided": "an arbitrary strided view of memory; use reshape, slicing or unfold",
    "_embedding_bag": "nn.EmbeddingBag is not supported; use nn.Embedding followed by a sum or "
                      "mean over the bag",
    "prod": "Ember has no product reduction; for positive values use exp(sum(log(x)))",
    "sym_stride": "strides are not part of Ember's static-shape graphs; export without them",
    "sym_storage_offset": "storage offsets are not part of Ember's graphs",
    "_native_batch_norm_legit_functional": "batch norm in training mode (it updates its "
                                           "running statistics): call model.eval() before "
                                           "exporting",
    "resize_": "an in-place resize of a tensor's storage; use reshape or a new tensor",
}
RANDOM = ("rand", "randn", "randperm", "randint", "rand_like", "randn_like", "randint_like",
          "bernoulli", "normal", "uniform", "multinomial", "exponential")
REFUSED.update({name: "random numbers: a compiled model is deterministic; draw them outside "
                "the model and pass them in as an input" for name in RANDOM})
REFUSED.update({name: _TRAINING for name in (
    "convolution_backward", "embedding_dense_backward", "native_layer_norm_backward",
    "native_group_norm_backward", "max_pool2d_with_indices_backward", "avg_pool2d_backward",
    "_adaptive_avg_pool2d_backward")})


def converts(*names):
    """Registers a converter for aten ops by overload-packet name ("conv2d", "add")."""
    def register(fn):
        for name in names:
            CONVERTERS[name] = fn
        return fn
    return register


class Args:
    """An aten call's arguments by schema name (a["weight"]) or position (a[1])."""

    def __init__(self, op, names, values):
        self.op = op  # the overload packet name, e.g. "batch_norm"
        self.names = list(names)
        self.values = list(values)

    def __getitem__(self, key):
        if isinstance(key, int):
            return self.values[key] if key < len(self.values) else None
        return self.values[self.names.index(key)] if key in self.names else None

    def has(self, key):
        return key in self.names


class Converter:
    """State of one import: the source name of the node being converted, the weights used
    so far (as function parameters) and every problem found, reported together at the end."""

    def __init__(self, tensors):
        self.name = ""          # PyTorch module path of the node being converted
        self.problems = []      # (op, where, detail or None)
        self.params = {}        # state_dict name -> NumPy array
        self.weights = []       # the ir.Var of each weight, in first-use order
        self._tensors = tensors  # state_dict name -> torch tensor
        self._weight_vars = {}
        self._constants = {}

    # ----------------------------------------------------------------- making nodes
    def emit(self, op, args, **attrs):
        return _ember.call(op, list(args), attrs, self.name)

    def const(self, value, dtype="float32"):
        try:
            array = np.asarray(value, dtype=dtype)
        except OverflowError:  # torch raises too: the number does not fit in the dtype
            raise EmberError(f"{self.name or 'a constant'}: the number {value!r} does not fit "
                             f"in {dtype}") from None
        return ir.const(array, self.name)

    def weight(self, name):
        """The function parameter for state_dict entry `name` (made on first use)."""
        if name not in self._weight_vars:
            tensor = self._tensors[name].detach().cpu()
            # No copy (a ResNet-50 copy costs half a second): ember.build copies params.
            # (np.asarray, not np.ascontiguousarray: a 0-d weight stays 0-d.)
            array = np.asarray(tensor.numpy(), order="C") if tensor.dtype != torch.bfloat16 \
                else None
            if array is None or array.dtype.name not in _PROMOTION:
                raise EmberError(f"weight '{name}' has dtype {tensor.dtype}, which Ember does "
                                 "not support; convert the model with model.float() first")
            var = ir.var(name, array.shape, array.dtype.name)
            self._weight_vars[name] = var
            self.params[name] = array
            self.weights.append(var)
        return self._weight_vars[name]

    # --------------------------------------------------------------- converting calls
    def resolve(self, value):
        """An argument with weight references replaced by their parameters."""
        if isinstance(value, WeightRef):
            return self.weight(value.name)
        if isinstance(value, (list, tuple)):
            return type(value)(self.resolve(v) for v in value)
        return value

    def convert(self, op, display, names, values, evaluate, where):
        """Converts one aten call: `op` is its overload-packet name, `display` how the user
        knows it, `where` its module path. An op without a converter whose tensor inputs
        are all constants is evaluated by `evaluate` (PyTorch itself). Problems are
        recorded, not raised, so that one import reports all of them; the result is then
        MISSING, and every node using it is skipped."""
        self.name = where
        for v in _flat(values):
            if v is MISSING:  # still report this op if it is unsupported too
                if op not in CONVERTERS:
                    self.problems.append((display, where, REFUSED.get(op)))
                return MISSING
            if isinstance(v, Complex) and op not in COMPLEX_OPS:
                self.problems.append((display, where, "it takes a complex tensor; Ember "
                                      "keeps complex values only through FFTs, real/imag/"
                                      "abs/view_as_real, conjugates, casts, products with "
                                      "real tensors and ops that move elements"))
                return MISSING
            if isinstance(v, Unavailable):
                self.problems.append((display, where, f"it uses {v.what}, which Ember does "
                                      "not compute"))
                return MISSING
        args, constant = None, False
        try:
            args = Args(op, names, [self.resolve(v) for v in values])
            constant = self._evaluable(op, args, evaluate)
            if any(isinstance(v, TorchValue) for v in _flat(args.values)):
                if not constant:
                    raise EmberError(_torch_only(args))
                return self._from_torch(evaluate(self._to_torch(args.values)))
            fn = CONVERTERS.get(op)
            if fn is not None:
                result = fn(self, args)
                if constant:  # PyTorch can compute it later if an op Ember lacks needs it
                    self._remember(result, lambda: evaluate(self._to_torch(args.values)))
                return result
            if constant:
                return self._from_torch(evaluate(self._to_torch(args.values)))
        except EmberError as error:
            # A constant computation that Ember's ops cannot express (sin of a float64
            # position table) is computed by PyTorch instead.
            if constant:
                try:
                    return self._from_torch(evaluate(self._to_torch(args.values)))
                except Exception:  # noqa: BLE001  (report Ember's reason, not PyTorch's)
                    pass
            self.problems.append((display, where, str(error)))
            return MISSING
        self.problems.append((display, where, REFUSED.get(op)))
        return MISSING

    # Expressions computed from constants alone (by id, with the expression kept alive) and
    # how PyTorch computes their values: (expr, thunk, cached value).
    def _remember(self, result, thunk, index=None):
        if isinstance(result, Expr) and not self._is_constant(result):  # (not an input
            # passed through: clone, a reshape to the same shape)
            self._constants[id(result)] = [result, thunk, index, None]
        elif isinstance(result, (list, tuple)):
            for k, item in enumerate(result):
                self._remember(item, thunk, k)

    def _is_constant(self, expr):
        return (isinstance(expr, (Constant, TorchValue)) or
                isinstance(expr, Expr) and id(expr) in self._constants)

    def _evaluable(self, op, args, evaluate):
        """Can PyTorch compute this call at import: every tensor input is a constant or
        computed from constants alone, and it draws no random numbers?"""
        return (evaluate is not None and op not in RANDOM
                and all(self._is_constant(v) for v in _flat(args.values)
                        if isinstance(v, (Expr, TorchValue))))

    def _to_torch(self, values):
        out = []
        for v in values:
            if isinstance(v, TorchValue):
                v = v.tensor
            elif isinstance(v, Constant):
                v = torch.from_numpy(np.asarray(v.value))
            elif isinstance(v, Expr) and id(v) in self._constants:
                entry = self._constants[id(v)]
                if entry[3] is None:
                    value = entry[1]()
                    value = value if entry[2] is None else value[entry[2]]
                    # Ember's values are dense (a clone Ember skipped may have made it so)
                    entry[3] = value.contiguous() if isinstance(value, torch.Tensor) else value
                v = entry[3]
            elif isinstance(v, (list, tuple)):
                v = type(v)(self._to_torch(v))
            out.append(v)
        return out

    def _from_torch(self, value):
        if isinstance(value, torch.Tensor):
            if str(value.dtype).replace("torch.", "") not in _PROMOTION:
                return TorchValue(value.detach())  # bfloat16, complex...: PyTorch keeps it
            return ir.const(value.detach().contiguous(), self.name)
        if isinstance(value, (list, tuple)):
            return [self._from_torch(v) for v in value]
        return value

    def error(self):
        """One EmberError listing every unsupported op and failed conversion with the
        module paths where each occurs, or None."""
        if not self.problems:
            return None
        unsupported, failed = {}, []
        for op, where, detail in self.problems:
            if detail is None:
                unsupported.setdefault(op, []).append(where)
            else:
                failed.append(f"  {op} at '{where}': {detail}")
        lines = []
        if unsupported:
            lines.append(f"from_pytorch: the model uses {len(unsupported)} PyTorch operator(s) "
                         "that Ember does not support:")
            for op, places in unsupported.items():
                unique = list(dict.fromkeys(places))
                lines.append(f"  {op} at " + ", ".join(f"'{p}'" for p in unique))
            lines.append("Rewrite those parts of the model with supported operations (see "
                         "ember.ir.list_ops()), or report the missing operators.")
        if failed:
            lines.append("from_pytorch: these operators could not be converted:")
            lines += failed
        return EmberError("\n".join(lines))


class TorchValue:
    """A constant computed at import whose dtype Ember lacks (a bfloat16 alibi table, before
    it is cast back to float32): PyTorch computes every call that uses it, which is fine while
    all that call's inputs are constants; a call that mixes it with the model's inputs is
    refused (_torch_only)."""

    def __init__(self, tensor):
        self.tensor = tensor
        self.shape, self.dtype = tuple(tensor.shape), str(tensor.dtype).replace("torch.", "")


def _torch_only(args):
    t = next(v for v in _flat(args.values) if isinstance(v, TorchValue))
    return (f"it uses a {t.dtype} tensor (computed at import from constants) together with "
            f"the model's inputs; Ember has no {t.dtype}: cast that tensor to float32 in the "
            "model")


class Complex:
    """A complex tensor inside the importer (_aten_fft.py): its real and imaginary float32
    parts (im None: zero). Ember's graph has no complex dtype; only COMPLEX_OPS take one."""

    def __init__(self, re, im=None):
        self.re, self.im = re, im
        self.shape, self.dtype = re.shape, "complex64"


COMPLEX_OPS = set()  # filled by _aten_fft


class WeightRef:
    """A parameter or buffer by state_dict name, made a function parameter when used."""

    def __init__(self, name):
        self.name = name


class Unavailable:
    """An output that PyTorch computes and Ember does not (max_pool2d's indices, batch
    norm's saved statistics); an error only if something uses it."""

    def __init__(self, what):
        self.what = what


def item(sequence, index, what):
    """sequence[index] for a multi-output op, as Unavailable where Ember has no value."""
    if sequence is MISSING:
        return MISSING
    value = sequence[index]
    return Unavailable(f"output {index} of {what}") if value is None else value


class _Missing:
    """The value of a node that could not be converted; anything using it is skipped."""

    def __repr__(self):
        return "MISSING"


MISSING = _Missing()


def _flat(values):
    for v in values:
        if isinstance(v, (list, tuple)):
            yield from _flat(v)
        else:
            yield v


# ------------------------------------------------------------------------------- helpers

def dtype_name(dtype):
    """Ember's name for a torch dtype (or a TorchScript ScalarType code)."""
    if isinstance(dtype, int) and not isinstance(dtype, bool):
        dtype = _SCALAR_TYPES.get(dtype, dtype)
    name = str(dtype).replace("torch.", "")
    if name not in _PROMOTION:
        raise EmberError(f"dtype {name} is not supported by Ember; use one of "
                         f"{', '.join(_PROMOTION)}")
    return name


def _is_float(dtype):
    return dtype.startswith("float")


def _axis(axis, rank):
    if not -rank <= axis < max(rank, 1):
        raise EmberError(f"dimension {axis} is out of range for a tensor of rank {rank}")
    return axis % rank if rank else 0


def _axes(dims, rank):
    if dims is None:
        return []
    dims = [dims] if isinstance(dims, int) else list(dims)
    return [_axis(d, rank) for d in dims]


def _pair(value):
    value = [value] if isinstance(value, int) else list(value)
    return value * 2 if len(value) == 1 else value


def _pads(padding):
    """torch (ph, pw) -> Ember's (top, left, bottom, right)."""
    ph, pw = _pair(padding)
    return [ph, pw, ph, pw]


def cast(cx, x, dtype):
    return x if x.dtype == dtype else cx.emit("cast", [x], dtype=dtype)


def reshape(cx, x, shape):
    shape = [int(s) for s in shape]
    return x if list(x.shape) == shape else cx.emit("reshape", [x], newshape=shape)


def transpose(cx, x, axes):
    axes = list(axes)
    return x if axes == list(range(len(axes))) else cx.emit("transpose", [x], axes=axes)


def swap_last(cx, x):
    axes = list(range(len(x.shape)))
    axes[-2], axes[-1] = axes[-1], axes[-2]
    return transpose(cx, x, axes)


def broadcast_to(cx, x, shape):
    shape = [int(s) for s in shape]
    return x if list(x.shape) == shape else cx.emit("broadcast_to", [x], shape=shape)


def slice_axis(cx, x, axis, begin, end, step=1):
    if begin == 0 and end >= x.shape[axis] and step == 1:
        return x
    return cx.emit("strided_slice", [x], begin=[begin], end=[end], strides=[step], axes=[axis])


def zero_pad(cx, x, widths):
    """x with zeros added: widths has (before, after) for every axis; a negative width crops
    that many elements instead."""
    for axis, (before, after) in enumerate(widths):
        if before < 0 or after < 0:
            x = slice_axis(cx, x, axis, max(-before, 0), x.shape[axis] - max(-after, 0))
    widths = [(max(b, 0), max(e, 0)) for b, e in widths]
    if not any(v for pair in widths for v in pair):
        return x
    return cx.emit("nn.pad", [x], pad_width=[int(v) for pair in widths for v in pair],
                   pad_value=0.0, pad_mode="constant")


def scalar_dtype(value):
    """The dtype torch gives a Python number made a tensor (torch.tensor(value))."""
    return ("bool" if isinstance(value, bool) else
            "int64" if isinstance(value, numbers.Integral) else "float32")


def _promote(cx, a, b):
    """The two operands of a binary op as expressions of one dtype, following torch's
    promotion: a Python number takes the tensor's dtype unless it is a float next to an
    integer tensor; a 0-dim tensor does not promote a bigger tensor of its own kind."""
    if not isinstance(a, Expr):
        b, a = _promote(cx, b, a)
        return a, b
    if not isinstance(b, Expr):
        dtype = a.dtype
        if isinstance(b, bool) and dtype != "bool":
            b = int(b)
        if isinstance(b, float) and not _is_float(dtype):
            dtype = "float32"
        elif isinstance(b, int) and not isinstance(b, bool) and dtype == "bool":
            dtype = "int64"
        return cast(cx, a, dtype), cx.const(b, dtype)
    if a.dtype == b.dtype:
        return a, b
    same_kind = _is_float(a.dtype) == _is_float(b.dtype)
    if same_kind and len(a.shape) == 0 and len(b.shape) > 0:
        return cast(cx, a, b.dtype), b
    if same_kind and len(b.shape) == 0 and len(a.shape) > 0:
        return a, cast(cx, b, a.dtype)
    dtype = max(a.dtype, b.dtype, key=_PROMOTION.index)
    return cast(cx, a, dtype), cast(cx, b, dtype)


def binary(cx, op, a, b):
    a, b = _promote(cx, a, b)
    return cx.emit(op, [a, b])


def matmul(cx, a, b):
    """torch.matmul for every rank combination, from nn.matmul (2-D right operand) and
    nn.batch_matmul (3-D, batch dimensions broadcast and flattened here)."""
    if len(b.shape) == 1:
        out = matmul(cx, a, reshape(cx, b, [b.shape[0], 1]))
        return reshape(cx, out, out.shape[:-1])
    if len(a.shape) == 1:
        out = matmul(cx, reshape(cx, a, [1, a.shape[0]]), b)
        return reshape(cx, out, out.shape[:-2] + out.shape[-1:])
    if len(b.shape) == 2:
        return cx.emit("nn.matmul", [a, b])
    batch = list(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]))
    a = broadcast_to(cx, a, batch + list(a.shape[-2:]))
    b = broadcast_to(cx, b, batch + list(b.shape[-2:]))
    if len(batch) == 1:
        return cx.emit("nn.batch_matmul", [a, b])
    n = int(np.prod(batch))
    out = cx.emit("nn.batch_matmul", [reshape(cx, a, [n] + list(a.shape[-2:])),
                                      reshape(cx, b, [n] + list(b.shape[-2:]))])
    return reshape(cx, out, batch + list(out.shape[-2:]))


# ------------------------------------------------------------------ elementwise operators

_UNARY = {"relu": "nn.relu", "sigmoid": "sigmoid", "tanh": "tanh", "exp": "exp",
          "sqrt": "sqrt", "rsqrt": "rsqrt", "erf": "erf", "log": "log", "abs": "abs",
          "neg": "negative", "floor": "floor", "ceil": "ceil", "round": "round",
          "silu": "nn.silu", "hardswish": "nn.hardswish", "hardsigmoid": "nn.hardsigmoid",
          "log_sigmoid": "nn.log_sigmoid", "logical_not": "logical_not", "sign": "sign"}
# Math functions of one float argument: integer inputs are computed in float32, as torch's
# default dtype. (Core ATen's pointwise float ops; sin, cos and tan take float32 only.)
_MATH = ("log1p", "expm1", "exp2", "log2", "log10", "erfc", "trunc", "sin", "cos", "tan",
         "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh")
_UNARY.update({name: name for name in _MATH})
_FLOAT_ONLY = {"sigmoid", "tanh", "exp", "sqrt", "rsqrt", "erf", "log", "silu", "hardswish",
               "hardsigmoid"} | set(_MATH) - {"trunc"}


def _unary(torch_name, ember_op):
    def convert(cx, a):
        x = a[0]
        if torch_name in _FLOAT_ONLY and not _is_float(x.dtype):
            x = cast(cx, x, "float32")  # torch computes these in the default float dtype
        return cx.emit(ember_op, [x])
    return convert


for _name, _op in _UNARY.items():
    CONVERTERS[_name] = _unary(_name, _op)


@converts("round")
def _round(cx, a):
    x, decimals = a[0], a["decimals"] or 0
    if not isinstance(x, Expr):  # round.int / round.float of a traced Python number
        return round(x, decimals) if decimals else round(x)
    if not _is_float(x.dtype):
        return x  # integers are already round
    if decimals == 0:
        return cx.emit("round", [x])
    scale = 10.0 ** decimals  # torch: round(x * 10^d) / 10^d
    return binary(cx, "divide", cx.emit("round", [binary(cx, "multiply", x, scale)]), scale)


def _float_test(ember_op, integer_answer):
    """isnan / isinf / isfinite: an Ember op on floats; on integers and bools the answer is
    the same for every element (x == x is True, x != x False)."""
    def convert(cx, a):
        x = a[0]
        if _is_float(x.dtype):
            return cx.emit(ember_op, [x])
        return cx.emit("equal" if integer_answer else "not_equal", [x, x])
    return convert


CONVERTERS["isnan"] = _float_test("isnan", False)
CONVERTERS["isinf"] = _float_test("isinf", False)
CONVERTERS["isfinite"] = _float_test("isfinite", True)


@converts("atan2", "arctan2")
def _atan2(cx, a):
    y, x = _promote(cx, a[0], a[1])
    if not _is_float(y.dtype):
        y, x = cast(cx, y, "float32"), cast(cx, x, "float32")
    return cx.emit("atan2", [y, x])


@converts("bitwise_not")
def _bitwise_not(cx, a):
    x = a[0]
    if not isinstance(x, Expr):
        return not x if isinstance(x, bool) else ~x
    # On bools the logical op, which the pattern passes know (an attention mask's ~mask).
    return cx.emit("logical_not" if x.dtype == "bool" else "bitwise_not", [x])


@converts("gelu")
def _gelu(cx, a):
    return cx.emit("nn.gelu", [a[0]], approximate=a["approximate"] or "none")


@converts("leaky_relu")
def _leaky_relu(cx, a):
    return cx.emit("nn.leaky_relu", [a[0]], alpha=float(a[1]))


@converts("hardtanh")
def _hardtanh(cx, a):
    return cx.emit("clip", [a[0]], a_min=float(a[1]), a_max=float(a[2]))


@converts("relu6")
def _relu6(cx, a):
    return cx.emit("clip", [a[0]], a_min=0.0, a_max=6.0)


@converts("clamp", "clip", "clamp_min", "clamp_max")
def _clamp(cx, a):
    x, low, high = a[0], a["min"], a["max"]
    if isinstance(low, Expr) or isinstance(high, Expr):  # clamp.Tensor
        if low is not None:
            x = binary(cx, "maximum", x, low)
        return x if high is None else binary(cx, "minimum", x, high)
    bounds = [b for b in (low, high) if b is not None]
    if x.dtype == "bool":
        raise EmberError("clamp of a bool tensor is not supported; cast it to int64")
    if not _is_float(x.dtype) and any(isinstance(b, float) for b in bounds):
        x = cast(cx, x, "float32")  # torch promotes an integer tensor clamped by a float
    if not _is_float(x.dtype) and any(abs(b) > 2 ** 53 for b in bounds):
        # clip's bounds are doubles, exact to 2^53; larger int64 bounds stay exact as tensors
        if low is not None:
            x = binary(cx, "maximum", x, int(low))
        return x if high is None else binary(cx, "minimum", x, int(high))
    low = -math.inf if low is None else float(low)
    high = math.inf if high is None else float(high)
    return cx.emit("clip", [x], a_min=low, a_max=high)


def _arith(ember_op, python_op):
    def convert(cx, a):
        x, y = a[0], a[1]
        alpha = a["alpha"]
        if not isinstance(x, Expr) and not isinstance(y, Expr):
            return python_op(x, y if alpha in (None, 1) else alpha * y)
        if alpha not in (None, 1):
            y = binary(cx, "multiply", y, alpha) if isinstance(y, Expr) else alpha * y
        x, y = _promote(cx, x, y)
        if x.dtype == "bool":  # torch: bool * bool is and, bool + bool is or
            if ember_op == "subtract":
                raise EmberError("subtracting bool tensors is not defined (torch refuses it "
                                 "too); use logical_xor or cast to an integer type")
            return cx.emit({"multiply": "logical_and", "add": "logical_or"}[ember_op], [x, y])
        return cx.emit(ember_op, [x, y])
    return convert


CONVERTERS["add"] = _arith("add", lambda x, y: x + y)
CONVERTERS["sub"] = CONVERTERS["subtract"] = _arith("subtract", lambda x, y: x - y)
CONVERTERS["mul"] = CONVERTERS["multiply"] = _arith("multiply", lambda x, y: x * y)


@converts("rsub")
def _rsub(cx, a):
    return CONVERTERS["sub"](cx, Args("sub", ["self", "other", "alpha"],
                                      [a[1], a[0], a["alpha"]]))


def _integer_divisor(cx, op, y, dtype):
    """The divisor `y` of an integer division, fmod or remainder as a `dtype` constant: torch
    raises for a zero divisor and a kernel cannot, so the divisor must be known when the
    model is imported (a zero in it is then an error naming the node). Made anew rather
    than cast, so that the op's check sees the constant."""
    if isinstance(y, numbers.Number):
        return cx.const(np.array(y), dtype)
    if not isinstance(y, Constant):
        raise EmberError(f"integer {op} by a tensor computed when the model runs is not "
                         "supported (a zero divisor has no value); cast both to float32")
    return cx.const(np.asarray(y.value), dtype)


def _integer_operands(x, y):
    """Whether torch's result of a binary op on x and y is an integer (or bool) tensor."""
    return all(isinstance(v, numbers.Integral) or (isinstance(v, Expr) and not _is_float(v.dtype))
               for v in (x, y))


@converts("div", "divide", "true_divide", "floor_divide", "floordiv")
def _div(cx, a):
    x, y = a[0], a[1]
    mode = "floor" if a.op in ("floor_divide", "floordiv") else a["rounding_mode"]
    if not isinstance(x, Expr) and not isinstance(y, Expr):
        return x // y if mode == "floor" else (int(x / y) if mode == "trunc" else x / y)
    if _integer_operands(x, y) and mode is not None:  # integer quotients stay integers
        x, _ = _promote(cx, x, y)
        x = cast(cx, x, "int64") if x.dtype == "bool" else x
        y = _integer_divisor(cx, f"division (rounding_mode={mode!r})", y, x.dtype)
        return cx.emit("floor_divide" if mode == "floor" else "trunc_divide", [x, y])
    x, y = _promote(cx, x, y)
    if not _is_float(x.dtype):  # torch's true division of integers gives floats
        x, y = cast(cx, x, "float32"), cast(cx, y, "float32")
    out = cx.emit("divide", [x, y])
    if mode == "floor":
        return cx.emit("floor", [out])
    if mode == "trunc":  # trunc(q) = sign(q) * floor(|q|)
        floor = cx.emit("floor", [cx.emit("abs", [out])])
        return cx.emit("where", [binary(cx, "less", out, 0.0), cx.emit("negative", [floor]),
                                 floor])
    return out


@converts("remainder", "fmod")
def _remainder(cx, a):
    x, y = a[0], a[1]
    if not isinstance(x, Expr) and not isinstance(y, Expr):
        return x % y if a.op == "remainder" else math.fmod(x, y)
    integer = _integer_operands(x, y)
    x, promoted = _promote(cx, x, y)
    y = _integer_divisor(cx, a.op, y, x.dtype) if integer else promoted
    if x.dtype not in ("float32", "int32", "int64"):
        raise EmberError(f"{a.op} of {x.dtype} tensors is not supported; Ember's {a.op} takes "
                         "float32 and integer tensors")
    return cx.emit(a.op, [x, y])


@converts("pow")
def _pow(cx, a):
    x, y = a[0], a[1]
    if not isinstance(x, Expr) and not isinstance(y, Expr):
        return x ** y
    if isinstance(x, Expr) and isinstance(y, numbers.Number):
        if y == 1:
            return x
        if y == 2:
            return cx.emit("multiply", [x, x])
        if y == 0.5:
            return cx.emit("sqrt", [x])
        if y == -0.5:
            return cx.emit("rsqrt", [x])
    x, y = _promote(cx, x, y)
    return cx.emit("power", [x, y])


@converts("square")
def _square(cx, a):
    return cx.emit("multiply", [a[0], a[0]])


@converts("reciprocal")
def _reciprocal(cx, a):
    return binary(cx, "divide", 1.0, a[0])


def _binary_op(ember_op, python_op, result_bool=False):
    def convert(cx, a):
        x, y = a[0], a[1]
        if not isinstance(x, Expr) and not isinstance(y, Expr):
            return python_op(x, y)
        x, y = _promote(cx, x, y)
        if x.dtype == "bool" and ember_op in _LOGICAL:
            return cx.emit(_LOGICAL[ember_op], [x, y])  # as bitwise_not: the logical op
        return cx.emit(ember_op, [x, y])
    return convert


_LOGICAL = {"bitwise_and": "logical_and", "bitwise_or": "logical_or",
            "bitwise_xor": "logical_xor"}


for _names, _op, _py in (
        (("maximum", "fmax"), "maximum", max),
        (("minimum", "fmin"), "minimum", min),
        (("eq",), "equal", lambda x, y: x == y), (("ne",), "not_equal", lambda x, y: x != y),
        (("lt",), "less", lambda x, y: x < y), (("le",), "less_equal", lambda x, y: x <= y),
        (("gt",), "greater", lambda x, y: x > y),
        (("ge",), "greater_equal", lambda x, y: x >= y),
        (("logical_and",), "logical_and", lambda x, y: x and y),
        (("logical_or",), "logical_or", lambda x, y: x or y),
        (("logical_xor",), "logical_xor", lambda x, y: bool(x) != bool(y))):
    for _name in _names:
        CONVERTERS[_name] = _binary_op(_op, _py)


def _bitwise(ember_op, python_op):
    """bitwise and/or/xor and the shifts of integer (and/or/xor also bool) tensors."""
    def convert(cx, a):
        x, y = a[0], a[1]
        if not isinstance(x, Expr) and not isinstance(y, Expr):
            return python_op(x, y)
        x, y = _promote(cx, x, y)
        if x.dtype == "bool" and ember_op in _LOGICAL:
            return cx.emit(_LOGICAL[ember_op], [x, y])  # as bitwise_not: the logical op
        return cx.emit(ember_op, [x, y])
    return convert


_LOGICAL = {"bitwise_and": "logical_and", "bitwise_or": "logical_or",
            "bitwise_xor": "logical_xor"}


for _names, _op, _py in ((("bitwise_and", "__and__"), "bitwise_and", lambda x, y: x & y),
                         (("bitwise_or", "__or__"), "bitwise_or", lambda x, y: x | y),
                         (("bitwise_xor", "__xor__"), "bitwise_xor", lambda x, y: x ^ y),
                         (("bitwise_left_shift", "__lshift__"), "left_shift",
                          lambda x, y: x << y),
                         (("bitwise_right_shift", "__rshift__"), "right_shift",
                          lambda x, y: x >> y)):
    for _name in _names:
        CONVERTERS[_name] = _bitwise(_op, _py)


@converts("where")
def _where(cx, a):
    cond, x, y = a[0], a[1], a[2]
    if x is None:
        raise EmberError("torch.where(condition) with one argument (nonzero) has a "
                         "data-dependent shape and is not supported")
    if not isinstance(x, Expr) and not isinstance(y, Expr):
        # where(mask, 0.0, -1e10) (LongT5's local attention mask): two numbers become
        # tensors of the wider of their dtypes
        dtype = max(scalar_dtype(x), scalar_dtype(y), key=_PROMOTION.index)
        x, y = cx.const(x, dtype), cx.const(y, dtype)
    x, y = _promote(cx, x, y)
    if cond.dtype != "bool":
        cond = cx.emit("not_equal", [cond, cx.const(0, cond.dtype)])
    return cx.emit("where", [cond, x, y])


@converts("masked_fill")
def _masked_fill(cx, a):
    x, mask, value = a[0], a[1], a[2]
    if isinstance(value, Expr):
        value = cast(cx, value, x.dtype)
    else:
        value = cx.const(value, x.dtype)
    return cx.emit("where", [mask, value, x])


# ----------------------------------------------------------------- identities and casts

def _identity(cx, a):
    return a[0]


for _name in ("contiguous", "clone", "detach", "alias", "lift_fresh_copy", "lift_fresh",
              "resolve_conj", "resolve_neg", "positive"):
    CONVERTERS[_name] = _identity


def _check_eval_dropout(a):
    train = a["train"] if a.has("train") else None
    if train:
        raise EmberError(f"{a.op} in training mode (random) is not supported: call "
                         "model.eval() first")


@converts("dropout", "feature_dropout", "alpha_dropout", "feature_alpha_dropout")
def _dropout(cx, a):
    _check_eval_dropout(a)
    return a[0]


@converts("native_dropout")
def _native_dropout(cx, a):
    _check_eval_dropout(a)
    return [a[0], None]


@converts("_assert_tensor_metadata", "_assert_scalar", "sym_constrain_range_for_size",
          "_assert_async")
def _no_op(cx, a):
    return None


@converts("to", "_to_copy", "type_as", "_to_dim_order_copy")
def _to(cx, a):
    x = a[0]
    dtype = a["dtype"]
    if a.has("other") and isinstance(a["other"], Expr):
        dtype = a["other"].dtype
    if dtype is None:
        for v in a.values[1:]:  # TorchScript's aten::to overloads put the dtype anywhere
            if isinstance(v, torch.dtype):
                dtype = v
                break
    if dtype is None:
        return x
    if not isinstance(x, Expr):
        return torch.tensor(x, dtype=_SCALAR_TYPES.get(dtype, dtype)).item()
    return cast(cx, x, dtype if isinstance(dtype, str) else dtype_name(dtype))


# ------------------------------------------------------------- scalars (TorchScript traces)

@converts("size", "sym_size")
def _size(cx, a):
    shape = list(a[0].shape)
    return shape if a[1] is None else shape[_axis(a[1], len(shape))]


@converts("is_contiguous", "sym_is_contiguous")
def _is_contiguous(cx, a):
    return True  # an Ember tensor is a value: always laid out densely


@converts("dim")
def _dim(cx, a):
    return len(a[0].shape)


@converts("numel", "sym_numel")
def _numel(cx, a):
    return int(np.prod(a[0].shape))


@converts("Int", "Float", "ScalarImplicit", "item", "Bool", "_local_scalar_dense")
def _scalar(cx, a):
    x = a[0]
    if isinstance(x, Constant):
        return np.asarray(x.value).item()
    if isinstance(x, Expr):
        raise EmberError("a tensor value is read as a Python number (.item(), int(tensor)): "
                         "the graph would depend on data; keep it a tensor")
    return x


@converts("__getitem__")
def _list_getitem(cx, a):
    return a[0][a[1]]


@converts("len")
def _len(cx, a):
    return len(a[0])


# ------------------------------------------------------------------ constant-like tensors

def _fill(shape, value, dtype, cx, like=None):
    if dtype is None:
        dtype = like.dtype if like is not None else scalar_dtype(value)
    elif not isinstance(dtype, str):
        dtype = dtype_name(dtype)
    return cx.const(np.full([int(s) for s in shape], value), dtype)


@converts("zeros_like")
def _zeros_like(cx, a):
    return _fill(a[0].shape, 0, a["dtype"], cx, a[0])


@converts("ones_like")
def _ones_like(cx, a):
    return _fill(a[0].shape, 1, a["dtype"], cx, a[0])


@converts("full_like")
def _full_like(cx, a):
    return _fill(a[0].shape, a[1], a["dtype"], cx, a[0])


@converts("new_zeros")
def _new_zeros(cx, a):
    return _fill(a[1], 0, a["dtype"], cx, a[0])


@converts("new_ones")
def _new_ones(cx, a):
    return _fill(a[1], 1, a["dtype"], cx, a[0])


@converts("new_full")
def _new_full(cx, a):
    return _fill(a[1], a[2], a["dtype"], cx, a[0])


# ------------------------------------------------------------------------ linear algebra

@converts("addmm")
def _addmm(cx, a):
    bias, beta, alpha = a[0], a["beta"], a["alpha"]
    y = matmul(cx, a[1], a[2])
    if alpha not in (None, 1):
        y = binary(cx, "multiply", y, alpha)
    if beta not in (None, 1):
        bias = binary(cx, "multiply", bias, beta)
    if len(bias.shape) == 1 and bias.shape[0] == y.shape[-1]:
        return cx.emit("nn.bias_add", [y, bias], axis=len(y.shape) - 1)
    return binary(cx, "add", y, bias)


@converts("mm", "matmul", "bmm")
def _matmul(cx, a):
    return matmul(cx, a[0], a[1])


@converts("_grouped_mm", "transformers::grouped_mm_fallback")
def _grouped_mm(cx, a):
    """Grouped matmul (mixture-of-experts layers) -> nn.grouped_matmul: rows
    offs[g-1]:offs[g] of x [S, K] times w[g] [K, N]; rows past the last offset are zero.
    Each row is multiplied by its own group's matrix only (the op reads the offsets at run
    time). Offsets that torch would reject (unsorted, outside [0, S]) are clamped by the op:
    each group ends at the running maximum of the offsets, within [0, S]."""
    x, w, offs = a[0], a[1], a[2]
    if len(x.shape) != 2 or len(w.shape) != 3 or offs is None:
        raise EmberError("grouped matmul is supported for a 2-D input, 3-D weights and "
                         "offsets (the mixture-of-experts form) only")
    if a["bias"] is not None or a["out_dtype"] is not None:
        raise EmberError("grouped matmul with a bias or out_dtype is not supported")
    if offs.dtype not in ("int32", "int64"):
        offs = cast(cx, offs, "int64")
    return cx.emit("nn.grouped_matmul", [x, w, offs])


@converts("baddbmm")
def _baddbmm(cx, a):
    return CONVERTERS["addmm"](cx, a)


@converts("t", "numpy_T")
def _t(cx, a):
    x = a[0]
    return x if len(x.shape) < 2 else transpose(cx, x, list(range(len(x.shape)))[::-1])


@converts("transpose", "swapaxes", "swapdims")
def _transpose(cx, a):
    x = a[0]
    axes = list(range(len(x.shape)))
    i, j = _axis(a[1], len(axes)), _axis(a[2], len(axes))
    axes[i], axes[j] = axes[j], axes[i]
    return transpose(cx, x, axes)


@converts("permute")
def _permute(cx, a):
    return transpose(cx, a[0], _axes(a[1], len(a[0].shape)))


@converts("movedim")
def _movedim(cx, a):
    x = a[0]
    rank = len(x.shape)
    src, dst = _axes(a[1], rank), _axes(a[2], rank)
    rest = [d for d in range(rank) if d not in src]
    order = [None] * rank
    for s, d in zip(src, dst):
        order[d] = s
    it = iter(rest)
    return transpose(cx, x, [o if o is not None else next(it) for o in order])


# ------------------------------------------------------------------------------- shapes

def _infer_shape(shape, total):
    shape = [int(s) for s in shape]
    if -1 in shape:
        known = int(np.prod([s for s in shape if s != -1]))
        shape[shape.index(-1)] = total // known if known else 0
    return shape


@converts("view", "reshape", "_unsafe_view", "view_copy", "_reshape_alias", "view_as",
          "reshape_as")
def _reshape(cx, a):
    x, shape = a[0], a[1]
    if isinstance(shape, Expr):  # view_as / reshape_as
        shape = shape.shape
    if isinstance(shape, torch.dtype):
        raise EmberError("view(dtype) reinterprets memory and is not supported")
    return reshape(cx, x, _infer_shape(shape, int(np.prod(x.shape))))


@converts("flatten")
def _flatten(cx, a):
    x = a[0]
    rank = len(x.shape)
    if rank == 0:
        return reshape(cx, x, [1])
    start, end = _axis(a[1] if a[1] is not None else 0, rank), _axis(
        a[2] if a[2] is not None else -1, rank)
    shape = list(x.shape[:start]) + [int(np.prod(x.shape[start:end + 1]))] + list(
        x.shape[end + 1:])
    return reshape(cx, x, shape)


@converts("unflatten")
def _unflatten(cx, a):
    x = a[0]
    axis = _axis(a[1], len(x.shape))
    sizes = _infer_shape(a[2], x.shape[axis])
    return reshape(cx, x, list(x.shape[:axis]) + sizes + list(x.shape[axis + 1:]))


@converts("unsqueeze")
def _unsqueeze(cx, a):
    x = a[0]
    axis = _axis(a[1], len(x.shape) + 1)
    return reshape(cx, x, list(x.shape[:axis]) + [1] + list(x.shape[axis:]))


@converts("squeeze")
def _squeeze(cx, a):
    x = a[0]
    dims = _axes(a[1], len(x.shape)) if a[1] is not None else range(len(x.shape))
    return reshape(cx, x, [s for i, s in enumerate(x.shape) if not (i in dims and s == 1)])


@converts("expand", "expand_as", "broadcast_to")
def _expand(cx, a):
    x, shape = a[0], a[1]
    shape = list(shape.shape if isinstance(shape, Expr) else shape)
    lead = len(shape) - len(x.shape)
    shape = [x.shape[i - lead] if s == -1 else s for i, s in enumerate(shape)]
    if lead > 0:
        x = reshape(cx, x, [1] * lead + list(x.shape))
    return broadcast_to(cx, x, shape)


@converts("repeat")
def _repeat(cx, a):
    x, repeats = a[0], list(a[1])
    shape = [1] * (len(repeats) - len(x.shape)) + list(x.shape)
    # [s0, s1] repeated [r0, r1]: view as [1, s0, 1, s1], broadcast to [r0, s0, r1, s1],
    # and merge each pair.
    x = reshape(cx, x, [d for s in shape for d in (1, s)])
    x = broadcast_to(cx, x, [d for r, s in zip(repeats, shape) for d in (r, s)])
    return reshape(cx, x, [r * s for r, s in zip(repeats, shape)])


@converts("cat", "concat", "concatenate")
def _cat(cx, a):
    tensors = [t for t in a[0] if not (len(t.shape) == 1 and t.shape[0] == 0)]
    if not tensors:
        raise EmberError("cat of only empty tensors")
    dtype = max((t.dtype for t in tensors), key=_PROMOTION.index)
    tensors = [cast(cx, t, dtype) for t in tensors]
    if len(tensors) == 1:
        return tensors[0]
    return cx.emit("concatenate", tensors, axis=_axis(a[1] or 0, len(tensors[0].shape)))


@converts("stack")
def _stack(cx, a):
    tensors = list(a[0])
    axis = _axis(a[1] or 0, len(tensors[0].shape) + 1)
    tensors = [reshape(cx, t, list(t.shape[:axis]) + [1] + list(t.shape[axis:]))
               for t in tensors]
    return tensors[0] if len(tensors) == 1 else cx.emit("concatenate", tensors, axis=axis)


def split(cx, x, sizes, axis):
    out, begin = [], 0
    for size in sizes:
        out.append(slice_axis(cx, x, axis, begin, begin + size))
        begin += size
    return out


@converts("split", "unsafe_split", "split_with_sizes", "unsafe_split_with_sizes")
def _split_op(cx, a):
    x = a[0]
    axis = _axis(a[2] if a[2] is not None else 0, len(x.shape))
    length = x.shape[axis]
    size = a[1]
    if isinstance(size, int):
        sizes = [min(size, length - i) for i in range(0, length, size)] if size else [0]
    else:
        sizes = list(size)
    return split(cx, x, sizes, axis)


@converts("chunk", "unsafe_chunk")
def _chunk(cx, a):
    x = a[0]
    axis = _axis(a[2] if a[2] is not None else 0, len(x.shape))
    length = x.shape[axis]
    size = -(-length // a[1])  # torch: every chunk but the last has ceil(length / chunks)
    return split(cx, x, [min(size, length - i) for i in range(0, length, size)], axis)


@converts("unbind")
def _unbind(cx, a):
    x = a[0]
    axis = _axis(a[1] or 0, len(x.shape))
    shape = list(x.shape[:axis]) + list(x.shape[axis + 1:])
    return [reshape(cx, s, shape) for s in split(cx, x, [1] * x.shape[axis], axis)]


def _bound(index, length, default):
    if index is None:
        return default
    index = int(index)
    if index < 0:
        index += length
    return min(max(index, 0), length)


@converts("slice")
def _slice(cx, a):
    x = a[0]
    if not isinstance(x, Expr):  # a Python list (TorchScript list slicing)
        return x[a[1]:a[2]:a[3]]
    axis = _axis(a[1] or 0, len(x.shape))
    length = x.shape[axis]
    begin = _bound(a[2], length, 0)
    end = max(_bound(a[3], length, length), begin)
    step = a[4] or 1
    return slice_axis(cx, x, axis, begin, end, step)


@converts("narrow")
def _narrow(cx, a):
    x = a[0]
    axis = _axis(a[1], len(x.shape))
    begin = _bound(a[2], x.shape[axis], 0)
    return slice_axis(cx, x, axis, begin, begin + a[3])


@converts("select")
def _select(cx, a):
    x = a[0]
    axis = _axis(a[1], len(x.shape))
    index = int(a[2]) % x.shape[axis]
    y = slice_axis(cx, x, axis, index, index + 1)
    return reshape(cx, y, list(x.shape[:axis]) + list(x.shape[axis + 1:]))


@converts("index_select")
def _index_select(cx, a):
    # torch's index_select refuses negative indices (x[idx] wraps them: see _index)
    return cx.emit("take", [a[0], a[2]], axis=_axis(a[1], len(a[0].shape)), allow_negative=0)


@converts("gather")
def _gather(cx, a):
    if len(a[0].shape) == 0:
        raise EmberError("gather of a 0-dimensional tensor is not supported; reshape it to (1,)")
    return cx.emit("gather", [a[0], a[2]], axis=_axis(a[1], len(a[0].shape)))


@converts("index")
def _index(cx, a):
    x, indices = a[0], list(a[1])
    used = [i for i, t in enumerate(indices) if t is not None]
    if any(indices[i].dtype == "bool" for i in used):
        raise EmberError("boolean mask indexing (x[mask]) has a data-dependent shape and "
                         "is not supported; use torch.where or masked_fill instead")
    tensors = [indices[i] for i in used]
    if len(used) == 1:
        return cx.emit("take", [x, tensors[0]], axis=used[0])
    if used == list(range(used[0], used[0] + len(used))):  # adjacent: the result's dims there
        return cx.emit("adv_index", [x, *tensors], axis=used[0])
    # Apart, PyTorch puts the indices' broadcast dims first: index the axes moved to the front.
    rest = [d for d in range(len(x.shape)) if d not in used]
    return cx.emit("adv_index", [cx.emit("transpose", [x], axes=used + rest), *tensors], axis=0)


@converts("embedding")
def _embedding(cx, a):
    return cx.emit("take", [a[0], a[1]], axis=0, allow_negative=0)  # as torch: no wrapping


def take_const(cx, x, axis, index):
    """x's slices along axis at constant positions `index` (a NumPy integer vector)."""
    if np.array_equal(index, np.arange(x.shape[axis])):
        return x
    return cx.emit("take", [x, cx.const(np.asarray(index, np.int64), "int64")], axis=axis)


@converts("flip")
def _flip(cx, a):
    x = a[0]
    for axis in _axes(a["dims"], len(x.shape)):
        x = take_const(cx, x, axis, np.arange(x.shape[axis] - 1, -1, -1))
    return x


@converts("tril", "triu")
def _triangle(cx, a):
    """The lower (tril) or upper (triu) triangle of the last two dimensions, counted from
    diagonal `diagonal`; the rest zero."""
    x, diagonal = a[0], int(a[1] or 0)
    if len(x.shape) < 2:
        raise EmberError(f"{a.op} takes a tensor of at least 2 dimensions, got {list(x.shape)}")
    rows, cols = x.shape[-2:]
    offset = np.arange(cols)[None, :] - np.arange(rows)[:, None]
    keep = offset <= diagonal if a.op == "tril" else offset >= diagonal
    zero = cx.const(False if x.dtype == "bool" else 0, x.dtype)
    return cx.emit("where", [cx.const(keep, "bool"), x, zero])


@converts("unfold")
def _unfold(cx, a):
    """Tensor.unfold(dim, size, step): the windows x[.., i * step : i * step + size, ..] along
    dim, which becomes the window count, each window's elements a new last axis."""
    x, size, step = a[0], int(a[2]), int(a[3])
    rank = max(len(x.shape), 1)
    x = reshape(cx, x, [1]) if not x.shape else x
    axis = _axis(a[1], rank)
    if size > x.shape[axis] or step < 1:
        raise EmberError(f"unfold: a window of {size} with step {step} does not fit in "
                         f"dimension {axis} of size {x.shape[axis]}")
    windows = (x.shape[axis] - size) // step + 1
    index = np.arange(windows)[:, None] * step + np.arange(size)[None, :]
    y = take_const(cx, x, axis, index.reshape(-1))
    shape = list(x.shape)
    y = reshape(cx, y, shape[:axis] + [windows, size] + shape[axis + 1:])
    order = list(range(axis + 1)) + list(range(axis + 2, rank + 1)) + [axis + 1]
    return transpose(cx, y, order)


@converts("diagonal")
def _diagonal(cx, a):
    """The diagonal of the dim1 x dim2 matrices, last: take of the flattened matrices."""
    x, offset = a[0], int(a["offset"] or 0)
    rank = len(x.shape)
    d1, d2 = _axis(a["dim1"] or 0, rank), _axis(1 if a["dim2"] is None else a["dim2"], rank)
    if d1 == d2:
        raise EmberError(f"diagonal: dim1 and dim2 are both dimension {d1}")
    rest = [d for d in range(rank) if d not in (d1, d2)]
    n, m = x.shape[d1], x.shape[d2]
    row, col = max(0, -offset), max(0, offset)
    length = min(n - row, m - col)
    if length <= 0:
        raise EmberError(f"diagonal {offset} of a {n}x{m} matrix is empty")
    flat = reshape(cx, transpose(cx, x, rest + [d1, d2]), [x.shape[d] for d in rest] + [n * m])
    steps = np.arange(length)
    return take_const(cx, flat, len(rest), (steps + row) * m + steps + col)


@converts("fill")
def _fill_op(cx, a):
    x, value = a[0], a[1]
    return CONVERTERS["copy"](cx, Args("copy", ["self", "src"], [x, value]))


@converts("slice_scatter")
def _slice_scatter(cx, a):
    """self with self[..., start:end:step, ...] (along dim) replaced by src."""
    x, src = a[0], a[1]
    axis = _axis(a["dim"] or 0, len(x.shape))
    n = x.shape[axis]
    begin = _bound(a["start"], n, 0)
    positions = np.arange(begin, max(_bound(a["end"], n, n), begin), a["step"] or 1)
    expected = list(x.shape[:axis]) + [len(positions)] + list(x.shape[axis + 1:])
    if list(src.shape) != expected:
        raise EmberError(f"slice_scatter: src has shape {list(src.shape)}, the slice "
                         f"{expected}")
    src = cast(cx, src, x.dtype)
    if len(positions) == 0:
        return x
    if len(positions) == n:
        return src
    # Every position reads src at its slot in the slice (0 outside it), then picks.
    slot = np.zeros(n, np.int64)
    slot[positions] = np.arange(len(positions))
    inside = np.zeros([n] + [1] * (len(x.shape) - axis - 1), bool)
    inside[positions] = True
    spread = take_const(cx, src, axis, slot)
    return cx.emit("where", [cx.const(inside, "bool"), spread, x])


@converts("select_scatter")
def _select_scatter(cx, a):
    x, src = a[0], a[1]
    axis = _axis(a["dim"], len(x.shape))
    index = int(a["index"]) % x.shape[axis]
    src = reshape(cx, src, list(x.shape[:axis]) + [1] + list(x.shape[axis + 1:]))
    return _slice_scatter(cx, Args("slice_scatter", ["self", "src", "dim", "start", "end"],
                                   [x, src, axis, index, index + 1]))


def _pad_index(n, before, after, mode):
    """The source position of each padded position along one axis. A negative width crops
    first, as torch does, and the rest pads the cropped axis."""
    if before < 0 or after < 0:
        kept = np.arange(max(-before, 0), n - max(-after, 0))
        return kept[_pad_index(len(kept), max(before, 0), max(after, 0), mode)]
    if mode == "reflect" and (before >= n or after >= n):
        raise EmberError(f"reflect padding ({before}, {after}) must be smaller than the "
                         f"dimension it pads ({n})")
    if mode == "circular" and (before > n or after > n):
        raise EmberError(f"circular padding ({before}, {after}) must not exceed the "
                         f"dimension it pads ({n})")
    i = np.arange(-before, n + after)
    if mode == "replicate":
        return np.clip(i, 0, n - 1)
    if mode == "circular":
        return i % n
    period = 2 * (n - 1)  # reflect: ... 2 1 | 0 1 2 ... n-1 | n-2 n-3 ...
    i = np.abs(i) % period if period else np.zeros_like(i)
    return np.where(i >= n, period - i, i)


@converts("constant_pad_nd", "pad", "reflection_pad1d", "reflection_pad2d",
          "reflection_pad3d", "replication_pad1d", "replication_pad2d", "replication_pad3d",
          "_pad_circular")
def _pad(cx, a):
    x, pad = a[0], list(a[1])
    mode = a["mode"] if a.has("mode") else "constant"
    mode = {"reflection": "reflect", "replication": "replicate", "_pad": "circular"}.get(
        a.op.rsplit("_", 1)[0], mode or "constant")
    if mode not in ("constant", "reflect", "replicate", "circular"):
        raise EmberError(f"padding mode '{mode}' is not supported; Ember pads with "
                         "constant, reflect, replicate and circular")
    rank = len(x.shape)
    width = [0] * (2 * rank)
    for i in range(len(pad) // 2):  # torch lists (before, after) pairs from the last dim
        axis = rank - 1 - i
        width[2 * axis], width[2 * axis + 1] = pad[2 * i], pad[2 * i + 1]
    if mode != "constant":
        for axis in range(rank):
            before, after = width[2 * axis], width[2 * axis + 1]
            if before or after:
                x = take_const(cx, x, axis, _pad_index(x.shape[axis], before, after, mode))
        return x
    value = a["value"] or 0.0
    return cx.emit("nn.pad", [x], pad_width=width, pad_value=float(value),
                   pad_mode="constant")


# ---------------------------------------------------------------------------- reductions

def _reduce(ember_op):
    def convert(cx, a):
        x = a[0]
        dims = a["dim"] if a.has("dim") else None
        axes = _axes(dims, len(x.shape))
        if a["dtype"] is not None:
            x = cast(cx, x, dtype_name(a["dtype"]))
        elif ember_op == "sum" and not _is_float(x.dtype):
            x = cast(cx, x, "int64")  # torch sums integers and bools in int64
        if ember_op == "mean" and not _is_float(x.dtype):
            raise EmberError("mean of an integer tensor: pass dtype=torch.float32")
        return cx.emit(ember_op, [x], axis=axes, keepdims=int(bool(a["keepdim"])))
    return convert


CONVERTERS["sum"] = _reduce("sum")
CONVERTERS["mean"] = _reduce("mean")
CONVERTERS["amax"] = _reduce("max")
CONVERTERS["amin"] = _reduce("min")


def _max_min(ember_op, python_op):
    def convert(cx, a):
        x, other = a[0], a[1]
        if isinstance(other, Expr) or (other is not None and not isinstance(x, Expr)):
            return _binary_op("maximum" if ember_op == "max" else "minimum", python_op)(cx, a)
        if other is None:  # max(x): all elements
            return cx.emit(ember_op, [x], axis=[], keepdims=0)
        axis = _axis(other, len(x.shape))  # max.dim returns (values, indices)
        values = cx.emit(ember_op, [x], axis=[axis], keepdims=int(bool(a["keepdim"])))
        return [values, arg_best(cx, x, axis, a["keepdim"], ember_op == "max")]
    return convert


CONVERTERS["max"] = _max_min("max", max)
CONVERTERS["min"] = _max_min("min", min)


def arg_best(cx, x, dim, keepdim, largest):
    """argmax (largest) or argmin of x along dim (None: of the flattened x), as the index of
    a top-1: among equal values topk gives the lower index, as torch does, and NaN wins
    (argmin is argmax of -x on floats, so NaN wins there too, as in torch)."""
    rank = len(x.shape)
    if x.dtype == "bool":
        x = cast(cx, x, "int32")
    if not largest and _is_float(x.dtype):
        x, largest = cx.emit("negative", [x]), True
    if dim is None or rank == 0:
        flat = reshape(cx, x, [int(np.prod(x.shape, dtype=np.int64))])
        t = cx.emit("topk", [flat], k=1, axis=0, largest=int(largest), sorted=1)
        return reshape(cx, ir.TupleGetItem(t, 1, cx.name), [1] * rank if keepdim else [])
    axis = _axis(dim, rank)
    t = cx.emit("topk", [x], k=1, axis=axis, largest=int(largest), sorted=1)
    index = ir.TupleGetItem(t, 1, cx.name)
    return index if keepdim else reshape(cx, index, x.shape[:axis] + x.shape[axis + 1:])


@converts("argmax", "argmin")
def _argmax(cx, a):
    return arg_best(cx, a[0], a["dim"], bool(a["keepdim"]), a.op == "argmax")


@converts("any", "all")
def _any_all(cx, a):
    """any / all: the max / min of x != 0 (over dims, or every element)."""
    x = a[0]
    if x.dtype != "bool":
        x = cx.emit("not_equal", [x, cx.const(0, x.dtype)])
    dims = a["dim"] if a.has("dim") else None
    axes = _axes(dims, len(x.shape))
    y = cx.emit("max" if a.op == "any" else "min", [cast(cx, x, "int32")], axis=axes,
                keepdims=int(bool(a["keepdim"])))
    return cast(cx, y, "bool")


@converts("sort", "argsort")
def _sort(cx, a):
    """sort / argsort along dim as a top-k of the whole axis. topk keeps equal values in
    index order, so the result is also torch's stable=True order; NaN sorts last ascending
    and first descending, as in torch. The kernel is an insertion sort, O(n^2) per row in
    the worst case: fine for the short rows of routing and beam search, slow for long ones."""
    x = a[0]
    rank = len(x.shape)
    if rank == 0:
        return [x, cx.const(np.array(0), "int64")] if a.op == "sort" else \
            cx.const(np.array(0), "int64")
    axis = _axis(a["dim"] if a["dim"] is not None else -1, rank)
    source = cast(cx, x, "int32") if x.dtype == "bool" else x
    t = cx.emit("topk", [source], k=x.shape[axis], axis=axis,
                largest=int(bool(a["descending"])), sorted=1)
    values, indices = (ir.TupleGetItem(t, i, cx.name) for i in range(2))
    return [cast(cx, values, x.dtype), indices] if a.op == "sort" else indices


@converts("histc")
def _histc(cx, a):
    """torch.histc with a given range: each element's bin, (x - min) * bins / (max - min)
    truncated as torch computes it (x == max goes to the last bin, elements outside the range
    and NaN to none), compared with every bin index and counted. Output in x's dtype."""
    x, bins = a[0], int(a["bins"])
    low, high = float(a["min"]), float(a["max"])
    if low == high:
        raise EmberError("histc without a range (min == max) takes its range from the data; "
                         "pass min and max")
    if not _is_float(x.dtype):
        raise EmberError(f"histc of a {x.dtype} tensor: torch takes floating-point input only")
    flat = reshape(cx, x, [int(np.prod(x.shape, dtype=np.int64)), 1])
    scaled = binary(cx, "divide", binary(cx, "multiply", binary(cx, "subtract", flat, low),
                                         float(bins)), high - low)
    index = binary(cx, "minimum", cast(cx, cx.emit("floor", [scaled]), "int32"), bins - 1)
    inside = binary(cx, "logical_and", binary(cx, "greater_equal", flat, low),
                    binary(cx, "less_equal", flat, high))
    hit = binary(cx, "logical_and", inside,
                 binary(cx, "equal", index, cx.const(np.arange(bins)[None, :], "int32")))
    return cx.emit("sum", [cast(cx, hit, x.dtype)], axis=[0], keepdims=0)


@converts("topk")
def _topk(cx, a):
    """torch.topk -> [values, indices]: the two fields of one topk call."""
    x, k, rank = a[0], int(a["k"]), len(a[0].shape)
    flags = {key: int(True if a[key] is None else bool(a[key])) for key in ("largest", "sorted")}
    if rank == 0:  # torch takes the top 1 of a scalar along dim 0 or -1
        _axis(a["dim"] if a["dim"] is not None else 0, 1)
        t = cx.emit("topk", [reshape(cx, x, [1])], k=k, axis=0, **flags)
        return [reshape(cx, ir.TupleGetItem(t, i, cx.name), []) for i in range(2)]
    axis = _axis(a["dim"] if a["dim"] is not None else -1, rank)
    t = cx.emit("topk", [x], k=k, axis=axis, **flags)
    return [ir.TupleGetItem(t, i, cx.name) for i in range(2)]


@converts("cumsum")
def _cumsum(cx, a):
    """torch.cumsum(x, dim, dtype=None): with a dtype, x is cast to it first, as torch does."""
    x = a[0]
    if a.has("dtype") and a["dtype"] is not None:
        x = cast(cx, x, dtype_name(a["dtype"]))
    rank = len(x.shape)
    if rank == 0:  # torch sums a scalar along dim 0 or -1: itself (integers become int64)
        _axis(a["dim"], 1)
        return reshape(cx, cx.emit("cumsum", [reshape(cx, x, [1])], axis=0), [])
    return cx.emit("cumsum", [x], axis=_axis(a["dim"], rank))


@converts("var", "std")
def _var(cx, a):
    x = a[0]
    axes = _axes(a["dim"], len(x.shape))
    correction = a["correction"] if a.has("correction") else None
    if correction is None:
        unbiased = a["unbiased"] if a.has("unbiased") else None
        correction = 1 if unbiased in (None, True) else 0
    count = int(np.prod([x.shape[i] for i in (axes or range(len(x.shape)))]))
    mean = cx.emit("mean", [x], axis=axes, keepdims=1)
    centered = cx.emit("subtract", [x, mean])
    total = cx.emit("sum", [cx.emit("multiply", [centered, centered])], axis=axes,
                    keepdims=int(bool(a["keepdim"])))
    out = binary(cx, "divide", total, float(max(count - correction, 0)))
    return cx.emit("sqrt", [out]) if a.op == "std" else out


from . import _aten_nn  # noqa: E402,F401  (registers the layer converters)
from . import _aten_conv  # noqa: E402,F401  (registers the convolution converters)
from . import _aten_grid_sample  # noqa: E402,F401  (registers F.grid_sample's converter)
from . import _aten_einsum  # noqa: E402,F401  (registers torch.einsum's converter)
from . import _aten_fft  # noqa: E402,F401  (registers torch.fft's converters)
from . import _aten_activations  # noqa: E402,F401  (registers the activation converters)
from . import _aten_resize  # noqa: E402,F401  (registers the interpolation converters)
from . import _aten_scatter  # noqa: E402,F401  (registers the scatter converters)
