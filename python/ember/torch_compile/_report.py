"""What the torch.compile backend did with each graph: its Ember partitions and what stayed
in PyTorch, and why. No torch import here (ember.last_compile_report is a top-level name)."""
import logging
import threading

logger = logging.getLogger("ember")

_lock = threading.Lock()
_last = []  # the most recent CompileReport, in a list so that threads swap it atomically


class PartitionReport:
    """One part of a graph that Ember runs: its name, its ATen ops and Ember's kernels."""

    def __init__(self, name, ops, num_inputs, num_outputs):
        self.name = name
        self.ops = list(ops)          # "aten.conv2d", ... in graph order
        self.num_inputs = num_inputs
        self.num_outputs = num_outputs
        self.kernels = []             # Ember kernel names, once built
        self.error = None             # why the build failed (then it runs in PyTorch)

    def __str__(self):
        if self.error:
            return f"{self.name}: {len(self.ops)} op(s) back to PyTorch: {self.error}"
        return (f"{self.name}: {len(self.ops)} op(s) -> {len(self.kernels)} Ember kernel(s) "
                f"({', '.join(_count(self.ops))})")


class CompileReport:
    """One build of one Dynamo graph: for its concrete input shapes, or for ranges of its
    symbolic sizes (one build then serves every size in them).

    .shapes: the input shapes (a run-time size named by its symbol, "s0");
    .symbols: {name: (min, max, source)} of the run-time sizes this build serves ({}: built
    for the concrete shapes); .note: why a graph with symbolic sizes was built for concrete
    shapes instead (None otherwise); .builds: every build of this graph so far, this one
    included, in order (len(report.builds) is how many builds the graph took);
    .partitions: PartitionReport list (Ember's parts); .fallbacks: (node, op, reason) for
    each op that runs in PyTorch; .reason: why the whole graph runs in PyTorch (None when
    Ember runs some of it)."""

    def __init__(self, graph_id, shapes):
        self.graph_id = graph_id
        self.shapes = shapes
        self.symbols = {}
        self.note = None
        self.builds = [self]
        self.partitions = []
        self.fallbacks = []
        self.reason = None

    @property
    def ember_ops(self):
        return sum(len(p.ops) for p in self.partitions if p.error is None)

    @property
    def build_number(self):
        return next(i for i, b in enumerate(self.builds, 1) if b is self)

    def describe_build(self):
        """One line: the shapes or the ranges this build serves."""
        if not self.symbols:
            return f"inputs {self.shapes}"
        sizes = ", ".join(f"{name} = {source} in [{lo}, {hi}]"
                          for name, (lo, hi, source) in self.symbols.items())
        return f"inputs {self.shapes}, run-time sizes {sizes}"

    def __str__(self):
        lines = [f"Ember torch.compile graph {self.graph_id}, build {self.build_number} of "
                 f"{len(self.builds)}: {self.describe_build()}:"]
        if self.note:
            lines.append(f"  built for these shapes only: {self.note}")
        if self.reason:
            lines.append(f"  whole graph runs in PyTorch: {self.reason}")
        for p in self.partitions:
            lines.append(f"  {p}")
        for node, op, reason in self.fallbacks:
            lines.append(f"  PyTorch runs {op} ({node}): {reason}")
        if len(self.builds) > 1:
            lines.append(f"  builds of graph {self.graph_id} so far:")
            lines.extend(f"    {i}. {b.describe_build()}" for i, b in enumerate(self.builds, 1))
        return "\n".join(lines)

    __repr__ = __str__


def _count(ops):
    counts = {}
    for op in ops:
        counts[op] = counts.get(op, 0) + 1
    return [f"{op} x{n}" if n > 1 else op for op, n in counts.items()]


def publish(report):
    """Makes `report` the last one and logs it on the `ember` logger at INFO."""
    with _lock:
        _last[:] = [report]
    if logger.isEnabledFor(logging.INFO):
        for line in str(report).splitlines():
            logger.info("%s", line)


def last_compile_report():
    """The CompileReport of the last build of the "ember" torch.compile backend (of one
    graph, for one set of input shapes or for ranges of its symbolic sizes), or None:
    print() it to see the partitions Ember runs, what stayed in PyTorch and why, and how
    many builds its graph took (.builds)."""
    with _lock:
        return _last[0] if _last else None
