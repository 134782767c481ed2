"""The screenshots of docs/explain.md, from real trained runs (issue 34's guide).

    python tools/explain_screenshots.py              # train what is missing, then shoot
    python tools/explain_screenshots.py --retrain    # train the runs again first

1. Trains, only where the run is missing, four shipped recipes with ``attnkit train`` into
   runs/docs-* (git-ignored), the last two with ``--set`` overrides that make them small:
   - configs/nsmc-quick.yaml (a 1-layer Korean Transformer sentiment classifier, one epoch
     over NSMC: validation accuracy 0.85), 3.0 minutes;
   - configs/shakespeare-nanogpt-cpu.yaml (nanoGPT's CPU character GPT, 2,000 steps:
     validation loss 1.92), 2.0 minutes;
   - configs/multi30k-lstm-attn.yaml (the LSTM encoder-decoder with Bahdanau's concat
     attention) made small and trained on a toy corpus this tool writes into
     runs/docs-data/: 3-9 German number words to their English words in reverse order
     ("drei eins vier" -> "four one three"), so that the alignment is the anti-diagonal and
     each output word looks at the source word it translates; validation BLEU 100,
     0.2-0.5 minutes;
   - configs/imdb-pretrain.yaml (BERT's masked LM) made small (20,000 IMDB reviews in
     48-token pieces, 2,400 steps: validation loss 5.32), so that it fills [MASK] with
     words ("this [MASK] is ..." -> "movie", "film"), 2.5-3.5 minutes.
   Measured on 2 busy CPU cores. A run killed midway is resumed (``--resume``); the data
   comes from $ATTNKIT_DATA (``attnkit data fetch nsmc tinyshakespeare imdb``).
2. Writes each run's page with the real ``attnkit explain RUN TEXT --html FILE``.
3. Opens it from disk in headless Chromium (Debian's ``chromium``, as
   tests/app/explain/test_explain_browser.py; or $ATTNKIT_CHROMIUM) with Playwright, sets the pickers
   the guide describes, checks what the page shows against the Python API, and saves the
   panels into docs/img/explain-NAME.png.

The images this tool owns are ``OWNED``; the browser test never writes them. The ELMo image
stays that of the browser test's tiny run (a real biLM takes far longer than a few minutes
on a CPU): ``ATTNKIT_SCREENSHOTS=1 pytest tests/app/explain/test_explain_browser.py`` rewrites it.
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from browser_support import find_chromium  # noqa: E402  (the tests' rule, pytest-free)

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
# the translator reverses and translates NUMBERS (two "eins": the alignment tells them apart);
# the screenshot shows step NUMBERS_STEP, the second "one": it looks at the first "eins"
NUMBERS = "drei eins vier eins fünf neun"
NUMBERS_STEP = 5
# the masked LM fills in both [MASK]s of MASKED
MASKED = "this [MASK] is one of the [MASK] films i have ever seen ."

# the panels of the classifier page, then the GPT's output panel: name -> page section
CLASSIFIER_PANELS = {
    "input": "#input",
    "embeddings": "#embed",
    "head": "#head",
    "heads": "#heads",
    "residual": "#residual",
    "classifier": "#family",
}
OWNED = (*CLASSIFIER_PANELS, "gpt", "seq2seq", "mlm")  # docs/img/explain-NAME.png made here

# the toy corpus of the translator: German number words -> English, in reverse order
GERMAN = ["eins", "zwei", "drei", "vier", "fünf", "sechs", "sieben", "acht", "neun", "zehn",
          "elf", "zwölf"]  # fmt: skip
ENGLISH = ["one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
           "eleven", "twelve"]  # fmt: skip


@dataclass(frozen=True)
class DocsRun:
    """A shipped recipe trained into ``runs/docs-NAME`` for the screenshots."""

    name: str
    recipe: str
    overrides: tuple[str, ...] = ()  # ``--set KEY=VALUE`` values
    # writes the run's own data into the folder it is given; returns the overrides reading it
    corpus: Callable[[Path], tuple[str, ...]] | None = None

    def path(self, runs: Path) -> Path:
        return runs / f"docs-{self.name}"


def write_numbers(folder: Path) -> tuple[str, ...]:
    """The translator's toy corpus, seeded: 4,000 training and 200 validation pairs, each
    3-9 random German number words (eins ... zwölf) and their English words in reverse order,
    as ``SOURCE<TAB>TARGET`` lines in ``folder``/numbers-{train,validation}.tsv. Returns the
    ``--set`` overrides that train on them."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(0)
    overrides = ["data.name=file"]
    for split, n in (("train", 4000), ("validation", 200)):
        lines = []
        for _ in range(n):
            words = [rng.randrange(len(GERMAN)) for _ in range(rng.randint(3, 9))]
            source = " ".join(GERMAN[i] for i in words)
            lines.append(f"{source}\t{' '.join(ENGLISH[i] for i in reversed(words))}\n")
        path = folder / f"numbers-{split}.tsv"
        path.write_text("".join(lines), encoding="utf-8")
        overrides.append(f"data.{split}={path}")
    return tuple(overrides)


CLASSIFIER = DocsRun("nsmc-quick", "configs/nsmc-quick.yaml")  # 2,227 steps (one epoch): 3 min
GPT = DocsRun("shakespeare-nanogpt-cpu", "configs/shakespeare-nanogpt-cpu.yaml")  # 2,000: 2 min
# the course's LSTM with Bahdanau (concat) attention, small, on the toy corpus: 500 steps
TRANSLATOR = DocsRun(
    "numbers-lstm-attn",
    "configs/multi30k-lstm-attn.yaml",
    (
        "data.max_len=16",
        "tokenizer.vocab_size=200",
        "tokenizer.lowercase=true",
        "model.emb_dim=64",
        "model.hidden_size=64",
        "model.dropout=0.0",
        "training.epochs=4",
        "training.batch_size=32",
        "training.lr=3e-3",
        "training.warmup_steps=50",
    ),
    corpus=write_numbers,
)
# BERT's masked LM on a slice of IMDB, small: 2,400 steps
MLM = DocsRun(
    "imdb-mlm",
    "configs/imdb-pretrain.yaml",
    (
        "data.limit=20000",
        "data.max_len=48",
        "tokenizer.vocab_size=8000",
        "model.d_ff=256",
        "training.max_steps=2400",
        "training.batch_size=64",
        "training.eval_every=800",
    ),
)


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
    overrides = spec.overrides + (spec.corpus(runs / "docs-data") if spec.corpus else ())
    for kv in overrides:
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


def chromium_path() -> str:
    """A Chromium that starts (tests/browser_support.py's rule), else exit with why not."""
    path, why = find_chromium()
    if path is None:
        raise SystemExit(f"explain_screenshots.py: {why}")
    return path


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


def shoot_translator(shooter: Shooter, run: Path, html: Path) -> None:
    """The seq2seq alignment of the LSTM translator at step NUMBERS_STEP (greedy only)."""
    import attnkit

    want = attnkit.load(run).alignment(NUMBERS)
    page = shooter.open(write_page(run, NUMBERS, html, "--beam", "1"))
    shown_output = page.inner_text("#s2s-output")
    if shown_output != f"output (greedy): {want.text}":
        raise SystemExit(f"the page shows {shown_output!r}, alignment() decodes {want.text!r}")
    for _ in range(NUMBERS_STEP - 1):
        page.click("#s2s-next")
    label = page.inner_text("#s2s-step-label")
    if not label.startswith(f"step {NUMBERS_STEP} of {len(want.output)}"):
        raise SystemExit(f"the translator page is at {label!r}")
    shooter.shoot(page, "#family", "seq2seq")
    shooter.close(page)


def shoot_mlm(shooter: Shooter, run: Path, html: Path) -> None:
    """The masked LM's candidates for each [MASK] of MASKED."""
    import attnkit

    want = attnkit.load(run).fill_mask(MASKED, top_k=10)
    page = shooter.open(write_page(run, MASKED, html))
    boxes = page.locator("#mlm-masks .mask-box")
    got = [box.locator(".lab").all_inner_texts() for box in boxes.all()]
    if got != [[token for token, _ in fills] for fills in want]:
        raise SystemExit(f"the page fills in {got}, fill_mask() {want}")
    shooter.shoot(page, "#family", "mlm")
    shooter.close(page)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--retrain", action="store_true", help="train the runs again")
    parser.add_argument("--runs", type=Path, default=ROOT / "runs", help="where runs/docs-* go")
    parser.add_argument("--img", type=Path, default=IMG, help="where the PNG files go")
    parser.add_argument("--threads", type=int, default=None, help="torch threads for training")
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright  # pip install playwright (make test)

    chromium = chromium_path()  # before training: fail early
    runs = args.runs.resolve()
    classifier = ensure_trained(CLASSIFIER, runs, retrain=args.retrain, threads=args.threads)
    gpt = ensure_trained(GPT, runs, retrain=args.retrain, threads=args.threads)
    translator = ensure_trained(TRANSLATOR, runs, retrain=args.retrain, threads=args.threads)
    mlm = ensure_trained(MLM, runs, retrain=args.retrain, threads=args.threads)
    args.img.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        shooter = Shooter(browser, args.img.resolve())
        shoot_classifier(shooter, classifier, Path(tmp) / "classifier.html")
        shoot_gpt(shooter, gpt, Path(tmp) / "gpt.html")
        shoot_translator(shooter, translator, Path(tmp) / "translator.html")
        shoot_mlm(shooter, mlm, Path(tmp) / "mlm.html")
        browser.close()
    print(f"{len(shooter.written)} screenshots: {', '.join(p.name for p in shooter.written)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
