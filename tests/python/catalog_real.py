"""Real-size versions of the fusion-catalog cases, for benchmarks/catalog.py --size real.

A case's optional "real" entry is data: {"inputs": [shape per input], "dims": {small: real}}.
`real_case(case)` builds the case's own model and grows every layer to real size by mapping
each of its dimensions through "dims" (a Conv2d(4, 8) with dims {4: 64, 8: 256} becomes
Conv2d(64, 256), same kernel, stride, padding; groups follow their channels), and tiles the
case's own inputs to the real shapes (np.resize), so the hard values it tests stay in. The
sizes are those of BERT-base (hidden 768, FFN 3072, seq 128, 12 heads) and ResNet-50 (64 and
256 channels at 56x56, 128/512 at 28x28).
"""
import numpy as np
import torch
from torch import nn

BERT_TOKENS = (128, 768)        # seq x hidden
BERT_FFN = (128, 3072)          # seq x FFN
BERT_HEADS = (1, 12, 128, 64)   # batch, heads, seq, head dim
BERT_SCORES = (1, 12, 128, 128)
RESNET_56 = (1, 64, 56, 56)
RESNET_56_WIDE = (1, 256, 56, 56)
RESNET_28 = (1, 128, 28, 28)


def real(*shapes, dims=None):
    """The "real" entry of a case: one shape per input, and the layer dimension map."""
    return {"inputs": [tuple(s) for s in shapes], "dims": dict(dims or {})}


LAYERS = (nn.Conv2d, nn.Linear, nn.LayerNorm, nn.BatchNorm2d, nn.InstanceNorm2d,
          nn.MultiheadAttention)


def _grown(m, d):
    """A real-size copy of layer `m` (dimensions mapped by `d`), or None to keep it."""
    if isinstance(m, nn.Conv2d):
        groups = d(m.groups) if m.groups > 1 else 1
        return nn.Conv2d(d(m.in_channels), d(m.out_channels), m.kernel_size, m.stride, m.padding,
                         m.dilation, groups, m.bias is not None)
    if isinstance(m, nn.Linear):
        return nn.Linear(d(m.in_features), d(m.out_features), m.bias is not None)
    if isinstance(m, nn.LayerNorm):
        return nn.LayerNorm([d(s) for s in m.normalized_shape], m.eps, m.elementwise_affine)
    if isinstance(m, nn.BatchNorm2d):
        bn = nn.BatchNorm2d(d(m.num_features))
        bn.running_mean.uniform_(-0.5, 0.5)
        bn.running_var.uniform_(0.5, 2.0)
        bn.weight.data.uniform_(0.5, 2.0)
        bn.bias.data.uniform_(-1, 1)
        return bn
    if isinstance(m, nn.InstanceNorm2d):
        return nn.InstanceNorm2d(d(m.num_features), affine=m.affine)
    if isinstance(m, nn.MultiheadAttention):
        return nn.MultiheadAttention(d(m.embed_dim), d(m.num_heads), batch_first=m.batch_first)
    return None


def grow(model, dims):
    """`model` with every layer (and every plain parameter of a custom module) grown."""
    torch.manual_seed(0)

    def d(n):
        return dims.get(n, n)
    for parent in list(model.modules()):
        if isinstance(parent, LAYERS):
            continue  # replaced whole by its parent
        for name, child in list(parent.named_children()):
            new = _grown(child, d)
            if new is not None:
                setattr(parent, name, new)
        for name, p in list(parent.named_parameters(recurse=False)):
            shape = [d(s) for s in p.shape]
            setattr(parent, name, nn.Parameter(torch.randn(*shape) / np.sqrt(shape[0])))
    return model.eval()


def tile(x, shape):
    """`x` resized to `shape`, repeating its elements in order."""
    return torch.from_numpy(np.resize(x.numpy(), shape).copy())


def real_case(case):
    """(model, inputs) of the case at real size, or None when it has no "real" entry."""
    spec = case.get("real")
    if spec is None:
        return None
    small = case["inputs"]()
    if len(small) != len(spec["inputs"]):
        raise ValueError(f"{case['name']}: {len(small)} inputs but {len(spec['inputs'])} real "
                         "shapes")
    model = grow(case["model"](), spec["dims"]) if spec["dims"] else case["model"]()
    return model, tuple(tile(x, s) for x, s in zip(small, spec["inputs"]))
