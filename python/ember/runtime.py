"""Running compiled models: GraphModule, tensors and the thread count."""
import operator
import sys

import numpy as np

from . import _ember
from ._ember import EmberError, Tensor, BenchmarkResult

# What GraphModule runs: a Library from ember.build, or a LoadedLibrary from ember.load (a
# runtime-only install has only the latter).
_LIBRARY_TYPES = tuple(t for t in (getattr(_ember, "Library", None),
                                   getattr(_ember, "LoadedLibrary", None)) if t is not None)

__all__ = ["GraphModule", "Tensor", "BenchmarkResult", "set_num_threads", "get_num_threads",
           "cuda_available"]

DTYPES = ("float32", "float64", "int32", "int64", "bool", "int8", "uint8", "bfloat16")


def _describe(value):
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{type(value).__name__} {text}"


def _is_torch_tensor(value):
    # torch is never imported here: a torch tensor can only exist if the caller did.
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.Tensor)


def as_array(value, what):
    """A C-contiguous NumPy array of an Ember dtype for `value` (a NumPy array or scalar, a
    CPU torch tensor, or an ember Tensor), sharing memory where it can. Values are never
    cast: an unsupported dtype is an EmberError naming `what`. NumPy has no bfloat16: a
    bfloat16 torch tensor (or ember Tensor) comes back as an ember Tensor, through DLPack."""
    if isinstance(value, Tensor):
        return value if value.dtype == "bfloat16" else np.asarray(value)
    if _is_torch_tensor(value):
        if value.device.type != "cpu":
            raise EmberError(f"{what} is a torch tensor on {value.device}; move it to the CPU "
                             "with .cpu() first")
        dtype = str(value.dtype).replace("torch.", "")
        if dtype not in DTYPES:
            raise EmberError(f"{what} has dtype {value.dtype}, which Ember does not support; "
                             f"use one of {', '.join(DTYPES)}")
        if dtype == "bfloat16":
            return Tensor.from_dlpack(value.detach().contiguous())
        value = value.detach().resolve_conj().resolve_neg().numpy()
    elif isinstance(value, np.generic):
        value = np.asarray(value)
    elif not isinstance(value, np.ndarray):
        raise EmberError(f"{what} must be a NumPy array or a CPU torch tensor, got "
                         f"{_describe(value)}")
    if value.dtype.name not in DTYPES:
        raise EmberError(f"{what} has dtype {value.dtype}, which Ember does not support; "
                         f"use one of {', '.join(DTYPES)}")
    if not value.dtype.isnative:  # same values in the host byte order
        value = value.astype(value.dtype.newbyteorder("="))
    # Not np.ascontiguousarray: it makes a 0-d array 1-d. This copies only when needed.
    return np.asarray(value, order="C")


def _input_value(value, what):
    """What the executor takes for an input value: an ember Tensor as it is, a CUDA torch
    tensor through DLPack (no host copy), anything else as a NumPy array (as_array)."""
    if isinstance(value, Tensor):
        return value
    if _is_torch_tensor(value) and value.device.type == "cuda":
        return Tensor.from_dlpack(value.detach().contiguous())
    return as_array(value, what)


def cuda_available():
    """True when a CUDA driver and an NVIDIA GPU are present (target="cuda" can run)."""
    return _ember.cuda_available()


def _index(value, what):
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise EmberError(f"{what} must be an integer, got {_describe(value)}")
    return operator.index(value)


def set_num_threads(n):
    """Threads used by parallel loops (default: OMP_NUM_THREADS, else the core count)."""
    _ember.set_num_threads(_index(n, "set_num_threads: the thread count"))


def get_num_threads():
    """Threads used by parallel loops."""
    return _ember.get_num_threads()


class GraphModule:
    """Runs a compiled Library: set inputs, run, read outputs.

        m = ember.GraphModule(lib)
        m.set_input("x", array)
        m.run()
        out = m.get_output(0)   # np.asarray(out) and torch.from_dlpack(out) share memory

        out = m(x=array)        # the same as one step, returning a copy of the output

    Threads: the module's input and output buffers are shared by every thread using it. Its
    calls are serialized (a run never computes on half-set inputs), but between one thread's
    set_input, run and get_output another thread may run. Threads that share one module call
    it, m(x=array) (or m.run(x=array)): inputs, run and output copies as one step. Separate
    GraphModules of one library run in parallel.

    A Library built with target="cuda" runs on the GPU: inputs may be NumPy arrays or CPU
    tensors (copied to the GPU) or CUDA torch tensors (read on the GPU, through DLPack);
    outputs are GPU tensors: out.numpy() copies to the host, torch.from_dlpack(out) shares.
    Without a GPU, creating the GraphModule raises EmberError ("no CUDA driver found").

    cuda_graph (keyword, default True; CPU modules ignore it): on the GPU the first run
    launches each kernel, and later runs (and benchmark) replay the whole run recorded once
    as a CUDA graph: one launch instead of one per kernel. Inputs and outputs stay the
    module's own buffers, so set_input between runs needs no new recording. A graph the
    driver cannot record is an EmberError ("CUDA graph capture failed: ..."): pass
    cuda_graph=False to launch every kernel each run.
    """

    def __init__(self, lib, *, cuda_graph=True):
        if not isinstance(lib, _LIBRARY_TYPES):
            raise EmberError("GraphModule: expected the Library returned by ember.build or "
                             "ember.load, got "
                             f"{_describe(lib)}")
        if not isinstance(cuda_graph, (bool, np.bool_)):
            raise EmberError(f"GraphModule: cuda_graph must be True or False, got "
                             f"{_describe(cuda_graph)}")
        self.lib = lib
        self._executor = lib._create_executor(cuda_graph=bool(cuda_graph))

    def set_input(self, key=None, value=None, **inputs):
        """Copies `value` into input `key` (its name or index); or set_input(x=array, ...).
        The shape and dtype must match the input exactly, except that a dimension of run-time
        size (see `symbols`) takes any size in its symbol's range."""
        if key is not None:
            self._set_input(key, value)
        elif value is not None:
            raise EmberError("set_input: name the input, e.g. set_input('x', array)")
        for name, array in inputs.items():
            self._set_input(name, array)

    def _set_input(self, key, value):
        if not isinstance(key, str):
            key = _index(key, "set_input: the input key (a name or an index)")
        self._executor.set_input(key, _input_value(value, f"set_input({key!r}): the value"))

    def run(self, *args, **inputs):
        """Runs the model (the GIL is released meanwhile). With inputs, run(x=array) is
        the same as calling the module: it returns the outputs (see __call__)."""
        if args or inputs:
            return self(*args, **inputs)
        self._executor.run()
        return None

    def __call__(self, *args, **inputs):
        """Runs the model on these inputs, given in input order or by name, and returns its
        output (a Tensor), or a tuple of Tensors for a model with several outputs. Setting
        the inputs, running and copying the outputs is one step, so threads may share one
        module this way: each gets the outputs of its own inputs. The outputs are copies the
        caller owns (on the module's device)."""
        names = self._executor.input_names()
        if len(args) > len(names):
            raise EmberError(f"the model takes {len(names)} input(s) ({', '.join(names)}) but "
                             f"was given {len(args)} positional values")
        values = dict(zip(names, args))
        for name, value in inputs.items():
            if name not in names:
                raise EmberError(f"unknown input '{name}': the model's inputs are "
                                 f"({', '.join(names)})")
            if name in values:
                raise EmberError(f"input '{name}' was given twice (by position and by name)")
            values[name] = value
        missing = [name for name in names if name not in values]
        if missing:
            raise EmberError(f"give every input when calling the model; missing: "
                             f"{', '.join(missing)}")
        outputs = self._executor.run_with(
            [_input_value(values[name], f"the value for input '{name}'") for name in names])
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    @property
    def device(self):
        """Where the module's tensors live: "cpu" or "cuda:0"."""
        return self._executor.device

    @property
    def cuda_graph(self):
        """True when runs replay a CUDA graph: a CUDA module made with cuda_graph=True (and
        at least one kernel). Always False on the CPU."""
        return self._executor.cuda_graph

    @property
    def symbols(self):
        """The model's run-time sizes (dynamic shapes): (name, min, max) tuples in the
        model's order; [] for a model whose shapes are all static. One build serves every
        input shape whose symbols lie in their ranges."""
        return self._executor.symbols

    @property
    def symbol_values(self):
        """{name: value} of each symbol in the last run (its maximum before the first run).
        Outputs have the last run's shapes."""
        return self._executor.symbol_values()

    def get_output(self, index=0):
        """Output `index` as an ember Tensor over the module's own buffer: no copy, and the
        next run() overwrites it (use .numpy() for a copy). On "cuda" it is a GPU tensor.
        An output that is a parameter of the model is a copy (writing to it must not change
        the model's weights)."""
        return self._executor.get_output(_index(index, "get_output: the output index"))

    def get_input(self, key):
        """The module's buffer for input `key` (a name or an index)."""
        if not isinstance(key, str):
            key = _index(key, "get_input: the input key (a name or an index)")
        return self._executor.get_input(key)

    def get_num_outputs(self):
        return self._executor.num_outputs()

    def get_num_inputs(self):
        return self._executor.num_inputs()

    def get_input_names(self):
        return self._executor.input_names()

    def benchmark(self, number=1, repeat=600, warmup=1):
        """Times run(): `repeat` measurements, each the mean of `number` runs, in ms.
        str(result) is the "Execution time summary" table."""
        return self._executor.benchmark(_index(number, "benchmark: number"),
                                        _index(repeat, "benchmark: repeat"),
                                        _index(warmup, "benchmark: warmup"))

    def profile(self, repeat=10):
        """Prints and returns the per-kernel time table (mean over `repeat` runs)."""
        table = self._executor.profile(_index(repeat, "profile: repeat"))
        print(table)
        return table
