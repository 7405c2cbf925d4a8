"""ember.build: compile an ir.Function into a Library."""
import logging

from . import _ember, transform
from ._ember import EmberError, Function, Library
from .report import FusionReport, KernelReport, attach_reports
from .runtime import as_array

__all__ = ["build", "Library", "native_vector_lanes", "measure_fma_peak", "FusionReport",
           "KernelReport"]

logger = logging.getLogger("ember")


def build(func, target="llvm", params=None):
    """Compiles `func` for `target` ("llvm" is the host CPU).

    `params` maps function parameter names to arrays (NumPy or CPU torch): those parameters
    become constants and the rest stay model inputs, in order. Returns a Library
    (get_source("ll") / get_source("asm")) to run with ember.GraphModule.
    """
    if not isinstance(func, Function):
        raise EmberError("ember.build: the model must be an ir.Function (ir.Function(params, "
                         f"body)), got {type(func).__name__}")
    if not isinstance(target, str):
        raise EmberError(f"ember.build: target must be a string such as 'llvm', got {target!r}")
    # Only converted here (torch tensors become NumPy arrays): the C++ pass bind_params is
    # the one place that checks names, shapes and dtypes against the function.
    if isinstance(params, dict):
        params = {name: as_array(value, f"ember.build: param '{name}'")
                  for name, value in params.items()}
    ctx = transform.current()
    config, tuned, tuning = dict(ctx.config), None, None
    if "tuning_log" in config:
        tuned, tuning = _tuned_table(config.pop("tuning_log"), target)
    lib = _ember._build(func, target, params, ctx.opt_level, ctx.disabled_passes,
                        ctx.required_passes, config, tuned, tuning)
    for k in lib._kernels():
        if k.get("tuning_note"):
            logger.warning("kernel %s: %s", k["name"], k["tuning_note"])
    if logger.isEnabledFor(logging.INFO):
        for producer, consumer, fused, reason in lib._fusion_decisions():
            if fused:
                logger.info("fused %s -> %s (%s)", producer, consumer, reason)
            else:
                logger.info("not fused %s -> %s: %s", producer, consumer, reason)
        for k in lib._kernels():
            logger.info("kernel %s: %s", k["name"], " -> ".join(k["ops"]))
    if config.get("Int8Products.int8_dot", "target") == "target":
        _say_why_not_int8(lib, target)
    return lib


def _say_why_not_int8(lib, target):
    """A quantized (PT2E) model none of whose layers became an int8 product says why: this
    CPU has no fast int8 products (warning: with reduce_range it would) or none at all
    (info). Recognised by its kernels' names (the converted module's dequantize nodes)."""
    if not target.startswith("llvm"):
        return
    kernels = lib._kernels()
    if (not any("dequantize_per_tensor" in k["name"] for k in kernels)
            or any("u8s8" in op or "int4" in op for k in kernels for op in k["ops"])):
        return
    from .target import machine_model
    m = machine_model(target)
    if m.int8_dot:
        return
    if m.int8_dot_7bit:
        logger.warning(
            "no layer of this quantized model runs as an int8 product on %s: without VNNI "
            "Ember takes only products of activations below 128 (quantize with torchao's "
            "get_default_x86_inductor_quantization_config(reduce_range=True)); the layers "
            "compute in float32", m.cpu)
    else:
        logger.info("%s multiplies int8 no faster than float32 (no VNNI; vpmaddubsw once a "
                    "cycle): the quantized layers compute in float32", m.cpu)


attach_reports(Library)


def _tuned_table(path, target):
    """({workload: knobs}, where) from the tuning log at `path` for this CPU and `target`'s
    vector width, `where` ({log, cpu, vector_bits, threads}) saying which entries were used
    (kept in the Library and its model file); ({}, None) with a warning for a GPU target,
    ({}, where) for a log that does not exist."""
    from .tuning import _log
    from .runtime import get_num_threads
    if not target.startswith("llvm"):
        logger.warning("tuning log %s ignored: tuning applies to CPU targets, not %r", path,
                       target)
        return {}, None
    import os
    vector_bits, threads = _ember._target_vector_bits(target), get_num_threads()
    where = {"log": os.fspath(path), "cpu": _log.cpu_model(), "vector_bits": vector_bits,
             "threads": threads}
    if not os.path.exists(path):
        logger.warning("tuning log %s does not exist: building with the default schedules",
                       path)
        return {}, where
    return _log.best(_log.read(path, vector_bits=vector_bits), threads=threads), where


def native_vector_lanes(dtype="float32"):
    """Vector lanes of the host CPU for `dtype` (16 float32 lanes with AVX-512)."""
    return _ember.native_vector_lanes(dtype)


def measure_fma_peak(target="llvm", seconds=0.3):
    """Single-thread float32 FMA throughput (GFLOP/s) of code Ember compiles for `target`:
    independent FMA chains at the target's vector width, best of runs over `seconds`. The
    benchmarks quote kernel efficiency against it."""
    return _ember.measure_fma_peak(target, float(seconds))
