"""A small model zoo written in plain torch.nn (torchvision is not available), used by the
frontend tests, the benchmarks and the demo. Widths and sizes are parameters so tests can
stay small; the defaults are the narrow test versions.

Every family is listed in FAMILIES as name -> (make_model(), make_inputs(batch)), where
make_inputs returns a tuple of example tensors.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def _seeded(make):
    """Builds a model with fixed random weights and non-trivial BatchNorm statistics, in
    eval mode."""
    def build(*args, **kwargs):
        torch.manual_seed(0)
        model = make(*args, **kwargs)
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):  # identity statistics would hide BN bugs
                m.running_mean.uniform_(-0.2, 0.2)
                m.running_var.uniform_(0.5, 1.5)
                m.weight.data.uniform_(0.5, 1.5)
                m.bias.data.uniform_(-0.2, 0.2)
        return model.eval()
    return build


# ------------------------------------------------------------------------------------ CNNs

class VGG(nn.Module):
    """VGG-style: stacks of 3x3 conv + BN + ReLU with max pooling, then a classifier."""

    def __init__(self, widths=(8, 16, 32), classes=10):
        super().__init__()
        layers, cin = [], 3
        for w in widths:
            layers += [nn.Conv2d(cin, w, 3, padding=1), nn.BatchNorm2d(w), nn.ReLU(inplace=True),
                       nn.Conv2d(w, w, 3, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(2)]
            cin = w
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d((2, 2))
        self.classifier = nn.Sequential(nn.Linear(cin * 4, 64), nn.ReLU(True), nn.Dropout(),
                                        nn.Linear(64, classes))

    def forward(self, x):
        x = self.avgpool(self.features(x))
        return self.classifier(torch.flatten(x, 1))


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, cin, width, stride=1, downsample=None):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, width, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(width, width, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.downsample = downsample

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, cin, width, stride=1, downsample=None):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, width * 4, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(width * 4)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + identity)


class ResNet(nn.Module):
    """torchvision's ResNet layout: stem (7x7 conv, BN, ReLU, max pool), four stages of
    residual blocks with 1x1 downsample convs, adaptive average pool, flatten, fc."""

    def __init__(self, block, layers, width=8, classes=10):
        super().__init__()
        self.cin = width
        self.conv1 = nn.Conv2d(3, width, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        self.layer1 = self._stage(block, width, layers[0], 1)
        self.layer2 = self._stage(block, width * 2, layers[1], 2)
        self.layer3 = self._stage(block, width * 4, layers[2], 2)
        self.layer4 = self._stage(block, width * 8, layers[3], 2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(width * 8 * block.expansion, classes)

    def _stage(self, block, width, blocks, stride):
        downsample = None
        if stride != 1 or self.cin != width * block.expansion:
            downsample = nn.Sequential(
                nn.Conv2d(self.cin, width * block.expansion, 1, stride, bias=False),
                nn.BatchNorm2d(width * block.expansion))
        layers = [block(self.cin, width, stride, downsample)]
        self.cin = width * block.expansion
        layers += [block(self.cin, width) for _ in range(1, blocks)]
        return nn.Sequential(*layers)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def resnet18(width=8, classes=10):
    return ResNet(BasicBlock, [2, 2, 2, 2], width, classes)


def resnet50(width=8, classes=10):
    return ResNet(Bottleneck, [3, 4, 6, 3], width, classes)


class InvertedResidual(nn.Module):
    """MobileNetV2 block: 1x1 expand + ReLU6, 3x3 depthwise + ReLU6, 1x1 linear project,
    residual add when the shape is kept."""

    def __init__(self, cin, cout, stride, expand):
        super().__init__()
        hidden = cin * expand
        self.use_res = stride == 1 and cin == cout
        layers = []
        if expand != 1:
            layers += [nn.Conv2d(cin, hidden, 1, bias=False), nn.BatchNorm2d(hidden),
                       nn.ReLU6(inplace=True)]
        layers += [nn.Conv2d(hidden, hidden, 3, stride, 1, groups=hidden, bias=False),
                   nn.BatchNorm2d(hidden), nn.ReLU6(inplace=True),
                   nn.Conv2d(hidden, cout, 1, bias=False), nn.BatchNorm2d(cout)]
        self.conv = nn.Sequential(*layers)

    def forward(self, x):
        return x + self.conv(x) if self.use_res else self.conv(x)


class MobileNetV2(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        config = [(1, 8, 1, 1), (6, 12, 2, 2), (6, 16, 2, 2)]  # expand, channels, repeats, stride
        layers = [nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU6(True)]
        cin = 8
        for t, c, n, s in config:
            for i in range(n):
                layers.append(InvertedResidual(cin, c, s if i == 0 else 1, t))
                cin = c
        layers += [nn.Conv2d(cin, 64, 1, bias=False), nn.BatchNorm2d(64), nn.ReLU6(True)]
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(64, classes))

    def forward(self, x):
        x = F.adaptive_avg_pool2d(self.features(x), (1, 1))
        return self.classifier(torch.flatten(x, 1))


class ForumNet(nn.Module):
    """The TVM forum example: a depthwise 64-channel 3x3 conv (pad 1) + BatchNorm + ReLU,
    run on 1x64x128x128."""

    def __init__(self, channels=64):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1, groups=channels)
        self.bn = nn.BatchNorm2d(channels)
        self.relu = nn.ReLU()

    def forward(self, x):
        return self.relu(self.bn(self.conv(x)))


class MLP(nn.Module):
    def __init__(self, sizes=(32, 64, 64, 10)):
        super().__init__()
        layers = []
        for a, b in zip(sizes[:-1], sizes[1:]):
            layers += [nn.Linear(a, b), nn.GELU()]
        self.net = nn.Sequential(*layers[:-1])

    def forward(self, x):
        return F.log_softmax(self.net(x), dim=-1)


# ----------------------------------------------------------------------------- transformers

class SelfAttention(nn.Module):
    """Attention written by hand: q/k/v projections, split heads, scaled scores, softmax."""

    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.q = nn.Linear(dim, dim)
        self.k = nn.Linear(dim, dim)
        self.v = nn.Linear(dim, dim)
        self.out = nn.Linear(dim, dim)

    def forward(self, x):
        b, n, d = x.shape
        h = self.heads
        q = self.q(x).reshape(b, n, h, d // h).permute(0, 2, 1, 3)
        k = self.k(x).reshape(b, n, h, d // h).permute(0, 2, 1, 3)
        v = self.v(x).reshape(b, n, h, d // h).permute(0, 2, 1, 3)
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(d // h)
        attn = torch.softmax(scores, dim=-1)
        out = torch.matmul(attn, v).permute(0, 2, 1, 3).reshape(b, n, d)
        return self.out(out)


class EncoderLayer(nn.Module):
    """Post-norm transformer encoder layer around the hand-written attention."""

    def __init__(self, dim=32, heads=4, ffn=64):
        super().__init__()
        self.attn = SelfAttention(dim, heads)
        self.norm1 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, ffn)
        self.fc2 = nn.Linear(ffn, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.dropout = nn.Dropout(0.1)

    def forward(self, x):
        x = self.norm1(x + self.dropout(self.attn(x)))
        return self.norm2(x + self.dropout(self.fc2(F.gelu(self.fc1(x)))))


class MHAEncoderLayer(nn.Module):
    """Pre-norm layer using nn.MultiheadAttention."""

    def __init__(self, dim=32, heads=4, ffn=64):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.norm2 = nn.LayerNorm(dim)
        self.ffn = nn.Sequential(nn.Linear(dim, ffn), nn.GELU(), nn.Linear(ffn, dim))

    def forward(self, x):
        y = self.norm1(x)
        x = x + self.attn(y, y, y, need_weights=False)[0]
        return x + self.ffn(self.norm2(x))


def torch_encoder_layer(dim=32, heads=4, ffn=64):
    return nn.TransformerEncoderLayer(dim, heads, ffn, dropout=0.1, batch_first=True)


class MaskedAttention(nn.Module):
    """scaled_dot_product_attention with a boolean key mask input, plus a causal block."""

    def __init__(self, dim=32, heads=4):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, mask):
        b, n, d = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask[:, None, None, :])
        y = F.scaled_dot_product_attention(y, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(b, n, d))


class TextClassifier(nn.Module):
    """Embedding lookup of int64 token ids, masked mean pooling, linear head."""

    def __init__(self, vocab=50, dim=16, classes=4):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.fc = nn.Linear(dim, classes)

    def forward(self, ids):
        e = self.embed(ids)
        keep = (ids != 0).unsqueeze(-1).to(e.dtype)
        return self.fc((e * keep).sum(1) / keep.sum(1).clamp(min=1.0))


# ------------------------------------------------------------------------------------ RNNs

class RNNCellModel(nn.Module):
    def __init__(self, inp=16, hidden=32):
        super().__init__()
        self.cell = nn.RNNCell(inp, hidden)

    def forward(self, x, h):
        return self.cell(x, h)


class LSTMCellModel(nn.Module):
    """nn.LSTMCell returning both states: several inputs and a tuple output."""

    def __init__(self, inp=16, hidden=32):
        super().__init__()
        self.cell = nn.LSTMCell(inp, hidden)

    def forward(self, x, h, c):
        return self.cell(x, (h, c))


class HandLSTMCell(nn.Module):
    """An LSTM cell written by hand: one fused gate projection split with chunk."""

    def __init__(self, inp=16, hidden=32):
        super().__init__()
        self.ih = nn.Linear(inp, 4 * hidden)
        self.hh = nn.Linear(hidden, 4 * hidden)

    def forward(self, x, h, c):
        i, f, g, o = (self.ih(x) + self.hh(h)).chunk(4, dim=1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        return torch.sigmoid(o) * torch.tanh(c), c


# --------------------------------------------------------------------------------- registry

def _image(size, channels=3):
    return lambda batch: (torch.randn(batch, channels, size, size),)


def _seq(n=8, dim=32):
    return lambda batch: (torch.randn(batch, n, dim),)


def _cell(inp=16, hidden=32, states=1):
    return lambda batch: (torch.randn(batch, inp),) + tuple(
        torch.randn(batch, hidden) for _ in range(states))


def _masked(batch, n=8, dim=32):
    mask = torch.ones(batch, n, dtype=torch.bool)
    mask[:, n // 2 + 1:] = False
    return torch.randn(batch, n, dim), mask


def _tokens(batch, n=12, vocab=50):
    ids = torch.randint(1, vocab, (batch, n))
    ids[:, n - 3:] = 0  # padding
    return (ids,)


FAMILIES = {
    "vgg": (_seeded(VGG), _image(32)),
    "resnet18": (_seeded(resnet18), _image(32)),
    "resnet50": (_seeded(resnet50), _image(32)),
    "mobilenet_v2": (_seeded(MobileNetV2), _image(32)),
    "mlp": (_seeded(MLP), lambda batch: (torch.randn(batch, 32),)),
    "encoder": (_seeded(EncoderLayer), _seq()),
    "mha_encoder": (_seeded(MHAEncoderLayer), _seq()),
    "torch_encoder": (_seeded(torch_encoder_layer), _seq()),
    "masked_attention": (_seeded(MaskedAttention), _masked),
    "text_classifier": (_seeded(TextClassifier), _tokens),
    "rnn_cell": (_seeded(RNNCellModel), _cell()),
    "lstm_cell": (_seeded(LSTMCellModel), _cell(states=2)),
    "hand_lstm_cell": (_seeded(HandLSTMCell), _cell(states=2)),
    "forum": (_seeded(ForumNet), _image(16, channels=64)),
}


def make(family, batch=1, seed=0):
    """(model, example_inputs) for a family, with reproducible weights and inputs."""
    make_model, make_inputs = FAMILIES[family]
    model = make_model()
    torch.manual_seed(seed + 1)
    return model, make_inputs(batch)


# ---------------------------------------------------------------------- a synthetic task

FIT_CLASSES = 10


def _ten_class_head(model):
    """`model` with its last nn.Linear replaced by one of FIT_CLASSES outputs (the head a
    user fine-tunes for their classes)."""
    name = [n for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)][-1]
    parent, _, attr = name.rpartition(".")
    owner = model.get_submodule(parent) if parent else model
    torch.manual_seed(0)
    setattr(owner, attr, torch.nn.Linear(getattr(owner, attr).in_features, FIT_CLASSES))
    return model


def fit_synthetic(model, shape, steps, batch=8, lr=0.01):
    """A classifier whose top-1 means something, without trained weights (none can be
    downloaded here): `model` with a FIT_CLASSES head, trained for `steps` SGD steps on a
    synthetic task, in eval mode. An image of class c is c's fixed pattern (a random
    C x 8 x 8 image upsampled to the input's size) plus unit Gaussian noise. With random
    weights a CNN gives one class for almost every image and its image-dependent logits are
    about as large as the quantization error; a fitted one separates classes with margins.
    Returns (model, sample(i): the task's i-th image as a 1-tuple, the training top-1 over
    the last 20 steps)."""
    model = _ten_class_head(model)
    # Each bottleneck's residual branch starts as zero (torchvision's zero_init_residual):
    # without it ResNet-50 stayed near chance in 100 steps (18%), with it 87%.
    for m in model.modules():
        if isinstance(getattr(m, "bn3", None), torch.nn.BatchNorm2d):
            torch.nn.init.zeros_(m.bn3.weight)
    g = torch.Generator().manual_seed(12345)
    patterns = torch.nn.functional.interpolate(
        torch.randn((FIT_CLASSES, shape[1], 8, 8), generator=g), size=tuple(shape[2:]),
        mode="bilinear", align_corners=False)

    def image(i):
        gi = torch.Generator().manual_seed(i)
        c = int(torch.randint(0, FIT_CLASSES, (1,), generator=gi))
        return patterns[c:c + 1] + torch.randn((1,) + tuple(shape[1:]), generator=gi), c

    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    model.train()
    correct = []
    for step in range(steps):
        pairs = [image(10_000_000 + step * batch + j) for j in range(batch)]
        x, y = torch.cat([p[0] for p in pairs]), torch.tensor([p[1] for p in pairs])
        logits = model(x)
        loss = torch.nn.functional.cross_entropy(logits, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        correct.append(float((logits.argmax(1) == y).float().mean()))
    model.eval()
    tail = correct[-20:]
    return model, lambda i: (image(i)[0],), sum(tail) / max(len(tail), 1)


# ---------------------------------------------------------------------- PT2E quantization

def pt2e_quantize(model, example, calibration, reduce_range=False):
    """The PT2E post-training flow of torchao (issue 45): capture, prepare_pt2e with the
    default X86InductorQuantizer config, one call per tensor tuple of `calibration`,
    convert_pt2e. Returns the converted torch.fx.GraphModule (quantized_decomposed Q/DQ
    around fp32 ops, BatchNorm folded into the convolutions), which runs as PyTorch's
    reference and which from_pytorch takes as it is or re-exported. `reduce_range`: the
    activations in [0, 127] (the config torchao recommends for CPUs without VNNI).

    The capture is torch.export with strict=True (TorchDynamo), as torchao's own x86 lowering
    (lower_pt2e_quantized_to_x86) does. The default non-strict capture records no
    source_fn_stack, so torch's get_source_partitions falls back to the module path and
    makes one partition of every call of a module object used twice, such as the ResNet
    blocks' shared `self.relu` (torchvision's layout too): X86InductorQuantizer's conv + add
    + relu annotation then fails with "Input partition has more than one output node"
    (pytorch/ao#4478 reports it for a reused nn.Linear). Strict capture names each call."""
    import warnings

    from torchao.quantization.pt2e import quantize_pt2e
    from torchao.quantization.pt2e.quantizer import x86_inductor_quantizer as x86

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graph = torch.export.export(model.eval(), tuple(example), strict=True).module()
        quantizer = x86.X86InductorQuantizer()
        quantizer.set_global(
            x86.get_default_x86_inductor_quantization_config(reduce_range=reduce_range))
        prepared = quantize_pt2e.prepare_pt2e(graph, quantizer)
        with torch.no_grad():
            for inputs in calibration:
                prepared(*inputs)
        return quantize_pt2e.convert_pt2e(prepared)
