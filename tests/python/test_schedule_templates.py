"""Which schedule template (and knob values) each kind of kernel gets, per CPU: a golden
table (tests/python/golden/schedule_templates.json) of representative layers (BERT's
GEMMs and row statistics, ResNet's and MobileNet's convs, a batch-1 GEMV, pooling,
softmax, transposes) built for the CPU matrix (Zen 1 with 128-bit FMA units, Zen 3, Zen 4,
Skylake-AVX512; code is generated for each, nothing runs), so that a change of choice is a
visible diff of that file rather than a silent speed change. Also: every kernel names its
template in the fusion report and profile(), and a model file keeps it.

A deliberate change of choice regenerates the table:
    EMBER_UPDATE_GOLDEN=1 PYTHONPATH=python python3 -m pytest tests/python/test_schedule_templates.py
"""
import json
import os
import pathlib

import numpy as np
import pytest
import torch
import torch.nn as nn

import ember
from ember import ir, op
from ember.frontend import from_pytorch
from op_checks import STRUCTURE_CPUS, build_for

GOLDEN = pathlib.Path(__file__).parent / "golden" / "schedule_templates.json"
CPUS = ["znver1", "znver3", "znver4", "skylake-avx512"]


class DenseGelu(nn.Module):  # BERT's intermediate layer; at 1 token a GEMV
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(768, 3072)

    def forward(self, x):
        return torch.nn.functional.gelu(self.fc(x))


class DenseResidualNorm(nn.Module):  # BERT's output layer: GEMM -> add -> layer norm
    def __init__(self):
        super().__init__()
        self.fc, self.norm = nn.Linear(3072, 768), nn.LayerNorm(768)

    def forward(self, x, residual):
        return self.norm(self.fc(x) + residual)


class Attention(nn.Module):
    def forward(self, q, k, v):
        return torch.softmax(q @ k.transpose(-1, -2) * 0.125, dim=-1) @ v


def conv_bn_relu(cin, cout, k, stride=1, groups=1):
    return nn.Sequential(nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False),
                         nn.BatchNorm2d(cout), nn.ReLU())


class Transpose(nn.Module):
    def forward(self, x):
        return x.permute(0, 2, 3, 1).contiguous() + 1.0


# name -> (module maker, input shapes)
CASES = {
    "gemv_dense_gelu": (DenseGelu, [(1, 768)]),
    "gemm_dense_gelu": (DenseGelu, [(128, 768)]),
    "gemm_residual_layer_norm": (DenseResidualNorm, [(128, 3072), (128, 768)]),
    "classifier_gemv": (lambda: nn.Linear(2048, 1000), [(1, 2048)]),
    "head_gemv_10": (lambda: nn.Linear(2048, 10), [(1, 2048)]),
    "attention": (Attention, [(1, 12, 128, 64)] * 3),
    "conv3x3_56": (lambda: conv_bn_relu(64, 64, 3), [(1, 64, 56, 56)]),
    "conv3x3_14": (lambda: conv_bn_relu(256, 256, 3), [(1, 256, 14, 14)]),
    "conv1x1_7": (lambda: conv_bn_relu(512, 2048, 1), [(1, 512, 7, 7)]),
    "conv7x7_stem": (lambda: conv_bn_relu(3, 64, 7, 2), [(1, 3, 224, 224)]),
    "depthwise3x3_112": (lambda: conv_bn_relu(32, 32, 3, groups=32), [(1, 32, 112, 112)]),
    "maxpool3x3": (lambda: nn.MaxPool2d(3, 2, 1), [(1, 64, 112, 112)]),
    "global_avgpool": (lambda: nn.AdaptiveAvgPool2d(1), [(1, 2048, 7, 7)]),
    "layer_norm": (lambda: nn.LayerNorm(768), [(128, 768)]),
    "softmax": (lambda: nn.Softmax(-1), [(12, 128, 128)]),
    "transpose": (Transpose, [(1, 64, 56, 56)]),
}


def _build(case, cpu):
    make, shapes = CASES[case]
    torch.manual_seed(0)
    model = make().eval()
    inputs = tuple(torch.randn(s) for s in shapes)
    mod, params = from_pytorch(model, inputs)
    return ember.build(mod, target=f"llvm -mcpu={cpu}" if cpu else "llvm", params=params)


def _choices(lib):
    return [[k.name, k.schedule, k.schedule_knobs] for k in lib.fusion_report()]


def _table():
    return {case: {cpu: _choices(_build(case, cpu)) for cpu in CPUS} for case in CASES}


def test_templates_match_the_golden_table():
    got = _table()
    if os.environ.get("EMBER_UPDATE_GOLDEN"):
        GOLDEN.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
    want = json.loads(GOLDEN.read_text())
    changed = [f"{case} on {cpu}: {want.get(case, {}).get(cpu)} -> {got[case][cpu]}"
               for case in got for cpu in CPUS if want.get(case, {}).get(cpu) != got[case][cpu]]
    assert not changed, ("schedule choices changed (regenerate the table with "
                         "EMBER_UPDATE_GOLDEN=1 if meant):\n" + "\n".join(changed))


def test_every_kernel_names_its_template_in_reports_profile_and_model_file(tmp_path):
    lib = _build("conv3x3_56", None)  # for the host: the model file must load here
    report = lib.fusion_report()
    names = [k.schedule for k in report]
    assert all(names), names
    text = str(report)
    assert "schedule" in text.splitlines()[1]
    for k in report:
        assert k.schedule in text
    path = tmp_path / "model.ember"
    lib.export(str(path))
    loaded = ember.load(str(path)).fusion_report()
    assert [(k.schedule, k.schedule_knobs) for k in loaded] == \
        [(k.schedule, k.schedule_knobs) for k in report]


def test_profile_has_a_schedule_column():
    torch.manual_seed(0)
    mod, params = from_pytorch(nn.LayerNorm(768).eval(), (torch.randn(128, 768),))
    m = ember.GraphModule(ember.build(mod, params=params))  # for the host: it runs
    m.set_input(0, np.random.rand(128, 768).astype("float32"))
    table = m.profile(1)
    header = table.splitlines()[0]
    assert "Schedule" in header
    assert "row_statistic." in table


@pytest.mark.parametrize("bits", [256, 512])
@pytest.mark.parametrize("window,per_tile", [(7, True), (9, False)])
def test_padded_inputs_are_computed_per_tile_only_through_small_windows(bits, window, per_tile):
    # A tile of 16 output rows computes the 16 + window - 1 padded rows it reads: a 7x7
    # window's 22 are within the model's max_pad_recompute (1.4x the rows), so the padded
    # rows template computes them in cache; a 9x9 window's 24 are not, and its padded input
    # is a pass of its own before the register tiles. The same at either width.
    x = ir.var("x", (1, 32, 40, 40), "float32")
    pool = op.nn.max_pool2d(x, (window, window), strides=(1, 1),
                            padding=(window // 2, window // 2))
    w = ir.const(np.full((32, 1, window, window), 0.01, "float32"))
    depthwise = op.nn.conv2d(x, w, padding=(window // 2, window // 2), groups=32)
    for y, kind in [(pool, "pool"), (depthwise, "depthwise_conv")]:
        lib = build_for(ir.Function([x], y), STRUCTURE_CPUS[bits], bits)
        (schedule,) = [k.schedule for k in lib.fusion_report()]
        assert schedule == (f"{kind}.padded_rows" if per_tile else f"{kind}.register_tile")
