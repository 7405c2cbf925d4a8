"""Saving and loading compiled models.

    lib = ember.build(mod, params=params)
    lib.export("model.ember")          # one file: graph, parameters, compiled code
    ...
    lib = ember.load("model.ember")    # in any process; no compiler needed
    m = ember.GraphModule(lib)

A loaded model runs the very code the compiler produced, so its outputs equal the in-memory
Library's bit for bit. Many GraphModules may run one loaded library at once from different
threads: each has its own buffers, and they share the parameters and code.

A model file holds native code, which runs in your process when the file is loaded: load
files only from sources you trust, and pin a file you received with its digest,
ember.load(path, sha256="...") (hashlib.sha256(data).hexdigest() of the file you trust).

The file format is documented in include/ember/runtime/artifact.h.
"""
import os
import pathlib
import shutil

from . import _ember
from ._ember import EmberError, LoadedLibrary

__all__ = ["load", "LoadedLibrary", "RUNTIME_ONLY_MESSAGE", "ship_runtime_headers"]

RUNTIME_ONLY_MESSAGE = (
    "this is a runtime-only install of Ember (built with EMBER_RUNTIME_ONLY=ON): it can load "
    "and run saved models (ember.load, ember.GraphModule) but has no compiler; compile and "
    "export the model with a full install (lib.export(path) or `ember compile`)")


def load(path, sha256=None):
    """Loads a model saved with Library.export (or `ember compile`) and returns a
    LoadedLibrary for ember.GraphModule. A missing, damaged (truncated or failing its
    checksum), foreign or other-version file raises EmberError saying which.

    The file holds native code that runs when it is loaded: load only files from sources
    you trust. With `sha256` (the file's SHA-256 digest as 64 hex digits), a file whose
    digest differs is refused before anything in it is used."""
    return _ember._load(_path(path, "ember.load"), _digest(sha256), True)


def ship_runtime_headers(dest):
    """Copies the headers the runtime's sources need beyond a C++ compiler, CMake and CUDA
    (nlohmann/json, header only) to DEST/include, for building the runtime on a machine
    without a package manager (the GPU machine): configure it there with
    -DEMBER_NLOHMANN_JSON_DIR=DEST/include (scripts/gpu_run.sh DEST does). Returns
    DEST/include. The headers come from where this Ember was built with them."""
    source = pathlib.Path(_ember._nlohmann_json_include_dir) / "nlohmann"
    if not (source / "json.hpp").is_file():
        raise EmberError(f"ship_runtime_headers: {source / 'json.hpp'} (where this Ember was "
                         "built with nlohmann/json) does not exist; install nlohmann-json3-dev "
                         "(scripts/setup.sh) on this machine")
    include = pathlib.Path(_path(dest, "ship_runtime_headers")) / "include"
    shutil.copytree(source, include / "nlohmann", dirs_exist_ok=True)
    return include


def _inspect(path):
    """The LoadedLibrary of `path` read and checked without loading its code (nothing in
    the file runs): for reports such as `ember inspect`. It cannot run."""
    return _ember._load(_path(path, "ember inspect"), None, False)


def _path(path, what):
    try:
        return os.fspath(path)
    except TypeError:
        raise EmberError(f"{what}: the path must be a str or os.PathLike, got "
                         f"{type(path).__name__} {path!r}") from None


def _digest(sha256):
    if sha256 is None:
        return None
    if not isinstance(sha256, str):
        raise EmberError(f"ember.load: sha256 must be the file's digest as a hex string, got "
                         f"{type(sha256).__name__} {sha256!r}")
    return sha256


def _runtime_only(*args, **kwargs):
    raise EmberError(RUNTIME_ONLY_MESSAGE)
