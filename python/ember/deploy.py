"""Saving and loading compiled models.

    lib = ember.build(mod, params=params)
    lib.export("model.ember")          # one file: graph, parameters, compiled code
    ...
    lib = ember.load("model.ember")    # in any process; no compiler needed
    m = ember.GraphModule(lib)

A loaded model runs the very code the compiler produced, so its outputs equal the in-memory
Library's bit for bit. Many GraphModules may run one loaded library at once from different
threads: each has its own buffers, and they share the parameters and code.

The file format is documented in include/ember/runtime/artifact.h.
"""
import os

from . import _ember
from ._ember import EmberError, LoadedLibrary

__all__ = ["load", "LoadedLibrary", "RUNTIME_ONLY_MESSAGE"]

RUNTIME_ONLY_MESSAGE = (
    "this is a runtime-only install of Ember (built with EMBER_RUNTIME_ONLY=ON): it can load "
    "and run saved models (ember.load, ember.GraphModule) but has no compiler; compile and "
    "export the model with a full install (lib.export(path) or `ember compile`)")


def load(path):
    """Loads a model saved with Library.export (or `ember compile`) and returns a
    LoadedLibrary for ember.GraphModule. A missing, damaged (truncated or failing its
    checksum), foreign or other-version file raises EmberError saying which."""
    try:
        path = os.fspath(path)
    except TypeError:
        raise EmberError(f"ember.load: the path must be a str or os.PathLike, got "
                         f"{type(path).__name__} {path!r}") from None
    return _ember._load(path)


def _runtime_only(*args, **kwargs):
    raise EmberError(RUNTIME_ONLY_MESSAGE)
