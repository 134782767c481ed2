"""``attnkit env``: the machine and version facts a bug report needs.

:func:`collect` gathers them into one JSON-serializable dict; :func:`format_report` turns
that into aligned ``key: value`` lines. Nothing heavy is imported just to be reported:
package versions come from ``importlib.metadata`` (transformers and onnxruntime take
seconds to import).
"""

from __future__ import annotations

import os
import platform
from importlib import metadata
from pathlib import Path
from typing import Any

from attnkit.core.version import __version__
from attnkit.data.catalogue import list_datasets
from attnkit.data.fetch import check_file
from attnkit.data.paths import resolve_data_dir
from attnkit.runtime import device as devices  # (attributes looked up per call)

__all__ = ["PACKAGES", "collect", "cpu_model", "format_report"]

# the distributions whose versions a report shows (besides attnkit and Python)
PACKAGES = ("torch", "transformers", "tokenizers", "fastapi", "onnxruntime")


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def cpu_model() -> str:
    """The CPU's name: ``model name`` in /proc/cpuinfo, else ``platform.processor()``."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name" and value.strip():
            return value.strip()
    return platform.processor() or platform.machine() or "unknown"


def _datasets(data_dir: str | None) -> dict[str, Any]:
    """The data directory and each catalogued dataset's state, by the quick check of
    ``attnkit data list``: ``present``, ``missing`` or ``bad`` (damaged)."""
    root = resolve_data_dir(data_dir)
    states: dict[str, str] = {}
    for info in list_datasets():
        found = {c.status for f in info.files for c in check_file(f, root, verify=False)}
        states[info.name] = (
            "bad" if "bad" in found else "missing" if "missing" in found else "present"
        )
    return {"dir": str(root), "exists": root.is_dir(), "datasets": states}


def collect(data_dir: str | None = None) -> dict[str, Any]:
    """Everything ``attnkit env`` reports, as one JSON-serializable dict of sections:
    versions, system, cpu, threads, precision, gpu, data. A version is None where the
    package is not installed."""
    import torch

    flags = devices.cpu_flags()
    device = devices.resolve_device("auto")
    precision = devices.resolve_precision("auto", device)
    torch_threads = torch.get_num_threads()
    cores = devices.usable_cores()
    cuda = torch.cuda.is_available()
    gpus = []
    if cuda:
        for index in range(torch.cuda.device_count()):
            major, minor = torch.cuda.get_device_capability(index)
            gpus.append(
                {
                    "index": index,
                    "name": torch.cuda.get_device_name(index),
                    "capability": f"{major}.{minor}",
                }
            )
    return {
        "versions": {
            "attnkit": __version__,
            "python": platform.python_version(),
            **{dist: _version(dist) for dist in PACKAGES},
        },
        "system": {
            "os": platform.platform(),
            "machine": platform.machine(),
            "python_implementation": platform.python_implementation(),
        },
        "cpu": {
            "model": cpu_model(),
            "flags": {flag: flag in flags for flag in devices.SPEED_FLAGS},
            "native_bf16": devices.cpu_has_native_bf16(),
        },
        "threads": {
            "torch": torch_threads,
            "usable_cores": cores,
            "cpu_count": os.cpu_count(),
            "oversubscribed": torch_threads > cores,
        },
        "precision": {
            "device": str(device),
            "bf16_auto": precision.name,
            "reason": precision.reason,
        },
        "gpu": {
            "cuda_available": cuda,
            "cuda_version": torch.version.cuda,
            "devices": gpus,
            "mps_available": devices._mps_available(),
        },
        "data": _datasets(data_dir),
    }


def _yes(value: bool) -> str:
    return "yes" if value else "no"


def format_report(info: dict[str, Any]) -> str:
    """``collect()``'s dict as aligned ``key: value`` lines (no trailing newline)."""
    versions, cpu, threads = info["versions"], info["cpu"], info["threads"]
    gpu, prec, data = info["gpu"], info["precision"], info["data"]
    rows: list[tuple[str, str]] = [
        (name, version or "not installed") for name, version in versions.items()
    ]
    rows += [
        ("os", info["system"]["os"]),
        ("machine", info["system"]["machine"]),
        ("cpu", cpu["model"]),
        ("cpu flags", ", ".join(f"{f} {_yes(on)}" for f, on in cpu["flags"].items())),
        ("cpu native bf16", _yes(cpu["native_bf16"])),
        ("bf16 (auto)", f"{prec['bf16_auto']} on {prec['device']} ({prec['reason']})"),
    ]
    line = (
        f"torch {threads['torch']}, usable cores {threads['usable_cores']}, "
        f"os.cpu_count {threads['cpu_count']}"
    )
    if threads["oversubscribed"]:
        line += (
            " -- WARNING: more torch threads than usable cores "
            "(set training.num_threads or OMP_NUM_THREADS)"
        )
    rows.append(("threads", line))
    cuda = _yes(gpu["cuda_available"])
    rows.append(("cuda", f"{cuda} (torch.version.cuda: {gpu['cuda_version'] or 'none'})"))
    for dev in gpu["devices"]:
        rows.append(
            (f"gpu {dev['index']}", f"{dev['name']} (compute capability {dev['capability']})")
        )
    rows.append(("mps", _yes(gpu["mps_available"])))
    rows.append(("data dir", data["dir"] + ("" if data["exists"] else " (does not exist)")))
    for state, label in (("present", "present"), ("missing", "missing"), ("bad", "damaged")):
        names = [name for name, s in data["datasets"].items() if s == state]
        if names or state != "bad":
            rows.append((f"datasets {label}", ", ".join(names) or "none"))
    width = max(len(key) for key, _ in rows) + 1
    return "\n".join(f"{key + ':':<{width}} {value}" for key, value in rows)
