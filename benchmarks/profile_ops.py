"""The profiles behind issues 17 and 42's changes (benchmarks/notes-speed.md); train,
generate and dropout on one thread, the others on torch's threads (as speed.py).

    python benchmarks/profile_ops.py train [fp32|bf16]   # 2 BERT training steps (L4 H256, batch
                                                          # 32 x 128): attnkit vs transformers
    python benchmarks/profile_ops.py generate             # 128 greedy tokens, GPT L4 H256, vocab 8000
    python benchmarks/profile_ops.py dropout              # one dropout, (32, 128, 1024), fwd + bwd
    python benchmarks/profile_ops.py infer [TOKENS] [bf16]     # BERT L4 H256, 1 x 16 tokens,
                                                  # warm: modules vs fast_forward vs transformers
    python benchmarks/profile_ops.py classify [TOKENS] [bf16]  # the same as a 2-way classifier:
                                       # BertForSequenceClassification, attnkit vs transformers
    python benchmarks/profile_ops.py bf16                 # bf16 inference products and attention
    python benchmarks/profile_ops.py nanogpt [profile] [bf16]  # a training step of nanoGPT's
                                          # CPU recipe: nanoGPT's model.py vs attnkit (autocast)

Prints ``torch.profiler``'s operator table (self CPU time) or the milliseconds; writes
nothing. Shapes and weights are benchmarks/speed.py's (its contenders: speed_peers.py).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parent))
import attnkit.nn.layers as layers  # noqa: E402
import speed_peers as speed  # noqa: E402  (benchmarks/speed.py's contenders)
from attnkit.nn.attention import explicit_attention  # noqa: E402
from attnkit.nn.dropout import dropout  # noqa: E402
from attnkit.nn.fast_paths import linear  # noqa: E402


def _table(fn, rows: int = 18) -> str:
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        fn()
    return prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=rows)


def train(dtype: str) -> None:
    b = speed.encoder_batch(32, 128, 30522)
    encs = speed.build_encoders(speed.Shape(4, 256, 4), 30522, 128, False)
    for name in ("attnkit", "transformers"):
        step, _ = speed.encoder_train_step(encs[name], b, dtype)
        step()
        print(f"==== {name}, 2 training steps, {dtype}")
        print(_table(lambda step=step: [step() for _ in range(2)]))


def generate() -> None:
    ours, _ = speed.build_gpts(speed.Shape(4, 256, 4), 8000, 256)
    ours.eval()
    ids = torch.randint(1, 8000, (1, 16))

    def run() -> None:
        with torch.inference_mode():
            ours.generate(ids, max_new_tokens=128, temperature=0.0)

    run()
    print(_table(run, rows=25))


def dropout_ms(repeats: int = 10) -> None:
    x0 = torch.randn(32, 128, 1024)
    for name, fn in (("F.dropout", lambda x: F.dropout(x, 0.1, True)),
                     ("attnkit.nn.dropout", lambda x: dropout(x, 0.1))):  # fmt: skip

        def once(fn=fn) -> None:
            x = x0.clone().requires_grad_()
            fn(x).sum().backward()

        once()
        start = time.perf_counter()
        for _ in range(repeats):
            once()
        print(f"{name}: {(time.perf_counter() - start) / repeats * 1000:.1f} ms fwd + bwd")


def _us(fn, number: int = 500) -> float:
    """Best of 3 means of ``number`` calls, in microseconds."""
    fn()
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - start) / number)
    return best * 1e6


def _warm_medians(
    calls: dict[str, Callable[[], object]], turns: int, in_a_row: int
) -> dict[str, float]:
    """Each contender ``in_a_row`` calls per turn (the first 2 untimed: the later ones find
    its weights in the caches), ``turns`` turns; prints and returns the median ms of each."""
    times: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(turns):
        for name, fn in calls.items():
            for i in range(in_a_row):
                start = time.perf_counter()
                fn()
                if i >= 2:
                    times[name].append((time.perf_counter() - start) * 1e3)
    med = {name: sorted(ms)[len(ms) // 2] for name, ms in times.items()}
    for name, ms in med.items():
        print(f"{name}: {ms:.2f} ms (median of {len(times[name])})")
    return med


def infer(seq: int = 16, bf16: bool = False, turns: int = 30, in_a_row: int = 12) -> None:
    """Batch-1 BERT forward (eval, inference_mode), each contender ``in_a_row`` calls per
    turn (the first 2 untimed): the median ms of attnkit's module path (fast_forward off),
    attnkit (fast_forward on) and transformers, then the profile of attnkit's forward.
    ``bf16``: every call under CPU autocast to bfloat16 (speed.py's bf16 rows)."""
    import contextlib

    b = speed.encoder_batch(1, seq, 30522)
    encs = speed.build_encoders(speed.Shape(4, 256, 4), 30522, seq, False)
    ours, hf = encs["attnkit"].model.eval(), encs["transformers"].model.eval()
    real = layers.encoder_forward

    def modules() -> None:
        layers.encoder_forward = lambda *args: None  # type: ignore[assignment]
        try:
            ours(b.ids, b.mask_long)
        finally:
            layers.encoder_forward = real

    calls = {
        "attnkit, module path": modules,
        "attnkit (fast_forward)": lambda: ours(b.ids, b.mask_long),
        "transformers": lambda: hf(input_ids=b.ids, attention_mask=b.mask_long),
    }
    cast = torch.autocast("cpu", torch.bfloat16) if bf16 else contextlib.nullcontext()
    with torch.inference_mode(), cast:
        _warm_medians(calls, turns, in_a_row)
        print(_table(lambda: [ours(b.ids, b.mask_long) for _ in range(100)], rows=12))


def classify(seq: int = 16, bf16: bool = False, turns: int = 30, in_a_row: int = 12) -> None:
    """Batch-1 sentence classifier (BERT L4 H256 A4, its pooler and a 2-way head; eval,
    inference_mode): attnkit's BertForSequenceClassification against transformers' with the
    same weights (``to_hf_state_dict``), each ``in_a_row`` calls per turn as ``infer``;
    the largest logit difference between the two is printed. ``bf16``: under autocast."""
    import contextlib

    import transformers

    from attnkit.models.bert import BertForSequenceClassification
    from attnkit.models.hf_bert import bert_config_to_hf, to_hf_state_dict

    torch.manual_seed(0)
    ours = BertForSequenceClassification(speed.bert_config(speed.Shape(4, 256, 4), 30522, seq, 0.1))
    hf_config = transformers.BertConfig(
        **bert_config_to_hf(ours.config), attn_implementation="sdpa"
    )
    hf = transformers.BertForSequenceClassification(hf_config)
    hf.load_state_dict(to_hf_state_dict(ours), strict=True)
    ours.eval()
    hf.eval()
    b = speed.encoder_batch(1, seq, 30522)
    calls = {
        "attnkit": lambda: ours(b.ids, b.mask_long).logits,
        "transformers": lambda: hf(input_ids=b.ids, attention_mask=b.mask_long).logits,
    }
    cast = torch.autocast("cpu", torch.bfloat16) if bf16 else contextlib.nullcontext()
    with torch.inference_mode(), cast:
        gap = (calls["attnkit"]().float() - calls["transformers"]().float()).abs().max()
        med = _warm_medians(calls, turns, in_a_row)
    print(f"ratio {med['transformers'] / med['attnkit']:.2f}x; largest logit difference "
          f"{gap.item():.1e} ({'bf16' if bf16 else 'fp32'}, {seq} tokens)")  # fmt: skip


def bf16() -> None:
    """bf16 inference: a product under autocast (its weight cast every call) against the
    kept bf16 weight (fast_paths.linear with an owner), and attention's fused kernel against
    the explicit formula, without gradients."""
    with torch.inference_mode():
        for rows, (n_in, n_out) in [
            (r, s) for r in (1, 16, 128) for s in ((256, 768), (1024, 256))
        ]:
            lin = torch.nn.Linear(n_in, n_out)
            x = torch.randn(1, rows, n_in)

            def auto(lin=lin, x=x) -> None:
                with torch.autocast("cpu", torch.bfloat16):
                    F.linear(x, lin.weight, lin.bias)

            def kept(lin=lin, x=x) -> None:
                with torch.autocast("cpu", torch.bfloat16):
                    linear(x, lin.weight, lin.bias, owner=lin)

            print(f"{rows:4d} x {n_in} -> {n_out}: autocast {_us(auto):.0f} us, "
                  f"kept bf16 weight {_us(kept):.0f} us")  # fmt: skip
        for batch, heads, t in ((1, 4, 16), (1, 4, 48), (8, 4, 16), (8, 4, 32), (1, 4, 128)):
            q, k, v = torch.randn(3, batch, heads, t, 64).bfloat16().unbind(0)
            fused = _us(lambda q=q, k=k, v=v: F.scaled_dot_product_attention(q, k, v))
            formula = _us(lambda q=q, k=k, v=v: explicit_attention(q, k, v, None, 0.0))
            print(f"attention {batch} x {heads} x {t} x {t}: fused {fused:.0f} us, "
                  f"explicit {formula:.0f} us")  # fmt: skip


def nanogpt_step(show_profile: bool, bf16: bool = False, rounds: int = 5, steps: int = 40) -> None:
    """One optimizer step of nanoGPT's CPU recipe (4 x 128, 12 x 64 tokens, no dropout,
    AdamW, gradient clipping at 1), fp32: nanoGPT's own model.py and optimizer (read from
    ../shared/peers/nanoGPT, as benchmarks/nanogpt_pairs.py runs it) against attnkit's GPT
    of configs/shakespeare-nanogpt-cpu.yaml and the Trainer's AdamW, alternating in one
    process; medians of ``rounds`` x ``steps``. ``bf16``: attnkit's forward under CPU
    autocast to bfloat16, as the Trainer runs it where bf16 is native (nanoGPT's train.py
    trains in float32 on a CPU either way)."""
    import contextlib
    import statistics

    from attnkit.models.gpt import GPT, GPTConfig
    from attnkit.runtime.training import make_adamw
    from attnkit.runtime.training_config import TrainingConfig
    from attnkit.tasks.lm import LanguageModelObjective

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "shared/peers/nanoGPT"))
    import model as nanogpt  # nanoGPT's model.py (MIT), only read here

    torch.manual_seed(0)
    ng_cfg = dict(block_size=64, vocab_size=65, n_layer=4, n_head=4, n_embd=128, dropout=0.0)
    ng = nanogpt.GPT(nanogpt.GPTConfig(**ng_cfg, bias=False))
    ng_opt = ng.configure_optimizers(0.1, 1e-3, (0.9, 0.99), "cpu")
    ours = GPT(GPTConfig(vocab_size=72, max_len=64, num_layers=4, d_model=128, num_heads=4,
                         d_ff=512, dropout=0.0, activation="gelu", bias=False)).train()  # fmt: skip
    our_opt = make_adamw(ours, TrainingConfig(lr=1e-3, betas=[0.9, 0.99], weight_decay=0.1))
    task = LanguageModelObjective(pad_id=0)
    ids = torch.randint(7, 65, (12, 65), generator=torch.Generator().manual_seed(0))
    x, y = ids[:, :-1].contiguous(), ids[:, 1:].contiguous()
    batch = {"input_ids": x, "attention_mask": torch.ones_like(x, dtype=torch.bool), "labels": y}

    def nanogpt_step() -> None:
        _, loss = ng(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(ng.parameters(), 1.0)
        ng_opt.step()
        ng_opt.zero_grad(set_to_none=True)

    def attnkit_step() -> None:
        with torch.autocast("cpu", torch.bfloat16) if bf16 else contextlib.nullcontext():
            loss, _ = task.loss(ours, batch)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(ours.parameters(), 1.0)
        our_opt.step()
        our_opt.zero_grad(set_to_none=True)

    contenders = {"nanoGPT": nanogpt_step, "attnkit": attnkit_step}
    times: dict[str, list[float]] = {k: [] for k in contenders}
    for fn in contenders.values():
        for _ in range(20):
            fn()
    for _ in range(rounds):
        for name, fn in contenders.items():
            start = time.perf_counter()
            for _ in range(steps):
                fn()
            times[name].append((time.perf_counter() - start) / steps * 1e3)
    for name, ms in times.items():
        print(f"{name}: {statistics.median(ms):.2f} ms a step (median of {rounds} x {steps})")
    if show_profile:
        for name, fn in contenders.items():
            print(name)
            print(_table(lambda fn=fn: [fn() for _ in range(10)], rows=16))


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else "train"
    if what not in ("infer", "classify", "bf16", "nanogpt"):  # (these: torch's threads)
        torch.set_num_threads(1)
    if what == "infer":
        infer(
            int(sys.argv[2]) if sys.argv[2:3] not in ([], ["bf16"]) else 16, "bf16" in sys.argv[2:]
        )
    elif what == "classify":
        classify(
            int(sys.argv[2]) if sys.argv[2:3] not in ([], ["bf16"]) else 16, "bf16" in sys.argv[2:]
        )
    elif what == "bf16":
        bf16()
    elif what == "train":
        train(sys.argv[2] if len(sys.argv) > 2 else "fp32")
    elif what == "generate":
        generate()
    elif what == "dropout":
        dropout_ms()
    elif what == "nanogpt":
        nanogpt_step("profile" in sys.argv[2:], bf16="bf16" in sys.argv[2:])
    else:
        raise SystemExit(
            "usage: profile_ops.py train [fp32|bf16] | generate | dropout"
            " | infer|classify [TOKENS] [bf16] | bf16 | nanogpt [profile] [bf16]"
        )
