"""Importing torch.jit.trace'd modules: walks the inlined TorchScript graph.

Traces record what ran, including fused kernels that torch.export never shows:
aten::_native_multi_head_attention (nn.MultiheadAttention's fast path),
aten::_transformer_encoder_layer_fwd (nn.TransformerEncoderLayer's) and the RNN cells;
_aten_nn.py expands them into Ember ops. prim:: nodes (constants, lists, tuples, attribute
reads) are evaluated here; weights are found by following prim::GetAttr chains from the
module input to their state_dict names.
"""
import torch

from .. import ir
from .._ember import EmberError
from . import _aten
from ._aten import MISSING, Converter, WeightRef
from ._inputs import check_input_names, input_var

_SCHEMAS = {}


class _ModuleRef:
    """A submodule reached by prim::GetAttr: its path and the object."""

    def __init__(self, path, obj):
        self.path = path
        self.obj = obj


def _scope(node):
    """The module path, 'layer1.0.conv1' from the scope name
    '__module.layer1/__module.layer1.0/__module.layer1.0.conv1' ('' at the top level)."""
    last = node.scopeName().split("/")[-1]
    return last[len("__module."):] if last.startswith("__module.") else ""


def _schema(node):
    text = node.schema()
    if text not in _SCHEMAS:
        _SCHEMAS[text] = torch._C.parse_schema(text) if text != "(no schema)" else None
    return _SCHEMAS[text]


# In-place ops that write part of a tensor: into a view, the write is meant for the tensor
# viewed, which the importer (value semantics) would not update.
_PARTIAL_WRITES = {"copy", "index_put", "index_add", "index_copy", "index_fill", "scatter",
                   "scatter_add", "scatter_reduce", "masked_scatter"}


def _is_view(value):
    """Whether a TorchScript value aliases another tensor (made by slice, select, view...)."""
    schema = _schema(value.node()) if value.node().kind().startswith("aten::") else None
    return schema is not None and any(r.alias_info is not None for r in schema.returns)


def _constant(node, where):
    try:
        value = node.output().toIValue()
    except Exception:  # constants of types Ember never reads (functions, classes)
        return None
    if isinstance(value, torch.Tensor):
        return ir.const(value.detach().contiguous(), where)
    return value


def _default_names(values):
    names = []
    for i, v in enumerate(values):
        name = v.debugName().split(".")[0]
        names.append(name if name and not name.isdigit() else f"input{i}")
    return names


def import_torchscript(model, inputs, input_names):
    graph = model.graph.copy()
    torch._C._jit_pass_inline(graph)  # submodule calls become their ops, with scope names
    graph_inputs = list(graph.inputs())
    is_module = isinstance(model, torch.jit.ScriptModule)
    user_values = graph_inputs[1:] if is_module else graph_inputs
    tensors = {}
    if is_module:
        tensors.update(dict(model.named_buffers()))
        tensors.update(dict(model.named_parameters()))
        tensors.update(model.state_dict())
    cx = Converter(tensors)
    names = check_input_names(input_names, _default_names(user_values))
    if len(user_values) != len(inputs):
        raise EmberError(f"from_pytorch: the traced model takes {len(user_values)} "
                               f"input(s) ({', '.join(names)}) but example_inputs has "
                               f"{len(inputs)}")
    env = {}
    if is_module:
        env[graph_inputs[0]] = _ModuleRef("", model)
    user_vars = [input_var(n, t) for n, t in zip(names, inputs)]
    env.update(zip(user_values, user_vars))

    for node in graph.nodes():
        _convert_node(cx, node, env, tensors)

    outputs = []

    def flatten(value):
        if isinstance(value, (list, tuple)):
            for v in value:
                flatten(v)
        else:
            outputs.append(cx.resolve(value))

    for out in graph.outputs():
        flatten(env[out])
    return cx, user_vars, outputs


def _convert_node(cx, node, env, tensors):
    kind = node.kind()
    where = _scope(node) or kind.split("::")[-1]
    try:
        _convert_prim_or_aten(cx, node, kind, where, env, tensors)
    except EmberError as error:  # a constant or weight of an unsupported dtype
        cx.problems.append((kind, where, str(error)))
        for out in node.outputs():
            env[out] = MISSING


def _convert_prim_or_aten(cx, node, kind, where, env, tensors):
    ins = [env.get(v, MISSING) for v in node.inputs()]
    outs = list(node.outputs())
    if kind == "prim::Constant":
        env[outs[0]] = _constant(node, where)
    elif kind == "prim::GetAttr":
        env[outs[0]] = _get_attr(ins[0], node.s("name"), tensors)
    elif kind in ("prim::ListConstruct", "prim::TupleConstruct"):
        env[outs[0]] = list(ins) if kind == "prim::ListConstruct" else tuple(ins)
    elif kind in ("prim::ListUnpack", "prim::TupleUnpack"):
        for i, out in enumerate(outs):
            env[out] = _aten.item(ins[0], i, "the unpacked list")
    elif kind in ("prim::TupleIndex", "aten::__getitem__") and not isinstance(ins[0], ir.Expr):
        env[outs[0]] = ins[0] if ins[0] is MISSING else ins[0][ins[1]]
    elif kind == "prim::NumToTensor":
        env[outs[0]] = ins[0]  # sizes stay Python numbers: shapes are static
    elif kind == "prim::device":
        env[outs[0]] = torch.device("cpu")
    elif kind == "prim::dtype":
        env[outs[0]] = getattr(torch, ins[0].dtype) if isinstance(ins[0], ir.Expr) else MISSING
    elif kind in ("prim::If", "prim::Loop"):
        cx.problems.append((kind, where, "data-dependent control flow from torch.jit.script; "
                            "Ember compiles one static graph: trace the model with "
                            "torch.jit.trace (or torch.export) instead of scripting it"))
        for out in outs:
            env[out] = MISSING
    elif kind.startswith("aten::") and _schema(node) is not None:
        schema = _schema(node)
        name = schema.name[len("aten::"):]
        in_place = name.endswith("_") and not name.endswith("__")
        name = name[:-1] if in_place else name

        def evaluate(values):
            op = getattr(getattr(torch.ops.aten, schema.name[6:]),
                         schema.overload_name or "default")
            args = [v for v, a in zip(values, schema.arguments) if not a.kwarg_only]
            kwargs = {a.name: v for v, a in zip(values, schema.arguments) if a.kwarg_only}
            with torch.no_grad():
                return op(*args, **kwargs)

        if in_place and name in _PARTIAL_WRITES and _is_view(next(node.inputs())):
            # The trace writes through the view (x[1:3] = y); the tensor it views would keep
            # its old value here. torch.export records the write on the tensor itself.
            cx.problems.append((kind, where, "an assignment into part of a tensor (x[...] = y) "
                                "is not supported in a TorchScript trace; pass the nn.Module "
                                "itself (torch.export)"))
            for out in outs:
                env[out] = MISSING
            return
        values = [_scalar_type(v, a) for v, a in zip(ins, schema.arguments)]
        result = cx.convert(name, kind, [a.name for a in schema.arguments], values,
                            evaluate, where)
        if len(outs) == 1:
            env[outs[0]] = result
        else:
            for i, out in enumerate(outs):
                env[out] = _aten.item(result, i, kind)
        first = schema.arguments[0] if schema.arguments else None
        if first is not None and first.alias_info is not None and first.alias_info.is_write:
            env[next(node.inputs())] = result  # in-place: later uses see the result
    else:
        detail = None
        if kind == "prim::PythonOp":
            detail = f"a Python autograd function ({node.pyname()}) cannot be compiled"
        cx.name = where
        cx.problems.append((kind, where, detail))
        for out in outs:
            env[out] = MISSING


def _scalar_type(value, argument):
    """TorchScript passes dtypes as ScalarType codes; converters want torch dtypes."""
    if "ScalarType" in str(argument.type) and isinstance(value, int):
        return _aten._SCALAR_TYPES.get(value, value)
    return value


def _get_attr(base, name, tensors):
    if base is MISSING or not isinstance(base, _ModuleRef):
        return MISSING
    path = f"{base.path}.{name}" if base.path else name
    obj = getattr(base.obj, name)
    if isinstance(obj, torch.Tensor):
        tensors.setdefault(path, obj)
        return WeightRef(path)
    if isinstance(obj, torch.nn.Module):
        return _ModuleRef(path, obj)
    return obj
