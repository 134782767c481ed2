"""``attnkit demo`` (``make demo``, ``python -m attnkit.app.demo``): the course's sentiment
classifier, trained and used in a few minutes, from any folder.

1. Draws the course's 50 x 128 sinusoidal positional encoding.
2. Trains the bundled recipe ``nsmc-quick`` (Korean movie reviews; downloads NSMC if the
   data folder lacks it), predicts a few Korean sentences, saves an attention heatmap.
3. The same in English with the bundled recipe ``imdb-quick``.

``--toy`` instead trains a tiny encoder-decoder Transformer to reverse digit strings (no
data needed) and draws its encoder-decoder attention: the learned alignment is the
anti-diagonal. Everything goes into ``demo_out/`` (or ``--out``).
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnkit.app.api import load, train
from attnkit.core.config import parse_yaml
from attnkit.core.errors import AttnkitError, DataError
from attnkit.core.output_guard import check_output
from attnkit.core.recipes import bundled_text
from attnkit.data.catalogue import get_dataset
from attnkit.data.fetch import DownloadError, fetch, is_present
from attnkit.data.paths import resolve_data_dir
from attnkit.nn.capture import capture
from attnkit.nn.layers import (
    BlockConfig,
    Decoder,
    Encoder,
    SinusoidalPositionalEncoding,
    TokenEmbedding,
)
from attnkit.runtime.viz import plot_attention, plot_positional_encoding
from attnkit.tasks.run_config import RunConfig

BOS, VOCAB, SEQ = 10, 11, 8  # digits 0-9, then <bos>


class TinyReverser(nn.Module):
    """Encoder-decoder Transformer for the toy task: src (B, T) digits -> reversed digits."""

    def __init__(self, d_model: int = 64, num_heads: int = 4, num_layers: int = 2) -> None:
        super().__init__()
        self.embed = TokenEmbedding(VOCAB, d_model)
        self.pos = SinusoidalPositionalEncoding(d_model, max_len=64)
        block = BlockConfig(d_model, num_heads, d_ff=4 * d_model, dropout=0.0)
        self.encoder = Encoder(block, num_layers)
        self.decoder = Decoder(block, num_layers)
        self.lm_head = nn.Linear(d_model, VOCAB)

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        memory = self.encoder(self.pos(self.embed(src)))  # (B, S, d_model)
        y = self.decoder(self.pos(self.embed(tgt_in)), memory)  # (B, T, d_model)
        return self.lm_head(y)  # (B, T, VOCAB)


def _batch(n: int, gen: torch.Generator) -> tuple[Tensor, Tensor, Tensor]:
    src = torch.randint(0, 10, (n, SEQ), generator=gen)
    tgt = src.flip(1)
    tgt_in = torch.cat([torch.full((n, 1), BOS), tgt[:, :-1]], dim=1)  # teacher forcing
    return src, tgt_in, tgt


def train_reverser(
    steps: int = 600, seed: int = 0, log_every: int = 100
) -> tuple[TinyReverser, float]:
    """Train the toy model; returns (model, accuracy of greedy-free teacher-forced prediction)."""
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    model = TinyReverser()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for step in range(1, steps + 1):
        src, tgt_in, tgt = _batch(64, gen)
        logits = model(src, tgt_in)
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), tgt.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        if log_every and step % log_every == 0:
            print(f"  step {step:4d}  loss {loss.item():.3f}")
    model.eval()
    with torch.no_grad():
        src, tgt_in, tgt = _batch(256, gen)
        acc = (model(src, tgt_in).argmax(-1) == tgt).float().mean().item()
    return model, acc


KOREAN = [
    "이 영화 정말 재미있어요! 배우들 연기도 최고",
    "시간 아까운 영화. 스토리가 너무 지루하다",
    "그냥 그랬어요",
    "감동적이고 여운이 남는 영화입니다",
]
ENGLISH = [
    "One of the best films I have seen this year, wonderful acting.",
    "A boring, predictable mess. I want my two hours back.",
    "The plot was thin but the music was great.",
]


def _toy(out: Path, steps: int) -> None:
    print("training a 2+2-layer Transformer to reverse 8 digits")
    start = time.perf_counter()
    model, acc = train_reverser(steps)
    print(f"   token accuracy {acc:.3f} after {time.perf_counter() - start:.0f}s")
    src = torch.tensor([[3, 1, 4, 1, 5, 9, 2, 6]])
    tgt_in = torch.cat([torch.tensor([[BOS]]), src.flip(1)[:, :-1]], dim=1)
    with torch.no_grad(), capture(model) as rec:  # the attention weights, as recorded
        logits = model(src, tgt_in)
    pred = logits.argmax(-1)[0].tolist()
    cross = rec.attention_weights("cross")[-1][0].mean(0)  # last layer, batch 0, mean of heads
    path = plot_attention(
        cross.numpy(),
        x_labels=[str(t) for t in src[0].tolist()],
        y_labels=[str(t) for t in pred],
        path=out / "cross_attention.png",
        title="encoder-decoder attention (reversal = anti-diagonal)",
        x_title="source",
        y_title="output",
    )
    print(f"   input {src[0].tolist()} -> output {pred}")
    print(f"   wrote {path}")


def _ensure_dataset(dataset: str) -> None:
    """Download ``dataset`` unless the data folder has it; offline, a one-line DataError."""
    info = get_dataset(dataset)
    if all(is_present(f) for f in info.files):
        return
    print(f"   {dataset} is not in the data folder: downloading it (sha256-checked)")
    try:
        fetch(dataset)
    except DownloadError as err:
        folder = resolve_data_dir() / Path(info.splits["train"]).parent
        raise DataError(
            f"cannot download {dataset} from {err.url}: {err.reason}; put its files in "
            f"{folder} or run `attnkit data fetch {dataset}` when online"
        ) from None


RECIPES = ("nsmc-quick", "imdb-quick")  # bundled recipes (attnkit.core.recipes)


def _bundled(name: str) -> RunConfig:
    """The bundled recipe ``name``, checked (never a file of that name in this folder)."""
    return RunConfig.from_dict(parse_yaml(bundled_text(name), f"bundled recipe {name}"))


def _sentiment(name: str, cfg: RunConfig, texts: list[str], out: Path) -> None:
    _ensure_dataset(cfg.data.name)
    run = out / name
    result = train(cfg, out=run, force=True)
    print(
        f"   best validation accuracy {result.best_metric:.3f} "
        f"({result.train_seconds / 60:.1f} min); run saved in {run}"
    )
    clf = load(run)
    for p in clf.predict(texts):
        print(f"   {p.label:8s} {p.probability:.2f}  {p.text}")
    heat = clf.explain(texts[0], out / f"{run.name}_attention.png")
    print(f"   attention heatmap of the first sentence: {heat}")


def main(argv: list[str] | None = None) -> int:
    """Run the demo; attnkit's own errors (no data and no network, ...) end in one line on
    stderr, ``attnkit: error: ...``, and exit code 2, as in the CLI (``ATTNKIT_DEBUG=1``:
    the traceback instead)."""
    try:
        args = build_parser().parse_args(argv)
        return run_demo(args.out, toy=args.toy, steps=args.steps)
    except KeyboardInterrupt:
        print("attnkit demo: interrupted (run `make demo` again to start over)", file=sys.stderr)
        return 130
    except AttnkitError as err:
        if os.environ.get("ATTNKIT_DEBUG"):
            raise
        message = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        print(f"attnkit: error: {message}", file=sys.stderr)
        return 2


def build_parser() -> argparse.ArgumentParser:
    """The demo's flags (``attnkit demo`` repeats them: attnkit.app.cli.demo)."""
    parser = argparse.ArgumentParser(prog="python -m attnkit.app.demo", description="attnkit demo")
    parser.add_argument("--out", default="demo_out", help="folder for runs and figures")
    parser.add_argument(
        "--toy",
        action="store_true",
        help="only the digit-reversal Transformer (no datasets needed)",
    )
    parser.add_argument("--steps", type=int, default=600, help="toy training steps")
    return parser


def run_demo(out: str | Path = "demo_out", toy: bool = False, steps: int = 600) -> int:
    """The demo into ``out``; attnkit's errors are raised (``main`` reports them). The
    recipes are the bundled ones, so it runs from any folder."""
    # a folder (or a place for one): not a file, a device or inside a run; writable
    folder = check_output(out, kind="folder", what="--out")
    # both recipes read (and checked) before anything is written or downloaded
    recipes = {} if toy else {name: _bundled(name) for name in RECIPES}

    folder.mkdir(parents=True, exist_ok=True)  # the demo's own output folder
    print("1) positional encoding (the course's 50 x 128 figure)")
    print(f"   wrote {plot_positional_encoding(50, 128, folder / 'positional_encoding.png')}")
    if toy:
        print("2) ", end="")
        _toy(folder, steps)
        print(
            "3) next, the explorer on a trained run: attnkit train nsmc-quick, then "
            'attnkit explain runs/nsmc-quick "정말 최고의 영화"'
        )
        return 0
    print("2) Korean sentiment (NSMC), the bundled recipe nsmc-quick")
    _sentiment("nsmc-quick", recipes["nsmc-quick"], KOREAN, folder)
    print("3) English sentiment (IMDB), the bundled recipe imdb-quick")
    _sentiment("imdb-quick", recipes["imdb-quick"], ENGLISH, folder)
    run = shlex.quote(str(folder / "nsmc-quick"))
    page = shlex.quote(str(folder / "explain.html"))
    text = "정말 최고의 영화"
    print("4) done. Step through the Korean model's forward pass in the browser (the explorer):")
    print(f'   attnkit explain {run} "{text}"                   # serves the page')
    print(f'   attnkit explain {run} "{text}" --html {page}   # one offline file')
    print(f'   attnkit predict {run} "{text}" --explain heat.png   # a heatmap PNG')
    print("   the course map, each concept -> its code, explorer section and lab: docs/concepts.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
