"""The ember package's modules import each other without cycles: shared code sits in a lower
module (frontend/_aten_registry.py below the converter modules, frontend/_inputs.py below both
importers, op/_util.py below op and op.nn), and the modules that collect others
(frontend/_aten.py, op/__init__.py) import them rather than the other way round. Read from
the source with ast, so an import inside a function (a cycle deferred to a call) counts too."""
import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "python" / "ember"
# The C++ extensions (built, so perhaps absent from a source tree): leaves of the graph.
EXTENSIONS = {"ember._ember", "ember._ember_runtime"}


def _modules():
    """Dotted module name -> (path, whether it is a package's __init__)."""
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        modules[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return modules


def _known(name, modules):
    return name in modules or name in EXTENSIONS


def _targets(module, is_package, node, modules):
    """The ember modules an import statement loads: `from pkg import x` loads pkg.x where x
    is a module, else pkg itself."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name.split(".")[0] == "ember"]
    if node.level:
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[:len(base) - (node.level - 1)]
        target = ".".join(base + ([node.module] if node.module else []))
    else:
        target = node.module or ""
        if target.split(".")[0] != "ember":
            return []
    return [f"{target}.{a.name}" if _known(f"{target}.{a.name}", modules) else target
            for a in node.names]


def import_graph():
    """Module -> the set of ember modules it imports (extensions left out)."""
    modules = _modules()
    graph = {}
    for module, (path, is_package) in modules.items():
        deps = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for target in _targets(module, is_package, node, modules):
                    while not _known(target, modules) and "." in target:
                        target = target.rsplit(".", 1)[0]  # ember.a.b loads ember.a.b's module
                    if target in modules and target != module:
                        deps.add(target)
        graph[module] = deps
    return graph


def find_cycles(graph):
    """Every cycle a depth-first walk closes (one per edge back to a module still open), as a
    list of modules that starts and ends with the same one."""
    cycles, state, stack = [], {}, []

    def visit(module):
        state[module] = "open"
        stack.append(module)
        for dep in sorted(graph[module]):
            if state.get(dep) == "open":
                cycles.append(stack[stack.index(dep):] + [dep])
            elif dep not in state:
                visit(dep)
        stack.pop()
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module)
    return cycles


def test_the_graph_reads_the_imports_it_should():
    graph = import_graph()
    assert "ember.frontend._aten_registry" in graph["ember.frontend._aten_nn"]
    assert "ember.frontend._aten_nn" in graph["ember.frontend._aten"]
    assert "ember.op.nn" in graph["ember.op"]
    assert "ember.op._util" in graph["ember.op.nn"]
    # A cycle is found, and named.
    assert find_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]


def test_the_package_imports_form_no_cycle():
    cycles = find_cycles(import_graph())
    assert not cycles, "import cycles in python/ember:\n" + "\n".join(
        "  " + " -> ".join(cycle) for cycle in cycles)
