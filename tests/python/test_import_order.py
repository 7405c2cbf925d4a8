"""Ember links LLVM statically with hidden symbols, so importing it before or after torch
(which carries its own LLVM pieces) must work either way. Each order runs in a fresh process."""
import os
import subprocess
import sys

import pytest

PYTHON_DIR = os.path.join(os.path.dirname(__file__), "..", "..", "python")

SCRIPT = """
import numpy as np
{imports}
from ember import ir, op
x = ir.var("x", shape=(4, 8))
w = torch.randn(5, 8)
f = ir.Function([x], op.nn.relu(op.nn.dense(x, ir.const(w))))
m = ember.GraphModule(ember.build(f))
data = torch.randn(4, 8)
m.set_input("x", data)
m.run()
expected = torch.relu(data @ w.T)
error = (torch.from_dlpack(m.get_output(0)) - expected).abs().max().item()
assert error < 1e-5, error
print("ok", error)
"""


@pytest.mark.parametrize("imports", ["import torch\nimport ember", "import ember\nimport torch"])
def test_import_order(imports):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [os.path.abspath(PYTHON_DIR),
                                                       env.get("PYTHONPATH")]))
    result = subprocess.run([sys.executable, "-c", SCRIPT.format(imports=imports)], env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("ok")
