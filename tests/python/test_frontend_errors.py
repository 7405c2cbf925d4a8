"""from_pytorch's user-facing errors: every unsupported op listed at once with its module
paths, dynamic control flow, bad arguments, and a wrong input shape at set_input."""
import numpy as np
import pytest
import torch
import torch.nn as nn

import ember
import models
from ember.frontend import from_pytorch


class Unsupported(nn.Module):
    def forward(self, x):
        return torch.logcumsumexp(torch.cumprod(x, -1), 0)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.odd = Unsupported()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        return torch.i0(torch.cumprod(self.fc(self.odd(x)), 0)) * x


class ManyUnsupported(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.Sequential(Block(), nn.Identity())
        self.head = Unsupported()

    def forward(self, x):
        return self.head(self.blocks(x).float())


@pytest.mark.parametrize("entry", ["module", "trace"])
def test_every_unsupported_op_is_listed_with_its_module_paths(entry):
    x = torch.randn(4, 8)
    model = ManyUnsupported().eval()
    if entry == "trace":
        with torch.no_grad():
            model = torch.jit.trace(model, x)
    with pytest.raises(ember.EmberError) as info:
        from_pytorch(model, x)
    text = str(info.value)
    sep = "." if entry == "module" else "::"
    lines = {line.split(" at ")[0].strip(): line for line in text.splitlines() if " at " in line}
    assert "3 PyTorch operator(s)" in text, text
    assert set(lines) >= {f"aten{sep}cumprod" + (".default" if sep == "." else ""),
                          f"aten{sep}logcumsumexp" + (".default" if sep == "." else ""),
                          f"aten{sep}i0" + (".default" if sep == "." else "")}, text
    cumprod = next(v for k, v in lines.items() if "cumprod" in k)
    for path in ("'blocks.0.odd'", "'blocks.0'", "'head'"):
        assert path in cumprod, text
    logcumsumexp = next(v for k, v in lines.items() if "logcumsumexp" in k)
    assert "'blocks.0.odd'" in logcumsumexp and "'head'" in logcumsumexp, text
    i0 = next(v for k, v in lines.items() if "i0" in k)
    assert "'blocks.0'" in i0, text


class DataDependent(nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return x * 2
        return x - 1


def test_dynamic_control_flow_says_what_to_do():
    with pytest.raises(ember.EmberError) as info:
        from_pytorch(DataDependent(), torch.randn(2, 3))
    text = str(info.value)
    assert "DataDependent" in text and "control flow" in text and "torch.jit.trace" in text


def test_scripted_control_flow_says_what_to_do():
    with pytest.raises(ember.EmberError) as info:
        from_pytorch(torch.jit.script(DataDependent()), torch.randn(2, 3))
    text = str(info.value)
    assert "prim::If" in text and "control flow" in text and "torch.jit.trace" in text


def test_training_mode_batch_norm_in_an_exported_program():
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4)).train()
    program = torch.export.export(model, (torch.randn(2, 3, 8, 8),))
    with pytest.raises(ember.EmberError, match=r"model\.eval\(\)") as info:
        from_pytorch(program, (torch.randn(2, 3, 8, 8),))
    assert "'1'" in str(info.value)  # the BatchNorm's module path


def test_bad_arguments():
    model = nn.Linear(4, 2)
    with pytest.raises(ember.EmberError, match="example_inputs"):
        from_pytorch(model, [np.zeros((1, 4), np.float32)])
    with pytest.raises(ember.EmberError, match="float16"):
        from_pytorch(model.half(), torch.zeros(1, 4, dtype=torch.float16))
    with pytest.raises(ember.EmberError, match="input_names"):
        from_pytorch(nn.Linear(4, 2), torch.zeros(1, 4), input_names=["a", "b"])
    with pytest.raises(ember.EmberError, match="nn.Module"):
        from_pytorch(lambda x: x, torch.zeros(1, 4))
    with pytest.raises(ember.EmberError, match="2 input"):
        from_pytorch(nn.Bilinear(4, 4, 2), torch.zeros(1, 4))


def test_input_shape_mismatch_at_set_input():
    model, inputs = models.make("mlp", 2)
    mod, params = from_pytorch(model, inputs)
    m = ember.GraphModule(ember.build(mod, params=params))
    with pytest.raises(ember.EmberError) as info:
        m.set_input("x", torch.randn(3, 32))
    text = str(info.value)
    assert "'x'" in text and "(2, 32)" in text and "(3, 32)" in text, text
    with pytest.raises(ember.EmberError) as info:
        m.set_input(0, torch.zeros(2, 32, dtype=torch.int64))
    assert "float32" in str(info.value) and "int64" in str(info.value)


def test_a_program_exported_with_dynamic_shapes_imports_its_ranges():
    """An ExportedProgram with a symbolic batch imports over the batch's range (issue 44): its
    symbol is named as torch names it, or after the Dim when dynamic_shapes is passed too;
    one build runs any batch in range, and one outside it is a shape error naming it."""
    model, x = nn.Sequential(nn.Linear(16, 8), nn.ReLU()).eval(), torch.randn(4, 16)
    batch = torch.export.Dim("batch", min=1, max=32)
    program = torch.export.export(model, (x,), dynamic_shapes=({0: batch},))
    mod, _ = from_pytorch(program, (x,))
    assert str(mod.params[0].type).startswith("float32[s"), mod.params[0].type
    mod, params = from_pytorch(program, (x,), dynamic_shapes=({0: batch},))
    m = ember.GraphModule(ember.build(mod, params=params))
    assert m.symbols == [("batch", 1, 32)]
    for n in (7, 1, 32):
        x = torch.randn(n, 16)
        m.set_input(0, x.numpy())
        m.run()
        np.testing.assert_allclose(m.get_output(0).numpy(), model(x).detach().numpy(),
                                   rtol=1e-5, atol=1e-6)
    with pytest.raises(ember.EmberError, match=r"batch = 33, outside batch's range \[1, 32\]"):
        m.set_input(0, torch.randn(33, 16))
