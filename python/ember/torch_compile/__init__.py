"""torch.compile(model, backend="ember"): Ember as a PyTorch 2 (Dynamo) backend.

    with torch.no_grad():
        fast = torch.compile(model.eval(), backend="ember",
                             options={"opt_level": 3, "disabled_passes": ["FuseOps"]})
        y = fast(x)
    print(ember.last_compile_report())

Each graph Dynamo captures is exported to ATen (torch.export), split into the largest parts
Ember supports (PyTorch's capability-based partitioner, fed by Ember's own converters and
type checks: an op Ember lacks, or one whose attributes Ember rejects, stays in PyTorch) and
each part is built by ember.build and run by Ember; the rest runs in PyTorch. Parameters and
buffers are frozen into the build (so BatchNorm folding and weight packing happen): after
changing weights call torch._dynamo.reset(). Inference only: a graph that needs gradients
runs in PyTorch (the report says why).

A graph with symbolic sizes (dynamic=True, or Dynamo's recompile under automatic dynamic
shapes) is built once for a range of each size and serves every size in it (_dynamic.py):
the range is Dynamo's (2 up; mark_dynamic's max where given), an unbounded size capped at
options={"dynamic_max": N} (default 256) or its first size's next power of two if larger; a
longer size rebuilds with that maximum doubled. A graph Ember does not build for run-time
sizes (a convolution over run-time spatial sizes, today; a size that is an int argument
rather than a tensor's dimension; an op Ember takes only at static sizes; a first run that
differs from PyTorch's) is built per concrete shape as a static graph is (the last 8 kept).
ember.last_compile_report() says which, and how many builds its graph took.

The backend is found by name through the package's entry point (pyproject.toml) once Ember
is installed, and `import ember` registers it too (for a source checkout on PYTHONPATH).
torch is imported only when a graph is compiled.
"""
from ._report import CompileReport, last_compile_report

__all__ = ["ember_backend", "last_compile_report", "CompileReport"]


def ember_backend(gm, example_inputs, options=None, mode=None):
    """The Dynamo backend: compiles the FX graph `gm` for `example_inputs` and returns the
    callable Dynamo runs instead. `options` (torch.compile's options=) are "opt_level",
    "disabled_passes", "num_threads", "tuning_log" and "dynamic_max" (see _options.py)."""
    from ._compile import compile_graph
    return compile_graph(gm, example_inputs, options, mode)
