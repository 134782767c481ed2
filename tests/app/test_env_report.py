"""``attnkit env``: versions, CPU flags and precision, threads, GPUs and data, as aligned lines
or one JSON object."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from importlib import metadata

import pytest

import attnkit
from attnkit.app import cli, env_report
from attnkit.data import catalogue
from attnkit.runtime.device import SPEED_FLAGS

SHAKESPEARE = b"First Citizen:\nBefore we proceed any further, hear me speak.\n"


@pytest.fixture
def data_dir(tmp_path, monkeypatch):
    """A data folder holding tinyshakespeare (catalogue entry patched to its contents)."""
    infos = []
    for info in catalogue.list_datasets():
        if info.name == "tinyshakespeare":
            files = tuple(
                dataclasses.replace(
                    f, sha256=hashlib.sha256(SHAKESPEARE).hexdigest(), size=len(SHAKESPEARE)
                )
                for f in info.files
            )
            info = dataclasses.replace(info, files=files)
        infos.append(info)
    monkeypatch.setattr(catalogue, "_DATASETS", tuple(infos))
    (tmp_path / "tinyshakespeare").mkdir()
    (tmp_path / "tinyshakespeare/input.txt").write_bytes(SHAKESPEARE)
    return tmp_path


def _env(capsys, *args: str) -> str:
    assert cli.main(["env", *args]) == 0
    return capsys.readouterr().out


def _json(capsys, *args: str) -> dict:
    return json.loads(_env(capsys, "--json", *args))


def _value(out: str, key: str) -> str:
    return next(line for line in out.splitlines() if line.startswith(f"{key}:")).split(":", 1)[1]


def test_text_report_has_every_section(capsys, data_dir):
    out = _env(capsys, "--data-dir", str(data_dir))
    for key in (
        "attnkit", "python", "torch", "transformers", "tokenizers", "fastapi", "onnxruntime",
        "os", "machine", "cpu", "cpu flags", "cpu native bf16", "bf16 (auto)", "threads",
        "cuda", "mps", "data dir", "datasets present", "datasets missing",
    ):  # fmt: skip
        assert any(line.startswith(f"{key}:") for line in out.splitlines()), key
    assert _value(out, "attnkit").strip() == attnkit.__version__
    for flag in SPEED_FLAGS:
        assert f"{flag} yes" in out or f"{flag} no" in out
    assert str(data_dir) in _value(out, "data dir")
    # values are aligned in one column
    starts = {len(line) - len(line.split(":", 1)[1].lstrip()) for line in out.splitlines()}
    assert len(starts) == 1


def test_json_keys_and_types(capsys, data_dir):
    info = _json(capsys, "--data-dir", str(data_dir))
    assert set(info) == {"versions", "system", "cpu", "threads", "precision", "gpu", "data"}
    assert isinstance(info["system"]["os"], str) and isinstance(info["system"]["machine"], str)
    assert isinstance(info["cpu"]["model"], str) and info["cpu"]["model"]
    assert set(info["cpu"]["flags"]) == set(SPEED_FLAGS)
    assert all(isinstance(v, bool) for v in info["cpu"]["flags"].values())
    assert isinstance(info["cpu"]["native_bf16"], bool)
    threads = info["threads"]
    assert all(isinstance(threads[k], int) for k in ("torch", "usable_cores", "cpu_count"))
    assert isinstance(threads["oversubscribed"], bool)
    assert info["precision"]["bf16_auto"] in ("bf16", "fp32")
    assert isinstance(info["precision"]["reason"], str)
    gpu = info["gpu"]
    assert isinstance(gpu["cuda_available"], bool) and isinstance(gpu["mps_available"], bool)
    assert isinstance(gpu["devices"], list)
    assert len(gpu["devices"]) == 0 or not gpu["cuda_available"] or gpu["devices"][0]["name"]
    assert info["data"]["dir"] == str(data_dir)


def test_versions_match_metadata(capsys, monkeypatch):
    real = metadata.version

    def version(dist: str) -> str:
        if dist == "onnxruntime":
            raise metadata.PackageNotFoundError(dist)
        return real(dist)

    monkeypatch.setattr(env_report.metadata, "version", version)
    info = env_report.collect()
    versions = info["versions"]
    assert versions["attnkit"] == attnkit.__version__
    for dist in ("torch", "transformers", "tokenizers", "fastapi"):
        try:
            expected = real(dist)
        except metadata.PackageNotFoundError:
            expected = None
        assert versions[dist] == expected, dist
    assert versions["onnxruntime"] is None
    assert _value(env_report.format_report(info), "onnxruntime").strip() == "not installed"


@pytest.mark.slow
def test_env_imports_neither_transformers_nor_onnxruntime():
    import subprocess
    import sys

    code = (
        "import sys; from attnkit.app import cli; cli.main(['env', '--json']); "
        "assert 'transformers' not in sys.modules and 'onnxruntime' not in sys.modules"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_present_and_missing_datasets(capsys, data_dir):
    datasets = _json(capsys, "--data-dir", str(data_dir))["data"]["datasets"]
    assert datasets["tinyshakespeare"] == "present"
    assert datasets["nsmc"] == "missing"
    out = _env(capsys, "--data-dir", str(data_dir))
    assert "tinyshakespeare" in _value(out, "datasets present")
    assert "nsmc" in _value(out, "datasets missing")
    assert "tinyshakespeare" not in _value(out, "datasets missing")


def test_damaged_dataset_is_named(capsys, data_dir):
    (data_dir / "tinyshakespeare/input.txt").write_bytes(SHAKESPEARE[:10])
    out = _env(capsys, "--data-dir", str(data_dir))
    assert "tinyshakespeare" in _value(out, "datasets damaged")


def test_data_dir_from_environment(capsys, data_dir, monkeypatch):
    monkeypatch.setenv("ATTNKIT_DATA", str(data_dir))
    info = _json(capsys)
    assert info["data"]["dir"] == str(data_dir)
    assert info["data"]["datasets"]["tinyshakespeare"] == "present"


def test_cpu_without_native_bf16_chooses_fp32(capsys, monkeypatch):
    monkeypatch.setenv("ATTNKIT_CPU_BF16", "0")
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    monkeypatch.setattr("attnkit.runtime.device._mps_available", lambda: False)
    info = _json(capsys)
    assert info["cpu"]["native_bf16"] is False
    assert info["precision"]["device"] == "cpu" and info["precision"]["bf16_auto"] == "fp32"
    assert "no native bf16" in info["precision"]["reason"]
    out = _env(capsys)
    assert _value(out, "cpu native bf16").strip() == "no"
    assert _value(out, "bf16 (auto)").strip().startswith("fp32 on cpu")


def test_cpu_with_native_bf16_chooses_bf16(capsys, monkeypatch):
    monkeypatch.setenv("ATTNKIT_CPU_BF16", "1")
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    monkeypatch.setattr("attnkit.runtime.device._mps_available", lambda: False)
    info = _json(capsys)
    assert info["cpu"]["native_bf16"] is True
    assert info["precision"]["bf16_auto"] == "bf16"


def test_more_torch_threads_than_cores_is_flagged(capsys, monkeypatch):
    monkeypatch.setattr("attnkit.runtime.device.usable_cores", lambda: 2)
    monkeypatch.setattr("torch.get_num_threads", lambda: 8)
    info = _json(capsys)
    assert info["threads"]["torch"] == 8 and info["threads"]["usable_cores"] == 2
    assert info["threads"]["oversubscribed"] is True
    assert "WARNING" in _value(_env(capsys), "threads")


def test_threads_within_cores_not_flagged(capsys, monkeypatch):
    monkeypatch.setattr("attnkit.runtime.device.usable_cores", lambda: 4)
    monkeypatch.setattr("torch.get_num_threads", lambda: 4)
    assert _json(capsys)["threads"]["oversubscribed"] is False
    assert "WARNING" not in _value(_env(capsys), "threads")


def test_gpus_are_listed(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i=0: f"Fake GPU {i}")
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda i=0: (8, 0))
    info = env_report.collect()
    assert info["gpu"]["devices"] == [
        {"index": 0, "name": "Fake GPU 0", "capability": "8.0"},
        {"index": 1, "name": "Fake GPU 1", "capability": "8.0"},
    ]
    assert info["precision"]["device"] == "cuda" and info["precision"]["bf16_auto"] == "bf16"
    out = env_report.format_report(info)
    assert "Fake GPU 1 (compute capability 8.0)" in _value(out, "gpu 1")
