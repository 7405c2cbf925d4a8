"""The model inputs of an import, shared by the torch.export (pytorch.py) and TorchScript
(_torchscript.py) importers: the names they take and the graph variables made for them."""
from .. import ir
from .._ember import EmberError
from ._aten_registry import dtype_name


def input_var(name, tensor):
    return ir.var(name, list(tensor.shape), dtype_name(tensor.dtype))


def check_input_names(input_names, default_names):
    """input_names (validated) or the names taken from the model."""
    if input_names is None:
        return list(default_names)
    if isinstance(input_names, str):
        input_names = [input_names]
    names = list(input_names)
    if len(names) != len(default_names) or not all(isinstance(n, str) and n for n in names):
        raise EmberError(f"from_pytorch: input_names must be {len(default_names)} non-empty "
                         f"strings (one per model input), got {input_names!r}")
    if len(set(names)) != len(names):
        raise EmberError(f"from_pytorch: input_names has duplicates: {names}")
    return names
