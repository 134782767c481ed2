"""The import contract (tools/check_layers.py, run by `make lint`): layers import down only,
no cycles, attnkit imports inside functions only where the contract lists them."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
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


def test_type_checking_imports_do_not_count(tmp_path: Path) -> None:
    body = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from attnkit.app import api\n"
    assert check_layers.violations(_tree(tmp_path, {"core/x.py": body})) == []


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


def test_only_the_type_checking_branch_is_skipped(tmp_path: Path) -> None:
    body = (
        "from typing import TYPE_CHECKING\n"
        "if not TYPE_CHECKING:\n    from attnkit.app import api\n"
        "if TYPE_CHECKING:\n    pass\nelse:\n    from attnkit.tasks import base\n"
    )
    found = check_layers.violations(_tree(tmp_path, {"core/x.py": body}))
    assert sum("a higher layer" in v for v in found) == 2, found


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
