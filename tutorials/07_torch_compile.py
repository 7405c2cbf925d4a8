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

    # 3. A new input shape: Dynamo recompiles (then with symbolic sizes) and Ember builds
    # one module per concrete shape, kept in a small cache.
    logging.getLogger("ember").setLevel(logging.WARNING)
    with torch.no_grad():
        for size in (20, 24):
            bigger = torch.randn(1, 3, size, size)
            assert (fast(bigger) - model(bigger)).abs().max().item() < 1e-4
    print("shapes compiled last:", ember.last_compile_report().shapes)
    return error


def test_lesson_07():
    torch._dynamo.reset()
    try:
        assert main() < 1e-4
    finally:
        torch._dynamo.reset()


if __name__ == "__main__":
    main()
