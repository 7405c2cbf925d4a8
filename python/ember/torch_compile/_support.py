"""Which ATen nodes Ember runs: the partitioner's OperatorSupport.

A node is supported when Ember's own converter turns it, on inputs of its real shapes and
dtypes, into Ember ops that pass Ember's type checks and give PyTorch's shape and dtype.
So the list of supported ops and every attribute limit (a padding mode, an integer fmod,
dropout in training mode) come from one place, the frontend; a rejected node stays in
PyTorch with the converter's message as the reason.
"""
import operator

import torch
from torch.fx.passes.operator_support import OperatorSupportBase

from .. import ir
from .._ember import EmberError, Expr
from ..frontend import _aten
from ..frontend.pytorch import _aten_name, _convert_node, fx_values

# Ops that only move or view data: a partition of these alone is left to PyTorch, where
# they cost nothing.
SHAPE_OPS = {"view", "reshape", "_unsafe_view", "permute", "transpose", "t", "expand",
             "unsqueeze", "squeeze", "clone", "contiguous", "alias", "detach", "slice",
             "select", "flatten", "unflatten", "view_copy", "split", "split_with_sizes",
             "chunk", "unbind", "lift_fresh_copy", "dropout", "_to_copy", "to"}


def _ember_dtype(value):
    try:
        _aten.dtype_name(value.dtype)
        return True
    except EmberError:
        return False


def is_size_node(node):
    """Does this node compute a size or check one (aten.sym_size, arithmetic on sizes,
    torch.export's run-time asserts), not a tensor? Such nodes stay in PyTorch, where they
    cost nothing, and an Ember partition takes the sizes it needs as ir.Dims."""
    val = node.meta.get("val")
    if isinstance(val, (torch.SymInt, torch.SymBool, int, bool)):
        return True
    return val is None and not any(isinstance(a.meta.get("val"), torch.Tensor)
                                   for a in node.all_input_nodes)


class EmberSupport(OperatorSupportBase):
    """is_node_supported by trial conversion; `reasons` maps each rejected node to why.
    `constants` maps placeholder nodes holding constant tensors (torch.export's lifted
    constants) to those tensors, which the converters may read; `symbols` (the frontend's
    Symbols) turns symbolic sizes into ir.Dims."""

    def __init__(self, constants, symbols):
        self.constants = constants
        self.symbols = symbols
        self.reasons = {}
        self._trials = {}  # node -> converted value (for getitem)

    def is_node_supported(self, submodules, node):
        if node.op != "call_function" or is_size_node(node):
            return False
        if node not in self._trials:
            try:
                self._trials[node] = self._trial(node)
            except EmberError as error:
                self._trials[node] = None
                self.reasons[node] = str(error)
        return self._trials[node] is not None

    def _trial(self, node):
        if node.target is operator.getitem:
            return self._trial_getitem(node)
        name = _aten_name(node.target)
        if name is None:
            raise EmberError(f"{node.target} is not an ATen operator")
        random = torch.Tag.nondeterministic_seeded in getattr(node.target, "tags", ())
        if random and name not in _aten.CONVERTERS:  # (dropout's converter checks its mode)
            raise EmberError("a random operator (Ember would freeze one sample)")
        for value in _flat_vals(node.meta.get("val")):
            if isinstance(value, torch.Tensor) and not _ember_dtype(value):
                raise EmberError(f"its result has dtype {value.dtype}, which Ember lacks")
        env = {}
        for arg in node.all_input_nodes:
            env[arg] = self._stand_in(arg)
        cx = _aten.Converter({})
        cx.symbols = self.symbols
        result = _convert_node(cx, node, env, fx_values(env))
        if cx.problems:
            op, _, detail = cx.problems[0]
            raise EmberError(detail or f"Ember does not support {op}")
        _check_like(result, node.meta.get("val"), self.symbols)
        return result

    def _trial_getitem(self, node):
        source = node.args[0]
        if not self.is_node_supported(None, source):
            raise EmberError("it reads an output of an op that runs in PyTorch")
        value = self._trials[source][node.args[1]]
        if not isinstance(value, Expr):
            raise EmberError(f"Ember does not compute output {node.args[1]} of {source.target}")
        return value

    def _stand_in(self, arg):
        """An Ember value for input `arg` of a trial: the constant itself, or a variable of
        its shape and dtype."""
        if arg in self.constants:
            return ir.const(self.constants[arg].detach().contiguous(), arg.name)
        val = arg.meta.get("val")
        if isinstance(val, torch.Tensor):
            if not _ember_dtype(val):
                raise EmberError(f"input '{arg.name}' has dtype {val.dtype}, which Ember lacks")
            return ir.var(arg.name, self.symbols.shape(val.shape), _aten.dtype_name(val.dtype))
        if isinstance(val, torch.SymInt):
            return self.symbols.size(val)  # a size computed in PyTorch (aten.sym_size)
        if isinstance(val, (list, tuple)) and arg.op == "call_function":
            # A multi-output producer (its outputs are read through getitem).
            raise EmberError(f"it takes the tuple result of {arg.target} whole")
        if val is None or isinstance(val, (int, float, bool)):
            return val
        raise EmberError(f"input '{arg.name}' is a {type(val).__name__}")


class ConcreteSizes:
    """The frontend's Symbols interface (size, shape) with every symbolic size evaluated at
    one call's sizes: EmberSupport with it says which nodes Ember would take at static
    sizes."""

    def __init__(self, binding):
        self.binding = binding  # sympy symbol -> int

    def size(self, value):
        if isinstance(value, torch.SymInt):
            return int(value.node.expr.xreplace(self.binding))
        return int(value)

    def shape(self, shape):
        return [self.size(s) for s in shape]


def _flat_vals(val):
    if isinstance(val, (list, tuple)):
        for v in val:
            yield from _flat_vals(v)
    else:
        yield val


def _check_like(result, val, symbols):
    """Ember's result must have PyTorch's shapes and dtypes (no silent difference)."""
    if isinstance(val, torch.Tensor):
        if not isinstance(result, Expr):
            raise EmberError("Ember's converter gives no tensor for it")
        want = (symbols.shape(val.shape), _aten.dtype_name(val.dtype))
        got = (list(result.shape), result.dtype)
        if want != got:
            raise EmberError(f"Ember's result would be {got[1]}{_str(got[0])}, PyTorch's is "
                             f"{want[1]}{_str(want[0])}")
    elif isinstance(val, (list, tuple)) and isinstance(result, (list, tuple)):
        for r, v in zip(result, val):
            if r is not None and isinstance(v, torch.Tensor):
                _check_like(r, v, symbols)


def _str(shape):
    return "[" + ", ".join(str(s) for s in shape) + "]"
