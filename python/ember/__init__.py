"""Ember: a tensor compiler with an LLVM backend.

    import ember
    from ember import ir, op
    x = ir.var("x", shape=(1, 3, 32, 32))
    f = ir.Function([x], op.nn.relu(x))
    m = ember.GraphModule(ember.build(f))
    m.set_input("x", array); m.run(); out = m.get_output(0)

Every user mistake raises ember.EmberError.
"""
from ._ember import EmberError
from . import ir, op
from .build import Library, build, native_vector_lanes
from .runtime import (BenchmarkResult, GraphModule, Tensor, get_num_threads,
                      set_num_threads)

__all__ = ["EmberError", "ir", "op", "build", "Library", "GraphModule", "Tensor",
           "BenchmarkResult", "set_num_threads", "get_num_threads", "native_vector_lanes"]
__version__ = "0.1.0"
EmberError.__module__ = "ember"  # shown as ember.EmberError in tracebacks
