"""Issue 42, start-up: a one-sentence ``attnkit predict`` loads neither torch._dynamo nor the
optional heavyweights (matplotlib, transformers, FastAPI, onnxruntime, sympy), and the
meta-device model the size check builds without values (``models.sizes.meta_model``) has
the real model's every tensor: name, shape and dtype."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from attnkit.models.registry import read_model_config
from attnkit.models.sizes import meta_model
from conftest import LEGACY_RUNS

FIXTURES = Path(__file__).parents[2] / "fixtures"
RUNS = sorted(
    p
    for p in [*(FIXTURES / "format2_runs").iterdir(), *LEGACY_RUNS.iterdir()]
    if (p / "config.json").is_file()
)
NOT_ON_PREDICT = ("torch._dynamo", "sympy", "matplotlib", "transformers", "fastapi",
                  "onnxruntime", "onnx")  # fmt: skip


def _tensors(model) -> dict[str, tuple[tuple[int, ...], str]]:
    named = [*model.named_parameters(), *model.named_buffers()]
    return {name: (tuple(t.shape), str(t.dtype)) for name, t in named}


@pytest.mark.parametrize("run", RUNS, ids=[p.name for p in RUNS])
def test_the_meta_model_has_the_real_models_tensors(run: Path) -> None:
    config = read_model_config(run)
    meta = meta_model(config, str(run))
    assert all(t.is_meta for t in [*meta.parameters(), *meta.buffers()])
    assert _tensors(meta) == _tensors(config.build())


def test_predict_imports_only_what_it_needs(tiny_run_once: Path) -> None:
    script = (
        "import json, sys\n"
        "from attnkit.app.cli import main\n"
        f"code = main(['predict', {str(tiny_run_once)!r}, 'a good movie'])\n"
        f"print(json.dumps([code, [m for m in {NOT_ON_PREDICT!r} if m in sys.modules]]))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    code, loaded = json.loads(done.stdout.splitlines()[-1])
    assert code == 0 and loaded == [], loaded
