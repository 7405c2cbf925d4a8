"""Ember: a tensor compiler with an LLVM backend.

    import ember
    from ember import ir, op
    x = ir.var("x", shape=(1, 3, 32, 32))
    f = ir.Function([x], op.nn.relu(x))
    m = ember.GraphModule(ember.build(f))
    m.set_input("x", array); m.run(); out = m.get_output(0)

Every user mistake raises ember.EmberError; a compiler bug raises ember.InternalError (not
a subclass of EmberError: please report it).
"""
try:
    from . import _ember
    RUNTIME_ONLY = False
except ImportError as _error:
    # A runtime-only install (EMBER_RUNTIME_ONLY=ON) has just _ember_runtime: ember.load and
    # GraphModule work, ember.build raises. The runtime module stands in for _ember.
    try:
        from . import _ember_runtime as _ember
    except ImportError:
        raise _error from None
    import sys as _sys
    _sys.modules[__name__ + "._ember"] = _ember
    RUNTIME_ONLY = True
from ._ember import EmberError, InternalError
from .deploy import LoadedLibrary, load
from .report import FusionReport, KernelReport, attach_reports as _attach_reports
_attach_reports(LoadedLibrary)
if RUNTIME_ONLY:
    from .deploy import _runtime_only as build
else:
    from . import frontend, ir, op, target, transform
    from .build import Library, build, measure_fma_peak, native_vector_lanes
    from .tuning import tune
from .runtime import (BenchmarkResult, GraphModule, Tensor, cuda_available, get_num_threads,
                      set_num_threads)
from .torch_compile import last_compile_report
if not RUNTIME_ONLY:  # torch.compile(model, backend="ember") (imports no torch here)
    from .torch_compile import _register as _torch_compile_register
    _torch_compile_register.install()

__all__ = ["EmberError", "InternalError", "frontend", "ir", "op", "transform", "build", "Library", "FusionReport",
           "KernelReport", "GraphModule", "Tensor", "BenchmarkResult", "set_num_threads", "get_num_threads", "native_vector_lanes",
           "measure_fma_peak", "cuda_available", "tune",
           "load", "LoadedLibrary", "RUNTIME_ONLY", "last_compile_report"]
__version__ = _ember.__version__  # CMakeLists.txt project(VERSION), via the extension
EmberError.__module__ = "ember"  # shown as ember.EmberError in tracebacks
InternalError.__module__ = "ember"
if RUNTIME_ONLY:
    __all__ = [name for name in __all__ if name in globals()]
