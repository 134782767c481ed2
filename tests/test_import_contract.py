"""The import contract (tools/check_layers.py, run by `make lint`): layers import down only,
no cycles, attnkit imports inside functions only where the contract lists them."""

from __future__ import annotations

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
