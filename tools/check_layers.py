"""The import contract of attnkit: the folders are layers and imports only point down.

    python tools/check_layers.py [SRC_DIR]     # run by `make lint`, so by CI

Layers, top to bottom (the layout in README.md); ``a | b`` are siblings that may not import
each other::

    app        attnkit.app (api, cli, serve, demo, env report), the package root
               (attnkit/__init__.py: attnkit.load & co.) and attnkit/__main__.py
    tasks      attnkit.tasks (TaskSpec, Predictor, one module/package per task)
    runtime | interop
               attnkit.runtime (Trainer, device, run directory, plots)
               attnkit.interop (Hugging Face, ONNX, int8)
    models     attnkit.models (one module per family, its config, init_from, outputs)
    data       attnkit.data (tokenization, catalogue + readers, batching, features)
    nn         attnkit.nn (attention, layers, dropout, generation, capture)
    core       attnkit.core (errors, config loading, checkpoint io, output guard)

An import is an edge of the graph, of one of three kinds, every one counted:

* an ``import`` statement, at the top or inside a function;
* an import under ``if TYPE_CHECKING:`` (for type checkers only, but a dependency all the
  same: a type hint names the module it comes from);
* an import by name at run time: ``importlib.import_module("attnkit.x")`` /
  ``__import__(...)`` with a literal name, a ``"attnkit.x.y:Name"`` string anywhere (a
  lazy registry's entry, imported on first use), and, in a module that imports by name,
  a module's name in a literal table (a dict's value, a list's or tuple's item: the table
  it looks its names up in).

Checked:
1. every module lives in a layer, and no edge points to a higher layer or to a sibling;
2. there are no cycles between modules, whatever the kinds of their edges (each cycle is
   reported with one closed path through it, each step's kind named);
3. an import of attnkit inside a function is allowed only in the modules ``LAZY`` lists
   (start-up speed of the CLI and of ``import attnkit``; ``NAME.*``: the package NAME and
   every module in it);
4. a module imported by name at run time (``importlib.import_module``, ``__import__``) is
   allowed only in the modules ``DYNAMIC`` lists;
5. the modules of a folder ``APART`` names reach none of the modules it keeps them from,
   through any chain of edges (models know only tensors: no dataset catalogue).

Each violation is one line ``path:line: ...``; the exit status is 1 if there is any.
"""

from __future__ import annotations

import ast
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = "attnkit"

LAYERS: list[list[tuple[str, ...]]] = [  # each layer: its groups; groups in one layer are
    [("attnkit.app", "=attnkit", "=attnkit.__main__")],  # siblings; "=": that module only
    [("attnkit.tasks",)],
    [("attnkit.runtime",), ("attnkit.interop",)],  # neither imports the other
    [("attnkit.models",)],
    [("attnkit.data",)],
    [("attnkit.nn",)],
    [("attnkit.core",)],
]

# The modules whose functions may import attnkit: what `attnkit --help`, `attnkit data
# list` and `import attnkit` would otherwise load up front (torch, FastAPI, every task).
# module (or "package.*": the package and every module in it) -> why.
LAZY: dict[str, str] = {
    "attnkit": "start-up speed: import attnkit stays light; attnkit.load & co. import the API",
    "attnkit.app.cli.*": "start-up speed: each verb loads what it needs (--help loads no torch)",
    "attnkit.app.serve": "start-up speed: the CLI checks serve's limits before FastAPI loads",
    "attnkit.data": "start-up speed: `attnkit data list` loads no torch (batching needs it)",
}

# The modules that import modules by a name known only at run time. module -> why.
DYNAMIC: dict[str, str] = {
    "attnkit.tasks.registry": "get_task imports a built-in task's spec (BUILTIN's "
    "'module:NAME') on first use, or a plugin's entry point",
    "attnkit.models.registry": "config_class imports a family's config class (MODEL_CONFIGS' "
    "'module:Class') on first use",
    "attnkit.models.pretrained": "the package a checkpoint named by model.init_from ships in "
    "(KNOWN_CHECKPOINTS)",
    "attnkit.interop.onnx": "onnx / onnxruntime, optional dependencies, named in one message",
    "attnkit.core.extras": "require(module, extra, what): an optional dependency, imported "
    "where it is used; a missing one is one line naming its pip install",
}


# the kinds of edges: an import statement, one under ``if TYPE_CHECKING:``, one by name
IMPORT, TYPE, NAME = "import", "TYPE_CHECKING", "by name"
# a lazy registry's entry: "attnkit.models.bert:BertConfig"
_ENTRY = re.compile(r"(\w+(?:\.\w+)*):\w+(?:\.\w+)*")
_MODULE = re.compile(r"\w+(?:\.\w+)*")

# folder -> (the modules none of its modules may reach, through any chain of edges; why)
APART: dict[str, tuple[tuple[str, ...], str]] = {
    "attnkit.models": (
        ("attnkit.data.catalogue", "attnkit.data.kinds", "attnkit.data.readers"),
        "models know only tensors: what a dataset is and how it is read is the tasks' to say",
    ),
}


@dataclass
class Graph:
    """Modules of one source tree and their attnkit imports."""

    files: dict[str, Path] = field(default_factory=dict)  # module -> file
    # importer -> imported -> [(line, at module level?, kind: IMPORT | TYPE | NAME)]
    edges: dict[str, dict[str, list[tuple[int, bool, str]]]] = field(default_factory=dict)
    dynamic: dict[str, list[int]] = field(default_factory=dict)  # module -> lines


def is_lazy(module: str) -> bool:
    """Whether ``LAZY`` lets ``module`` import attnkit inside its functions."""
    return any(
        module == name.removesuffix(".*")
        or (name.endswith(".*") and module.startswith(name.removesuffix("*")))
        for name in LAZY
    )


def module_name(src: Path, path: Path) -> str:
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _targets(graph: Graph, module: str, node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        if node.level:  # relative: from package of the importer
            package = module.split(".")
            if graph.files[module].name != "__init__.py":
                package = package[:-1]
            package = package[: len(package) - (node.level - 1)]
            base = ".".join(package + ([node.module] if node.module else []))
        else:
            base = node.module or ""
        names = [
            f"{base}.{a.name}" if f"{base}.{a.name}" in graph.files else base for a in node.names
        ]
    return [t for t in (_resolve(graph, module, name) for name in names) if t]


def _resolve(graph: Graph, module: str, name: str) -> str | None:
    """The module of the tree ``name`` imports (itself or its nearest package), None for
    another package's or ``module`` itself."""
    while name not in graph.files and "." in name:
        name = name.rsplit(".", 1)[0]
    return name if name in graph.files and name != module else None


def _is_type_checking(test: ast.expr) -> bool:
    """``TYPE_CHECKING`` or ``typing.TYPE_CHECKING`` (not ``not TYPE_CHECKING``)."""
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


class _Imports(ast.NodeVisitor):
    """The imports of one module: (node, inside a function?, kind), its run-time imports by
    name (the lines of the calls) and the names it holds as strings."""

    def __init__(self) -> None:
        self.found: list[tuple[ast.Import | ast.ImportFrom, bool, str]] = []
        self.dynamic: list[int] = []  # lines of importlib.import_module / __import__ calls
        # (line, string, inside a function?): literal names of those calls, "module:Name"
        # entries and other strings that may be a module's name
        self.named: list[tuple[int, str, bool]] = []
        self.strings: list[tuple[int, str, bool]] = []
        self._depth = 0  # functions entered
        self._type_checking = 0  # ``if TYPE_CHECKING:`` bodies entered

    def _function(self, node: ast.AST) -> None:
        self._depth += 1
        self.generic_visit(node)
        self._depth -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _function

    def visit_If(self, node: ast.If) -> None:
        if _is_type_checking(node.test):  # for type checkers only: kind TYPE
            self._type_checking += 1
            for child in node.body:
                self.visit(child)
            self._type_checking -= 1
            for child in node.orelse:
                self.visit(child)
        else:
            self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        self.found.append((node, self._depth > 0, TYPE if self._type_checking else IMPORT))

    visit_ImportFrom = visit_Import

    def visit_Expr(self, node: ast.Expr) -> None:
        if not (isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)):
            self.generic_visit(node)  # (a docstring names modules without importing them)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str):
            entry = _ENTRY.fullmatch(node.value)
            if entry:
                self.named.append((node.lineno, entry.group(1), self._depth > 0))

    def _table(self, node: ast.Dict | ast.List | ast.Tuple | ast.Set) -> None:
        """A literal table's strings (a dict's values, a list's items) may be modules'
        names that the module imports by name."""
        items = node.values if isinstance(node, ast.Dict) else node.elts
        for item in items:
            string = isinstance(item, ast.Constant) and isinstance(item.value, str)
            if string and _MODULE.fullmatch(item.value):
                self.strings.append((item.lineno, item.value, self._depth > 0))
        self.generic_visit(node)

    visit_Dict = visit_List = visit_Tuple = visit_Set = _table

    def visit_Call(self, node: ast.Call) -> None:
        name = ast.unparse(node.func)
        if name in ("importlib.import_module", "import_module", "__import__"):
            self.dynamic.append(node.lineno)
            first = node.args[0] if node.args else None
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                self.named.append((node.lineno, first.value, self._depth > 0))
        self.generic_visit(node)


def build(src: Path) -> Graph:
    """Parse every module under ``src`` (the folder that holds the ``attnkit`` package)."""
    graph = Graph()
    for path in sorted((src / ROOT).rglob("*.py")):
        graph.files[module_name(src, path)] = path
    for module, path in graph.files.items():
        visitor = _Imports()
        visitor.visit(ast.parse(path.read_text(encoding="utf-8"), str(path)))
        found: list[tuple[str | None, int, bool, str]] = [  # (target, line, at top?, kind)
            (target, node.lineno, not in_function, kind)
            for node, in_function, kind in visitor.found
            for target in _targets(graph, module, node)
        ]
        found += [(_resolve(graph, module, name), line, not in_function, NAME)
                  for line, name, in_function in visitor.named]  # fmt: skip
        if visitor.dynamic:  # a module that imports by name: the modules its tables name
            graph.dynamic[module] = visitor.dynamic
            found += [(name, line, not in_function, NAME)
                      for line, name, in_function in visitor.strings
                      if name in graph.files and name != module]  # fmt: skip
        for target, line, at_top, kind in found:
            if target:
                graph.edges.setdefault(module, {}).setdefault(target, []).append(
                    (line, at_top, kind)
                )
    return graph


def layer_of(module: str) -> tuple[int, str]:
    """(layer index, group's first name) of ``module``: the longest matching name wins;
    (-1, "") for a module in no layer."""
    best, length = (-1, ""), -1
    for index, groups in enumerate(LAYERS):
        for group in groups:
            for name in group:
                exact = name.startswith("=")
                name = name.lstrip("=")
                hit = module == name or (not exact and module.startswith(name + "."))
                if hit and len(name) > length:
                    best, length = (index, group[0]), len(name)
    return best


def cycles(graph: Graph) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in graph.files:
        if start in index:
            continue
        work = [(start, iter(sorted(graph.edges.get(start, {}))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.edges.get(child, {})))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def violations(src: Path) -> list[str]:
    """Every breach of the contract in the tree under ``src``, one line each."""
    graph = build(src)
    out = [
        f"{path}:1: {module} is in no layer of the contract (tools/check_layers.py LAYERS)"
        for module, path in sorted(graph.files.items())
        if layer_of(module)[0] < 0
    ]
    for module, targets in sorted(graph.edges.items()):
        path = graph.files[module]
        mine, my_layer = layer_of(module)
        for target, places in sorted(targets.items()):
            theirs, their_layer = layer_of(target)
            line = places[0][0]
            if min(mine, theirs) >= 0 and (
                theirs < mine or (theirs == mine and my_layer != their_layer)
            ):
                kind = "a sibling" if theirs == mine else "a higher"
                out.append(
                    f"{path}:{line}: {module} imports {target}, {kind} layer "
                    f"({my_layer} may import only the layers below it)"
                )
            if not is_lazy(module):
                out += [
                    f"{path}:{lineno}: {module} imports {target} inside a function "
                    "(not a listed start-up-speed import: import it at the top)"
                    for lineno in sorted(
                        {n for n, top, kind in places if not top and kind == IMPORT}
                    )
                ]
    for module, lines in sorted(graph.dynamic.items()):
        if module not in DYNAMIC:
            out += [
                f"{graph.files[module]}:{n}: {module} imports a module by name at run time "
                "(importlib.import_module / __import__; not listed in DYNAMIC)"
                for n in lines
            ]
    for folder, (kept_from, why) in APART.items():
        inside = {m for m in graph.files if m == folder or m.startswith(folder + ".")}
        for module in sorted(inside):  # each edge out of the folder that leads there
            for target, places in sorted(graph.edges.get(module, {}).items()):
                way = [target] if target in kept_from else []
                if target not in inside and not way:
                    way = shortest_path(graph, target, set(kept_from))
                if way:
                    out.append(
                        f"{graph.files[module]}:{places[0][0]}: {module} reaches {way[-1]} "
                        f"({' -> '.join([module, *way])}): {why}"
                    )
    for component in cycles(graph):
        out.append(
            f"{graph.files[component[0]]}:1: import cycle: {', '.join(component)} "
            f"({cycle_path(graph, component)})"
        )
    return out


def shortest_path(
    graph: Graph, start: str, ends: set[str], within: set[str] | None = None
) -> list[str]:
    """A shortest chain of edges from ``start`` to one of ``ends`` (through the modules
    ``within`` only, if given): [start, ..., end]; [] if there is none. ``start`` in
    ``ends`` is reached by a way back to it (a cycle)."""
    came: dict[str, str] = {}
    queue, found = [start], None
    while queue and found is None:  # breadth first
        node = queue.pop(0)
        for target in sorted(graph.edges.get(node, {})):
            if (within is None or target in within) and target not in came:
                came[target] = node
                if target in ends:
                    found = target
                    break
                queue.append(target)
    if found is None:
        return []
    path = [found]
    while len(path) == 1 or path[-1] != start:
        path.append(came[path[-1]])
    return path[::-1]


def cycle_path(graph: Graph, component: list[str]) -> str:
    """One closed path through a cycle's modules, from its first back to it, each step
    ``a -> b`` with its line in ``a`` and, unless a plain import, its kind:
    ``attnkit.x -> attnkit.y (x.py:3, TYPE_CHECKING) -> attnkit.x (y.py:5)``."""
    start = component[0]
    path = shortest_path(graph, start, {start}, set(component))
    steps = [start]
    for a, b in zip(path, path[1:], strict=False):
        line, _, kind = min(graph.edges[a][b], key=lambda p: (p[2] != IMPORT, p[0]))
        where = f"{graph.files[a].name}:{line}" + ("" if kind == IMPORT else f", {kind}")
        steps.append(f"-> {b} ({where})")
    return " ".join(steps)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    src = Path(args[0]) if args else Path(__file__).resolve().parents[1] / "src"
    found = violations(src)
    for line in found:
        print(line)
    if found:
        print(f"check_layers: {len(found)} import(s) break the layer contract", file=sys.stderr)
        return 1
    print(f"check_layers: {len(build(src).files)} modules, imports point down, no cycles")
    return 0


if __name__ == "__main__":
    sys.exit(main())
