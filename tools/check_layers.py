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

Checked, counting imports inside functions too:
1. every module lives in a layer, and no import points to a higher layer or to a sibling;
2. there are no import cycles between modules;
3. an import of attnkit inside a function is allowed only in the modules ``LAZY`` lists
   (start-up speed of the CLI and of ``import attnkit``);
4. a module imported by name at run time (``importlib.import_module``, ``__import__``) is
   allowed only in the modules ``DYNAMIC`` lists.
Imports under ``if TYPE_CHECKING:`` are for type checkers only and are not counted.

Each violation is one line ``path:line: ...``; the exit status is 1 if there is any.
"""

from __future__ import annotations

import ast
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
# module -> why.
LAZY: dict[str, str] = {
    "attnkit": "start-up speed: import attnkit stays light; attnkit.load & co. import the API",
    "attnkit.app.cli": "start-up speed: each verb loads what it needs (--help loads no torch)",
    "attnkit.app.serve": "start-up speed: the CLI checks serve's limits before FastAPI loads",
    "attnkit.data": "start-up speed: `attnkit data list` loads no torch (batching needs it)",
}

# The modules that import modules by a name known only at run time. module -> why.
DYNAMIC: dict[str, str] = {
    "attnkit.tasks.registry": "get_task imports a built-in task's module (BUILTIN) on first "
    "use; that module registers itself by importing the registry",
    "attnkit.models.pretrained": "the package of a model family named by a pretrained "
    "source's config",
    "attnkit.interop.onnx": "onnx / onnxruntime, optional dependencies, named in one message",
    "attnkit.core.extras": "require(module, extra, what): an optional dependency, imported "
    "where it is used; a missing one is one line naming its pip install",
}


@dataclass
class Graph:
    """Modules of one source tree and their attnkit imports."""

    files: dict[str, Path] = field(default_factory=dict)  # module -> file
    # importer -> imported -> [(line, at module level?)]
    edges: dict[str, dict[str, list[tuple[int, bool]]]] = field(default_factory=dict)
    dynamic: dict[str, list[int]] = field(default_factory=dict)  # module -> lines


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
    out = []
    for name in names:
        while name not in graph.files and "." in name:
            name = name.rsplit(".", 1)[0]
        if name in graph.files and name != module:
            out.append(name)
    return out


def _is_type_checking(test: ast.expr) -> bool:
    """``TYPE_CHECKING`` or ``typing.TYPE_CHECKING`` (not ``not TYPE_CHECKING``)."""
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


class _Imports(ast.NodeVisitor):
    """The imports of one module: (node, inside a function?) and run-time imports by name."""

    def __init__(self) -> None:
        self.found: list[tuple[ast.Import | ast.ImportFrom, bool]] = []
        self.dynamic: list[int] = []  # lines of importlib.import_module / __import__ calls
        self._depth = 0  # functions entered

    def _function(self, node: ast.AST) -> None:
        self._depth += 1
        self.generic_visit(node)
        self._depth -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _function

    def visit_If(self, node: ast.If) -> None:
        if _is_type_checking(node.test):  # for type checkers only; its else branch counts
            for child in node.orelse:
                self.visit(child)
        else:
            self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        self.found.append((node, self._depth > 0))

    visit_ImportFrom = visit_Import

    def visit_Call(self, node: ast.Call) -> None:
        name = ast.unparse(node.func)
        if name in ("importlib.import_module", "import_module", "__import__"):
            self.dynamic.append(node.lineno)
        self.generic_visit(node)


def build(src: Path) -> Graph:
    """Parse every module under ``src`` (the folder that holds the ``attnkit`` package)."""
    graph = Graph()
    for path in sorted((src / ROOT).rglob("*.py")):
        graph.files[module_name(src, path)] = path
    for module, path in graph.files.items():
        visitor = _Imports()
        visitor.visit(ast.parse(path.read_text(encoding="utf-8"), str(path)))
        for node, in_function in visitor.found:
            for target in _targets(graph, module, node):
                lines = graph.edges.setdefault(module, {}).setdefault(target, [])
                lines.append((node.lineno, not in_function))
        if visitor.dynamic:
            graph.dynamic[module] = visitor.dynamic
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
            if module not in LAZY:
                out += [
                    f"{path}:{lineno}: {module} imports {target} inside a function "
                    "(not a listed start-up-speed import: import it at the top)"
                    for lineno in sorted({n for n, at_top in places if not at_top})
                ]
    for module, lines in sorted(graph.dynamic.items()):
        if module not in DYNAMIC:
            out += [
                f"{graph.files[module]}:{n}: {module} imports a module by name at run time "
                "(importlib.import_module / __import__; not listed in DYNAMIC)"
                for n in lines
            ]
    for component in cycles(graph):
        out.append(f"{graph.files[component[0]]}:1: import cycle: {', '.join(component)}")
    return out


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
