"""Frontends: importing models from other frameworks into Ember's graph IR.

    mod, params = ember.frontend.from_pytorch(model, example_inputs)
    lib = ember.build(mod, target="llvm", params=params)

torch is imported only when from_pytorch is called, so `import ember` never needs it.
"""

__all__ = ["from_pytorch"]


def from_pytorch(model, example_inputs, input_names=None, dynamic_shapes=None):
    """Converts a PyTorch model (nn.Module, torch.export.ExportedProgram,
    torch.fx.GraphModule or torch.jit.trace'd module) into (ir.Function, params); see
    ember.frontend.pytorch.from_pytorch."""
    from .pytorch import from_pytorch as convert
    return convert(model, example_inputs, input_names, dynamic_shapes)
