"""The ATen converter registry, below every converter module (_aten_*.py) and the importers:
the table CONVERTERS that @converts fills, the ops refused and why (REFUSED), the Converter
that runs one import (it looks each call up in the table), the values an import passes
around (WeightRef, Complex, TorchValue, Unavailable, MISSING) and the helpers converters
build Ember nodes with. The table is complete once _aten.py, which imports every converter
module, is imported.

A converter gets the Converter `cx` (which names every node it makes after the PyTorch
module being converted) and the call's arguments `a`, by schema name or position, with
defaults filled in. Tensors arrive as Ember expressions, everything else as Python values.
It returns an expression, a Python value (shape arithmetic in traced graphs), or a list for
ops with several outputs. Shapes are static, so shape logic runs here in Python.
"""
import numbers

import numpy as np
import torch

from .. import _ember, ir
from .._ember import Constant, EmberError, Expr
from ._sizes import as_size, bind_sizes, broadcast_shape, is_dim, prod, surely

CONVERTERS = {}

# TorchScript passes a dtype as its ScalarType code.
_SCALAR_TYPES = {0: torch.uint8, 1: torch.int8, 2: torch.int16, 3: torch.int32, 4: torch.int64,
                 5: torch.float16, 6: torch.float32, 7: torch.float64, 11: torch.bool,
                 15: torch.bfloat16}
# Type promotion order of Ember's dtypes (torch's, restricted to them; promoted() handles
# the one pair it does not order, uint8 with int8).
_PROMOTION = ["bool", "uint8", "int8", "int32", "int64", "bfloat16", "float32", "float64"]


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
        self.meta_shape = None  # the node's shape as torch.export typed it (may hold Dims)

    # ----------------------------------------------------------------- making nodes
    def emit(self, op, args, **attrs):
        return _ember.call(op, list(args), attrs, self.name)

    def const(self, value, dtype="float32"):
        if dtype == "bfloat16":  # NumPy has no bfloat16: float32's, cast (FoldConstant folds it)
            return self.emit("cast", [self.const(value, "float32")], dtype=dtype)
        try:
            if dtype in ("int8", "uint8") and isinstance(value, int):
                value = np.asarray(value).astype(dtype)  # torch wraps a number into them
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
            # bfloat16 (NumPy has none) stays a torch tensor: ember.build takes it through
            # DLPack.
            bf16 = tensor.dtype == torch.bfloat16
            array = tensor.contiguous() if bf16 else \
                np.asarray(tensor.numpy(), order="C") if tensor.dtype != torch.float16 else None
            # int16 widens to int32, which holds its values (Ember has no int16).
            if array is not None and not bf16 and array.dtype.name == "int16":
                array = array.astype(np.int32)
            dtype = "bfloat16" if bf16 else None if array is None else array.dtype.name
            if dtype not in _PROMOTION:
                raise EmberError(f"weight '{name}' has dtype {tensor.dtype}, which Ember does "
                                 "not support; convert the model with model.float() (or "
                                 "model.to(torch.bfloat16)) first")
            var = ir.var(name, tuple(array.shape), dtype)
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
            if constant and any(is_dim(v) for v in _flat(args.values)):
                return self._sized_constant(args, evaluate)
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

    def _sized_constant(self, args, evaluate):
        """A constant computed from run-time sizes (arange(seq), ones(batch, seq)): PyTorch
        computes it at the sizes' maxima, and each run reads its leading part. Checked at
        other sizes of the range: a value that is not the leading part of the largest one
        (linspace(0, 1, seq)) is an error, not a wrong result."""
        symbols = {}
        for v in _flat(args.values):
            if is_dim(v):
                symbols.update({name: (lo, hi) for name, lo, hi in v.symbols})
        probe = {name: hi if lo == hi else max(lo, min(hi - 1, 3)) for name, (lo, hi) in
                 symbols.items()}
        top = {name: hi for name, (lo, hi) in symbols.items()}
        largest = evaluate(self._to_torch(bind_sizes(args.values, top)))
        small = evaluate(self._to_torch(bind_sizes(args.values, probe)))
        if not isinstance(largest, torch.Tensor):
            raise EmberError(f"{args.op} computes a {type(largest).__name__} from sizes known "
                             "only at run time; Ember takes run-time sizes in tensors only")
        lead = tuple(slice(0, n) for n in small.shape)
        if small.dim() != largest.dim() or not torch.equal(largest[lead], small):
            raise EmberError(f"{args.op} computes from sizes known only at run time values "
                             "that change with them (not the leading part of its largest "
                             "result); build with static sizes for the inputs involved")
        y = self._from_torch(largest)
        shape = self.meta_shape or list(largest.shape)
        for axis, size in enumerate(shape):
            if is_dim(size):
                y = slice_axis(self, y, axis, 0, size)
        return y

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


def promoted(dtypes):
    """The dtype PyTorch promotes these Ember dtypes to (of tensors of the same rank kind)."""
    dtypes = set(dtypes)
    if {"uint8", "int8"} <= dtypes and not dtypes - {"bool", "uint8", "int8"}:
        raise EmberError("uint8 with int8: PyTorch promotes them to int16, which Ember does not "
                         "have; cast one of them to int32 first")
    return max(dtypes, key=_PROMOTION.index)


def _is_float(dtype):
    return dtype.startswith("float") or dtype == "bfloat16"


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
    shape = [as_size(s) for s in shape]
    return x if list(x.shape) == shape else cx.emit("reshape", [x], newshape=shape)


def transpose(cx, x, axes):
    axes = list(axes)
    return x if axes == list(range(len(axes))) else cx.emit("transpose", [x], axes=axes)


def swap_last(cx, x):
    axes = list(range(len(x.shape)))
    axes[-2], axes[-1] = axes[-1], axes[-2]
    return transpose(cx, x, axes)


def broadcast_to(cx, x, shape):
    shape = [as_size(s) for s in shape]
    return x if list(x.shape) == shape else cx.emit("broadcast_to", [x], shape=shape)


def slice_axis(cx, x, axis, begin, end, step=1):
    if begin == 0 and step == 1 and surely(lambda: end >= x.shape[axis]):
        return x
    return cx.emit("strided_slice", [x], begin=[begin], end=[end], strides=[step], axes=[axis])


def split(cx, x, sizes, axis):
    out, begin = [], 0
    for size in sizes:
        out.append(slice_axis(cx, x, axis, begin, begin + size))
        begin += size
    return out


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


def take_const(cx, x, axis, index):
    """x's slices along axis at constant positions `index` (a NumPy integer vector)."""
    if np.array_equal(index, np.arange(x.shape[axis])):
        return x
    return cx.emit("take", [x, cx.const(np.asarray(index, np.int64), "int64")], axis=axis)


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
    dtype = promoted((a.dtype, b.dtype))
    return cast(cx, a, dtype), cast(cx, b, dtype)


def _bf16_with_number(a, b):
    """Whether a binary op's operands are a bfloat16 tensor and a Python number."""
    for x, y in ((a, b), (b, a)):
        if isinstance(x, Expr) and x.dtype == "bfloat16" and isinstance(y, numbers.Number) \
                and not isinstance(y, bool):
            return True
    return False


def number_in_float32(convert):
    """A binary converter (operands a[0], a[1]) that computes a bfloat16 tensor with a Python
    number as torch does: in float32 with the number unrounded, the result rounded to
    bfloat16 (x * 0.1 multiplies by float32's 0.1, not bfloat16's 0.10009765625)."""
    def wrapped(cx, a):
        if not _bf16_with_number(a[0], a[1]):
            return convert(cx, a)
        values = [cast(cx, v, "float32") if isinstance(v, Expr) and v.dtype == "bfloat16"
                  else v for v in a.values]
        out = convert(cx, Args(a.op, a.names, values))
        return cast(cx, out, "bfloat16") if out.dtype == "float32" else out
    return wrapped


def binary(cx, op, a, b):
    if _bf16_with_number(a, b):  # see number_in_float32
        x = a if isinstance(a, Expr) else b
        f = cast(cx, x, "float32")
        out = binary(cx, op, f if a is x else a, f if b is x else b)
        return cast(cx, out, "bfloat16") if out.dtype == "float32" else out
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
    batch = broadcast_shape(a.shape[:-2], b.shape[:-2])
    a = broadcast_to(cx, a, batch + list(a.shape[-2:]))
    b = broadcast_to(cx, b, batch + list(b.shape[-2:]))
    if len(batch) == 1:
        return cx.emit("nn.batch_matmul", [a, b])
    n = prod(batch)
    out = cx.emit("nn.batch_matmul", [reshape(cx, a, [n] + list(a.shape[-2:])),
                                      reshape(cx, b, [n] + list(b.shape[-2:]))])
    return reshape(cx, out, batch + list(out.shape[-2:]))
