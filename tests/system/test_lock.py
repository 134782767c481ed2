"""requirements.lock against pyproject.toml: every dependency pinned, inside its range, no
CUDA package, and (in a venv that `make` built from the lock) installed at the pinned version.
Fast and offline: reads the two files and the installed metadata."""

import os
import re
import sys
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parents[2]
LOCK = ROOT / "requirements.lock"
# installed by the Makefile outside the lock: torch first from TORCH_SPEC (the CPU build),
# attnkit itself editable with --no-deps
NOT_LOCKED = {"torch", "attnkit"}
CUDA = re.compile(r"^(nvidia-|cuda-|cupy|triton$)")


def _direct_requirements() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = project["optional-dependencies"]
    every_extra = [r for extra in extras.values() for r in extra]
    reqs = [Requirement(r) for r in project["dependencies"] + every_extra]
    return [
        r
        for r in reqs
        if canonicalize_name(r.name) not in NOT_LOCKED and (r.marker is None or r.marker.evaluate())
    ]


def _pins() -> dict[str, str]:
    pins = {}
    for line in LOCK.read_text(encoding="utf-8").splitlines():
        m = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", line)
        if m:
            pins[canonicalize_name(m.group(1))] = m.group(2)
    return pins


def test_lock_pins_every_dependency_within_its_range():
    pins = _pins()
    reqs = _direct_requirements()
    assert len(reqs) >= 20, "pyproject.toml's dependencies were not read"
    missing = [r.name for r in reqs if canonicalize_name(r.name) not in pins]
    assert not missing, f"not pinned in requirements.lock (run `make lock`): {missing}"
    outside = [
        f"{r.name}=={pins[canonicalize_name(r.name)]} (pyproject: {r.specifier})"
        for r in reqs
        if not r.specifier.contains(pins[canonicalize_name(r.name)], prereleases=True)
    ]
    assert not outside, f"lock pins outside pyproject's range (run `make lock`): {outside}"


def test_lock_has_no_torch_and_no_cuda_package():
    pins = _pins()
    assert "torch" not in pins, "torch belongs in the Makefile's TORCH_SPEC (the CPU build)"
    cuda = [f"{n}=={v}" for n, v in pins.items() if CUDA.match(n) or "+cu" in v]
    assert not cuda, f"requirements.lock pins CUDA packages: {cuda}"


def test_installed_versions_equal_the_lock():
    if os.environ.get("ATTNKIT_LATEST"):
        pytest.skip("ATTNKIT_LATEST is set: `make test-latest` tests the newest versions")
    if sys.version_info[:2] != (3, 11):
        pytest.skip("requirements.lock is for Python 3.11; the Makefile installs ranges here")
    if not (Path(sys.prefix) / ".dev").exists():
        pytest.skip(f"{sys.prefix} is not a venv that `make` installed from requirements.lock")
    pins = _pins()
    differ = []
    for r in _direct_requirements():
        name = canonicalize_name(r.name)
        if name not in pins:  # reported by the first test
            continue
        try:
            installed = metadata.version(name)
        except metadata.PackageNotFoundError:
            installed = "not installed"
        if installed == "not installed" or Version(installed) != Version(pins[name]):
            differ.append(f"{name}: installed {installed}, lock {pins[name]}")
    assert not differ, f"the venv differs from requirements.lock (run `make`): {differ}"
