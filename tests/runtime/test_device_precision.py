"""Precision and threads that fit the machine: ``training.bf16: auto`` (the default) turns
bf16 on only where the device computes it natively; inference follows the same rule; torch
uses the cores this process may use. conftest.py sets ATTNKIT_CPU_BF16=0 (a CPU without
native bf16); the tests of the other kind of CPU set it to 1."""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import pytest
import torch
import yaml

import attnkit
from attnkit.core.config import ConfigError
from attnkit.runtime import device as dev
from attnkit.runtime.device import apply_threads, native_bf16, resolve_precision, usable_cores
from attnkit.tasks.base import RunError
from attnkit.tasks.classify import ClassifierPredictor
from attnkit.tasks.run_config import load_config

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
CPU = torch.device("cpu")


@pytest.fixture
def native_cpu(monkeypatch):
    monkeypatch.setenv("ATTNKIT_CPU_BF16", "1")


def test_cpu_flags_decide_native_bf16(monkeypatch):
    monkeypatch.delenv("ATTNKIT_CPU_BF16")
    monkeypatch.setattr(dev, "cpu_flags", lambda: frozenset({"avx2", "fma"}))
    assert not dev.cpu_has_native_bf16()  # an AVX2 laptop
    monkeypatch.setattr(dev, "cpu_flags", lambda: frozenset({"avx2", "avx512_bf16"}))
    assert dev.cpu_has_native_bf16()
    monkeypatch.setattr(dev, "cpu_flags", lambda: frozenset({"amx_bf16"}))
    assert dev.cpu_has_native_bf16()


def test_cpu_flags_read_the_flags_line(monkeypatch, tmp_path):
    flags = dev.cpu_flags()
    if Path("/proc/cpuinfo").is_file():
        assert "fpu" in flags or "fp" in flags or flags  # some flags line was found
    assert isinstance(flags, frozenset)


def test_auto_is_fp32_without_native_bf16_and_bf16_with_it(monkeypatch):
    p = resolve_precision("auto", CPU)
    assert p.dtype is None and p.name == "fp32" and "no native bf16" in p.reason
    monkeypatch.setenv("ATTNKIT_CPU_BF16", "1")
    p = resolve_precision("auto", CPU)
    assert p.dtype is torch.bfloat16 and p.name == "bf16" and not p.emulated


def test_explicit_true_and_false(monkeypatch):
    forced = resolve_precision(True, CPU)
    assert forced.name == "bf16" and forced.emulated  # asked for where it is emulated
    assert resolve_precision(False, CPU).name == "fp32"
    monkeypatch.setenv("ATTNKIT_CPU_BF16", "1")
    assert not resolve_precision(True, CPU).emulated


def test_fp16_and_devices_without_bf16():
    with pytest.raises(ConfigError, match="fp16 needs a CUDA device"):
        resolve_precision("auto", CPU, fp16=True)
    with pytest.raises(ConfigError, match="both on"):
        resolve_precision(True, CPU, fp16=True)
    mps = torch.device("mps")
    assert resolve_precision("auto", mps).name == "fp32"  # MPS trains in fp32
    with pytest.raises(ConfigError, match="CPU or CUDA"):
        resolve_precision(True, mps)


@pytest.mark.parametrize(
    ("capability", "native"), [((8, 0), True), ((9, 0), True), ((7, 5), False)]
)
def test_cuda_needs_compute_capability_8(monkeypatch, capability, native):
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
    ok, why = native_bf16(torch.device("cuda"))
    assert ok == native and f"{capability[0]}.{capability[1]}" in why
    assert resolve_precision("auto", torch.device("cuda")).name == ("bf16" if native else "fp32")
    assert resolve_precision("auto", torch.device("cuda")).device_type == "cuda"


def test_config_takes_auto_true_false_and_refuses_the_rest(tmp_path):
    assert load_config(None, []).training.bf16 == "auto"  # the default
    for text, value in [("auto", "auto"), ("AUTO", "auto"), ("true", True), ("false", False)]:
        assert load_config(None, [f"training.bf16={text}"]).training.bf16 == value
    for bad in ("maybe", "1", "2", "[1]"):
        with pytest.raises(ConfigError, match="training.bf16 must be true, false or auto"):
            load_config(None, [f"training.bf16={bad}"])
    with pytest.raises(ConfigError, match="exclude each other"):
        load_config(None, ["training.bf16=true", "training.fp16=true"])
    load_config(None, ["training.bf16=auto", "training.fp16=true"])  # auto yields to fp16


def test_no_recipe_hard_codes_bf16():
    """Only the experiments that measure bf16 itself (``*-bf16``, their name says so) force it."""
    for recipe in sorted(CONFIGS.glob("**/*.yaml")):
        training = (yaml.safe_load(recipe.read_text(encoding="utf-8")) or {}).get("training", {})
        if recipe.parent.name == "experiments" and recipe.stem.endswith("-bf16"):
            continue
        assert training.get("bf16", "auto") in ("auto", False), recipe.name


def _train(tiny_data: Path, tmp_path: Path, **training):
    from conftest import tiny_recipe

    recipe = tmp_path / "r.yaml"
    recipe.write_text(yaml.safe_dump(tiny_recipe(tiny_data, max_steps=2, **training)))
    lines: list[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        attnkit.train(recipe, out=tmp_path / "run", log=lines.append)
    return lines, [w for w in caught if "bf16" in str(w.message)]


def test_training_log_starts_with_device_precision_and_threads(tiny_data, tmp_path, caplog):
    lines, bf16_warnings = _train(tiny_data, tmp_path)
    assert lines[0].startswith("device: cpu; precision: fp32 (training.bf16=auto and the CPU")
    assert lines[1].startswith("threads: 1 (training.num_threads")
    assert not bf16_warnings and not [r for r in caplog.records if r.levelname == "WARNING"]
    saved = json.loads((tmp_path / "run" / "config.json").read_text())
    assert saved["precision"] == "fp32" and saved["training"]["bf16"] == "auto"


def test_training_picks_bf16_where_native(tiny_data, tmp_path, native_cpu):
    lines, _ = _train(tiny_data, tmp_path)
    assert lines[0].startswith("device: cpu; precision: bf16 (training.bf16=auto and the CPU has")
    assert json.loads((tmp_path / "run" / "config.json").read_text())["precision"] == "bf16"


def test_forced_bf16_where_emulated_is_one_warning_line(tiny_data, tmp_path, caplog):
    lines, bf16_warnings = _train(tiny_data, tmp_path, bf16=True)
    assert lines[0].startswith("device: cpu; precision: bf16 (training.bf16=true)")
    # a logged warning (the CLI and a script show it as ``attnkit: warning: ...``, see
    # tests/runtime/test_tracking.py), not a Python UserWarning
    warned = [r for r in caplog.records if "bf16" in r.getMessage()]
    assert len(warned) == 1 and warned[0].levelname == "WARNING"
    assert warned[0].name.startswith("attnkit.") and "much slower" in warned[0].getMessage()
    assert not bf16_warnings


@pytest.mark.slow
def test_inference_follows_the_same_rule(tiny_data, tmp_path, monkeypatch):
    _train(tiny_data, tmp_path)
    run = tmp_path / "run"
    text = ["a wonderful movie", "최악 지루해요"]
    fp32 = attnkit.load(run)
    assert isinstance(fp32, ClassifierPredictor) and fp32.precision.name == "fp32"
    expected = [p.probabilities for p in fp32.predict(text)]
    assert attnkit.load(run, precision="bf16").precision.name == "bf16"
    monkeypatch.setenv("ATTNKIT_CPU_BF16", "1")
    bf16 = attnkit.load(run)
    assert bf16.precision.name == "bf16"
    seen: list[torch.dtype] = []
    hook = bf16.model.register_forward_hook(lambda m, i, out: seen.append(_first(out).dtype))
    got = [p.probabilities for p in bf16.predict(text)]
    hook.remove()
    assert seen == [torch.bfloat16]  # the forward pass ran under bf16 autocast
    for g, e in zip(got, expected, strict=True):
        assert all(abs(g[k] - e[k]) < 0.03 for k in e)
    assert attnkit.load(run, precision="fp32").precision.name == "fp32"
    assert attnkit.load(run, quantize="int8").precision.name == "fp32"  # int8 runs as it is
    report = attnkit.evaluate(run, data_dir=None, split="test")
    assert report["precision"] == "bf16"
    with pytest.raises(RunError, match="precision must be"):
        attnkit.load(run, precision="half")


def _first(out):
    return out[0] if isinstance(out, (tuple, list)) else getattr(out, "logits", out)


def test_threads_default_to_the_usable_cores(monkeypatch):
    before = torch.get_num_threads()
    try:
        monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0}, raising=False)
        assert usable_cores() == 1
        assert apply_threads(None) == 1 and torch.get_num_threads() == 1
        assert apply_threads(2) == 2 and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_a_busy_machine_suggests_fewer_threads(monkeypatch):
    monkeypatch.setattr(dev, "usable_cores", lambda: 2)
    monkeypatch.setattr(os, "getloadavg", lambda: (1.0, 1.0, 1.0))  # one core taken
    note = dev.busy_note(2)
    assert note and "busy (load average 1.0 on 2 cores)" in note and "--threads 1" in note
    assert dev.busy_note(1) is None  # one thread does not wait for another
    monkeypatch.setattr(os, "getloadavg", lambda: (0.1, 0.1, 0.1))
    assert dev.busy_note(2) is None  # a quiet machine


@pytest.mark.parametrize("value", ["false", "true", "yes", "2", "auto"])
def test_an_unknown_cpu_bf16_override_is_an_error_not_ignored(monkeypatch, capsys, value) -> None:
    """``ATTNKIT_CPU_BF16`` takes 0 or 1 (or nothing); "false" once meant "the CPU decides"."""
    from attnkit.app.cli import main
    from attnkit.core.errors import ConfigError
    from attnkit.runtime.device import cpu_has_native_bf16

    monkeypatch.setenv("ATTNKIT_CPU_BF16", value)
    with pytest.raises(ConfigError, match="ATTNKIT_CPU_BF16 must be 0 .* or 1"):
        cpu_has_native_bf16()
    assert main(["env"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "ATTNKIT_CPU_BF16" in err[0] and repr(value) in err[0]
    for accepted in ("0", "1", ""):
        monkeypatch.setenv("ATTNKIT_CPU_BF16", accepted)
        assert cpu_has_native_bf16() in (True, False)
