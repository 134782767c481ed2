"""The import contract (tools/check_layers.py, run by `make lint`): layers import down only,
no cycles, attnkit imports inside functions only where the contract lists them. Every import
counts, those under ``if TYPE_CHECKING:`` and those by name at run time (a lazy registry's
``"module:Name"`` entries, ``import_module("literal")``) too."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import check_layers  # noqa: E402


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    """A source tree holding a package ``attnkit`` with the layer folders and ``files``."""
    src = tmp_path / "src"
    for package in ("", "core", "nn", "data", "models", "runtime", "interop", "tasks", "app"):
        folder = src / "attnkit" / package
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "__init__.py").write_text("")
    for name, text in files.items():
        (src / "attnkit" / name).write_text(text)
    return src


def test_the_source_tree_keeps_the_contract() -> None:
    assert check_layers.violations(ROOT / "src") == []


def test_make_lint_runs_the_check() -> None:
    lint = ROOT.joinpath("Makefile").read_text().split("\nlint:")[1].split("\n\n")[0]
    assert "tools/check_layers.py" in lint


def test_an_upward_import_is_refused(tmp_path: Path) -> None:
    src = _tree(tmp_path, {"nn/attention.py": "import attnkit.models.bert\n",
                           "models/bert.py": "from attnkit.nn import attention\n"})  # fmt: skip
    found = check_layers.violations(src)
    assert any(
        "nn/attention.py:1: attnkit.nn.attention imports attnkit.models.bert, a higher layer" in v
        for v in found
    ), found


def test_siblings_do_not_import_each_other(tmp_path: Path) -> None:
    src = _tree(tmp_path, {"runtime/training.py": "from attnkit.interop import onnx\n",
                           "interop/onnx.py": "x = 1\n"})  # fmt: skip
    found = check_layers.violations(src)
    assert any("a sibling layer" in v for v in found), found


def test_a_cycle_inside_one_layer_is_refused(tmp_path: Path) -> None:
    src = _tree(tmp_path, {"data/a.py": "from attnkit.data import b\n",
                           "data/b.py": "from attnkit.data import a\n"})  # fmt: skip
    found = check_layers.violations(src)
    assert any("import cycle: attnkit.data.a, attnkit.data.b" in v for v in found), found


def test_an_import_inside_a_function_must_be_listed(tmp_path: Path) -> None:
    body = "def f():\n    from attnkit.core import errors\n    return errors\n"
    src = _tree(tmp_path, {"models/gpt.py": body, "core/errors.py": "", "app/cli.py": body})
    found = check_layers.violations(src)
    assert [v.split("/src/")[1] for v in found] == [
        "attnkit/models/gpt.py:2: attnkit.models.gpt imports attnkit.core.errors inside a "
        "function (not a listed start-up-speed import: import it at the top)"
    ]  # app/cli.py is listed (start-up speed), models/gpt.py is not


TYPE_CHECKING_A = (
    "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from attnkit.data import a\n"
)


def test_a_type_checking_import_points_down_too(tmp_path: Path) -> None:
    body = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from attnkit.app import api\n"
    found = check_layers.violations(_tree(tmp_path, {"core/x.py": body}))
    assert [v.split("/src/")[1] for v in found] == [
        "attnkit/core/x.py:3: attnkit.core.x imports attnkit.app, a higher layer (attnkit.core "
        "may import only the layers below it)"
    ]


def test_a_cycle_through_a_type_checking_import_is_reported(tmp_path: Path) -> None:
    src = _tree(
        tmp_path, {"data/a.py": "from attnkit.data import b\n", "data/b.py": TYPE_CHECKING_A}
    )
    found = check_layers.violations(src)
    assert [v.split("/src/")[1] for v in found] == [
        "attnkit/data/a.py:1: import cycle: attnkit.data.a, attnkit.data.b (attnkit.data.a -> "
        "attnkit.data.b (a.py:1) -> attnkit.data.a (b.py:3, TYPE_CHECKING))"
    ]


def test_a_cycle_through_a_lazy_registry_is_reported(tmp_path: Path) -> None:
    """A registry that names a module ("module:Name", imported on first use) depends on it;
    the module that imports the registry back closes a cycle."""
    registry = (
        "import importlib\n\n"
        'TABLE = {"x": "attnkit.tasks.x:SPEC"}\n\n'
        "def get(name):\n"
        '    module, _, attr = TABLE[name].partition(":")\n'
        "    return getattr(importlib.import_module(module), attr)\n"
    )
    src = _tree(tmp_path, {"tasks/registry.py": registry,
                           "tasks/x.py": "from attnkit.tasks import registry\nSPEC = 1\n"})  # fmt: skip
    found = check_layers.violations(src)
    assert [v.split("/src/")[1] for v in found] == [
        "attnkit/tasks/registry.py:1: import cycle: attnkit.tasks.registry, attnkit.tasks.x "
        "(attnkit.tasks.registry -> attnkit.tasks.x (registry.py:3, by name) -> "
        "attnkit.tasks.registry (x.py:1))"
    ]  # (attnkit.tasks.registry is a listed DYNAMIC module: only the cycle is refused)


def test_imports_by_a_literal_name_and_by_a_listed_table_count(tmp_path: Path) -> None:
    """``import_module("attnkit.data.b")`` is an edge; so is, in a module that imports by
    name, a module's name in a literal table (BUILTIN = {"x": "attnkit.tasks.x"})."""
    literal = 'import importlib\n\ndef f():\n    return importlib.import_module("attnkit.data.b")\n'
    table = 'import importlib\n\nBUILTIN = {"x": "attnkit.tasks.x"}\n\ndef get(name):\n' \
            "    return importlib.import_module(BUILTIN[name])\n"  # fmt: skip
    src = _tree(tmp_path, {"data/a.py": literal, "data/b.py": TYPE_CHECKING_A,
                           "tasks/registry.py": table, "tasks/x.py": "import attnkit.tasks.registry\n"})  # fmt: skip
    graph = check_layers.build(src)
    assert graph.edges["attnkit.data.a"]["attnkit.data.b"] == [(4, False, "by name")]
    assert graph.edges["attnkit.tasks.registry"]["attnkit.tasks.x"] == [(3, True, "by name")]
    assert sorted(check_layers.cycles(graph)) == [
        ["attnkit.data.a", "attnkit.data.b"],
        ["attnkit.tasks.registry", "attnkit.tasks.x"],
    ]
    found = check_layers.violations(src)
    assert any("a.py:4: attnkit.data.a imports a module by name at run time" in v for v in found)


def test_a_string_that_names_a_module_elsewhere_is_no_import(tmp_path: Path) -> None:
    """A docstring or a logger's name is not an import: only a DYNAMIC module's tables and
    "module:Name" entries are."""
    body = '"""See attnkit.data.a:f and attnkit.data.a."""\nimport logging\n' \
           'log = logging.getLogger("attnkit.data.a")\nNAMES = ["attnkit.data.a"]\n'  # fmt: skip
    src = _tree(tmp_path, {"data/a.py": "from attnkit.data import b\n", "data/b.py": body})
    assert check_layers.violations(src) == []


def test_the_source_tree_has_no_cycle_counting_every_kind_of_import() -> None:
    graph = check_layers.build(ROOT / "src")
    assert check_layers.cycles(graph) == []
    kinds = {kind for targets in graph.edges.values() for places in targets.values()
             for _, _, kind in places}  # fmt: skip
    assert kinds == {"import", "TYPE_CHECKING", "by name"}  # (each kind is counted)
    # the lazy registries name what they import
    assert graph.edges["attnkit.tasks.registry"]["attnkit.tasks.classify"][0][2] == "by name"
    assert graph.edges["attnkit.models.registry"]["attnkit.models.bert"][0][2] == "by name"


def test_models_reach_no_dataset_catalogue(tmp_path: Path) -> None:
    """Models know only tensors: no chain of imports from attnkit.models leads to the
    catalogue, the kinds or the readers of attnkit.data (the package's re-exports neither)."""
    src = _tree(tmp_path, {"data/catalogue.py": "", "data/tokenization.py": "",
                           "models/ok.py": "from attnkit.data.tokenization import Tokenizer\n",
                           "models/x.py": "import attnkit.data\n"})  # fmt: skip
    (src / "attnkit" / "data" / "__init__.py").write_text("from attnkit.data import catalogue\n")
    found = check_layers.violations(src)
    assert [v.split("/src/")[1] for v in found] == [
        "attnkit/models/x.py:1: attnkit.models.x reaches attnkit.data.catalogue "
        "(attnkit.models.x -> attnkit.data -> attnkit.data.catalogue): models know only "
        "tensors: what a dataset is and how it is read is the tasks' to say"
    ]
    graph = check_layers.build(ROOT / "src")
    kept_from = set(check_layers.APART["attnkit.models"][0])
    assert not [(m, t) for m, targets in graph.edges.items() if m.startswith("attnkit.models")
                for t in targets if t in kept_from or t == "attnkit.data"]  # fmt: skip


@pytest.mark.slow
def test_the_script_fails_on_an_upward_import_in_a_copy_of_the_tree(tmp_path: Path) -> None:
    """What `make lint` does, on this repository's own tree with one import added."""
    shutil.copytree(ROOT / "src" / "attnkit", tmp_path / "attnkit")
    errors = tmp_path / "attnkit" / "core" / "errors.py"
    errors.write_text(errors.read_text() + "\nimport attnkit.app.api  # noqa\n")
    script = ROOT / "tools" / "check_layers.py"
    done = subprocess.run([sys.executable, script, tmp_path], capture_output=True, text=True)
    assert done.returncode == 1
    assert "attnkit.core.errors imports attnkit.app.api, a higher layer" in done.stdout
    clean = subprocess.run([sys.executable, script, ROOT / "src"], capture_output=True, text=True)
    assert clean.returncode == 0, clean.stdout


def test_a_module_outside_every_layer_is_refused(tmp_path: Path) -> None:
    src = _tree(tmp_path, {})
    (src / "attnkit" / "export").mkdir()
    (src / "attnkit" / "export" / "__init__.py").write_text("import attnkit.app.api\n")
    found = check_layers.violations(src)
    assert any("attnkit.export is in no layer of the contract" in v for v in found), found


def test_both_branches_of_type_checking_count(tmp_path: Path) -> None:
    body = (
        "from typing import TYPE_CHECKING\n"
        "if not TYPE_CHECKING:\n    from attnkit.app import api\n"
        "if TYPE_CHECKING:\n    from attnkit.runtime import run\nelse:\n"
        "    from attnkit.tasks import base\n"
    )
    src = _tree(tmp_path, {"core/x.py": body})
    found = check_layers.violations(src)
    assert sum("a higher layer" in v for v in found) == 3, found
    edges = check_layers.build(src).edges["attnkit.core.x"]
    kinds = {target: places[0][2] for target, places in edges.items()}
    assert kinds == {"attnkit.app": "import", "attnkit.runtime": "TYPE_CHECKING",
                     "attnkit.tasks": "import"}  # fmt: skip


def test_module_level_try_imports_are_top_level(tmp_path: Path) -> None:
    body = "try:\n    from attnkit.core import errors\nexcept ImportError:\n    errors = None\n"
    assert check_layers.violations(_tree(tmp_path, {"models/x.py": body})) == []


def test_imports_by_name_at_run_time_must_be_listed(tmp_path: Path) -> None:
    body = "import importlib\n\ndef f(name):\n    return importlib.import_module(name)\n"
    found = check_layers.violations(_tree(tmp_path, {"models/x.py": body}))
    assert any("imports a module by name at run time" in v for v in found), found


def test_only_the_listed_modules_import_inside_functions(tmp_path: Path) -> None:
    body = "def f():\n    from attnkit.core import errors\n    return errors\n"
    found = check_layers.violations(_tree(tmp_path, {"app/cli.py": body, "app/demo.py": body}))
    assert [v.split("/src/")[1].split(":")[0] for v in found] == ["attnkit/app/demo.py"]


def test_a_listed_package_covers_its_modules(tmp_path: Path) -> None:
    """``attnkit.app.cli.*``: the CLI package and each verb module in it; not a module
    whose name merely starts the same (``attnkit.app.client``)."""
    body = "def f():\n    from attnkit.core import errors\n    return errors\n"
    (tmp_path / "src" / "attnkit" / "app" / "cli").mkdir(parents=True)
    files = {"app/cli/__init__.py": body, "app/cli/train.py": body, "app/client.py": body}
    found = check_layers.violations(_tree(tmp_path, files))
    assert [v.split("/src/")[1].split(":")[0] for v in found] == ["attnkit/app/client.py"]


def _compares(path: Path, attribute: str) -> list[str]:
    """Lines of ``path`` that compare ``<x>.<attribute>`` with a literal (==, !=, in)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            named = any(isinstance(s, ast.Attribute) and s.attr == attribute for s in sides)
            literal = any(
                isinstance(s, ast.Constant)
                or (
                    isinstance(s, ast.Tuple | ast.List | ast.Set)
                    and s.elts
                    and all(isinstance(e, ast.Constant) for e in s.elts)
                )  # fmt: skip
                for s in sides
            )
            if named and literal:
                found.append(f"{path.name}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_tasks_branch_on_no_dataset_name_and_no_arch() -> None:
    """Datasets read themselves (catalogue readers) and models say what they can do."""
    tasks = sorted((ROOT / "src" / "attnkit" / "tasks").rglob("*.py"))
    branches = [hit for path in tasks for hit in _compares(path, "arch")]
    branches += [hit for path in tasks for hit in _compares(path, "name") if ".data.name" in hit]
    assert branches == []


def test_only_models_check_model_config_classes() -> None:
    """No isinstance / type() test on a model config outside attnkit.models."""
    not_models = {"RunConfig", "DataConfig", "TrainingConfig", "TokenizerConfig", "BlockConfig"}
    hits = []
    for path in sorted((ROOT / "src" / "attnkit").rglob("*.py")):
        if "models" in path.relative_to(ROOT / "src" / "attnkit").parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            text = ast.unparse(node) if isinstance(node, ast.Call | ast.Compare) else ""
            checks = text.startswith("isinstance(") or " is " in text
            names = set(re.findall(r"\b([A-Z]\w*Config)\b", text)) - not_models
            if checks and names:
                hits.append(f"{path.name}:{node.lineno}: {text}")
    assert hits == []
