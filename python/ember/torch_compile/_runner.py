"""An Ember-built partition as a torch.nn.Module inside the partitioned FX graph."""
import torch

from .._ember import Tensor


class EmberPartition(torch.nn.Module):
    """Runs one Ember Library on the tensors of its inputs that are not frozen into it.

    Inputs cross by DLPack with no copy (contiguous tensors; others are made contiguous
    first) and the kernels write into fresh tensors each call (GraphExecutor.run_bound),
    handed to PyTorch by DLPack: a result is never overwritten by a later call."""

    def __init__(self, lib, arg_indices, single_output):
        super().__init__()
        self.lib = lib
        self.arg_indices = list(arg_indices)
        self.single_output = single_output
        self._executor = lib._create_executor()

    def forward(self, *args):
        inputs = [Tensor.from_dlpack(args[i].detach().contiguous()) for i in self.arg_indices]
        outputs = [torch.from_dlpack(t) for t in self._executor.run_bound(inputs)]
        return outputs[0] if self.single_output else tuple(outputs)
