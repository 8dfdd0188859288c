"""The import graph of ``src/cpgbn``: no cycle, and no private name reaches across a module.

Every module is parsed with :mod:`ast`, and *every* import counts: those at module level and
those inside functions, methods and ``if``/``try`` blocks alike, ``if TYPE_CHECKING:``
included (function-level imports once hid three cycles).  Relative imports are resolved
against the importing module's package.

Two graphs must be acyclic:

* the module graph, one node per module (``cpgbn.datasets.loaders``), so no two modules need
  each other;
* the unit graph, one node per package directory (``cpgbn.explain``, ``cpgbn.backends.numba``)
  or top-level module (``cpgbn.model``), so the subpackages form layers.

An import of ``cpgbn.a.b`` is an edge to ``cpgbn.a.b`` only, not to the packages Python runs
on the way (``cpgbn``, ``cpgbn.a``): every module would otherwise sit on a cycle through the
root package's ``__init__``.

Private names: a module may not import a name ``_x`` defined in another module
(``from m import _x``), nor read one through a module object (``m._x``).  Dunder names such as
``__version__`` are public by convention, and a private *module* (``cpgbn._version``) may be
imported; what is checked is the names inside modules.
"""
from __future__ import annotations

import ast
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

SOURCE_ROOT = Path(__file__).resolve().parents[1] / "src"


@dataclass(frozen=True)
class Module:
    name: str  # dotted: cpgbn.explain.report; a package's __init__ is named after the package
    path: Path
    is_package: bool
    shown: str  # the path as messages show it: cpgbn/explain/report.py

    @property
    def package(self) -> str:
        """The package whose namespace relative imports start from."""
        return self.name if self.is_package else self.name.rpartition(".")[0]


@dataclass(frozen=True)
class Edge:
    importer: str
    target: str  # a module of the package
    names: tuple[str, ...]  # names taken from ``target`` by ``from target import ...``
    line: int

    def where(self, modules: dict[str, Module]) -> str:
        return f"{modules[self.importer].shown}:{self.line}"


@dataclass(frozen=True)
class PrivateUse:
    module: str
    line: int
    owner: str  # the module the private name belongs to
    name: str


def find_modules(root: Path, package: str) -> dict[str, Module]:
    """Every ``.py`` file under ``root/package`` as a :class:`Module`, by dotted name."""
    modules = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts.pop()
        name = ".".join(parts)
        modules[name] = Module(name, path, is_package, path.relative_to(root).as_posix())
    return modules


def _owning_module(dotted: str, modules: dict[str, Module]) -> str | None:
    """The longest prefix of ``dotted`` that is a module of the package."""
    parts = dotted.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in modules:
            return candidate
    return None


def _from_base(module: Module, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    package = module.package.split(".")
    if node.level - 1 > len(package) - 1:
        raise ValueError(f"{module.path}:{node.lineno}: relative import beyond the package")
    base = package[:len(package) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def module_edges(module: Module, modules: dict[str, Module]) -> list[Edge]:
    """Every import of a package module by ``module``, at any depth of its syntax tree."""
    tree = ast.parse(module.path.read_text(encoding="utf-8"), filename=str(module.path))
    edges = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = _owning_module(alias.name, modules)
                if target is not None and target != module.name:
                    edges.append(Edge(module.name, target, (), node.lineno))
        elif isinstance(node, ast.ImportFrom):
            base = _from_base(module, node)
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                if submodule in modules:  # from package import submodule
                    target, names = submodule, ()
                else:
                    target, names = _owning_module(base, modules), (alias.name,)
                if target is not None and target != module.name:
                    edges.append(Edge(module.name, target, names, node.lineno))
    return edges


def unit_of(module: Module) -> str:
    """The node of the unit graph: the module's package directory, or a top-level module."""
    if module.is_package or module.name.count(".") >= 2:
        return module.package
    return module.name  # cpgbn.model, cpgbn.io, ...; the root package is ``cpgbn`` itself


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (as a node path that returns to its start) per strongly connected component
    of more than one node, by Tarjan's algorithm; an empty list for an acyclic graph."""
    index: dict[str, int] = {}
    lowlink: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []

    def visit(node: str) -> None:  # the package graph is a few dozen nodes: recursion is fine
        index[node] = lowlink[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(graph.get(node, ())):
            if succ not in index:
                visit(succ)
                lowlink[node] = min(lowlink[node], lowlink[succ])
            elif succ in on_stack:
                lowlink[node] = min(lowlink[node], index[succ])
        if lowlink[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(component)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return [_cycle_in(component, graph) for component in components]


def _cycle_in(component: set[str], graph: dict[str, set[str]]) -> list[str]:
    """A shortest cycle through the component's first node (by name), by breadth-first search;
    ``graph`` has no self-loops (:func:`graph_of` drops them)."""
    start = min(component)
    parent: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for succ in sorted(graph.get(node, set()) & component):
                if succ == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(parent[path[-1]])
                    return [start, *reversed(path[:-1]), start]
                if succ not in parent:
                    parent[succ] = node
                    following.append(succ)
        frontier = following
    raise AssertionError(f"no cycle through {start} in its own component")


def describe_cycle(cycle: list[str], edges: list[Edge], modules: dict[str, Module],
                   node_of) -> str:
    """``a -> b -> a`` with, for each step, the import lines that make it."""
    steps = []
    for a, b in zip(cycle, cycle[1:]):
        lines = sorted({f"{e.where(modules)} ({e.importer} imports {e.target})" for e in edges
                        if node_of(e.importer) == a and node_of(e.target) == b})
        steps.append(f"  {a} -> {b}: " + "; ".join(lines))
    return " -> ".join(cycle) + "\n" + "\n".join(steps)


def private_uses(module: Module, modules: dict[str, Module]) -> list[PrivateUse]:
    """Private names of other modules that ``module`` imports or reads through a module object."""
    found = []
    for edge in module_edges(module, modules):
        for name in edge.names:
            if _is_private(name):
                found.append(PrivateUse(module.name, edge.line, edge.target, name))
    tree = ast.parse(module.path.read_text(encoding="utf-8"), filename=str(module.path))
    bound = _names_bound_to_modules(module, tree, modules)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _is_private(node.attr):
            owner = _module_of_expression(node.value, bound, modules)
            if owner is not None and owner != module.name:
                found.append(PrivateUse(module.name, node.lineno, owner, node.attr))
    return found


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _names_bound_to_modules(module: Module, tree: ast.AST, modules: dict[str, Module]):
    """Local name -> dotted module name, for every ``import``/``from`` that binds a module."""
    bound: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    bound[alias.asname] = alias.name
                else:
                    head = alias.name.split(".")[0]
                    bound[head] = head
        elif isinstance(node, ast.ImportFrom):
            base = _from_base(module, node)
            for alias in node.names:
                if f"{base}.{alias.name}" in modules:
                    bound[alias.asname or alias.name] = f"{base}.{alias.name}"
    return bound


def _module_of_expression(node: ast.expr, bound: dict[str, str], modules: dict[str, Module]):
    """The package module that ``node`` (``name`` or ``name.attr.attr``) denotes, if any."""
    attrs = []
    while isinstance(node, ast.Attribute):
        attrs.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name) or node.id not in bound:
        return None
    dotted = ".".join([bound[node.id], *reversed(attrs)])
    return dotted if dotted in modules else None


def analyse(root: Path, package: str):
    modules = find_modules(root, package)
    edges = [edge for module in modules.values() for edge in module_edges(module, modules)]
    return modules, edges


def graph_of(edges: list[Edge], node_of) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for edge in edges:
        a, b = node_of(edge.importer), node_of(edge.target)
        if a != b:
            graph.setdefault(a, set()).add(b)
    return graph


# ----------------------------------------------------------------------------- the package
@pytest.fixture(scope="module")
def package():
    return analyse(SOURCE_ROOT, "cpgbn")


def test_the_package_is_found(package):
    modules, edges = package
    assert {"cpgbn", "cpgbn.model", "cpgbn.cli", "cpgbn.datasets",
            "cpgbn.text.corpus"} <= set(modules)
    assert len(edges) > 50


def test_no_cycle_between_modules(package):
    modules, edges = package
    cycles = find_cycles(graph_of(edges, lambda name: name))
    assert not cycles, "import cycles between modules:\n" + "\n".join(
        describe_cycle(c, edges, modules, lambda name: name) for c in cycles)


def test_no_cycle_between_subpackages(package):
    modules, edges = package

    def node_of(name):
        return unit_of(modules[name])

    cycles = find_cycles(graph_of(edges, node_of))
    assert not cycles, "import cycles between subpackages and top-level modules:\n" + "\n".join(
        describe_cycle(c, edges, modules, node_of) for c in cycles)


#: unit -> units it must not reach, directly or through others, and why
LAYERS = {
    "cpgbn.explain": ({"cpgbn.model", "cpgbn.evaluate"},
                      "the model calls the explanation code, which takes a fitted model as an "
                      "argument"),
    "cpgbn.text": ({"cpgbn.datasets"}, "the loaders use the text readers, not the reverse"),
    "cpgbn.datasets": ({"cpgbn.model", "cpgbn.explain", "cpgbn.evaluate"},
                       "loading data needs no model"),
    "cpgbn.modes": ({"cpgbn.model", "cpgbn.explain", "cpgbn.evaluate"},
                    "the estimator dispatches to the modes, which return a fitted state"),
    "cpgbn.inference": ({"cpgbn.model", "cpgbn.modes", "cpgbn.io"},
                        "the algorithms know nothing of the estimator or of its modes"),
}


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for succ in graph.get(todo.pop(), ()):
            if succ not in seen:
                seen.add(succ)
                todo.append(succ)
    return seen


def test_layers(package):
    modules, edges = package
    graph = graph_of(edges, lambda name: unit_of(modules[name]))
    wrong = [f"{unit} reaches {sorted(reachable(graph, unit) & forbidden)} ({why})"
             for unit, (forbidden, why) in LAYERS.items() if reachable(graph, unit) & forbidden]
    library = [unit for unit in graph if unit not in ("cpgbn.cli", "cpgbn.__main__")]
    wrong += [f"{unit} reaches the command line" for unit in library
              if "cpgbn.cli" in reachable(graph, unit)]
    assert not wrong, "\n".join(wrong)
    assert {"cpgbn.text", "cpgbn.errors"} <= reachable(graph, "cpgbn.datasets")  # the graph is real


def third_party_imports(module: Module) -> list[tuple[str, int]]:
    """(top-level package, line) of every import of a package outside ``cpgbn``, at any depth."""
    tree = ast.parse(module.path.read_text(encoding="utf-8"), filename=str(module.path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name.split(".")[0], node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.module.split(".")[0], node.lineno))
    return [(name, line) for name, line in found if name != "cpgbn"]


def test_inference_reaches_torch_only_through_a_backend(package):
    """``inference/`` holds the schedules; tensor code lives in ``backends/torch/`` and is
    reached through the backend protocols (cpgbn.inference.backend_protocols), so no module of
    ``inference/`` imports torch itself, not even inside a function."""
    modules, _ = package
    found = [f"{m.shown}:{line}" for m in modules.values()
             if m.name.startswith("cpgbn.inference.") or m.name == "cpgbn.inference"
             for name, line in third_party_imports(m) if name == "torch"]
    assert not found, "torch imported in inference/: " + ", ".join(found)
    assert any(name == "torch" for m in modules.values() if m.name.startswith("cpgbn.backends")
               for name, _ in third_party_imports(m))   # the check sees imports


def test_the_algorithms_hardly_ask_how_many_workers_run():
    """Distribution lives in the communicator (its collectives are exact in a group of one:
    ``weighted_mean``, ``gather_row_arrays``, ``deal``, ``own_item``) and the driver: at most
    five lines of ``inference/`` outside ``communicator.py`` read ``world_size`` or
    ``is_root`` (what one worker does for all: writing and reading a checkpoint, the root's
    TLASGR step; a group's own shortcut; one refusal)."""
    root = SOURCE_ROOT / "cpgbn" / "inference"
    found = []
    for path in sorted(root.glob("*.py")):
        if path.name == "communicator.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found += sorted({f"{path.name}:{node.lineno}" for node in ast.walk(tree)
                         if isinstance(node, ast.Attribute)
                         and node.attr in ("world_size", "is_root")})
    assert found and len(found) <= 5, found


def test_collectives_are_exact_in_one_process():
    import numpy as np

    from cpgbn.inference.communicator import (SingleProcess, deal, gather_row_arrays,
                                              own_item, weighted_mean)
    one = SingleProcess()
    loss = 0.7   # loss * 3 / 3 != loss in floating point
    assert loss * 3 / 3 != loss and weighted_mean(loss, 3, one) == (loss, 3)
    arrays = {"w": np.arange(4), "D": np.ones(2)}
    assert gather_row_arrays(arrays, lambda name: name == "w", one) is arrays
    assert deal(lambda: [{"part": 0}], one) == {"part": 0}
    assert own_item(["mine"], one, lambda world: "refused") == "mine"
    with pytest.raises(ValueError, match="refused 1"):
        own_item(["a", "b"], one, lambda world: f"refused {world}")


def test_no_private_name_crosses_a_module(package):
    modules, _ = package
    uses = [use for module in modules.values() for use in private_uses(module, modules)]
    assert not uses, "private names used outside their module:\n" + "\n".join(
        f"  {modules[u.module].shown}:{u.line}: {u.module} uses "
        f"{u.owner}.{u.name}" for u in uses)


# ----------------------------------------------------------------------------- the checker
def _write_package(root: Path, files: dict[str, str]) -> None:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")


def test_a_cycle_hidden_in_a_function_is_found(tmp_path):
    _write_package(tmp_path, {
        "pkg/__init__.py": "from .a import f\n",
        "pkg/a.py": "def f():\n    from .sub import g\n    return g()\n",
        "pkg/sub/__init__.py": "",
        "pkg/sub/b.py": "import pkg.sub.c\n",
        "pkg/sub/c.py": "",
        "pkg/sub/__main__.py": "",
        "pkg/sub/g.py": "class K:\n    def m(self):\n        if True:\n"
                        "            from ..a import f\n",
    })
    modules, edges = analyse(tmp_path, "pkg")
    assert {(e.importer, e.target) for e in edges} == {
        ("pkg", "pkg.a"), ("pkg.a", "pkg.sub.g"), ("pkg.sub.b", "pkg.sub.c"),
        ("pkg.sub.g", "pkg.a")}
    assert find_cycles(graph_of(edges, lambda name: name)) == [["pkg.a", "pkg.sub.g", "pkg.a"]]
    units = find_cycles(graph_of(edges, lambda name: unit_of(modules[name])))
    assert units == [["pkg.a", "pkg.sub", "pkg.a"]]
    message = describe_cycle(units[0], edges, modules, lambda name: unit_of(modules[name]))
    assert "pkg/sub/g.py:4 (pkg.sub.g imports pkg.a)" in message


def test_a_cycle_only_between_subpackages_is_found(tmp_path):
    # no two modules need each other, but the packages do: x.one -> y.two, y.three -> x.four
    _write_package(tmp_path, {
        "pkg/__init__.py": "", "pkg/x/__init__.py": "", "pkg/y/__init__.py": "",
        "pkg/x/one.py": "from ..y import two\n", "pkg/y/two.py": "",
        "pkg/y/three.py": "from pkg.x.four import thing\n", "pkg/x/four.py": "thing = 1\n",
    })
    modules, edges = analyse(tmp_path, "pkg")
    assert find_cycles(graph_of(edges, lambda name: name)) == []
    assert find_cycles(graph_of(edges, lambda name: unit_of(modules[name]))) == [
        ["pkg.x", "pkg.y", "pkg.x"]]


def test_private_names_across_modules_are_found(tmp_path):
    _write_package(tmp_path, {
        "pkg/__init__.py": "from ._version import __version__\n",
        "pkg/_version.py": "__version__ = '1'\n",
        "pkg/a.py": "_SECRET = 1\n_other = 2\n\ndef _helper():\n    return _SECRET\n",
        "pkg/b.py": "from .a import (\n    _SECRET as S,\n)\n\n\ndef f():\n"
                    "    from pkg import a\n    return a._helper() + S\n",
        "pkg/c.py": "import pkg.a\nimport pkg.a as alias\n"
                    "x = pkg.a._other + alias._SECRET + alias.__name__.__len__()\n",
    })
    modules = find_modules(tmp_path, "pkg")
    found = {(u.module, u.line, u.owner, u.name)
             for m in modules.values() for u in private_uses(m, modules)}
    assert found == {("pkg.b", 1, "pkg.a", "_SECRET"), ("pkg.b", 8, "pkg.a", "_helper"),
                     ("pkg.c", 3, "pkg.a", "_other"), ("pkg.c", 3, "pkg.a", "_SECRET")}
