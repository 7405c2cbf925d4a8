"""ember.build: compile an ir.Function into a Library."""
import logging
import os
import shutil
import subprocess

from . import _ember, transform
from ._ember import EmberError, Function, Library
from .runtime import as_array

__all__ = ["build", "Library", "native_vector_lanes", "FusionReport", "KernelReport"]

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
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise EmberError("ember.build: params must be a dict of parameter name -> array, got "
                         f"{type(params).__name__}")
    inputs = {p.name: p for p in func.params}
    arrays = {}
    for name, value in params.items():
        if name not in inputs:
            raise EmberError(f"ember.build: params has '{name}', which is not a parameter of "
                             f"the function; its parameters are {', '.join(inputs) or 'none'}")
        array = as_array(value, f"ember.build: param '{name}'")
        expected = inputs[name]
        if tuple(array.shape) != expected.shape or array.dtype.name != expected.dtype:
            raise EmberError(f"ember.build: param '{name}' is {array.dtype.name}"
                             f"{list(array.shape)} but the function declares it as "
                             f"{expected.type}; pass an array of that shape and dtype")
        arrays[name] = array
    ctx = transform.current()
    lib = _ember._build(func, target, arrays, ctx.opt_level, ctx.disabled_passes,
                        ctx.required_passes, ctx.config)
    if logger.isEnabledFor(logging.INFO):
        for producer, consumer, fused, reason in lib._fusion_decisions():
            if fused:
                logger.info("fused %s -> %s (%s)", producer, consumer, reason)
            else:
                logger.info("not fused %s -> %s: %s", producer, consumer, reason)
        for k in lib._kernels():
            logger.info("kernel %s: %s", k["name"], " -> ".join(k["ops"]))
    return lib


class KernelReport:
    """One kernel: `name` (source names joined by " + "), `ops` (op names in order),
    `anchor` (the op that sets the loop nest), `patterns` (fusion rules that fired),
    `func` (the symbol)."""

    def __init__(self, d):
        self.name, self.ops, self.anchor = d["name"], list(d["ops"]), d["anchor"]
        self.patterns, self.func = list(d["patterns"]), d["func"]

    def __repr__(self):
        return f"KernelReport(name={self.name!r}, ops={self.ops}, patterns={self.patterns})"


class FusionReport(list):
    """One KernelReport per kernel, in execution order. `unfused` lists each pair of
    adjacent ops that were not fused, as (producer, consumer, reason)."""

    def __init__(self, kernels, unfused):
        super().__init__(kernels)
        self.unfused = unfused

    def __str__(self):
        rows = [(str(i), k.name, " -> ".join(k.ops), ", ".join(k.patterns) or "-")
                for i, k in enumerate(self)]
        head = ("#", "kernel", "ops", "patterns")
        widths = [max(len(r[c]) for r in rows + [head]) for c in range(4)]
        fmt = "  ".join("{:<%d}" % w for w in widths)
        lines = [f"Fusion report: {len(self)} kernels", fmt.format(*head),
                 fmt.format(*("-" * w for w in widths))]
        lines += [fmt.format(*r) for r in rows]
        if self.unfused:
            lines.append("")
            lines.append(f"Not fused ({len(self.unfused)} edges):")
            lines += [f"  {p} -> {c}: {why}" for p, c, why in self.unfused]
        return "\n".join(lines)


def _fusion_report(lib):
    """Which ops each kernel computes, and which adjacent ops were not fused and why."""
    unfused = [(p, c, why) for p, c, fused, why in lib._fusion_decisions() if not fused]
    return FusionReport([KernelReport(k) for k in lib._kernels()], unfused)


def _fusion_graph(lib, path=None):
    """Graphviz DOT of the compiled graph, each kernel a cluster of its ops.

    With `path` ending in .svg/.png/.pdf it is rendered with the `dot` program (EmberError
    if Graphviz is not installed); with .dot (or .gv) the text is written. Returns the DOT text.
    """
    dot = lib._fusion_dot()
    if path is None:
        return dot
    path = os.fspath(path)
    ext = os.path.splitext(path)[1].lstrip(".").lower()
    if ext in ("dot", "gv", ""):
        with open(path, "w") as fh:
            fh.write(dot)
        return dot
    exe = shutil.which("dot")
    if exe is None:
        raise EmberError("fusion_graph: rendering needs Graphviz's `dot` program, which is not "
                         "installed (apt-get install graphviz); or save the text with a .dot path")
    result = subprocess.run([exe, f"-T{ext}", "-o", path], input=dot.encode(),
                            capture_output=True)
    if result.returncode != 0:
        raise EmberError(f"fusion_graph: dot failed for format '{ext}': "
                         f"{result.stderr.decode(errors='replace').strip()}")
    return dot


Library.fusion_report = _fusion_report
Library.fusion_graph = _fusion_graph


def native_vector_lanes(dtype="float32"):
    """Vector lanes of the host CPU for `dtype` (16 float32 lanes with AVX-512)."""
    return _ember.native_vector_lanes(dtype)
