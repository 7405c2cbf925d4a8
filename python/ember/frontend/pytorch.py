"""Importing PyTorch models into Ember's graph IR.

    mod, params = ember.frontend.from_pytorch(model, example_inputs)
    lib = ember.build(mod, target="llvm", params=params)

`model` is an nn.Module (exported here with torch.export in eval mode), an ExportedProgram,
a torch.fx.GraphModule (exported the same way, so its call_module targets become the node
names) or a torch.jit.trace'd module (see _torchscript.py). Both paths walk an ATen graph
and hand each call to the converters of _aten.py's table (in _aten_*.py), which name every
Ember node after the PyTorch module it came from ("layer1.0.conv1").
"""
import inspect
import logging
import operator

import torch
from torch.export.graph_signature import InputKind, OutputKind

from .. import ir
from .._ember import EmberError, Expr
from . import _aten
from ._aten import MISSING, Converter, Unavailable, WeightRef, dtype_name
from ._inputs import check_input_names
from ._sizes import Symbols, is_dim
from ._torchscript import import_torchscript

__all__ = ["from_pytorch"]

logger = logging.getLogger("ember")


def from_pytorch(model, example_inputs, input_names=None, dynamic_shapes=None):
    """Converts a PyTorch model into (ir.Function, params).

    The function's first parameters are the model inputs, in example_inputs order, named
    after forward()'s arguments unless `input_names` is given; the remaining parameters are
    the weights and buffers, named by their state_dict keys, and `params` maps those names
    to NumPy arrays that share memory with the model's tensors (ember.build binds them as
    constants, copying them). example_inputs is a tensor or a tuple of tensors with the
    shapes and dtypes the compiled model will take.

    `dynamic_shapes` (torch.export's own form: torch.export.Dim("seq", min=1, max=512) per
    dimension that varies) builds for a range of shapes: the function's inputs then have
    sizes known only at run time (ir.Dim, named after the Dims), and one build serves every
    size in the ranges. An ExportedProgram exported with dynamic shapes imports the same way
    (its symbols named as torch names them unless dynamic_shapes names them).
    """
    inputs = _example_inputs(example_inputs, model)
    if isinstance(model, (torch.jit.ScriptModule, torch.jit.ScriptFunction)):
        if dynamic_shapes is not None:
            raise EmberError("from_pytorch: dynamic_shapes needs torch.export; a traced "
                             "(TorchScript) module has static shapes. Pass the nn.Module")
        cx, user_vars, outputs = import_torchscript(model, inputs, input_names)
    else:
        if isinstance(model, torch.export.ExportedProgram):
            program = model
        elif isinstance(model, torch.nn.Module):
            program = _export(model, inputs, dynamic_shapes)
        else:
            raise EmberError("from_pytorch: the model must be a torch.nn.Module, a "
                             "torch.export.ExportedProgram, a torch.fx.GraphModule or a "
                             f"torch.jit.trace'd module, got {type(model).__name__}")
        cx, user_vars, outputs = _import_exported(program, inputs, input_names, dynamic_shapes)
    return make_function(cx, user_vars, outputs)


def make_function(cx, user_vars, outputs):
    """The ir.Function and params of an import, or the one error listing every problem."""
    for i, out in enumerate(outputs):
        if isinstance(out, Unavailable):
            cx.problems.append(("output", f"output {i}", f"the model returns {out.what}, "
                                "which Ember does not compute"))
        elif isinstance(out, _aten.TorchValue):
            cx.problems.append(("output", f"output {i}", f"the model returns a {out.dtype} "
                                "tensor; Ember has no such dtype: return it as float32"))
        elif isinstance(out, _aten.Complex):
            cx.problems.append(("output", f"output {i}", "the model returns a complex tensor; "
                                "Ember's outputs are real: return torch.view_as_real(z), z.real "
                                "or z.abs()"))
        elif out is not MISSING and not isinstance(out, Expr):
            cx.problems.append(("output", f"output {i}", "the model returns a "
                                f"{type(out).__name__}, not a tensor; return tensors only"))
    error = cx.error()
    if error is not None:
        raise error
    if not outputs:
        raise EmberError("from_pytorch: the model returns no tensors")
    clash = [v.name for v in user_vars if v.name in cx.params]
    if clash:
        raise EmberError(f"from_pytorch: input name(s) {clash} are also weight names; pick "
                         "other names with input_names=[...]")
    body = outputs[0] if len(outputs) == 1 else ir.Tuple(list(outputs))
    return ir.Function(list(user_vars) + cx.weights, body), cx.params


def _example_inputs(example_inputs, model):
    if example_inputs is None and isinstance(model, torch.export.ExportedProgram):
        return None  # the program knows its input shapes
    if isinstance(example_inputs, torch.Tensor):
        example_inputs = (example_inputs,)
    if not isinstance(example_inputs, (tuple, list)) or not all(
            isinstance(t, torch.Tensor) for t in example_inputs):
        raise EmberError("from_pytorch: example_inputs must be a tensor or a tuple of tensors "
                         f"(one per forward() argument), got {type(example_inputs).__name__}")
    for i, t in enumerate(example_inputs):
        try:
            dtype_name(t.dtype)
        except EmberError as error:
            raise EmberError(f"from_pytorch: example input {i}: {error}") from None
    return tuple(t.detach() for t in example_inputs)


# ------------------------------------------------------------------------ torch.export

def _check_arity(model, inputs):
    try:
        params = list(inspect.signature(model.forward).parameters.values())
    except (TypeError, ValueError):  # no introspectable signature: let export judge
        return
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in positional if p.default is p.empty]
    varargs = any(p.kind == p.VAR_POSITIONAL for p in params)
    if len(inputs) < len(required) or (not varargs and len(inputs) > len(positional)):
        names = ", ".join(p.name for p in positional)
        raise EmberError(f"from_pytorch: {type(model).__name__}.forward takes "
                         f"{len(required)} input(s) ({names}) but example_inputs has "
                         f"{len(inputs)}; pass one example tensor per argument")


def _export(model, inputs, dynamic_shapes=None):
    """torch.export in eval mode under no_grad, restoring every submodule's own mode
    afterwards (a wrapper in training mode around an eval model stays so)."""
    _check_arity(model, inputs)
    modes = [(m, m.training) for m in model.modules()]
    _eval(model)
    try:
        with torch.no_grad():
            return torch.export.export(model, inputs, dynamic_shapes=dynamic_shapes)
    except Exception as error:  # torch raises many kinds; all mean "cannot capture"
        raise EmberError(_export_failure(model, error)) from None
    finally:
        for m, training in modes:
            m.training = training


def _eval(model):
    """model.eval(). A graph module that torch.export made (ExportedProgram.module(), and
    torchao's prepare_pt2e / convert_pt2e output) refuses train() and eval() with
    NotImplementedError: its graph was captured in one mode, which the flag cannot change.
    Such a module, or a model holding one, gets every submodule's flag set instead (what
    eval() does) and is exported as it is."""
    try:
        model.eval()
    except NotImplementedError:
        for m in model.modules():
            m.training = False


def _export_failure(model, error):
    text = str(error).strip().splitlines()
    first = text[0] if text else type(error).__name__
    kind = type(error).__name__
    message = (f"from_pytorch: torch.export could not capture {type(model).__name__} "
               f"({kind}: {first})\n")
    data_dependent = any(word in " ".join(text[:20]).lower() for word in
                         ("data-dependent", "data dependent", "guardondatadependent"))
    if data_dependent or "DataDependent" in kind:
        return message + (
            "Its forward() branches, loops or sizes a tensor on tensor *values* (dynamic "
            "control flow). Ember compiles one static graph: rewrite that part with tensor "
            "operations (torch.where, masking), or trace the model with "
            "torch.jit.trace(model.eval(), example_inputs) and pass the traced module (a "
            "trace records only the path taken for the example inputs).")
    return message + ("Make forward() exportable with the given example_inputs, or pass a "
                      "torch.jit.trace(model.eval(), example_inputs) module instead.")


def _aten_name(target):
    """'conv2d' for aten.conv2d.default; 'relu' for the in-place aten.relu_; the qualified
    name of another namespace's op that has a converter ('transformers::grouped_mm_fallback');
    None for anything else."""
    schema = getattr(target, "_schema", None)
    if schema is None:
        return None
    if not schema.name.startswith("aten::"):
        return schema.name if schema.name in _aten.CONVERTERS else None
    name = schema.name[len("aten::"):]
    return name[:-1] if name.endswith("_") and not name.endswith("__") else name


def _writes_through_a_view(program):
    """Whether an in-place op writes into a view (x[1:3] = y is copy_ into a slice) or into a
    tensor with a view taken before the write: torch.export keeps those ops, and converting
    them one by one (value semantics) would lose the write to the aliased tensor."""
    def schema(node):
        return getattr(node.target, "_schema", None) if node.op == "call_function" else None

    order = {n: i for i, n in enumerate(program.graph.nodes)}
    for node in program.graph.nodes:
        s = schema(node)
        if s is None or not s.arguments or s.arguments[0].alias_info is None \
                or not s.arguments[0].alias_info.is_write or not node.args \
                or not isinstance(node.args[0], torch.fx.Node):
            continue
        target = node.args[0]
        if _is_view(target) or any(_is_view(u) and order[u] < order[node]
                                   for u in target.users):
            return True
    return False


def _decompose(program):
    """Decomposes only what Ember cannot convert whole. The exported graph keeps linear,
    conv, batch_norm, layer_norm, gelu, softmax, ... as single ops (fusion wants them that
    way); only when another op is present, or an in-place op writes through a view, does
    run_decompositions lower it to functional core ATen, with every op that has a converter
    removed from the table so it stays whole."""
    targets = {n.target for n in program.graph.nodes if n.op == "call_function"}
    aliased = _writes_through_a_view(program)
    if not aliased and all(t is operator.getitem or _aten_name(t) in _aten.CONVERTERS
                           for t in targets):
        return program  # nothing to decompose: skip the (slow) retrace
    table = torch.export.default_decompositions()
    for op in list(table.keys()):
        if _aten_name(op) in _aten.CONVERTERS:
            table.pop(op)
    try:
        return program.run_decompositions(table)
    except Exception as error:  # keep the original ops; the unsupported ones get reported
        if aliased:  # converting the writes one by one would compute a wrong result
            raise EmberError("from_pytorch: the model writes into part of a tensor in place "
                             "(x[...] = y) and torch.export could not make that functional "
                             f"({type(error).__name__}: {error})") from None
        return program


def _is_view(node):
    """Whether an FX node's value aliases its input (slice, select, view; not an in-place
    op's result, which is its input itself)."""
    schema = getattr(node.target, "_schema", None) if node.op == "call_function" else None
    return schema is not None and any(r.alias_info is not None and not r.alias_info.is_write
                                      for r in schema.returns)


def _module_path(node):
    """The PyTorch module a node came from ("layer1.0.conv1"), else the node's name."""
    stack = node.meta.get("nn_module_stack")
    if stack:
        path = list(stack.values())[-1][0]
        if path:
            return path
    return node.name


def _import_exported(program, inputs, input_names, dynamic_shapes=None):
    program = _decompose(program)
    signature = program.graph_signature
    specs = {spec.arg.name: spec for spec in signature.input_specs
             if hasattr(spec.arg, "name")}
    tensors = dict(program.state_dict)
    tensors.update({k: v for k, v in program.constants.items() if isinstance(v, torch.Tensor)})
    cx = Converter(tensors)

    placeholders = [n for n in program.graph.nodes if n.op == "placeholder"
                    and specs[n.name].kind == InputKind.USER_INPUT]
    names = check_input_names(input_names, [n.name for n in placeholders])
    if inputs is not None and len(inputs) != len(placeholders):
        raise EmberError(f"from_pytorch: the model takes {len(placeholders)} input(s) "
                         f"({', '.join(n.name for n in placeholders)}) but example_inputs has "
                         f"{len(inputs)}")
    for node in placeholders:
        if not isinstance(node.meta.get("val"), torch.Tensor):
            raise EmberError(f"from_pytorch: input '{node.name}' is not a tensor; Ember models "
                             "take tensors only")
    symbols = Symbols(program, placeholders, dynamic_shapes, [n.name for n in placeholders])
    cx.symbols = symbols
    env, user_vars = {}, []
    for i, node in enumerate(placeholders):
        val = node.meta.get("val")
        shape = symbols.shape(val.shape)
        if inputs is not None and (val.dtype != inputs[i].dtype or len(shape) != inputs[i].dim()
                                   or any(not is_dim(s) and s != n
                                          for s, n in zip(shape, inputs[i].shape))):
            raise EmberError(f"from_pytorch: example input {i} ('{node.name}') is "
                             f"{inputs[i].dtype}{list(inputs[i].shape)} but the program was "
                             f"exported for {val.dtype}{[str(s) for s in shape]}")
        env[node] = ir.var(names[i], shape, dtype_name(val.dtype))
        user_vars.append(env[node])

    value = fx_values(env)

    outputs = []
    for node in program.graph.nodes:
        if node.op == "placeholder":
            spec = specs[node.name]
            if spec.kind in (InputKind.PARAMETER, InputKind.BUFFER):
                env[node] = WeightRef(spec.target)
            elif spec.kind == InputKind.CONSTANT_TENSOR:
                try:
                    env[node] = ir.const(tensors[spec.target].detach().contiguous(),
                                         spec.target)
                except EmberError as error:  # an unsupported dtype
                    cx.problems.append(("constant", spec.target, str(error)))
                    env[node] = MISSING
            elif spec.kind != InputKind.USER_INPUT:
                raise EmberError(f"from_pytorch: input '{node.name}' of kind {spec.kind.name} "
                                 "is not supported")
        elif node.op == "call_function" and isinstance(node.meta.get("val"), torch.SymInt):
            env[node] = _size(symbols, node.meta["val"])  # sym_size, and arithmetic on sizes
        elif node.op == "call_function":
            env[node] = _convert_node(cx, node, env, value)
        elif node.op == "output":
            kinds = [s.kind for s in signature.output_specs]
            outputs = [cx.resolve(value(a)) for a, kind in zip(node.args[0], kinds)
                       if kind == OutputKind.USER_OUTPUT]
        else:  # get_attr of submodules: control-flow operators (torch.cond, while_loop)
            env[node] = MISSING
    return cx, user_vars, outputs


def _size(symbols, value):
    """A torch size as an int or ir.Dim; MISSING for one that depends on the data (nonzero's
    count, u0): the op that makes it is reported as unsupported, and what uses it is skipped."""
    try:
        return symbols.size(value)
    except EmberError:
        return MISSING


def fx_values(env):
    """The resolver of FX node arguments: nodes become their values in `env` (Ember
    expressions), lists and tuples are resolved element by element, constants pass."""
    def value(arg):
        if isinstance(arg, torch.fx.Node):
            return env[arg]
        if isinstance(arg, (list, tuple)):
            return type(arg)(value(a) for a in arg)
        return arg
    return value


def _convert_node(cx, node, env, value):
    where = _module_path(node)
    target = node.target
    if target is operator.getitem:
        return _aten.item(value(node.args[0]), node.args[1], str(node.args[0].target))
    name = _aten_name(target)
    if name is None:
        detail = None
        if isinstance(target, torch._ops.HigherOrderOperator):
            detail = ("control flow (torch.cond / while_loop / map) is not supported; "
                      "Ember compiles one static graph")
        cx.name = where
        cx.problems.append((str(target), where, detail))
        return MISSING
    schema = target._schema
    names = [a.name for a in schema.arguments]
    values = []
    for i, arg in enumerate(schema.arguments):
        if i < len(node.args) and not arg.kwarg_only:
            values.append(value(node.args[i]))
        elif arg.name in node.kwargs:
            values.append(value(node.kwargs[arg.name]))
        else:
            values.append(arg.default_value if arg.has_default_value() else None)

    def evaluate(torch_values):
        args = [v for v, a in zip(torch_values, schema.arguments) if not a.kwarg_only]
        kwargs = {a.name: v for v, a in zip(torch_values, schema.arguments) if a.kwarg_only}
        with torch.no_grad():
            return target(*args, **kwargs)

    first = schema.arguments[0] if schema.arguments else None
    writes = (first is not None and first.alias_info is not None and first.alias_info.is_write
              and node.args and isinstance(node.args[0], torch.fx.Node))
    if writes and _is_view(node.args[0]):  # left when functionalization failed
        cx.name = where
        cx.problems.append((str(target), where, "it writes in place into a view of another "
                            "tensor; write it out of place (torch.where, torch.cat)"))
        return MISSING
    val = node.meta.get("val")
    cx.meta_shape = None
    if isinstance(val, torch.Tensor) and all(_size(cx.symbols, n) is not MISSING
                                             for n in val.shape):
        cx.meta_shape = cx.symbols.shape(val.shape)
    result = cx.convert(name, str(target), names, values, evaluate, where)
    if writes:
        env[node.args[0]] = result  # in-place (relu_): later uses of the input see the result
    return result
