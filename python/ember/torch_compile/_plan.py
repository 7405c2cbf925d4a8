"""One plan: a Dynamo graph exported to ATen (for its concrete input shapes, or for ranges
of its symbolic sizes: _dynamic.py), partitioned, and its Ember partitions built. The plan
is a callable taking the graph's inputs."""
import torch
from torch.export.graph_signature import InputKind, OutputKind
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner

from .. import build as _build
from .. import ir
from .._ember import EmberError
from ..frontend._aten import Converter, WeightRef, dtype_name
from ..frontend._sizes import Symbols, is_dim
from ..frontend.pytorch import _aten_name, _convert_node, _decompose, fx_values, make_function
from ._dynamic import static_module
from ._report import PartitionReport
from ._runner import EmberPartition
from ._support import SHAPE_OPS, ConcreteSizes, EmberSupport, is_size_node


class _Fallback(Exception):
    """The whole graph runs in PyTorch, for this reason."""


def build_plan(gm, args, frozen, options, report, constants, sizes=None, ranges=None):
    """The plan for `args`' shapes, or with `sizes` (a SymbolicSizes) for every size in
    `ranges`; `constants`: values for the graph's .item() reads (ScalarInputs); `report`
    (a CompileReport) records what was built. A graph Ember cannot take at all is planned as
    gm.forward (PyTorch), with report.reason saying why."""
    try:
        if sizes is None:
            kept, shapes = list(range(len(args))), None
            program = _export(static_module(gm, constants), args)
        else:
            kept = sizes.kept
            shapes = sizes.export_shapes(ranges)
            program = _export(sizes.export_module(constants), [args[i] for i in kept], shapes)
        symbols = _symbols(program, shapes)
        if sizes is not None:
            report.symbols = sizes.describe(_built_ranges(program, symbols, sizes))
        return _partitioned_plan(program, symbols, [args[i] for i in kept],
                                 [frozen[i] for i in kept], kept, options, report,
                                 _output_type(gm), dynamic=sizes is not None)
    except _Fallback as reason:
        report.reason = str(reason)
        return gm.forward


def _partitioned_plan(program, symbols, args, frozen, kept, options, report, output_type,
                      dynamic=False):
    """`args`, `frozen`: the exported graph's inputs; kept[i]: the Dynamo graph's input that
    is its input i; symbols: the frontend's Symbols of its symbolic sizes; dynamic: built
    for ranges of them (refused when an op Ember takes at `args`' sizes is refused)."""
    for spec in program.graph_signature.output_specs:
        if spec.kind != OutputKind.USER_OUTPUT:
            raise _Fallback(f"the graph writes to its inputs or buffers ({spec.kind.name}); "
                            "Ember compiles graphs without side effects")
    module = program.graph_module
    _check_layout_readers(module)
    feeds, frozen_nodes, constants = _feeds(program, args, frozen, kept)
    support = EmberSupport(constants, symbols)
    partitioner = CapabilityBasedPartitioner(module, support,
                                             allows_single_node_partition=True)
    partitions = partitioner.propose_partitions()
    kept_parts = [p for p in partitions if any(_computes(n) for n in p.nodes)]
    if dynamic:
        _check_static_only(program, args, constants, support)
    _record_fallbacks(module, kept_parts, support, report)
    if not kept_parts:
        raise _Fallback("Ember supports none of its operators (see the list below)")
    module = partitioner.fuse_partitions(kept_parts)  # (may copy the graph: nodes go by name)
    frozen_nodes = {node.name: t for node, t in frozen_nodes.items()}
    constants = {node.name: t for node, t in constants.items()}
    for node in list(module.graph.nodes):
        if node.op == "call_module" and node.target.startswith("fused_"):
            _replace_partition(module, node, frozen_nodes, constants, symbols, options, report)
    return _Plan(module, feeds, output_type)


def _check_static_only(program, args, constants, support):
    """A build for ranges that leaves to PyTorch an op Ember takes at static sizes (a
    convolution whose output size is a floor division of a run-time size) would run less
    in Ember than builds per shape: refused (_Fallback), naming the ops."""
    binding = {}
    for node, arg in zip(_user_placeholders(program), args):
        val = node.meta.get("val")
        if isinstance(val, torch.Tensor):
            for size, n in zip(val.shape, arg.shape):
                if isinstance(size, torch.SymInt) and size.node.expr.is_Symbol:
                    binding[size.node.expr] = int(n)
    static = EmberSupport(constants, ConcreteSizes(binding))
    refused = [node for node in support.reasons if static.is_node_supported(None, node)]
    if refused:
        names = sorted({_op_name(n) for n in refused})
        raise _Fallback(f"Ember takes {len(refused)} of its ops ({', '.join(names)}) only at "
                        f"static sizes: {support.reasons[refused[0]]}")


def _built_ranges(program, symbols, sizes):
    """{Dynamo symbol name: (min, max)} as the exported program has it (torch.export may
    narrow a range Dynamo's guards imply)."""
    placeholders = _user_placeholders(program)
    out = {}
    for s in sizes.symbols.values():
        node = placeholders[sizes.kept.index(s.index)]
        dim = symbols.size(node.meta["val"].shape[s.dim])
        out[s.name] = (dim.min, dim.max) if is_dim(dim) else (dim, dim)
    return out


def _user_placeholders(program):
    user = {s.arg.name for s in program.graph_signature.input_specs
            if s.kind == InputKind.USER_INPUT and hasattr(s.arg, "name")}
    return [n for n in program.graph_module.graph.nodes
            if n.op == "placeholder" and n.name in user]


def _symbols(program, shapes):
    """The frontend's map from the program's symbolic sizes to ir.Dims (named after the
    Dims of `shapes`, Dynamo's symbols); empty for a static program."""
    placeholders = _user_placeholders(program)
    tensors = [isinstance(n.meta.get("val"), torch.Tensor) for n in placeholders]
    if shapes is not None:
        shapes = [s for s, t in zip(shapes, tensors) if t]
    placeholders = [n for n, t in zip(placeholders, tensors) if t]
    try:
        return Symbols(program, placeholders, shapes, [n.name for n in placeholders])
    except EmberError as error:
        raise _Fallback(str(error)) from None


# Ops that read their input's memory (its strides and storage offset), not just its values.
_LAYOUT_READERS = ("as_strided", "as_strided_scatter", "as_strided_copy")


def _check_layout_readers(module):
    """An as_strided in PyTorch on a value the graph computed reads that value's storage as
    laid out in eager (a transposed view, say); an Ember partition returns the same values
    in a fresh contiguous tensor, so the strided view would read other elements. Such a
    graph runs in PyTorch (Longformer's sliding-window attention does this). On a graph input
    (PyTorch's own tensor) it is safe."""
    for node in module.graph.nodes:
        if node.op != "call_function" or _aten_name(node.target) not in _LAYOUT_READERS:
            continue
        source = node.args[0]
        if isinstance(source, torch.fx.Node) and source.op != "placeholder":
            raise _Fallback(f"aten.{_aten_name(node.target)} ({node.name}) reads the memory "
                            f"layout of {source.name}, which an Ember partition would not "
                            "reproduce; rewrite it with reshape, slicing or unfold to compile "
                            "it with Ember")


def _export(gm, args, dynamic_shapes=None):
    try:
        with torch.no_grad():
            program = torch.export.export(gm, tuple(args), dynamic_shapes=dynamic_shapes,
                                          strict=False)
    except Exception as error:  # torch raises many kinds; all mean "cannot capture"
        first = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise _Fallback(f"torch.export could not capture it ({type(error).__name__}: "
                        f"{first})") from None
    return _decompose(program)


def _feeds(program, args, frozen, kept):
    """How to feed each placeholder of the exported graph ("arg", index of the Dynamo
    graph's input) or ("const", tensor); the frozen placeholders (weights) and the constant
    ones, with their tensors."""
    placeholders = [n for n in program.graph_module.graph.nodes if n.op == "placeholder"]
    specs = program.graph_signature.input_specs
    if len(placeholders) != len(specs):
        raise _Fallback("its exported inputs do not match the graph's")
    feeds, frozen_nodes, constants, user = [], {}, {}, 0
    for node, spec in zip(placeholders, specs):
        if spec.kind == InputKind.USER_INPUT:
            feeds.append(("arg", kept[user]))
            if frozen[user] and isinstance(args[user], torch.Tensor):
                frozen_nodes[node] = args[user]
            user += 1
        elif spec.kind in (InputKind.PARAMETER, InputKind.BUFFER):
            tensor = program.state_dict.get(spec.target)
            tensor = program.constants[spec.target] if tensor is None else tensor
            feeds.append(("const", tensor))
            frozen_nodes[node] = tensor
        elif spec.kind == InputKind.CONSTANT_TENSOR:
            feeds.append(("const", program.constants[spec.target]))
            constants[node] = program.constants[spec.target]
        else:
            raise _Fallback(f"it has an input of kind {spec.kind.name}")
    return feeds, frozen_nodes, constants


def _computes(node):
    """Does this node do arithmetic (rather than only view or move data)?"""
    if node.op != "call_function" or not node.all_input_nodes:
        return False
    name = _aten_name(node.target)
    return name is not None and name not in SHAPE_OPS


def _op_name(node):
    name = _aten_name(node.target)
    return f"aten.{name}" if name else str(node.target)


def _record_fallbacks(module, kept, support, report):
    inside = {n for p in kept for n in p.nodes}
    for node in module.graph.nodes:
        if (node.op != "call_function" or node in inside or _aten_name(node.target) is None
                or is_size_node(node)):
            continue
        reason = support.reasons.get(node) or ("only views or moves data between PyTorch "
                                               "ops, which costs nothing there")
        report.fallbacks.append((node.name, _op_name(node), reason))


def _replace_partition(module, call, frozen_nodes, constants, symbols, options, report):
    sub = getattr(module, call.target)
    ops = [_op_name(n) for n in sub.graph.nodes if n.op == "call_function"
           and _aten_name(n.target) is not None]
    outputs = next(n for n in sub.graph.nodes if n.op == "output").args[0]
    single = not isinstance(outputs, (tuple, list))
    part = PartitionReport(call.target, ops, len(call.args), 1 if single else len(outputs))
    report.partitions.append(part)
    try:
        func, params, arg_indices = _import_partition(sub, call, frozen_nodes, constants,
                                                      symbols)
        with options.pass_context:
            lib = _build(func, target="llvm", params=params)
        runner = EmberPartition(lib, arg_indices, single)  # (checks run-time sizes)
    except EmberError as error:  # build-time limits: this part stays in PyTorch
        part.error = str(error).splitlines()[0]
        return
    part.kernels = [k["name"] for k in lib._kernels()]
    setattr(module, call.target, runner)


def _import_partition(sub, call, frozen_nodes, constants, symbols):
    """The partition as an Ember function: its non-frozen tensor inputs are the function's
    inputs (arg_indices: their positions among the call's arguments), weights become
    params, and a size computed in PyTorch (aten.sym_size) is its ir.Dim: Ember's run binds
    it from the input tensors' shapes."""
    placeholders = [n for n in sub.graph.nodes if n.op == "placeholder"]
    tensors, env, user_vars, arg_indices = {}, {}, [], []
    for i, (ph, outer) in enumerate(zip(placeholders, call.args)):
        if outer.name in constants:
            env[ph] = ir.const(constants[outer.name].detach().contiguous(), outer.name)
        elif outer.name in frozen_nodes:
            name = f"weight{i}_{outer.name}"
            tensors[name] = frozen_nodes[outer.name]
            env[ph] = WeightRef(name)
        elif isinstance(outer.meta["val"], (torch.SymInt, int)):
            env[ph] = symbols.size(outer.meta["val"])
        else:
            val = outer.meta["val"]
            env[ph] = ir.var(f"input{i}", symbols.shape(val.shape), dtype_name(val.dtype))
            user_vars.append(env[ph])
            arg_indices.append(i)
    cx = Converter(tensors)
    cx.symbols = symbols

    value = fx_values(env)

    outputs = []
    for node in sub.graph.nodes:
        if node.op == "call_function":
            env[node] = _convert_node(cx, node, env, value)
        elif node.op == "output":
            outs = node.args[0]
            outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
            outputs = [cx.resolve(value(o)) for o in outs]
    func, params = make_function(cx, user_vars, outputs)
    return func, params, arg_indices


def _output_type(gm):
    out = next(n for n in gm.graph.nodes if n.op == "output").args[0]
    return type(out) if isinstance(out, (tuple, list)) else None


class _Plan:
    """Calls the partitioned ATen graph with the weights and constants in their places."""

    def __init__(self, module, feeds, output_type):
        self.module = module
        self.feeds = feeds
        self.output_type = output_type

    def __call__(self, *args):
        flat = [args[v] if kind == "arg" else v for kind, v in self.feeds]
        outputs = self.module(*flat)
        if self.output_type is None:
            return outputs[0]
        return self.output_type(outputs)
