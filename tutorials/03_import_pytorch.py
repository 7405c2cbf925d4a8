"""Lesson 03: import a PyTorch model, compile it, compare with PyTorch.

    PYTHONPATH=python python3 tutorials/03_import_pytorch.py

Lesson 01 built a graph by hand. Real models come from PyTorch, so Ember reads them:

    mod, params = ember.frontend.from_pytorch(model, example_inputs)
    lib = ember.build(mod, target="llvm", params=params)

from_pytorch takes an nn.Module (it runs torch.export on it, in eval mode), an
ExportedProgram, a torch.fx.GraphModule, or a torch.jit.trace'd module; with
dynamic_shapes=... one build serves a range of shapes (step 6). It returns the
model as an ir.Function plus its weights: the function's first parameters are the model's
inputs, the rest are the weights and buffers named by their state_dict keys, and `params`
maps those names to arrays, which ember.build turns into constants. Every node keeps the
PyTorch module it came from as its name, so you can always find your way back to the model.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import ember


class SmallNet(nn.Module):
    """A little classifier: two conv + BatchNorm + ReLU blocks, pooling, a linear head."""

    def __init__(self):
        super().__init__()
        self.block1 = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
        self.block2 = nn.Sequential(nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16),
                                    nn.ReLU())
        self.head = nn.Linear(16, 10)

    def forward(self, image):
        x = F.max_pool2d(self.block1(image), 2)
        x = F.adaptive_avg_pool2d(self.block2(x), 1).flatten(1)
        return F.softmax(self.head(x), dim=-1)


def main():
    torch.manual_seed(0)
    model = SmallNet().eval()
    image = torch.randn(2, 3, 32, 32)

    # 1. Import. example_inputs fix the shapes and dtypes the compiled model takes (here a
    #    batch of 2). The input is named after forward()'s argument: "image".
    mod, params = ember.frontend.from_pytorch(model, image)
    print(mod)  # conv2d / batch_norm / relu ... each commented with its module path
    assert mod.params[0].name == "image"
    assert "block1.1.running_var" in params  # BatchNorm statistics are parameters too

    # 2. Compile. Binding the params makes them constants, so the compiler can fold the
    #    BatchNorms into the convolutions and fuse each block into one kernel.
    lib = ember.build(mod, target="llvm", params=params)

    # 3. Run and compare with PyTorch. Inputs go in by name or by position.
    m = ember.GraphModule(lib)
    m.set_input("image", image)
    m.run()
    out = np.asarray(m.get_output(0))
    with torch.no_grad():
        expected = model(image).numpy()
    err = float(np.abs(out - expected).max())
    print(f"max abs error vs PyTorch: {err:.2e}")
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-5)

    # 4. A traced module works the same way and gives the same graph.
    with torch.no_grad():
        traced = torch.jit.trace(model, image)
    mod2, _ = ember.frontend.from_pytorch(traced, image)
    assert str(mod2) == str(mod)

    # 5. The compiled model has a fixed input shape; another shape is a clear error.
    try:
        m.set_input("image", torch.randn(1, 3, 32, 32))
    except ember.EmberError as error:
        print("as expected:", error)

    # 6. One build for a range of shapes: name the dimensions that vary, in torch.export's
    #    own form, each with its range. The graph's sizes are then symbols (image:
    #    float32[batch, 3, 32, 32]), the kernels loop to each run's sizes, and any batch from
    #    1 to 64 runs on the one build; outside the range is a clear error.
    batch = torch.export.Dim("batch", min=1, max=64)
    mod3, params3 = ember.frontend.from_pytorch(model, image, dynamic_shapes=({0: batch},))
    print(mod3.params[0].type)
    m3 = ember.GraphModule(ember.build(mod3, target="llvm", params=params3))
    for n in (1, 5, 64):
        x = torch.randn(n, 3, 32, 32)
        y = m3(image=x)
        with torch.no_grad():
            np.testing.assert_allclose(y.numpy(), model(x).numpy(), rtol=1e-4, atol=1e-5)
    try:
        m3.set_input("image", torch.randn(65, 3, 32, 32))
    except ember.EmberError as error:
        print("as expected:", error)

    # 7. An operator Ember does not support is reported with the module path where it is
    #    used, all of them in one error, before anything is compiled.
    class Odd(nn.Module):
        def forward(self, x):
            return torch.cumprod(x, dim=1)
    try:
        ember.frontend.from_pytorch(nn.Sequential(nn.Linear(4, 4), Odd()), torch.randn(1, 4))
    except ember.EmberError as error:
        print(error)
        assert "cumprod" in str(error) and "'1'" in str(error)
    return err


def test_lesson_03():
    assert main() < 1e-4


if __name__ == "__main__":
    main()
