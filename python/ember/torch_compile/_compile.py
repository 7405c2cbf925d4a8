"""The backend's entry: checks, freezing, and the plans of one Dynamo graph: one for every
size in a range when the graph has symbolic sizes (_dynamic.py), else one per concrete input
shape."""
import collections
import itertools

import torch

from .. import runtime
from ._dynamic import NotDynamic, SymbolicSizes
from ._options import Options
from ._plan import build_plan
from ._report import CompileReport, publish

# Plans kept per graph built for concrete shapes (one per set of input shapes): the oldest
# is dropped beyond this.
MAX_SHAPES = 8

_graph_ids = itertools.count()


def compile_graph(gm, example_inputs, options, mode):
    opts = Options(options, mode)
    if opts.num_threads is not None:
        runtime.set_num_threads(opts.num_threads)
    frozen = _frozen_inputs(gm, len(example_inputs))
    compiled = CompiledGraph(gm, frozen, opts, next(_graph_ids))
    if _needs_grad(example_inputs, frozen, check_weights=True):
        report = CompileReport(compiled.graph_id, _shapes(example_inputs, frozen))
        report.reason = ("gradients are enabled and the graph's inputs or weights require "
                         "them; Ember compiles inference only (run the model under "
                         "torch.no_grad() or torch.inference_mode())")
        publish(report)
        return gm.forward
    if not any(isinstance(a, torch.SymInt) for a in example_inputs):
        compiled.plan_for(example_inputs)  # build now: errors and the report come at once
    return compiled


class CompiledGraph:
    """What Dynamo calls: runs the plan for the call's inputs, building it on first use. A
    graph with symbolic sizes has one plan per set of weights, built for ranges of its
    sizes and rebuilt wider when a call's size is past them; a static graph, or one whose
    sizes Ember cannot keep symbolic (`static_reason`), one plan per concrete shape."""

    def __init__(self, gm, frozen, options, graph_id):
        self.gm = gm
        self.frozen = frozen
        self.options = options
        self.graph_id = graph_id
        self.varying = [i for i, f in enumerate(frozen) if not f]
        self.weights = [i for i, f in enumerate(frozen) if f]
        self.plans = collections.OrderedDict()   # per shape: (shapes, weights) -> plan
        self.ranged = collections.OrderedDict()  # for ranges: weights -> (plan, ranges)
        self.builds = []  # the CompileReport of every build of this graph, in order
        self.sizes, self.static_reason = None, None
        try:
            self.sizes = SymbolicSizes(gm, len(frozen), frozen) or None
        except NotDynamic as reason:
            self.static_reason = str(reason)

    def plan_for(self, args):
        # The weights' addresses are part of the key: Dynamo reuses one graph for every
        # instance of a module class (weights are graph inputs), and each instance needs a
        # build with its own weights. (Weights changed in place keep their address: that
        # needs torch._dynamo.reset(), as documented.)
        weights = tuple(args[i].data_ptr() for i in self.weights)
        if self.sizes is not None:
            plan = self._ranged_plan(weights, args)
            if plan is not None:
                return plan
        key = (tuple(_key(args[i]) for i in self.varying), weights)
        plan = self.plans.get(key)
        if plan is None:
            report = self._report(_shapes(args, self.frozen))
            report.note = self.static_reason
            plan = build_plan(self.gm, args, self.frozen, self.options, report)
            publish(report)
            self.plans[key] = plan
            if len(self.plans) > MAX_SHAPES:
                self.plans.popitem(last=False)
        else:
            self.plans.move_to_end(key)
        return plan

    def _ranged_plan(self, weights, args):
        """The plan for every size in its ranges; built (or rebuilt wider) when the call's
        sizes are past them. None, and this graph is built per shape from then on, when
        Ember cannot build all of it for run-time sizes."""
        values = self.sizes.values(args)
        entry = self.ranged.get(weights)
        if entry is not None and all(lo <= values[n] <= hi
                                     for n, (lo, hi) in entry[1].items()):
            return entry[0]
        ranges = self.sizes.ranges(values, None if entry is None else entry[1],
                                   self.options.dynamic_max)
        report = self._report(self._symbolic_shapes())
        report.symbols = self.sizes.describe(ranges)
        plan = build_plan(self.gm, args, self.frozen, self.options, report, self.sizes,
                          ranges)
        ranges = {n: (lo, hi) for n, (lo, hi, _) in report.symbols.items()}
        failed = report.reason or "; ".join(f"{p.name}: {p.error}" for p in report.partitions
                                            if p.error)
        if not failed and not all(lo <= values[n] <= hi for n, (lo, hi) in ranges.items()):
            failed = f"torch.export narrowed the ranges to {ranges}, without sizes {values}"
        if failed:
            self.sizes, self.ranged = None, None
            self.static_reason = ("Ember could not build it for run-time sizes (build "
                                  f"{len(self.builds)}: {failed})")
            return None
        publish(report)
        self.ranged[weights] = (plan, ranges)
        self.ranged.move_to_end(weights)
        if len(self.ranged) > MAX_SHAPES:
            self.ranged.popitem(last=False)
        return plan

    def _report(self, shapes):
        report = CompileReport(self.graph_id, shapes)
        self.builds.append(report)
        report.builds = self.builds
        return report

    def _symbolic_shapes(self):
        """The inputs' shapes with each run-time size named by its symbol."""
        placeholders = [n for n in self.gm.graph.nodes if n.op == "placeholder"]
        out = []
        for node, f in zip(placeholders, self.frozen):
            value = node.meta.get("example_value")
            if f:
                continue
            if isinstance(value, torch.Tensor):
                out.append(tuple(_size_name(s) for s in value.shape))
            else:
                out.append(_size_name(value))
        return out

    def __call__(self, *args):
        if torch.is_grad_enabled() and _needs_grad(args, self.frozen, check_weights=False):
            return self.gm(*args)  # never a wrong gradient: PyTorch runs it
        return self.plan_for(args)(*args)


def _size_name(size):
    if isinstance(size, torch.SymInt):
        expr = size.node.expr
        return int(expr) if expr.is_Integer else str(expr)
    return size if isinstance(size, int) else type(size).__name__


def _key(value):
    if isinstance(value, torch.Tensor):
        return (tuple(value.shape), value.dtype)
    return value


def _needs_grad(args, frozen, check_weights):
    if not torch.is_grad_enabled():
        return False
    return any(isinstance(a, torch.Tensor) and a.requires_grad
               for a, f in zip(args, frozen) if check_weights or not f)


def _shapes(args, frozen):
    return [tuple(a.shape) if isinstance(a, torch.Tensor) else a
            for a, f in zip(args, frozen) if not f]


def _frozen_inputs(gm, count):
    """Per graph input: is it a module parameter or buffer (frozen into the build)? Dynamo
    records each placeholder's source; parameters and buffers come from a module's
    _parameters / _buffers."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    frozen = []
    for node in placeholders[:count]:
        source = getattr(node.meta.get("grapharg"), "source", None)
        name = getattr(source, "name", "")
        name = name() if callable(name) else name
        frozen.append("._parameters[" in name or "._buffers[" in name)
    return frozen + [False] * (count - len(frozen))
