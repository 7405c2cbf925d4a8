"""Dynamo's symbolic sizes as one Ember build for a range of sizes (issue 44).

With dynamic=True, or after a recompile under automatic dynamic shapes, Dynamo hands the
backend a graph whose tensor inputs have symbolic sizes (the placeholders' example_value
shapes hold SymInts s0, s1, ...) and which takes those sizes as extra int inputs. Such a
graph is built once for a range of every symbol and serves each call in the ranges:

- A size input that is a tensor input's dimension is bound from that tensor at run time:
  the graph Ember exports computes it (aten.sym_size) instead of taking it, so Ember's run
  binds it from the tensor's shape. A size input that is no tensor's dimension (a Python
  int argument Dynamo made dynamic) leaves the graph to one build per value.
- A float that Dynamo made a graph input (specialize_float=False under dynamic=True:
  LayerNorm's eps, ReLU6's bounds, BatchNorm's momentum arrive as 0-d tensors read with
  .item()) is a constant of the graph Ember exports (ScalarInputs); plans are kept per set of
  their values, so a changed attribute gets its own build.
- Ranges: Dynamo's lower bound (2: sizes 0 and 1 are specialized, so they recompile), and
  its upper bound where it has one (torch._dynamo.mark_dynamic(x, dim, max=...)). An
  unbounded size (the usual case) gets max(dynamic_max, the next power of two >= its first
  size) with the option dynamic_max (default DYNAMIC_MAX): Ember's buffers are planned for
  the largest run, so the bound costs memory. A later size above the range rebuilds the
  graph with that symbol's maximum doubled until it fits (the report counts the builds).

A build for ranges is not used, and the graph is built per concrete shape as a static one
is (_compile.py; the report's note says why), when torch.export cannot keep the sizes
symbolic, a partition fails to build (a convolution over run-time spatial sizes), an op
Ember takes at the call's static sizes is refused at run-time sizes (a stride-2
convolution's floor-divided output size: _plan._check_static_only), or its first call
differs from PyTorch's result (_compile._disagreement: run-time sizes are new; a check on
the first call guards against what they may still get wrong).
"""
import torch

# The largest size Ember builds for where Dynamo leaves a size unbounded (options:
# "dynamic_max"). Ember plans buffers at every symbol's maximum and GraphExecutor.run_bound
# returns outputs over max-size buffers, so the bound costs memory and time per call: a
# float [batch, seq, 64] output at 256 x 256 is 16 MiB. A larger size rebuilds (doubling).
DYNAMIC_MAX = 256


class NotDynamic(Exception):
    """This graph is built per concrete shape, for this reason."""


class Symbol:
    """One of Dynamo's size symbols: its name, the graph input and dimension it is read
    from, a description of that source and Dynamo's range (hi None: unbounded)."""

    def __init__(self, name, index, dim, source, lo, hi):
        self.name, self.index, self.dim, self.source = name, index, dim, source
        self.lo, self.hi = lo, hi


class SymbolicSizes:
    """The symbols of a Dynamo graph and how to export it with them (see the module doc).
    Raises NotDynamic when the graph cannot be built for ranges."""

    def __init__(self, gm, count, frozen):
        self.gm = gm
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"][:count]
        self.symbols = {}   # sympy symbol -> Symbol
        self.sizes = {}     # placeholder index of a size input -> (tensor index, dim)
        for i, node in enumerate(placeholders):
            value = node.meta.get("example_value")
            if isinstance(value, torch.Tensor):
                self._tensor_symbols(i, node, value, frozen[i])
        for i, node in enumerate(placeholders):
            value = node.meta.get("example_value")
            if isinstance(value, (torch.SymFloat, torch.SymBool)):
                raise NotDynamic(f"graph input '{node.name}' is a symbolic "
                                 f"{type(value).__name__}; Ember takes tensors")
            if isinstance(value, torch.SymInt):
                symbol = self.symbols.get(value.node.expr)
                if symbol is None:
                    raise NotDynamic(f"graph input '{node.name}' is a size ({value.node.expr}) "
                                     "that is no tensor input's dimension (an int argument); "
                                     "Ember binds run-time sizes from tensors only")
                self.sizes[i] = (symbol.index, symbol.dim)
        self.kept = [i for i in range(count) if i not in self.sizes]  # the export's inputs

    def _tensor_symbols(self, i, node, value, frozen):
        for d, size in enumerate(value.shape):
            if not isinstance(size, torch.SymInt):
                continue
            expr = size.node.expr
            if expr.is_Integer:
                continue
            if frozen or not expr.is_Symbol:
                what = "weight" if frozen else "input"
                raise NotDynamic(f"{what} '{node.name}' dimension {d} is the symbolic size "
                                 f"{expr}; Ember takes an input dimension that is one symbol")
            if expr not in self.symbols:
                lo, hi = _dynamo_range(size)
                self.symbols[expr] = Symbol(str(expr), i, d, f"{_source(node)}.size({d})",
                                            lo, hi)

    def __bool__(self):
        return bool(self.symbols)

    def values(self, args):
        """{symbol name: its size in this call}."""
        return {s.name: int(args[s.index].shape[s.dim]) for s in self.symbols.values()}

    def ranges(self, values, previous, dynamic_max):
        """{name: (min, max)} that covers `values`: Dynamo's range, an unbounded one capped
        as the module doc says; past `previous` ranges a symbol's maximum doubles until
        its size fits."""
        out = {}
        for s in self.symbols.values():
            v = values[s.name]
            lo = max(1, min(s.lo, v))
            if s.hi is not None:
                hi = max(s.hi, v)
            elif previous is None:
                hi = max(dynamic_max, _pow2(v))
            else:
                hi = previous[s.name][1]
                while hi < v:
                    hi *= 2
            out[s.name] = (lo, hi)
        return out

    def describe(self, ranges):
        """{name: (min, max, source)} for the report."""
        return {s.name: (*ranges[s.name], s.source) for s in self.symbols.values()}

    def export_module(self, constants):
        """The graph Ember exports: the size inputs computed from their tensors, the nodes
        in `constants` (ScalarInputs.constants) those values."""
        return _rewrite(self.gm, self.sizes, constants)

    def export_shapes(self, ranges):
        """torch.export's dynamic_shapes for the exported graph's inputs: Dim.DYNAMIC with
        the symbol's range for each symbolic dimension. (Not a named Dim: torch.export
        would refuse a range in which Dynamo's guards leave holes, "(s - 2) != 1" from a
        mean over a dimension of a convolution's output; Dynamo's guards keep those sizes
        from the build. torch.export unifies inputs that share a size where the graph
        needs it.)"""
        dims = {expr: torch.export.Dim.DYNAMIC(min=ranges[s.name][0], max=ranges[s.name][1])
                for expr, s in self.symbols.items()}
        placeholders = [n for n in self.gm.graph.nodes if n.op == "placeholder"]
        out = []
        for i in self.kept:
            value = placeholders[i].meta.get("example_value")
            spec = None
            if isinstance(value, torch.Tensor):
                spec = {d: dims[s.node.expr] for d, s in enumerate(value.shape)
                        if isinstance(s, torch.SymInt) and s.node.expr in dims}
            out.append(spec or None)
        return tuple(out)


class ScalarInputs:
    """The graph inputs that are numbers Dynamo left unspecialized (0-d tensors the graph
    only reads with .item()): their values, a plan's key, and the constants replacing the
    reads in the graph Ember exports (torch.export would trace a read as a number known
    only at run time, which a comparison on it, hardtanh's min <= max, cannot guard)."""

    def __init__(self, gm, count, frozen):
        self.reads = {}  # placeholder index -> its .item() nodes
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"][:count]
        for i, node in enumerate(placeholders):
            value = node.meta.get("example_value")
            if frozen[i] or not isinstance(value, torch.Tensor) or value.dim() != 0:
                continue
            users = list(node.users)
            if users and all(u.op == "call_method" and u.target == "item" for u in users):
                self.reads[i] = users

    def key(self, args):
        return tuple(args[i].item() for i in self.reads)

    def constants(self, args):
        return {u: args[i].item() for i, users in self.reads.items() for u in users}


def static_module(gm, constants):
    """The graph to export for concrete shapes: `gm` with the nodes in `constants` those
    values."""
    return _rewrite(gm, {}, constants)


def _rewrite(gm, sizes, constants):
    """A copy of `gm` whose size inputs `sizes` ({placeholder index: (tensor placeholder
    index, dim)}) are computed by aten.sym_size, whose nodes in `constants` are those
    values, and without the scalar computations nothing then uses."""
    graph = torch.fx.Graph()
    env = {}
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for i, node in enumerate(placeholders):
        if i not in sizes:
            env[node] = graph.node_copy(node, env.__getitem__)
    for i, (index, dim) in sizes.items():
        env[placeholders[i]] = graph.call_function(torch.ops.aten.sym_size.int,
                                                   (env[placeholders[index]], dim))
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            continue
        if node.op == "output":
            graph.output(torch.fx.node.map_arg(node.args[0], env.__getitem__))
        elif node in constants:
            env[node] = constants[node]
        else:
            env[node] = graph.node_copy(node, env.__getitem__)
    _drop_unused_scalars(graph)
    return torch.fx.GraphModule(gm, graph)


_SCALARS = (torch.SymInt, torch.SymFloat, torch.SymBool, int, float, bool)


def _drop_unused_scalars(graph):
    """Erases the nodes computing a scalar that nothing uses (not fx's eliminate_dead_code,
    which takes call_method nodes for pure: x.add_(1) would go)."""
    for node in reversed(list(graph.nodes)):
        if (node.op in ("call_function", "call_method") and not node.users
                and isinstance(node.meta.get("example_value"), _SCALARS)):
            graph.erase_node(node)


def _dynamo_range(size):
    vr = size.node.shape_env.var_to_range.get(size.node.expr)
    if vr is None:
        return 2, None
    hi = int(vr.upper) if vr.upper.is_Integer else None  # (int_oo: unbounded)
    if hi is not None and hi >= 2 ** 62:
        hi = None
    return int(vr.lower), hi


def _pow2(n):
    return 1 << max(int(n) - 1, 1).bit_length()


def _source(node):
    """How the user knows a graph input (L['x']), else its name."""
    source = getattr(node.meta.get("grapharg"), "source", None)
    name = getattr(source, "name", None)
    name = name() if callable(name) else name
    return name or node.name

