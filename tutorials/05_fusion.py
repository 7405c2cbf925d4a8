"""Lesson 05: what got fused? Passes, the fusion report, and the fused graph.

    PYTHONPATH=python python3 tutorials/05_fusion.py

A question users ask about every compiler: "is there any way to check whether all
operations are fused?" In Ember the answer is always at hand. This lesson takes the network
from the TVM forum thread that asked it — a depthwise convolution, a BatchNorm and a ReLU —
and shows what the graph passes do to it, step by step:

  SimplifyInference  BatchNorm (inference) becomes a per-channel multiply and add
  FoldConstant       the multiply's scale (gamma / sqrt(var + eps)) is computed once, now
  FoldScaleAxis      the multiply folds into the convolution's weights, the add is a bias
  FuseOps            conv, bias add and ReLU become one kernel: the ReLU runs inside the
                     convolution's loop nest on each output tile, not in a second pass

Each pass can be switched off with ember.transform.PassContext, and the model still runs
and gives the same numbers; only the kernel count and the time change.
"""
import numpy as np
import torch

import ember
from ember.transform import PassContext


class ForumNet(torch.nn.Module):
    def __init__(self, channels=64):
        super().__init__()
        self.conv = torch.nn.Conv2d(channels, channels, 3, padding=1, groups=channels)
        self.bn = torch.nn.BatchNorm2d(channels)
        self.relu = torch.nn.ReLU()

    def forward(self, x):
        return self.relu(self.bn(self.conv(x)))


def main(size=32):
    torch.manual_seed(0)
    model = ForumNet().eval()
    model.bn.running_var.uniform_(0.5, 1.5)  # non-trivial statistics
    x = torch.randn(1, 64, size, size)
    mod, params = ember.frontend.from_pytorch(model, (x,))

    # 1. With every pass (the default, opt_level=3): one kernel. Its name lists the PyTorch
    #    modules that went into it, folded BatchNorm included.
    lib = ember.build(mod, target="llvm", params=params)
    report = lib.fusion_report()
    print(report)
    assert len(report) == 1 and report[0].name == "conv + bn + relu"
    assert "nn.batch_norm" not in lib.get_source("graph")

    # 2. The fused kernel's loop IR: the ReLU (max with 0) is applied to the convolution's
    #    accumulator tile inside the same parallel loop; no buffer holds the conv output.
    loop_ir = lib.get_source("loop")
    print(loop_ir[:2500])

    # 3. A picture of the fused graph: Graphviz DOT with one cluster per kernel
    #    (lib.fusion_graph("fused.svg") renders it when Graphviz is installed).
    print(lib.fusion_graph())

    # 4. Switch passes off and compare: same numbers, more kernels.
    outputs = {}
    for label, cfg in [("all passes", {}),
                       ("FuseOps disabled", {"disabled_passes": ["FuseOps"]}),
                       ("FuseOps+FoldConstant disabled",
                        {"disabled_passes": ["FuseOps", "FoldConstant"]})]:
        with PassContext(**cfg):
            lib = ember.build(mod, target="llvm", params=params)
        m = ember.GraphModule(lib)
        m.set_input("x", x.numpy())
        m.run()
        outputs[label] = np.asarray(m.get_output(0)).copy()
        print(f"{label:32s} {len(lib.fusion_report()):3d} kernels,"
              f" median {m.benchmark(number=5, repeat=10).median:.3f} ms")
        # Unfused edges say why they were not fused.
        for producer, consumer, why in lib.fusion_report().unfused[:3]:
            print(f"    {producer} -> {consumer}: {why}")
    with torch.no_grad():
        expected = model(x).numpy()
    for label, out in outputs.items():
        np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-5, err_msg=label)

    # 5. Per-kernel times, like TVM's debug executor.
    m = ember.GraphModule(ember.build(mod, target="llvm", params=params))
    m.set_input("x", x.numpy())
    m.profile()
    return len(report)


def test_lesson_05():
    assert main(size=16) == 1


if __name__ == "__main__":
    main()
