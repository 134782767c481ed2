"""Greedy decoding in fp32 against bf16 autocast (what ``--precision auto`` computes on a
CPU with native bf16), alternating, for several GPT sizes and 1 or 16 rows: milliseconds
for 48 new tokens after a 16-token prompt (median of 3 rounds). Random weights; prints a
line per shape (no record: data for a precision rule, see benchmarks/notes-speed.md).

    python benchmarks/bf16_decode.py
"""

import contextlib
import statistics
import time

import torch

from attnkit.models.gpt import GPT, GPTConfig

SHAPES = [(4, 128, 72), (4, 256, 8000), (6, 512, 8000), (12, 768, 8000)]  # layers, d, vocab


def _ms(model: GPT, x: torch.Tensor, bf16: bool) -> float:
    cast = torch.autocast("cpu", torch.bfloat16) if bf16 else contextlib.nullcontext()
    with torch.inference_mode(), cast:
        model.generate(x, 8, temperature=0.0)  # warm-up
        start = time.perf_counter()
        model.generate(x, 48, temperature=0.0)
        return (time.perf_counter() - start) * 1e3


def main() -> None:
    torch.manual_seed(0)
    for layers, d, vocab in SHAPES:
        config = GPTConfig(vocab_size=vocab, max_len=256, d_model=d, num_heads=max(4, d // 64),
                           d_ff=4 * d, num_layers=layers, dropout=0.0)  # fmt: skip
        model = GPT(config).eval()
        for rows in (1, 16):
            x = torch.randint(1, vocab, (rows, 16))
            times: dict[bool, list[float]] = {False: [], True: []}
            for _ in range(3):
                for bf16 in (False, True):
                    times[bf16].append(_ms(model, x, bf16))
            fp32, bf16 = statistics.median(times[False]), statistics.median(times[True])
            print(f"L{layers} H{d} vocab {vocab}, {rows} rows: fp32 {fp32:.0f} ms, "
                  f"bf16 {bf16:.0f} ms ({bf16 / fp32:.2f}x the time)", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
