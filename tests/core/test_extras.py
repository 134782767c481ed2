"""The optional dependencies (extras): `import attnkit`, training, evaluation and prediction
need only the core; a command that needs a missing extra says in one line which
`pip install "attnkit[...]"` to run, and exits non-zero."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from attnkit.core.errors import AttnkitError
from attnkit.core.extras import (
    EXTRAS,
    MissingExtraError,
    extra_of,
    install_command,
    missing_extra,
    needs,
    require,
)

ROOT = Path(__file__).resolve().parents[2]

# every optional top-level module (and what they pull in directly) is made unimportable
OPTIONAL = sorted({name for names in EXTRAS.values() for name in names})


def test_needs_turns_a_missing_package_into_one_line_naming_the_extra():
    with pytest.raises(MissingExtraError) as caught, needs("serve", "attnkit serve"):
        import attnkit_no_such_package  # noqa: F401
    message = str(caught.value)
    assert message.startswith('attnkit serve needs the serve extra: pip install "attnkit[serve]"')
    assert "attnkit_no_such_package" in message and "\n" not in message
    # a user error for the CLI (one line, exit 2) and still an ImportError for Python code
    assert isinstance(caught.value, AttnkitError) and isinstance(caught.value, ImportError)
    assert caught.value.name == "attnkit_no_such_package"


def test_needs_leaves_attnkit_s_own_import_errors_alone():
    with pytest.raises(ModuleNotFoundError) as caught, needs("plot", "plotting"):
        import attnkit.no_such_module  # noqa: F401  (a bug, not a missing extra)
    assert not isinstance(caught.value, MissingExtraError)


def test_needs_passes_other_errors_and_success_through():
    with needs("plot", "plotting"):
        import json as found
    assert found is json
    with pytest.raises(KeyError), needs("plot", "plotting"):
        raise KeyError("x")
    with pytest.raises(ValueError, match="unknown extra 'plots'"), needs("plots", "x"):
        pass


def test_require_imports_or_names_the_extra():
    assert require("json", "plot", "plotting") is json
    with pytest.raises(MissingExtraError, match=r'pip install "attnkit\[onnx\]"'):
        require("onnx_not_installed_here", "onnx", "export --format onnx")


def test_missing_extra_maps_a_module_to_its_extra():
    assert extra_of("matplotlib.pyplot") == "plot" and extra_of("uvicorn") == "serve"
    assert extra_of("torch") is None and extra_of(None) is None
    exc = ModuleNotFoundError("No module named 'fastapi'", name="fastapi")
    found = missing_extra(exc, "attnkit serve")
    assert found is not None and str(found) == (
        'attnkit serve needs the serve extra: pip install "attnkit[serve]" '
        "(no module named 'fastapi')"
    )
    assert missing_extra(ModuleNotFoundError("x", name="torch"), "attnkit train") is None
    assert install_command("tensorboard") == 'pip install "attnkit[tensorboard]"'


def test_every_extra_module_list_names_an_extra_of_pyproject():
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        tomllib = pytest.importorskip("tomli")
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert set(EXTRAS) <= set(extras)


# What the subprocess runs: the optional packages blocked (as if never installed), then the
# core path in-process: train, evaluate, predict, and the CLI's verbs that need an extra.
_BLOCKED_RUN = """
import json, sys
for name in {optional!r}:
    sys.modules[name] = None  # `import name` raises ModuleNotFoundError, find_spec is None
import attnkit
from attnkit.app.cli import main

recipe, out = sys.argv[1], sys.argv[2]
attnkit.train(recipe, out=out)
result = {{"evaluate": attnkit.evaluate(out)["accuracy"],
           "predict": attnkit.load(out).predict(["great movie"])[0].label}}
for key, argv in {{
    "serve": ["serve", out, "--port", "8765"],
    "plot": ["plot", "positional-encoding", "-o", out + "-pe.png"],
    "explain": ["explain", out, "great"],
    "data": ["data", "list"],
}}.items():
    print("---", key, file=sys.stderr, flush=True)
    result[key] = main(argv)
print("---", file=sys.stderr, flush=True)
loaded = sorted(n for n in {optional!r} if sys.modules.get(n) is not None)
print(json.dumps({{**result, "loaded": loaded}}))
"""


@pytest.mark.slow
def test_core_only_install_trains_and_names_the_missing_extras(tmp_path, tiny_data):
    import yaml

    from conftest import tiny_recipe

    recipe = tmp_path / "tiny.yaml"
    recipe.write_text(yaml.safe_dump(tiny_recipe(tiny_data, epochs=1, max_steps=4)))
    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-c", _BLOCKED_RUN.format(optional=OPTIONAL), str(recipe), str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    # trained, evaluated and predicted with the core only; curves.png skipped with one note
    assert 0.0 <= result["evaluate"] <= 1.0 and result["predict"] in ("pos", "neg")
    assert (out / "model.safetensors").is_file() and (out / "metrics.jsonl").is_file()
    assert not (out / "curves.png").exists()
    training_output = proc.stdout + proc.stderr.split("--- serve")[0]
    notes = [line for line in training_output.splitlines() if "curves.png" in line]
    assert len(notes) == 1 and 'pip install "attnkit[plot]"' in notes[0], notes
    assert result["loaded"] == []
    # each verb that needs an extra: exit 2, one line naming its pip install
    sections = dict(part.split("\n", 1) for part in proc.stderr.split("--- ")[1:] if "\n" in part)
    for verb, extra in (("serve", "serve"), ("plot", "plot"), ("explain", "serve")):
        assert result[verb] == 2, (verb, sections.get(verb))
        lines = sections[verb].strip().splitlines()
        assert len(lines) == 1, (verb, lines)
        assert lines[0].startswith("attnkit: error: ") and (
            f'needs the {extra} extra: pip install "attnkit[{extra}]"' in lines[0]
        ), lines[0]
    assert "--html" in sections["explain"]  # the way that needs no extra
    assert result["data"] == 0
