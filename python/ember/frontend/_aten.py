"""ATen operators to Ember ops: one converter per aten op, shared by the torch.export and the
TorchScript importers (both speak ATen; they differ only in how a graph is walked).

This module is the complete converter table. The registry (the table CONVERTERS, @converts,
REFUSED, the Converter that runs an import and the helpers converters share) is
_aten_registry.py, which also describes what a converter gets and returns; the converters
are in _aten_*.py by theme, each registering its own on import. Importing them all here
fills the table; the importers (pytorch.py, _torchscript.py, coverage.py, torch_compile) use
the names re-exported below.
"""
# The order is the table's: where a name is registered twice the later converter wins, and
# _aten_fft wraps converters it finds in the table (views, casts, neg, abs, mul: to take
# complex values part by part), so it comes after the modules that register those.
from . import _aten_elementwise  # noqa: F401  (registers the elementwise converters)
from . import _aten_values  # noqa: F401  (registers identities, casts, scalars, fills)
from . import _aten_linalg  # noqa: F401  (registers the matrix products and permutations)
from . import _aten_shape  # noqa: F401  (registers the shape and indexing converters)
from . import _aten_reduce  # noqa: F401  (registers the reduction converters)
from . import _aten_nn  # noqa: F401  (registers the layer converters)
from . import _aten_conv  # noqa: F401  (registers the convolution converters)
from . import _aten_grid_sample  # noqa: F401  (registers F.grid_sample's converter)
from . import _aten_einsum  # noqa: F401  (registers torch.einsum's converter)
from . import _aten_fft  # noqa: F401  (registers torch.fft's converters)
from . import _aten_activations  # noqa: F401  (registers the activation converters)
from . import _aten_resize  # noqa: F401  (registers the interpolation converters)
from . import _aten_scatter  # noqa: F401  (registers the scatter converters)
from . import _aten_quantized  # noqa: F401  (registers the PT2E quantize / dequantize converters)
from ._aten_registry import (CONVERTERS, MISSING, REFUSED, _SCALAR_TYPES, Args,  # noqa: F401
                             Complex, Converter, TorchValue, Unavailable, WeightRef, dtype_name,
                             item)
