"""The screenshots of docs/explain.md, from real trained runs (issue 34's guide).

    python tools/explain_screenshots.py              # train what is missing, then shoot
    python tools/explain_screenshots.py --retrain    # train the runs again first

1. Trains, only where the run is missing, two shipped recipes with ``attnkit train`` into
   runs/docs-* (git-ignored): configs/nsmc-quick.yaml (a 1-layer Korean Transformer sentiment
   classifier, one epoch over NSMC: validation accuracy 0.85) and
   configs/shakespeare-nanogpt-cpu.yaml (nanoGPT's CPU character GPT, 2,000 steps: validation
   loss 1.92). Measured on 2 busy CPU cores: 3.0 + 2.0 minutes. A run killed midway is
   resumed (``--resume``); the data comes from $ATTNKIT_DATA (``attnkit data fetch nsmc
   tinyshakespeare``).
2. Writes each run's page with the real ``attnkit explain RUN TEXT --html FILE``.
3. Opens it from disk in headless Chromium (Debian's ``chromium``, as
   tests/test_explain_browser.py; or $ATTNKIT_CHROMIUM) with Playwright, sets the pickers
   the guide describes, and saves the panels into docs/img/explain-NAME.png.

The images this tool owns are ``OWNED``; the browser test never writes them. The seq2seq,
BERT MLM and ELMo images stay those of the browser test's tiny runs (a real run of those
families takes far longer than a few minutes on a CPU): ``ATTNKIT_SCREENSHOTS=1 pytest
tests/test_explain_browser.py`` rewrites them.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
IMG = ROOT / "docs" / "img"

# what docs/explain.md describes: the classifier reads REVIEW (6 word pieces: 이 영화 정말
# 재미있어요 감동적이 ##네요); panels 2, 3 and 5 show its token CHOSEN ("감동적이") and head 1;
# the GPT samples STEPS characters after PROMPT and the screenshot shows the last step
REVIEW = "이 영화 정말 재미있어요 감동적이네요"
CHOSEN = 4
PROMPT = "ROMEO:"
STEPS = 48
GPT_OPTIONS = ("--steps", str(STEPS), "--temperature", "0.5", "--top-k", "40", "--seed", "0")

# the panels of the classifier page, then the GPT's output panel: name -> page section
CLASSIFIER_PANELS = {
    "input": "#input",
    "embeddings": "#embed",
    "head": "#head",
    "heads": "#heads",
    "residual": "#residual",
    "classifier": "#family",
}
OWNED = (*CLASSIFIER_PANELS, "gpt")  # docs/img/explain-NAME.png made here


@dataclass(frozen=True)
class DocsRun:
    """A shipped recipe trained into ``runs/docs-NAME`` for the screenshots."""

    name: str
    recipe: str
    overrides: tuple[str, ...] = ()  # ``--set KEY=VALUE`` values

    def path(self, runs: Path) -> Path:
        return runs / f"docs-{self.name}"


CLASSIFIER = DocsRun("nsmc-quick", "configs/nsmc-quick.yaml")  # 2,227 steps (one epoch): 3 min
GPT = DocsRun("shakespeare-nanogpt-cpu", "configs/shakespeare-nanogpt-cpu.yaml")  # 2,000: 2 min


def shown(path: Path) -> str:
    """``path`` relative to the repository when it is inside it."""
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def done_marker(run: Path) -> Path:
    """Written beside ``run`` once ``attnkit train`` finished it (a killed run has weights
    too: its best so far)."""
    return run.parent / f".{run.name}.done"


def ensure_trained(spec: DocsRun, runs: Path, *, retrain: bool, threads: int | None) -> Path:
    """Train ``spec`` with ``attnkit train`` unless it finished before; an interrupted run
    is resumed from its last/ checkpoint, ``retrain`` starts it again."""
    out = spec.path(runs)
    marker = done_marker(out)
    if marker.is_file() and (out / "model.safetensors").is_file() and not retrain:
        print(f"{shown(out)}: trained already (--retrain to train it again)")
        return out
    cmd = [sys.executable, "-m", "attnkit", "train", str(ROOT / spec.recipe), "--out", str(out)]
    for kv in spec.overrides:
        cmd += ["--set", kv]
    if threads:
        cmd += ["--threads", str(threads)]
    if (out / "last").is_dir() and not retrain:
        cmd.append("--resume")
    elif out.exists():
        cmd.append("--force")
    marker.unlink(missing_ok=True)
    print("$", " ".join(cmd[1:]), flush=True)
    start = time.monotonic()
    subprocess.run(cmd, check=True, cwd=ROOT)
    minutes = (time.monotonic() - start) / 60
    marker.write_text(f"{' '.join(cmd[1:])}\n{minutes:.1f} min\n", encoding="utf-8")
    print(f"{shown(out)}: trained in {minutes:.1f} min")
    return out


def write_page(run: Path, text: str, html: Path, *options: str) -> Path:
    """``attnkit explain RUN TEXT --html FILE``."""
    from attnkit.app.cli import main

    if main(["explain", str(run), text, "--html", str(html), *options]) != 0:
        raise SystemExit(f"attnkit explain {run} failed")
    return html


def find_chromium() -> str:
    """A Chromium that starts ($ATTNKIT_CHROMIUM, else Debian's ``chromium`` on PATH)."""
    names = ("chromium", "chromium-browser", "google-chrome")
    for path in [os.environ.get("ATTNKIT_CHROMIUM")] + [shutil.which(n) for n in names]:
        if not path:
            continue
        try:
            done = subprocess.run([path, "--version"], capture_output=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if done.returncode == 0:
            return path
    raise SystemExit("no chromium that starts: install Debian's chromium or set ATTNKIT_CHROMIUM")


class Shooter:
    """Opens pages from disk in one headless Chromium and saves panels as PNG files."""

    def __init__(self, browser, img: Path) -> None:
        self.browser = browser
        self.img = img
        self.written: list[Path] = []
        self.errors: list[str] = []  # the script errors of the open page

    def open(self, html: Path):
        """The page of ``html``, once its script has drawn it (one page open at a time)."""
        self.errors = []
        page = self.browser.new_page(viewport={"width": 1100, "height": 1400})
        page.set_default_timeout(60_000)
        page.on("pageerror", lambda e: self.errors.append(str(e)))
        page.goto(html.as_uri())
        page.wait_for_selector("body[data-ready=true]")
        return page

    def shoot(self, page, selector: str, name: str) -> None:
        target = self.img / f"explain-{name}.png"
        page.locator(selector).screenshot(path=str(target))
        self.written.append(target)
        print(f"wrote {shown(target)}")

    def close(self, page) -> None:
        if self.errors:
            raise SystemExit(f"the page raised: {self.errors}")
        page.close()


def shoot_classifier(shooter: Shooter, run: Path, html: Path) -> None:
    """Panels 1-5 and the classifier's output, on the Korean review."""
    import attnkit

    want = attnkit.load(run).predict([REVIEW])[0]
    page = shooter.open(write_page(run, REVIEW, html))
    pred = page.inner_text("#cls-pred")
    if not pred.startswith(f"predicted: {want.label} "):
        raise SystemExit(f"the page shows {pred!r}, the Python API predicts {want.label!r}")
    shooter.shoot(page, CLASSIFIER_PANELS["input"], "input")
    page.locator("#input .chip").nth(CHOSEN).click()  # panel 2's position, panel 3's query
    page.select_option("#pick-head", "0")  # "head 1"
    page.select_option("#res-token", str(CHOSEN))
    if page.input_value("#pick-query") != str(CHOSEN):
        raise SystemExit("a click on a token did not choose it as the query")
    for name in ("embeddings", "head", "heads", "residual", "classifier"):
        shooter.shoot(page, CLASSIFIER_PANELS[name], name)
    shooter.close(page)


def shoot_gpt(shooter: Shooter, run: Path, html: Path) -> None:
    """The GPT's next-token panel at its last step, with the settings it sampled with."""
    page = shooter.open(write_page(run, PROMPT, html, *GPT_OPTIONS))
    for _ in range(STEPS - 1):
        page.click("#lm-next")
    label = page.inner_text("#lm-step-label")
    if not label.startswith(f"step {STEPS} of {STEPS}"):
        raise SystemExit(f"the GPT page is at {label!r}")
    shooter.shoot(page, "#family", "gpt")
    shooter.close(page)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--retrain", action="store_true", help="train the runs again")
    parser.add_argument("--runs", type=Path, default=ROOT / "runs", help="where runs/docs-* go")
    parser.add_argument("--img", type=Path, default=IMG, help="where the PNG files go")
    parser.add_argument("--threads", type=int, default=None, help="torch threads for training")
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright  # pip install playwright (make test)

    chromium = find_chromium()  # before training: fail early
    runs = args.runs.resolve()
    classifier = ensure_trained(CLASSIFIER, runs, retrain=args.retrain, threads=args.threads)
    gpt = ensure_trained(GPT, runs, retrain=args.retrain, threads=args.threads)
    args.img.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        shooter = Shooter(browser, args.img.resolve())
        shoot_classifier(shooter, classifier, Path(tmp) / "classifier.html")
        shoot_gpt(shooter, gpt, Path(tmp) / "gpt.html")
        browser.close()
    print(f"{len(shooter.written)} screenshots: {', '.join(p.name for p in shooter.written)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
