"""What got fused: the fusion report and the fused-graph picture of a built or loaded library.

No compiler is needed here, so a runtime-only install reports on loaded models too.
"""
import os
import shutil
import subprocess

from ._ember import EmberError

__all__ = ["FusionReport", "KernelReport", "attach_reports"]


class KernelReport:
    """One kernel: `name` (source names joined by " + "), `ops` (op names in order),
    `anchor` (the op that sets the loop nest), `patterns` (fusion rules that fired),
    `func` (the symbol), `schedule` (the template that scheduled it: "conv.chunked",
    "gemv.dot_rows", a GPU "tiled(...)"; "" for a model file saved before schedules were
    recorded) and `schedule_knobs` (the CPU schedule's knob values it used, a dict); for a
    build with a tuning log, `workload` (its key), `tuned` (whether the log's schedule was
    applied; None when no log was given) and `knobs` (the schedule knobs applied, a dict;
    None when not tuned). A model file keeps all of them."""

    def __init__(self, d):
        self.name, self.ops, self.anchor = d["name"], list(d["ops"]), d["anchor"]
        self.patterns, self.func = list(d["patterns"]), d["func"]
        self.schedule = d.get("schedule", "")
        self.schedule_knobs = dict(d.get("schedule_knobs", {}))
        self._schedule_label = d.get("schedule_label", self.schedule)
        self.workload = d.get("workload") or None
        self.tuned = d.get("tuned") if self.workload else None
        self.knobs = dict(d["knobs"]) if self.tuned else None

    def __repr__(self):
        return f"KernelReport(name={self.name!r}, ops={self.ops}, patterns={self.patterns})"


class FusionReport(list):
    """One KernelReport per kernel, in execution order. `unfused` lists each pair of
    adjacent ops that were not fused, as (producer, consumer, reason). `tuning`: for a build
    with a tuning log, {log, cpu, vector_bits, threads} (where its entries were measured),
    else None. `symbols`: the run-time sizes (name, min, max) one build serves (dynamic
    shapes), empty for a static build."""

    def __init__(self, kernels, unfused, tuning=None, symbols=()):
        super().__init__(kernels)
        self.unfused = unfused
        self.tuning = tuning
        self.symbols = list(symbols)  # run-time sizes: (name, min, max)

    def __str__(self):
        rows = [(str(i), k.name, " -> ".join(k.ops), ", ".join(k.patterns) or "-",
                 k._schedule_label or "-") for i, k in enumerate(self)]
        head = ("#", "kernel", "ops", "patterns", "schedule")
        if any(k.tuned is not None for k in self):  # built with a tuning log
            rows = [r + ("yes" if k.tuned else "no",) for r, k in zip(rows, self)]
            head += ("tuned",)
        widths = [max(len(r[c]) for r in rows + [head]) for c in range(len(head))]
        fmt = "  ".join("{:<%d}" % w for w in widths)
        lines = [f"Fusion report: {len(self)} kernels"]
        if self.symbols:
            ranges = ", ".join(f"{n} in [{lo}, {hi}]" for n, lo, hi in self.symbols)
            lines.append(f"One build for every run with {ranges}; kernels scheduled at the "
                         "maxima, looping to each run's sizes")
        if self.tuning:
            t = self.tuning
            lines.append(f"Tuning log {t['log']}: {sum(bool(k.tuned) for k in self)} kernels "
                         f"tuned, measured on {t['cpu']} ({t['vector_bits']}-bit vectors, "
                         f"{t['threads']} thread(s))")
        lines += [fmt.format(*head), fmt.format(*("-" * w for w in widths))]
        lines += [fmt.format(*r).rstrip() for r in rows]
        if self.unfused:
            lines.append("")
            lines.append(f"Not fused ({len(self.unfused)} edges):")
            lines += [f"  {p} -> {c}: {why}" for p, c, why in self.unfused]
        return "\n".join(lines)


def _fusion_report(lib):
    """Which ops each kernel computes, and which adjacent ops were not fused and why."""
    unfused = [(p, c, why) for p, c, fused, why in lib._fusion_decisions() if not fused]
    return FusionReport([KernelReport(k) for k in lib._kernels()], unfused, lib._tuning(),
                        lib._symbols())


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



def attach_reports(cls):
    """Gives a library class fusion_report() (and fusion_graph() when it has the DOT text)."""
    cls.fusion_report = _fusion_report
    cls.tuning = property(lambda lib: lib._tuning(), doc="The tuning log the build applied: "
                          "{log, cpu, vector_bits, threads}, or None.")
    if hasattr(cls, "_fusion_dot"):
        cls.fusion_graph = _fusion_graph
