"""Makes `torch.compile(model, backend="ember")` find Ember without a pip install.

An installed Ember declares the backend as an entry point (pyproject.toml,
[project.entry-points."torch_dynamo_backends"]), which Dynamo reads the first time a
backend name is looked up. A source checkout on PYTHONPATH has no installed metadata, so
`import ember` calls install(), which must not import torch (`import ember` never needs it):

- if torch._dynamo is already imported, the backend is registered with its
  register_backend now (unless an installed entry point will do it);
- otherwise a finder on sys.meta_path lends importlib.metadata the same entry point (the
  documented way to extend distribution discovery), so Dynamo finds it as it would an
  installed one, whenever torch is imported later.
"""
import importlib.metadata
import sys

from .._ember import __version__

GROUP = "torch_dynamo_backends"
NAME = "ember"
TARGET = "ember.torch_compile:ember_backend"


def _installed_entry_point():
    try:
        return NAME in importlib.metadata.entry_points(group=GROUP).names
    except Exception:  # broken metadata elsewhere on the path must not break import ember
        return False


class _Distribution(importlib.metadata.Distribution):
    """Metadata of the source checkout: a name, a version and the entry point."""

    _FILES = {"METADATA": f"Metadata-Version: 2.1\nName: ember-source-checkout\n"
                          f"Version: {__version__}\n",
              "entry_points.txt": f"[{GROUP}]\n{NAME} = {TARGET}\n"}

    def read_text(self, filename):
        return self._FILES.get(filename)

    def locate_file(self, path):
        return None


class _Finder:
    """Imports nothing; lends the distribution to importlib.metadata searches."""

    def find_spec(self, fullname, path=None, target=None):
        return None

    def find_distributions(self, context=importlib.metadata.DistributionFinder.Context()):
        if context.name in (None, "ember-source-checkout", "ember_source_checkout"):
            yield _Distribution()


def install():
    if "torch._dynamo" in sys.modules:
        if not _installed_entry_point():
            _register_now()
        return
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.append(_Finder())


def _register_now():
    from torch._dynamo import register_backend
    from . import ember_backend
    try:
        register_backend(ember_backend, name=NAME)
    except AssertionError:  # Dynamo's "duplicate name": registered already
        pass
