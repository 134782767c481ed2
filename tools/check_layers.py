"""The import contract of attnkit: the folders are layers and imports only point down.

    python tools/check_layers.py [SRC_DIR]     # run by `make lint`, so by CI

Layers, top to bottom (ARCHITECTURE.md); ``a | b`` are siblings that may not import
each other::

    app        attnkit.app (api, cli, serve, demo, env report) and the package root
    tasks      attnkit.tasks (TaskSpec, Predictor, one module/package per task)
    runtime | interop
               attnkit.runtime (Trainer, device, run directory, plots)
               attnkit.interop (Hugging Face, ONNX, int8)
    models     attnkit.models (one module per family, its config, init_from, outputs)
    data       attnkit.data (tokenization, catalogue + readers, batching, features)
    nn         attnkit.nn (attention, layers, dropout, generation, capture)
    core       attnkit.core (errors, config loading, checkpoint io, output guard)

Checked, counting imports inside functions too:
1. no import points to a higher layer or to a sibling;
2. there are no import cycles between modules;
3. an import of attnkit inside a function is allowed only where ``LAZY`` lists it
   (start-up speed of the CLI and of ``import attnkit``).

Each violation is one line ``path:line: ...``; the exit status is 1 if there is any.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = "attnkit"

LAYERS: list[list[tuple[str, ...]]] = [  # each layer: its groups; groups in one layer are
    [("attnkit.app", "attnkit")],  # siblings ("attnkit" = the root: attnkit.load & co.)
    [("attnkit.tasks",)],
    [("attnkit.runtime",), ("attnkit.interop",)],  # neither imports the other
    [("attnkit.models",)],
    [("attnkit.data",)],
    [("attnkit.nn",)],
    [("attnkit.core",)],
]

# Function-level imports of attnkit that are wanted: what `attnkit --help`, `import
# attnkit` and the server would otherwise load up front (torch, FastAPI, every task).
# importer (module or package prefix) -> why.
# A name ending in ".*" covers the package and its modules.
LAZY: dict[str, str] = {
    "attnkit": "import attnkit stays light: attnkit.load & co. import the API on first call",
    "attnkit.app.cli": "start-up speed: `attnkit --help` and `attnkit env` load no torch",
    "attnkit.app.demo": "start-up speed: `python -m attnkit.app.demo --help` loads no torch",
    "attnkit.app.env_report": "start-up speed: `attnkit env` loads no torch",
    "attnkit.app.serve.*": "start-up speed: FastAPI and the models load when serving starts",
    "attnkit.data": "start-up speed: the data commands load no torch (batching needs it)",
}


@dataclass
class Graph:
    """Modules of one source tree and their attnkit imports."""

    files: dict[str, Path] = field(default_factory=dict)  # module -> file
    # importer -> imported -> [(line, at module level?)]
    edges: dict[str, dict[str, list[tuple[int, bool]]]] = field(default_factory=dict)


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


def build(src: Path) -> Graph:
    """Parse every module under ``src`` (the folder that holds the ``attnkit`` package)."""
    graph = Graph()
    for path in sorted((src / ROOT).rglob("*.py")):
        graph.files[module_name(src, path)] = path
    for module, path in graph.files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        top_level = {id(node) for node in tree.body}
        skip = {  # `if TYPE_CHECKING:` blocks are not imports at run time
            id(n)
            for node in tree.body
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
            for n in ast.walk(node)
        }
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)) and id(node) not in skip:
                for target in _targets(graph, module, node):
                    lines = graph.edges.setdefault(module, {}).setdefault(target, [])
                    lines.append((node.lineno, id(node) in top_level))
    return graph


def layer_of(module: str) -> tuple[int, str]:
    """(layer index, group's first name) of ``module``: the longest matching name wins."""
    best, length = (-1, ""), -1
    for index, groups in enumerate(LAYERS):
        for group in groups:
            for name in group:
                if (module == name or module.startswith(name + ".")) and len(name) > length:
                    best, length = (index, group[0]), len(name)
    return best


def _lazy_ok(module: str) -> bool:
    return any(
        module == name.removesuffix(".*") or (name.endswith(".*") and module.startswith(name[:-1]))
        for name in LAZY
    )


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
    out = []
    for module, targets in sorted(graph.edges.items()):
        path = graph.files[module]
        mine, my_layer = layer_of(module)
        for target, places in sorted(targets.items()):
            theirs, their_layer = layer_of(target)
            line = places[0][0]
            if theirs < mine or (theirs == mine and my_layer != their_layer):
                kind = "a sibling" if theirs == mine else "a higher"
                out.append(
                    f"{path}:{line}: {module} imports {target}, {kind} layer "
                    f"({my_layer} may import only the layers below it)"
                )
            for lineno in sorted({n for n, at_top in places if not at_top}):
                if not _lazy_ok(module):
                    out.append(
                        f"{path}:{lineno}: {module} imports {target} inside a function "
                        "(not a listed start-up-speed import: import it at the top)"
                    )
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
