"""The backend's entry: checks, freezing, and the plans of one Dynamo graph: one for every
size in a range when the graph has symbolic sizes (_dynamic.py), else one per concrete input
shape."""
import collections
import itertools

import torch

from .. import runtime
from ._dynamic import NotDynamic, ScalarInputs, SymbolicSizes
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
    graph with symbolic sizes has one plan per set of weights (and of values of the numbers
    Dynamo passes as tensors: ScalarInputs), built for ranges of its sizes and rebuilt wider
    when a call's size is past them; a static graph, or one Ember does not build for
    run-time sizes (`static_reason`), one plan per concrete shape."""

    def __init__(self, gm, frozen, options, graph_id):
        self.gm = gm
        self.frozen = frozen
        self.options = options
        self.graph_id = graph_id
        self.varying = [i for i, f in enumerate(frozen) if not f]
        self.weights = [i for i, f in enumerate(frozen) if f]
        # Keys: `fixed` is (the weights' addresses, the values of number inputs).
        self.plans = collections.OrderedDict()   # per shape: (shapes, fixed) -> plan
        self.ranged = collections.OrderedDict()  # for ranges: fixed -> (plan, ranges)
        self.builds = []  # the CompileReport of every build of this graph, in order
        self.scalars = ScalarInputs(gm, len(frozen), frozen)
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
        # Numbers Dynamo passes as 0-d tensors are constants of a build: part of the key.
        fixed = (tuple(args[i].data_ptr() for i in self.weights), self.scalars.key(args))
        if self.sizes is not None:
            plan = self._ranged_plan(fixed, args)
            if plan is not None:
                return plan
        key = (tuple(_key(args[i]) for i in self.varying if i not in self.scalars.reads),
               fixed)
        plan = self.plans.get(key)
        if plan is None:
            report = self._report(_shapes(args, self.frozen))
            report.note = self.static_reason
            plan = build_plan(self.gm, args, self.frozen, self.options, report,
                              self.scalars.constants(args))
            publish(report)
            self.plans[key] = plan
            if len(self.plans) > MAX_SHAPES:
                self.plans.popitem(last=False)
        else:
            self.plans.move_to_end(key)
        return plan

    def _ranged_plan(self, fixed, args):
        """The plan for every size in its ranges; built (or rebuilt wider) when the call's
        sizes are past them. None, and this graph is built per shape from then on, when
        the build is not used (see _dynamic.py's doc)."""
        values = self.sizes.values(args)
        entry = self.ranged.get(fixed)
        if entry is not None and all(lo <= values[n] <= hi
                                     for n, (lo, hi) in entry[1].items()):
            return entry[0]
        ranges = self.sizes.ranges(values, None if entry is None else entry[1],
                                   self.options.dynamic_max)
        report = self._report(self._symbolic_shapes())
        report.symbols = self.sizes.describe(ranges)
        plan = build_plan(self.gm, args, self.frozen, self.options, report,
                          self.scalars.constants(args), self.sizes, ranges)
        ranges = {n: (lo, hi) for n, (lo, hi, _) in report.symbols.items()}
        failed = report.reason or "; ".join(f"{p.name}: {p.error}" for p in report.partitions
                                            if p.error)
        if not failed and not all(lo <= values[n] <= hi for n, (lo, hi) in ranges.items()):
            failed = f"torch.export narrowed the ranges to {ranges}, without sizes {values}"
        if not failed:
            failed = _disagreement(plan, self.gm, args)
        if failed:
            self.sizes, self.ranged = None, None
            self.static_reason = (f"the build for run-time sizes (build {len(self.builds)}) "
                                  f"is not used: {failed}")
            return None
        publish(report)
        self.ranged[fixed] = (plan, ranges)
        self.ranged.move_to_end(fixed)
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


# The first call of a build for ranges is checked against PyTorch (see _disagreement):
# outputs within this of the largest |value| agree.
CHECK_RTOL = 1e-3


def _disagreement(plan, gm, args):
    """Why the first call of a build for ranges disagrees with PyTorch (None: it agrees).
    Run-time sizes are new in Ember (issue 44) and a few fusions of them still compute wrong
    values; this keeps such a build from running (the graph is built per shape instead).
    Both run from the same random state, which is then restored."""
    with torch.random.fork_rng(devices=[]):
        state = torch.random.get_rng_state()
        try:
            got = _tensors(plan(*args))
        except Exception as error:  # noqa: BLE001  (any failure: build per shape instead)
            first = (str(error).strip().splitlines() or [type(error).__name__])[0]
            return f"its first run failed ({type(error).__name__}: {first})"
        torch.random.set_rng_state(state)
        want = _tensors(gm(*args))
    if len(got) != len(want):
        return f"it returns {len(got)} tensor(s), PyTorch {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        if g.shape != w.shape or g.dtype != w.dtype:
            return (f"output {i} is {g.dtype}{list(g.shape)}, PyTorch's "
                    f"{w.dtype}{list(w.shape)}")
        if not w.is_floating_point():
            if not torch.equal(g, w):
                return f"output {i} differs from PyTorch's"
            continue
        scale = w.abs().max().item() if w.numel() else 0.0
        error = (g - w).abs().max().item() if w.numel() else 0.0
        if not error <= CHECK_RTOL * max(scale, 1e-6):  # (NaN disagrees too)
            return (f"its first run differs from PyTorch's (output {i}: max error {error:.3g} "
                    f"for values up to {scale:.3g})")
    return None


def _tensors(out):
    if isinstance(out, torch.Tensor):
        return [out.detach()]
    if isinstance(out, (list, tuple)):
        return [t for o in out for t in _tensors(o)]
    return []


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
