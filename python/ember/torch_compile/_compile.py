"""The backend's entry: checks, freezing, and one plan per concrete input shape."""
import collections
import itertools

import torch

from .. import runtime
from ._options import Options
from ._plan import build_plan
from ._report import CompileReport, publish

# Plans kept per graph (one per concrete input shapes): the oldest is dropped beyond this.
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
    """What Dynamo calls: runs the plan for the call's input shapes, building it on first
    use (a graph with symbolic sizes gets one plan per concrete shape)."""

    def __init__(self, gm, frozen, options, graph_id):
        self.gm = gm
        self.frozen = frozen
        self.options = options
        self.graph_id = graph_id
        self.varying = [i for i, f in enumerate(frozen) if not f]
        self.weights = [i for i, f in enumerate(frozen) if f]
        self.plans = collections.OrderedDict()

    def plan_for(self, args):
        # The weights' addresses are part of the key: Dynamo reuses one graph for every
        # instance of a module class (weights are graph inputs), and each instance needs a
        # build with its own weights. (Weights changed in place keep their address: that
        # needs torch._dynamo.reset(), as documented.)
        key = (tuple(_key(args[i]) for i in self.varying),
               tuple(args[i].data_ptr() for i in self.weights))
        plan = self.plans.get(key)
        if plan is None:
            plan = build_plan(self.gm, args, self.frozen, self.options, self.graph_id)
            self.plans[key] = plan
            if len(self.plans) > MAX_SHAPES:
                self.plans.popitem(last=False)
        else:
            self.plans.move_to_end(key)
        return plan

    def __call__(self, *args):
        if torch.is_grad_enabled() and _needs_grad(args, self.frozen, check_weights=False):
            return self.gm(*args)  # never a wrong gradient: PyTorch runs it
        return self.plan_for(args)(*args)


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
