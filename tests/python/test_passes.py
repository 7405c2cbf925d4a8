"""Pass configuration, fusion report, fusion graph and logs (issue: passes and fusion).

Numerical tolerance: fused and unfused builds of the same graph agree within 1e-5
(float32, the same summation order inside a kernel)."""
import logging
import shutil

import numpy as np
import pytest

import ember
from ember import ir, op
from ember.transform import PassContext

RS = np.random.RandomState(0)


def conv_bn_relu(channels=8, depthwise=False, hw=16):
    """conv1 -> bn1 -> relu1, built by hand with source names."""
    x = ir.var("x", shape=(1, channels, hw, hw), dtype="float32")
    groups = channels if depthwise else 1
    w = RS.randn(channels, channels // groups, 3, 3).astype("float32")
    y = op.nn.conv2d(x, ir.const(w, name="conv1.weight"), padding=(1, 1), groups=groups,
                     name="conv1")
    stats = [RS.rand(channels).astype("float32") + 0.5, RS.randn(channels).astype("float32"),
             RS.randn(channels).astype("float32"), RS.rand(channels).astype("float32") + 0.5]
    y = op.nn.batch_norm(y, *[ir.const(s) for s in stats], name="bn1")
    y = op.nn.relu(y, name="relu1")
    return ir.Function([x], y)


def run(lib, *inputs):
    m = ember.GraphModule(lib)
    for i, a in enumerate(inputs):
        m.set_input(i, a)
    m.run()
    return [np.asarray(m.get_output(i)).copy() for i in range(m.get_num_outputs())]


def test_unknown_pass_name_lists_the_known_ones():
    with pytest.raises(ember.EmberError) as e:
        PassContext(disabled_passes=["FuseOp"])
    for name in ("SimplifyInference", "FoldConstant", "FoldScaleAxis", "FuseOps"):
        assert name in str(e.value)


def test_opfusion_is_another_name_for_fuseops():
    f = conv_bn_relu()
    with PassContext(opt_level=3, disabled_passes=["OpFusion"]):
        lib = ember.build(f)
    assert len(lib.fusion_report()) > 1
    assert all("FuseOps is disabled" in why for _, _, why in lib.fusion_report().unfused)


def test_all_passes_fold_batch_norm_and_fuse_into_one_kernel():
    f = conv_bn_relu()
    lib = ember.build(f)  # default: opt_level 3, everything on
    report = lib.fusion_report()
    assert len(report) == 1, str(report)
    k = report[0]
    assert k.name == "conv1 + bn1 + relu1"
    assert "nn.batch_norm" not in k.ops
    assert k.ops[0] == "nn.conv2d" and k.ops[-1] == "nn.relu"
    assert k.anchor == "nn.conv2d"
    assert k.patterns and "epilogue" in k.patterns[0]
    assert "nn.batch_norm" not in lib.get_source("graph")
    assert "conv1 + bn1 + relu1" in str(report)


@pytest.mark.parametrize("depthwise", [False, True])
def test_every_configuration_gives_the_same_numbers(depthwise):
    f = conv_bn_relu(depthwise=depthwise)
    x = RS.randn(1, 8, 16, 16).astype("float32")
    configs = [dict(), dict(disabled_passes=["FuseOps"]),
               dict(disabled_passes=["FuseOps", "FoldConstant"]), dict(opt_level=0),
               dict(opt_level=1), dict(opt_level=2)]
    results = []
    kernels = []
    for cfg in configs:
        with PassContext(**cfg):
            lib = ember.build(f)
        kernels.append(len(lib.fusion_report()))
        results.append(run(lib, x)[0])
    for r in results[1:]:
        np.testing.assert_allclose(r, results[0], rtol=1e-5, atol=1e-5)
    assert kernels[0] == 1
    assert kernels[3] >= 3  # opt_level 0: SimplifyInference only, one kernel per op


def test_opt_level_zero_keeps_one_kernel_per_op_and_required_passes_run():
    f = conv_bn_relu()
    with PassContext(opt_level=0):
        lib = ember.build(f)
    ops = [k.ops for k in lib.fusion_report()]
    assert all(len(o) == 1 for o in ops)
    with PassContext(opt_level=0, required_passes=["FuseOps"]):
        fused = ember.build(f)
    assert len(fused.fusion_report()) < len(ops)


def test_pass_contexts_nest():
    f = conv_bn_relu()
    with PassContext(disabled_passes=["FuseOps"]):
        with PassContext(opt_level=3):
            inner = ember.build(f)
        outer = ember.build(f)
    assert len(inner.fusion_report()) == 1
    assert len(outer.fusion_report()) > 1


def test_build_logs_fusion_decisions(caplog):
    f = conv_bn_relu()
    with caplog.at_level(logging.INFO, logger="ember"):
        ember.build(f)
    text = caplog.text
    assert "fused" in text and "relu1" in text


def test_unfused_lists_pairs_with_reasons():
    x = ir.var("x", shape=(1, 4, 8, 8), dtype="float32")
    w = ir.const(RS.randn(4, 4, 3, 3).astype("float32"))
    a = op.nn.conv2d(x, w, padding=(1, 1), name="conv1")
    y = ir.Tuple([a, op.nn.relu(a, name="relu1")])  # conv1 is also a model output
    lib = ember.build(ir.Function([x], y))
    unfused = lib.fusion_report().unfused
    assert len(unfused) == 1
    producer, consumer, why = unfused[0]
    assert "conv1" in producer and "relu1" in consumer and "model output" in why
    out = run(lib, RS.randn(1, 4, 8, 8).astype("float32"))
    np.testing.assert_allclose(out[1], np.maximum(out[0], 0), rtol=0, atol=0)


def test_views_are_not_kernels():
    x = ir.var("x", shape=(2, 3, 4), dtype="float32")
    lib = ember.build(ir.Function([x], op.reshape(x, newshape=(6, 4))))
    assert len(lib.fusion_report()) == 0
    data = RS.randn(2, 3, 4).astype("float32")
    np.testing.assert_array_equal(run(lib, data)[0], data.reshape(6, 4))


def test_fusion_graph_dot_and_render(tmp_path):
    lib = ember.build(conv_bn_relu())
    dot = lib.fusion_graph()
    assert dot.startswith("digraph") and "cluster_0" in dot and "nn.conv2d" in dot
    lib.fusion_graph(tmp_path / "g.dot")
    assert (tmp_path / "g.dot").read_text() == dot
    if shutil.which("dot"):
        lib.fusion_graph(tmp_path / "g.svg")
        assert (tmp_path / "g.svg").read_text().lstrip().startswith(("<?xml", "<svg"))
    else:
        with pytest.raises(ember.EmberError, match="graphviz"):
            lib.fusion_graph(tmp_path / "g.svg")


def test_dump_ir_config_prints_each_pass(capfd):
    with PassContext(config={"dump_ir": True}):
        ember.build(conv_bn_relu())
    err = capfd.readouterr().err
    for name in ("SimplifyInference", "FoldConstant", "FoldScaleAxis", "FuseOps"):
        assert f"after {name}" in err
    # The CPU kernels' loop passes, each logged after lowering, in their list's order.
    steps = ["LowerGraph", "RollLongEpilogues", "VectorizeRowInvariants", "AnnotateLoops",
             "SerialBelowParallelGrain"]
    at = [err.index(f"after {name} (step") for name in steps]
    assert at == sorted(at)


def test_bad_config_values_are_errors():
    with pytest.raises(ember.EmberError):
        PassContext(opt_level=-1)
    with pytest.raises(ember.EmberError):
        PassContext(disabled_passes="FuseOps")  # a string, not a list
    with PassContext(config={"FuseOps.max_depth": 0}):
        with pytest.raises(ember.EmberError, match="max_depth"):
            ember.build(conv_bn_relu())


def test_profile_lists_each_kernel():
    lib = ember.build(conv_bn_relu())
    m = ember.GraphModule(lib)
    m.set_input("x", RS.randn(1, 8, 16, 16).astype("float32"))
    table = m.profile()
    assert "conv1 + bn1 + relu1" in str(table)


def test_reduction_fuses_onto_the_matmul_output_without_storing_it():
    # dense -> relu -> sum over the output features: one kernel; the dense output exists only
    # as one vector tile inside the sum's loop (cuDNN's reduction on the GEMM output).
    x = ir.var("x", shape=(3, 40), dtype="float32")
    w = RS.randn(50, 40).astype("float32")
    y = op.sum(op.nn.relu(op.nn.dense(x, ir.const(w), name="fc"), name="act"), axis=[1],
               name="rowsum")
    f = ir.Function([x], y)
    # The schedule is tested with FuseOps' cost rule off: at 3 x 50 it prices the fused kernel
    # above the separate ones and declines it (the report says so).
    with PassContext(config={"FuseOps.cost_model": "none"}):
        lib = ember.build(f)
    report = lib.fusion_report()
    assert len(report) == 1, str(report)
    assert report[0].ops == ["nn.dense_packed", "nn.relu", "sum"]  # AlterOpLayout packed w
    loop = lib.get_source("loop")
    import re
    sizes = [int(n) for n in re.findall(r"allocate \S+: float32\[(\d+)\]", loop)]
    assert all(n < 3 * 50 for n in sizes), loop
    data = RS.randn(3, 40).astype("float32")
    got = run(lib, data)[0]
    with PassContext(disabled_passes=["FuseOps"]):
        unfused = run(ember.build(f), data)[0]
    ref = np.maximum(data.astype(np.float64) @ w.T.astype(np.float64), 0).sum(axis=1)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got, unfused, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("bits", [256, 512])
def test_batch_shared_dense_matches_pytorch_and_unbatched(bits):
    """BatchSharedDense: an unrolled LSTM cell (16 steps) and a Siamese pair of branches
    sharing one Linear. The input projections of every step become one dense over 16 rows
    (fewer GEMM kernels); the numbers match PyTorch (float32 rtol 1e-4) and the build with
    the pass disabled (1e-5)."""
    import torch

    class Unrolled(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.cell = torch.nn.LSTMCell(24, 20)

        def forward(self, x):
            h = c = torch.zeros(1, 20)
            for t in range(x.shape[0]):
                h, c = self.cell(x[t:t + 1], (h, c))
            return h

    class Siamese(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(17, 9)

        def forward(self, a, b):
            return torch.cat([torch.relu(self.fc(a)), self.fc(torch.tanh(b))])

    torch.manual_seed(0)
    for model, inputs in ((Unrolled(), (torch.randn(16, 24),)),
                          (Siamese(), (torch.randn(3, 17), torch.randn(5, 17)))):
        model.eval()
        mod, params = ember.frontend.from_pytorch(model, inputs)
        outs, kernels = {}, {}
        for name, disabled in (("on", []), ("off", ["BatchSharedDense"])):
            with PassContext(opt_level=3, disabled_passes=disabled):
                lib = ember.build(mod, target=f"llvm -vector-bits={bits}", params=params)
            m = ember.GraphModule(lib)
            for i, x in enumerate(inputs):
                m.set_input(i, x.numpy())
            m.run()
            outs[name] = m.get_output(0).numpy()
            kernels[name] = sum(any(o.startswith("nn.dense") for o in k.ops)
                                for k in lib.fusion_report())
        with torch.no_grad():
            want = model(*inputs).numpy()
        np.testing.assert_allclose(outs["on"], want, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(outs["on"], outs["off"], rtol=1e-5, atol=1e-5)
        assert kernels["on"] < kernels["off"], kernels
