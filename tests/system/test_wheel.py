"""The pip path: attnkit's wheel, built without network, installed alone into a fresh venv
and used from an empty folder exactly as the README's "Install with pip" section says.

The fresh venv gets attnkit only from the wheel (``pip install --no-index --no-deps``) and
its dependencies, without network, as links to the packages of this venv: exactly the
dependency closure of ``attnkit[all]`` that the wheel's metadata declares, nothing more. So a
package attnkit imports but does not declare fails here, and ``pip check`` there checks that
the declared versions fit together.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
DATA = Path(
    os.environ.get("ATTNKIT_DATA") or Path(__file__).resolve().parents[3] / "shared" / "data"
)

# The README's pip path: the bash block after the line PIP_PATH_MARK in README.md,
# docs/README.ko.md and docs/pypi.md (the long description: pyproject's readme), command by
# command (comments dropped), and how this test runs each. Every command of that block is
# run by test_the_readme_pip_path_runs_from_the_wheel, but the three that need the network,
# which are replaced by what they would have done:
#   pip install torch ... / pip install "attnkit[all]": the wheel, installed with
#       --no-index --no-deps, and its declared dependencies linked from this venv;
#   attnkit data fetch nsmc: ATTNKIT_DATA points at a folder that has NSMC (CI's
#       ../shared/data; tests/data/test_catalogue.py tests fetch itself against a local mirror).
# The others run as written, with these additions: train gets QUICK (seconds, not minutes),
# serve a free port (and is stopped once /healthz answers).
PIP_PATH_MARK = "<!-- pip path: tests/system/test_wheel.py runs every command of this block -->"
NETWORK = {
    "pip install torch --index-url https://download.pytorch.org/whl/cpu",
    'pip install "attnkit[all]"',
    "attnkit data fetch nsmc",
}
PIP_PATH = [
    "pip install torch --index-url https://download.pytorch.org/whl/cpu",
    'pip install "attnkit[all]"',
    "attnkit data fetch nsmc",
    "attnkit data list",
    "attnkit recipes",
    "attnkit recipes show nsmc-quick",
    "attnkit train nsmc-quick",
    'attnkit predict runs/nsmc-quick "배우들 연기가 정말 최고였어요" "시간 낭비"',
    'attnkit explain runs/nsmc-quick "연기가 최고" --html explain.html',
    "attnkit export runs/nsmc-quick --format onnx -o nsmc-onnx",
    "attnkit serve runs/nsmc-quick",
]
QUICK = ["--set", "data.limit=600", "--set", "training.max_steps=4",
         "--set", "tokenizer.vocab_size=600"]  # fmt: skip
EXTRAS = {"plot", "serve", "onnx", "tensorboard", "notebook", "all", "dev"}


def pip_path_block(path: Path) -> list[str]:
    """The commands of the bash block after PIP_PATH_MARK in ``path`` (comments dropped)."""
    text = path.read_text(encoding="utf-8")
    assert PIP_PATH_MARK in text, f"{path.name} has no pip path block ({PIP_PATH_MARK})"
    block = re.search(r"```bash\n(.*?)```", text.split(PIP_PATH_MARK, 1)[1], re.S)
    assert block is not None, f"{path.name}: no ```bash block after the pip path mark"
    commands = []
    for line in block.group(1).splitlines():
        words = shlex.split(line, comments=True)
        if words:
            commands.append(shlex.join(words))
    return commands


def _long_description() -> Path:
    readme = PYPROJECT["project"]["readme"]
    return ROOT / (readme if isinstance(readme, str) else readme["file"])


@pytest.mark.parametrize("doc", ["README.md", "docs/README.ko.md", "docs/pypi.md"])
def test_every_pip_path_shows_the_commands_this_test_runs(doc):
    assert pip_path_block(ROOT / doc) == [shlex.join(shlex.split(c)) for c in PIP_PATH]


def test_the_long_description_works_on_a_package_index():
    """A package index shows the long description without the repository around it: every
    link and image there must be absolute (a relative docs/x.png is a broken image)."""
    text = _long_description().read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)\s]+)", text) + re.findall(r"<img [^>]*src=\"([^\"]+)", text)
    relative = [t for t in targets if not re.match(r"(https?://|mailto:|#)", t)]
    assert not relative, f"{_long_description().name}: relative links {relative}"


# ----------------------------------------------------------------------------- the wheel
def _build_wheel(tmp: Path) -> Path:
    """attnkit's wheel, built from a copy of the sources (no build isolation: no network;
    the copy keeps build/ and egg-info out of the checkout)."""
    src = tmp / "src-copy"
    src.mkdir()
    names = {"pyproject.toml", "LICENSE", "README.md", str(_long_description().relative_to(ROOT))}
    for name in names:
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, src / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "*.pyc")
    shutil.copytree(ROOT / "src", src / "src", ignore=ignore)
    out = tmp / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
         "-w", str(out), str(src)],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    (wheel,) = out.glob("attnkit-*.whl")
    return wheel


def _check_contents(wheel: Path, description: Path) -> dict:
    """What the wheel must hold (``description``: the long description it was built with);
    returns its METADATA (an email.message.Message) and requirements."""
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        (meta_name,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        meta = Parser().parsestr(z.read(meta_name).decode("utf-8"))
    dist_info = meta_name.rsplit("/", 1)[0]
    assert f"{dist_info}/licenses/LICENSE" in names
    assert "attnkit/py.typed" in names
    package = ROOT / "src" / "attnkit"
    for folder in ("recipes", "app/serve/static", "app/explain/static"):
        shipped = {p.relative_to(package).as_posix() for p in (package / folder).iterdir()}
        assert shipped, folder
        assert {f"attnkit/{s}" for s in shipped} <= names, (folder, shipped)
    assert "attnkit/recipes/nsmc-quick.yaml" in names
    assert meta["License-Expression"] == "MIT"
    assert len(meta.get_all("Classifier")) >= 10 and "attention" in meta["Keywords"]
    assert set(meta.get_all("Provides-Extra")) == EXTRAS
    assert {u.split(",")[0] for u in meta.get_all("Project-URL")} >= {"Homepage", "Source"}
    requires = [Requirement(r) for r in meta.get_all("Requires-Dist")]
    core = {canonicalize_name(r.name) for r in requires if r.marker is None}
    assert core == {"torch", "numpy", "tokenizers", "safetensors", "tqdm", "pyyaml", "sacrebleu"}
    text = description.read_text(encoding="utf-8")
    assert meta.get_payload().strip() == text.strip(), "not pyproject's readme"
    return {"meta": meta, "requires": requires}


def _closure(requires: list[Requirement], extras: set[str]) -> set[str]:
    """The distributions (canonical names, attnkit left out) that attnkit with ``extras``
    needs, following each one's metadata as installed in this venv."""
    todo = [r for r in requires if r.marker is None or any(
        r.marker.evaluate({"extra": e}) for e in extras)]  # fmt: skip
    found: set[str] = set()
    seen: set[tuple[str, tuple[str, ...]]] = set()
    while todo:
        req = todo.pop()
        name = canonicalize_name(req.name)
        if name == "attnkit":  # attnkit[plot,...] names its own extras
            todo += [r for r in requires if r.marker is not None and any(
                r.marker.evaluate({"extra": e}) for e in req.extras)]  # fmt: skip
            continue
        key = (name, tuple(sorted(req.extras)))
        if key in seen:
            continue
        seen.add(key)
        found.add(name)
        envs = [{"extra": e} for e in (*req.extras, "")]
        for line in importlib.metadata.distribution(req.name).requires or []:
            dep = Requirement(line)
            if dep.marker is None or any(dep.marker.evaluate(env) for env in envs):
                todo.append(dep)
    return found


def _link_dependencies(names: set[str], site: Path) -> None:
    """Link each distribution's top-level files and folders (its dist-info too) from this
    venv into ``site``: what `pip install` would have put there, without downloading."""
    for name in sorted(names):
        dist = importlib.metadata.distribution(name)
        assert dist.files, f"{name}: installed without a RECORD"
        base = Path(dist.locate_file(""))
        tops = {Path(str(f)).parts[0] for f in dist.files}
        for top in tops - {"..", "__pycache__"}:
            if (base / top).exists() and not (site / top).exists():
                (site / top).symlink_to(base / top)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve_until_healthy(cmd: list[str], env: dict, cwd: Path, port: int) -> dict:
    proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                pytest.fail(f"attnkit serve exited {proc.returncode}: {proc.stdout.read()}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as r:
                    health = json.loads(r.read())
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as r:
                    health["page"] = r.read().decode("utf-8")
                return health
            except OSError:
                time.sleep(0.3)
        pytest.fail("attnkit serve did not answer /healthz within 60 s")
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.mark.slow
def test_the_readme_pip_path_runs_from_the_wheel(tmp_path):
    wheel = _build_wheel(tmp_path)
    found = _check_contents(wheel, tmp_path / "src-copy" / _long_description().relative_to(ROOT))

    venv = tmp_path / "fresh"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   timeout=60)  # fmt: skip
    python = venv / "bin" / "python"
    site = Path(
        subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                       check=True, capture_output=True, text=True).stdout.strip()
    )  # fmt: skip
    pip = [sys.executable, "-m", "pip", "--python", str(python)]
    subprocess.run([*pip, "install", "-q", "--no-index", "--no-deps", str(wheel)], check=True,
                   capture_output=True, timeout=120)  # fmt: skip
    _link_dependencies(_closure(found["requires"], {"all"}), site)
    check = subprocess.run([*pip, "check"], capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr

    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", PYTHONNOUSERSITE="1",
               ATTNKIT_DATA=str(DATA), COLUMNS="200")  # fmt: skip
    work = tmp_path / "empty"
    work.mkdir()
    where = subprocess.run([str(python), "-c", "import attnkit; print(attnkit.__file__)"],
                           env=env, cwd=work, check=True, capture_output=True, text=True)  # fmt: skip
    assert Path(where.stdout.strip()).is_relative_to(site), where.stdout  # the wheel's attnkit

    def attnkit(command: str, *more: str) -> str:
        words = shlex.split(command)
        assert words[0] == "attnkit" and command in PIP_PATH or command == "attnkit --help"
        proc = subprocess.run([str(venv / "bin" / "attnkit"), *words[1:], *more], env=env,
                              cwd=work, capture_output=True, text=True, timeout=180)  # fmt: skip
        assert proc.returncode == 0, f"{command}: {proc.stderr[-2000:]}"
        return proc.stdout

    assert "recipes" in attnkit("attnkit --help")
    assert "nsmc" in attnkit("attnkit data list")
    listed = attnkit("attnkit recipes")
    assert "nsmc-quick" in listed and "imdb-quick" in listed
    shown = yaml.safe_load(attnkit("attnkit recipes show nsmc-quick"))
    assert shown["task"] == "classify" and shown["data"]["name"] == "nsmc"
    if not (DATA / "nsmc" / "ratings_train.txt.gz").is_file():
        pytest.skip(f"NSMC is not in {DATA} (set ATTNKIT_DATA): the pip path stops before train")

    attnkit("attnkit train nsmc-quick", *QUICK)
    run = work / "runs" / "nsmc-quick"
    assert {"model.safetensors", "tokenizer.json", "curves.png"} <= {p.name for p in run.iterdir()}
    lines = attnkit(PIP_PATH[7]).splitlines()
    assert len(lines) == 2 and all(
        line.split("\t")[0] in ("positive", "negative") for line in lines
    )
    attnkit(PIP_PATH[8])
    page = (work / "explain.html").read_text(encoding="utf-8")
    assert page.lstrip().lower().startswith("<!doctype html") and "연기가" in page
    attnkit(PIP_PATH[9])
    assert (work / "nsmc-onnx" / "model.onnx").is_file()

    port = _free_port()
    cmd = [str(venv / "bin" / "attnkit"), *shlex.split(PIP_PATH[10])[1:], "--port", str(port)]
    health = _serve_until_healthy(cmd, env, work, port)
    assert health["status"] == "ok" and "nsmc-quick" in json.dumps(health["models"])
    assert "<html" in health["page"].lower()
