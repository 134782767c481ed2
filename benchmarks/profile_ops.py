"""The profiles behind issue 17's changes (benchmarks/notes-speed.md), on one thread.

    python benchmarks/profile_ops.py train [fp32|bf16]   # 2 BERT training steps (L4 H256, batch
                                                          # 32 x 128): attnkit vs transformers
    python benchmarks/profile_ops.py generate             # 128 greedy tokens, GPT L4 H256, vocab 8000
    python benchmarks/profile_ops.py dropout              # one dropout, (32, 128, 1024), fwd + bwd

Prints ``torch.profiler``'s operator table (self CPU time) or the milliseconds; writes
nothing. Shapes and weights are benchmarks/speed.py's (its contenders: speed_peers.py).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parent))
import speed_peers as speed  # noqa: E402  (benchmarks/speed.py's contenders)
from attnkit.nn.dropout import dropout  # noqa: E402


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


if __name__ == "__main__":
    torch.set_num_threads(1)
    what = sys.argv[1] if len(sys.argv) > 1 else "train"
    if what == "train":
        train(sys.argv[2] if len(sys.argv) > 2 else "fp32")
    elif what == "generate":
        generate()
    elif what == "dropout":
        dropout_ms()
    else:
        raise SystemExit("usage: profile_ops.py train [fp32|bf16] | generate | dropout")
