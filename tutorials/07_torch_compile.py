"""Lesson 07: Ember inside PyTorch 2 with torch.compile(model, backend="ember").

    PYTHONPATH=python python3 tutorials/07_torch_compile.py

Lesson 03 imported a whole model with from_pytorch, which refuses a model with an op Ember
lacks. torch.compile instead hands Ember each graph Dynamo captures; Ember takes the largest
parts it supports and leaves the rest to PyTorch:

    fast = torch.compile(model.eval(), backend="ember", options={"opt_level": 3})
    with torch.no_grad():
        y = fast(x)
    print(ember.last_compile_report())

An installed Ember is found by name (its package entry point); `import ember` registers the
backend too. Weights are frozen into the build: after changing them, torch._dynamo.reset().

With dynamic=True (or after Dynamo recompiles a graph whose shapes changed) the graph has
symbolic sizes, and Ember builds it once for a range of each size (part 4).
"""
import logging

import torch
import torch.nn as nn

import ember


class RankedClassifier(nn.Module):
    """conv + BatchNorm + ReLU features, then a cumulative product (which Ember lacks), then a
    linear head with a LogSigmoid (log1p inside)."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8),
                                      nn.ReLU())
        self.head = nn.Linear(8, 4)

    def forward(self, image):
        x = self.features(image).mean((2, 3))
        x = torch.cumprod(x, dim=1)
        return nn.functional.logsigmoid(self.head(x))


def main():
    torch.manual_seed(0)
    model = RankedClassifier().eval()
    fast = torch.compile(model, backend="ember")

    # 1. Run it. Under no_grad (or inference_mode) Ember compiles; with gradients needed,
    # the graph would run in PyTorch (the report would say so).
    image = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        got = fast(image)
        want = model(image)
    error = (got - want).abs().max().item()
    print(f"max difference from eager PyTorch: {error:.2e}")
    assert error < 1e-4

    # 2. What ran where: Ember's partitions (with their ATen ops and kernels) and each op
    # that stayed in PyTorch, with the reason. The `ember` logger prints the same at INFO.
    report = ember.last_compile_report()
    print(report)
    assert any("aten.cumprod" == op for _, op, _ in report.fallbacks)
    assert len(report.partitions) == 2

    # 3. A new input shape: Dynamo recompiles with symbolic sizes. Ember tries one build for
    # a range of the image sizes, but cannot yet build a convolution over run-time spatial
    # sizes, so this graph is built per concrete shape (a small cache); the note says why.
    logging.getLogger("ember").setLevel(logging.WARNING)
    with torch.no_grad():
        for size in (20, 24):
            bigger = torch.randn(1, 3, size, size)
            assert (fast(bigger) - model(bigger)).abs().max().item() < 1e-4
    report = ember.last_compile_report()
    print("shapes compiled last:", report.shapes)
    print("why per shape:", report.note)

    # 4. A sequence model with dynamic=True: Dynamo passes symbolic batch and length sizes,
    # and one Ember build serves every length up to options "dynamic_max" (default 256;
    # a longer one rebuilds with the range doubled).
    tagger = nn.Sequential(nn.Linear(16, 32), nn.LayerNorm(32), nn.GELU(), nn.Linear(32, 5),
                           nn.Softmax(dim=-1)).eval()
    fast_tagger = torch.compile(tagger, backend="ember", dynamic=True)
    with torch.no_grad():
        for length in (7, 30, 12, 64, 3):
            tokens = torch.randn(2, length, 16)
            assert (fast_tagger(tokens) - tagger(tokens)).abs().max().item() < 1e-5
    report = ember.last_compile_report()
    print(report)
    assert len(report.builds) == 1 and len(report.symbols) == 2
    return error


def test_lesson_07():
    torch._dynamo.reset()
    try:
        assert main() < 1e-4
    finally:
        torch._dynamo.reset()


if __name__ == "__main__":
    main()
