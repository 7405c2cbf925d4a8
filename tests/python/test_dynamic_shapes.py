"""Dynamic shapes (issue 44): one build serves every size in its symbols' ranges.

Each model is imported with torch.export Dims (from_pytorch(dynamic_shapes=...)), built
once, and run at several sizes against PyTorch eager on the same inputs. Tolerances: float32
against float32 eager, max abs error 2e-4 for the transformer blocks (LayerNorm outputs of
order 1 after 2 layers of 768-wide GEMMs) and 1e-5 relative to the output's scale for the
CNN. Fused and unfused builds of one dynamic model agree, and bad shapes are clear errors.
"""
import numpy as np
import pytest
import torch
from torch.export import Dim

import ember
from ember import EmberError, ir

import models

transformers = pytest.importorskip("transformers")

BATCH = Dim("batch", min=1, max=16)
SEQ = Dim("seq", min=1, max=512)
TOKENS = {"input_ids": {0: BATCH, 1: SEQ}, "attention_mask": {0: BATCH, 1: SEQ}}
# (batch, seq) runs: the lengths at batch 1, and its batches at two lengths.
RUNS = [(1, 1), (1, 7), (1, 64), (1, 127), (1, 128), (1, 200), (1, 384), (1, 512), (3, 127),
        (16, 64)]


class LastHidden(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask):
        return self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state


def tokens(batch, seq, seed):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, 1000, (batch, seq), generator=g)
    mask = torch.ones(batch, seq, dtype=torch.int64)
    if seq > 3:
        mask[0, -2:] = 0  # padding at the end of the first sequence
    return ids, mask


def dynamic_build(model, example, dynamic_shapes, **ctx):
    mod, params = ember.frontend.from_pytorch(model, example, dynamic_shapes=dynamic_shapes)
    with ember.transform.PassContext(opt_level=3, **ctx):
        return mod, ember.GraphModule(ember.build(mod, target="llvm", params=params))


def check_text_model(model, runs, atol=2e-4):
    model = LastHidden(model).eval()
    mod, m = dynamic_build(model, tokens(2, 16, 0), TOKENS)
    assert m.symbols == [("batch", 1, 16), ("seq", 1, 512)]
    assert "int64[batch, seq]" in str(mod.params[0].type)
    for i, (batch, seq) in enumerate(runs):
        ids, mask = tokens(batch, seq, i)
        m.set_input("input_ids", ids.numpy())
        m.set_input("attention_mask", mask.numpy())
        m.run()
        assert m.symbol_values == {"batch": batch, "seq": seq}
        with torch.no_grad():
            want = model(ids, mask).numpy()
        got = m.get_output(0).numpy()
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, atol=atol, rtol=0, err_msg=f"{batch}x{seq}")


def test_bert_encoder_one_build_serves_every_length_and_batch():
    torch.manual_seed(0)
    config = transformers.BertConfig(num_hidden_layers=2)  # BERT-base widths
    check_text_model(transformers.BertModel(config).eval(), RUNS)


def test_gpt2_block_one_build_serves_every_length_and_batch():
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=1, use_cache=False)
    check_text_model(transformers.GPT2Model(config).eval(), RUNS)


class CausalSelfAttention(torch.nn.Module):
    def __init__(self, width=64, heads=4):
        super().__init__()
        self.heads, self.qkv = heads, torch.nn.Linear(width, 3 * width)

    def forward(self, x):
        b, s, w = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.heads, w // self.heads).permute(2, 0, 3, 1, 4)
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return y.transpose(1, 2).reshape(b, s, w)


def test_causal_attention_over_run_time_lengths_is_one_attention_kernel():
    # SDPA's is_causal over a run-time length: the causal mask is the leading part of one made
    # at the maximum, which RecognizeAttention reads as causality (nn.attention's own loop
    # nest, its query blocks chosen per part of the range), with and without that pass.
    torch.manual_seed(0)
    model = CausalSelfAttention().eval()
    shapes = ({0: Dim("batch", min=1, max=4), 1: Dim("seq", min=1, max=200)},)
    lib = None
    for disabled in ([], ["RecognizeAttention"]):
        mod, params = ember.frontend.from_pytorch(model, (torch.randn(2, 8, 64),),
                                                  dynamic_shapes=shapes)
        with ember.transform.PassContext(opt_level=3, disabled_passes=disabled):
            lib = ember.build(mod, target="llvm", params=params)
        fused = "nn.attention" in str(lib.function)
        assert fused == (not disabled)
        assert not fused or "causal=1" in str(lib.function)
        m = ember.GraphModule(lib)
        for batch, seq in ((1, 1), (2, 9), (1, 70), (3, 200)):
            x = torch.randn(batch, seq, 64)
            with torch.no_grad():
                want = model(x).numpy()
            got = m(x=x.numpy()).numpy()
            np.testing.assert_allclose(got, want, atol=2e-5, rtol=0, err_msg=f"{batch}x{seq}")


def test_resnet50_dynamic_batch():
    torch.manual_seed(0)
    model = models.resnet50(width=64, classes=1000).eval()
    batch = Dim("batch", min=1, max=32)
    _, m = dynamic_build(model, (torch.randn(2, 3, 224, 224),), ({0: batch},))
    for n in (1, 5, 32):
        x = torch.randn(n, 3, 224, 224)
        m.set_input("x", x.numpy())
        m.run()
        with torch.no_grad():
            want = model(x).numpy()
        got = m.get_output(0).numpy()
        assert got.shape == (n, 1000)
        np.testing.assert_allclose(got, want, atol=1e-5 * np.abs(want).max(), rtol=0)


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b, self.norm = torch.nn.Linear(32, 64), torch.nn.Linear(64, 32), \
            torch.nn.LayerNorm(32)

    def forward(self, x):
        h = self.norm(self.b(torch.relu(self.a(x))) + x)
        return h.softmax(-1), h.reshape(-1)


def test_fused_and_unfused_dynamic_builds_agree():
    torch.manual_seed(0)
    model = Mlp().eval()
    shapes = ({0: Dim("batch", min=1, max=64)},)
    _, fused = dynamic_build(model, (torch.randn(4, 32),), shapes)
    _, unfused = dynamic_build(model, (torch.randn(4, 32),), shapes, disabled_passes=["FuseOps"])
    for n in (1, 3, 17, 64):
        x = torch.randn(n, 32).numpy()
        a, b = fused(x=x), unfused(x=x)
        want = [t.detach().numpy() for t in model(torch.from_numpy(x))]
        for got_f, got_u, w in zip(a, b, want):
            assert got_f.shape == w.shape  # the flattened output too: [n * 32]
            np.testing.assert_allclose(got_f.numpy(), got_u.numpy(), atol=1e-6, rtol=0)
            np.testing.assert_allclose(got_f.numpy(), w, atol=1e-5, rtol=0)


def test_a_saved_dynamic_model_runs_any_size_in_range(tmp_path):
    torch.manual_seed(0)
    model = Mlp().eval()
    mod, params = ember.frontend.from_pytorch(model, (torch.randn(4, 32),),
                                              dynamic_shapes=({0: Dim("rows", max=40)},))
    path = tmp_path / "mlp.ember"
    ember.build(mod, target="llvm", params=params).export(path)
    lib = ember.load(path)
    assert "One build for every run with rows in [1, 40]" in str(lib.fusion_report())
    m = ember.GraphModule(lib)
    assert m.symbols == [("rows", 1, 40)]
    for n in (40, 2, 9):
        x = torch.randn(n, 32)
        got = m(x=x.numpy())[0].numpy()
        np.testing.assert_allclose(got, model(x)[0].detach().numpy(), atol=1e-5, rtol=0)


def test_bad_shapes_are_errors_naming_the_symbol_range_and_input():
    x = ir.var("x", [ir.symbol("rows", 2, 8), 4])
    y = ir.var("y", [ir.symbol("rows", 2, 8), 4])
    m = ember.GraphModule(ember.build(ir.Function([x, y], ir.call("add", [x, y]))))
    with pytest.raises(EmberError, match=r"input 'x' dimension 0 is rows = 9, outside "
                                         r"rows's range \[2, 8\]"):
        m.set_input("x", np.zeros((9, 4), np.float32))
    with pytest.raises(EmberError, match="rows = 1, outside"):
        m.set_input("x", np.zeros((1, 4), np.float32))
    with pytest.raises(EmberError, match="dimension 1"):
        m.set_input("x", np.zeros((3, 5), np.float32))
    m.set_input("x", np.zeros((3, 4), np.float32))
    m.set_input("y", np.zeros((5, 4), np.float32))
    with pytest.raises(EmberError, match=r"inputs 'x' and 'y' disagree on rows"):
        m.run()


def test_a_cuda_build_over_run_time_sizes_is_a_clear_error():
    x = ir.var("x", [ir.symbol("rows", 1, 64), 32])
    w = ir.const(np.ones((16, 32), dtype="float32"))
    f = ir.Function([x], ir.call("nn.relu", [ir.call("nn.dense", [x, w])]))
    with pytest.raises(EmberError, match=r"rows in \[1, 64\].*CUDA builds take static sizes"):
        ember.build(f, target="cuda -arch=sm_80")


def test_import_errors_for_ranges_ember_cannot_build():
    model = Mlp().eval()
    with pytest.raises(EmberError, match="no upper bound; give its torch.export.Dim a max"):
        ember.frontend.from_pytorch(model, (torch.randn(4, 32),),
                                    dynamic_shapes=({0: Dim("rows")},))
    traced = torch.jit.trace(model, torch.randn(4, 32), strict=False)
    with pytest.raises(EmberError, match="dynamic_shapes needs torch.export"):
        ember.frontend.from_pytorch(traced, (torch.randn(4, 32),),
                                    dynamic_shapes=({0: Dim("rows", max=8)},))


def test_the_cpp_runtime_runs_a_dynamic_model_at_any_size(tmp_path):
    """The C++ lesson (linked only with ember_runtime) loads one saved dynamic model and
    runs it at two sizes, bit for bit with the in-process build."""
    import pathlib
    import subprocess
    lesson = pathlib.Path(__file__).parents[2] / "build" / "tutorial_04_deploy_cpp"
    if not lesson.exists():
        pytest.skip(f"{lesson} is not built (bash scripts/build.sh builds it)")
    torch.manual_seed(0)
    model = Mlp().eval()
    mod, params = ember.frontend.from_pytorch(model, (torch.randn(4, 32),),
                                              dynamic_shapes=({0: Dim("rows", max=40)},))
    lib = ember.build(mod, target="llvm", params=params)
    lib.export(tmp_path / "mlp.ember")
    m = ember.GraphModule(lib)
    for n in (3, 40):
        x = torch.randn(n, 32).numpy()
        outputs = m(x=x)
        np.save(tmp_path / f"x{n}.npy", x)
        expected = [tmp_path / f"want{n}_{i}.npy" for i in range(len(outputs))]
        for path, out in zip(expected, outputs):
            np.save(path, out.numpy())
        done = subprocess.run([str(lesson), str(tmp_path / "mlp.ember"), str(tmp_path / f"x{n}.npy"),
                               ",".join(str(p) for p in expected)],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "bit for bit" in done.stdout


class MeanPool(torch.nn.Module):
    def forward(self, x):
        return x.mean(1)


@pytest.mark.parametrize("model, shapes, why", [
    (torch.nn.Conv2d(4, 4, 3, padding=1, groups=4), ({2: Dim("h", min=4, max=16)},),
     "windows run over a run-time height or width"),
    (MeanPool(), ({1: Dim("seq", max=64)},), "averages over a run-time axis"),
])
def test_ops_whose_kernels_use_a_run_time_size_as_a_value_are_refused(model, shapes, why):
    """A compute rule that uses a run-time size as a value (a pad's far edge, a mean's count)
    would compute the largest run's answer: the build says which op and why, never a wrong
    result."""
    x = torch.randn(2, 4, 8, 8) if isinstance(model, torch.nn.Conv2d) else torch.randn(2, 8, 4)
    mod, params = ember.frontend.from_pytorch(model.eval(), (x,), dynamic_shapes=shapes)
    with pytest.raises(EmberError, match=why):
        ember.build(mod, target="llvm", params=params)


@pytest.mark.parametrize("cpu", ["znver1", "znver4"])
def test_runs_shorter_than_a_register_tile_get_their_own_kernel(cpu):
    """A GEMM over run-time rows dispatches runs shorter than its register tile to builds with
    that many rows; the report lists the counts. Built (not run) for a named CPU, so the
    machine model's tile is the same on every host."""
    torch.manual_seed(0)
    mod, params = ember.frontend.from_pytorch(
        Mlp().eval(), (torch.randn(4, 32),), dynamic_shapes=({0: Dim("batch", max=64)},))
    lib = ember.build(mod, target=f"llvm -mcpu={cpu}", params=params)
    assert "+runs(batch=1" in str(lib.fusion_report()), lib.fusion_report()
