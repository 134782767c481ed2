"""generation.py on toy models whose best sequence is known by enumeration."""

import itertools
import math

import pytest
import torch

from attnkit.nn.generation import (
    Joining,
    RowOptions,
    beam_search,
    greedy,
    sample,
    sample_rows,
    top_k_top_p_filter,
)

EOS = 0


class HistoryModel:
    """Next-token log-probs depend on the whole prefix (a fixed pseudo-random table keyed by
    the prefix), so beams must be reordered correctly to score the right continuation."""

    def __init__(self, vocab: int, batch: int, seed: int = 0):
        self.vocab, self.seed = vocab, seed
        self.prefix = [[] for _ in range(batch)]

    def logp(self, prefix: list[int]) -> torch.Tensor:
        gen = torch.Generator().manual_seed(hash((self.seed, *prefix)) % 2**31)
        return (torch.randn(self.vocab, generator=gen) * 2).log_softmax(-1)

    def step(self, tokens):
        for row, tok in zip(self.prefix, tokens.tolist(), strict=True):
            row.append(tok)
        return torch.stack([self.logp(p) for p in self.prefix])

    def reorder(self, index):
        self.prefix = [list(self.prefix[i]) for i in index.tolist()]

    def extend(self, other: "HistoryModel"):
        self.prefix += other.prefix


def brute_force_best(model, start, max_len, length_penalty):
    best = (-math.inf, None)
    for n in range(1, max_len + 1):
        for body in itertools.product(range(1, model.vocab), repeat=n - 1):
            seq = [*body, EOS]
            prefix, total = [start], 0.0
            for tok in seq:
                total += model.logp(prefix)[tok].item()
                prefix.append(tok)
            score = total / n**length_penalty
            best = max(best, (score, list(body)))
    # hypotheses cut at max_len without EOS also count
    for body in itertools.product(range(1, model.vocab), repeat=max_len):
        prefix, total = [start], 0.0
        for tok in body:
            total += model.logp(prefix)[tok].item()
            prefix.append(tok)
        best = max(best, (total / max_len**length_penalty, list(body)))
    return best


def test_beam_search_finds_the_enumerated_optimum():
    vocab, max_len = 4, 4
    for seed in range(3):
        for lp in (0.0, 1.0):
            starts = torch.tensor([1, 2])
            result = beam_search(
                HistoryModel(vocab, 2, seed),
                starts,
                beam_size=vocab**max_len,
                max_new_tokens=max_len,
                eos_id=EOS,
                length_penalty=lp,
            )
            for i, s in enumerate(starts.tolist()):
                score, seq = brute_force_best(HistoryModel(vocab, 1, seed), s, max_len, lp)
                assert result.tokens[i] == seq
                assert math.isclose(result.scores[i], score, rel_tol=1e-5)


class TrapModel:
    """Greedy takes 'a' (p=0.6) but then everything is flat; 'b' (p=0.4) leads to EOS with
    p=0.99. Best complete sequence: b EOS (0.396) > a x EOS (0.6 * 1/3 * 1/3 ...)."""

    A, B, X = 1, 2, 3

    def __init__(self):
        self.last = None

    def step(self, tokens):
        rows = []
        for tok in tokens.tolist():
            p = torch.full((4,), 1e-6)
            if tok == 9:  # start
                p[self.A], p[self.B] = 0.6, 0.4
            elif tok == self.B:
                p[EOS], p[self.X] = 0.99, 0.01
            else:
                p[:] = 0.25
            rows.append((p / p.sum()).log())
        return torch.stack(rows)

    def reorder(self, index):
        pass


def test_beam_beats_greedy_on_the_trap():
    g = greedy(TrapModel(), torch.tensor([9]), max_new_tokens=3, eos_id=EOS)
    assert g[0, 0].item() == TrapModel.A
    beam = beam_search(
        TrapModel(),
        torch.tensor([9]),
        beam_size=2,
        max_new_tokens=3,
        eos_id=EOS,
        length_penalty=0.0,
    )
    assert beam.tokens == [[TrapModel.B]]
    assert math.isclose(beam.scores[0], math.log(0.4 * 0.99), rel_tol=1e-3)


def test_greedy_stops_and_pads_after_eos():
    model = HistoryModel(5, 3, seed=1)
    out = greedy(model, torch.tensor([1, 2, 3]), max_new_tokens=6, eos_id=EOS, pad_id=-1)
    for row in out.tolist():
        if EOS in row:
            assert all(t == -1 for t in row[row.index(EOS) + 1 :])


def test_sampling_filters_and_temperature():
    logits = torch.tensor([[3.0, 2.0, 1.0, 0.0]])
    assert torch.isinf(top_k_top_p_filter(logits, top_k=2)[0, 2:]).all()
    kept = top_k_top_p_filter(logits, top_p=0.7)  # p = .64, .24, ... -> keep 2
    assert torch.isfinite(kept[0, :2]).all() and torch.isinf(kept[0, 2:]).all()

    class Const:
        def step(self, tokens):
            return logits.expand(len(tokens), -1)

        def reorder(self, index):
            pass

    gen = torch.Generator().manual_seed(0)
    out = sample(
        Const(), torch.zeros(2000, dtype=torch.long), 1, temperature=1.0, top_k=2, generator=gen
    )
    frac0 = (out == 0).float().mean().item()
    expected = math.exp(3) / (math.exp(3) + math.exp(2))
    assert abs(frac0 - expected) < 0.04 and set(out.unique().tolist()) <= {0, 1}
    cold = sample(Const(), torch.zeros(50, dtype=torch.long), 1, temperature=0.05, generator=gen)
    assert (cold == 0).all()


def test_tiny_temperature_and_penalty_do_not_overflow():
    """T -> 0 tends to greedy; a tiny T or repetition penalty never gives inf / NaN
    probabilities (torch.multinomial would raise)."""
    logits = torch.tensor([[3.0, 2.0, -1.0, float("-inf")]])  # token 3: banned

    class Const:
        def step(self, tokens):
            return logits.expand(len(tokens), -1)

        def reorder(self, index):
            pass

    gen = torch.Generator().manual_seed(0)
    start = torch.zeros(20, dtype=torch.long)
    for t in (1e-40, 1e-300, 5e-324):
        out = sample(Const(), start, 2, temperature=t, generator=gen)
        assert (out == 0).all()  # the argmax, every time
    # penalty 1e-300 multiplies the seen token 0's logit by 1e300: huge, still finite
    out = sample(Const(), start, 3, temperature=1.0, repetition_penalty=1e-300, generator=gen)
    assert (out == 0).all()
    assert not (out == 3).any()  # the banned token stays banned


# ----------------------------------------------------------------------------- sample_rows
class CountedHistory(HistoryModel):
    """HistoryModel (each row's logits depend on its own prefix only: batching cannot change
    them) that records the rows of each step."""

    def __init__(self, vocab: int, batch: int, seed: int = 0):
        super().__init__(vocab, batch, seed)
        self.widths: list[int] = []

    def step(self, tokens):
        self.widths.append(len(tokens))
        return super().step(tokens)


ROWS = [
    RowOptions(max_new_tokens=6, temperature=0.0),
    RowOptions(max_new_tokens=9, temperature=1.0, top_k=3),
    RowOptions(max_new_tokens=4, temperature=0.7, top_p=0.8, repetition_penalty=1.5),
    RowOptions(max_new_tokens=0, temperature=0.0),
    RowOptions(max_new_tokens=7, temperature=1.0, top_k=3),  # (1's options: one group)
]


def _alone(row: RowOptions, start: int, seed: int | None, context=None) -> list[int]:
    """What ``sample`` gives the row by itself."""
    gen = None if seed is None else torch.Generator().manual_seed(seed)
    out = sample(
        HistoryModel(7, 1),
        torch.tensor([start]),
        row.max_new_tokens,
        temperature=row.temperature,
        top_k=row.top_k,
        top_p=row.top_p,
        repetition_penalty=row.repetition_penalty,
        generator=gen,
        context=context,
    )
    return out[0].tolist()


def test_sample_rows_gives_each_row_what_sample_gives_it_alone():
    starts = [1, 2, 3, 4, 5]
    rows = [
        RowOptions(**{**r.__dict__, "generator": torch.Generator().manual_seed(10 + i)})
        for i, r in enumerate(ROWS)
    ]
    context = torch.tensor([[6, 6], [1, 2], [3, 0], [2, 2], [5, 5]])
    model = CountedHistory(7, len(starts))
    seen: list[tuple[int, int]] = []

    def on_token(i: int, token: int) -> bool:
        seen.append((i, token))
        return False  # (rows end at their max_new_tokens)

    out = sample_rows(model, torch.tensor(starts), rows, on_token, context=context)
    for i, (row, start) in enumerate(zip(ROWS, starts, strict=True)):
        want = _alone(row, start, 10 + i, context[i : i + 1]) if row.max_new_tokens else []
        assert out[i] == want, i
        assert [t for j, t in seen if j == i] == want
    # the row of 0 tokens never runs; each row leaves after its last token
    assert model.widths == [4] * 4 + [3] * 2 + [2] * 1 + [1] * 2


def test_sample_rows_finishes_a_row_when_on_token_says_so():
    model = CountedHistory(7, 3)
    rows = [RowOptions(max_new_tokens=8, temperature=0.0)] * 3
    out = sample_rows(model, torch.tensor([1, 2, 3]), rows, on_token=lambda i, t: i == 1)
    assert [len(o) for o in out] == [8, 1, 8]
    assert model.widths == [3] + [2] * 7
    assert out[0] == _alone(rows[0], 1, None) and out[2] == _alone(rows[2], 3, None)
    # the surviving rows' histories were kept (reordered), not mixed up
    assert model.prefix == [[1, *out[0][:-1]], [3, *out[2][:-1]]]


def test_sample_rows_rows_may_share_a_generator_and_bad_options_raise():
    gen = torch.Generator().manual_seed(0)
    rows = [RowOptions(max_new_tokens=5, generator=gen)] * 2
    a = sample_rows(HistoryModel(7, 2), torch.tensor([1, 1]), rows, lambda i, t: False)
    gen.manual_seed(0)
    b = sample_rows(HistoryModel(7, 2), torch.tensor([1, 1]), rows, lambda i, t: False)
    assert a == b
    with pytest.raises(ValueError, match="2 row options for 3 rows"):
        sample_rows(HistoryModel(7, 3), torch.tensor([1, 1, 1]), rows, lambda i, t: False)
    bad = [RowOptions(max_new_tokens=2, repetition_penalty=0.0)]
    with pytest.raises(ValueError, match="repetition_penalty must be > 0"):
        sample_rows(HistoryModel(7, 1), torch.tensor([1]), bad, lambda i, t: False)


def test_a_sampled_row_draws_what_multinomial_draws():
    """_pick's draw is torch.multinomial's own for one sample (argmax p / Exp(1) noise):
    the same token from the same generator state, for a vocabulary of any size."""
    from attnkit.nn.generation import _pick

    for vocab in (7, 1000, 30522):
        logits = torch.randn(4, vocab, generator=torch.Generator().manual_seed(vocab))
        rows = [RowOptions(max_new_tokens=1, generator=torch.Generator().manual_seed(s))
                for s in range(4)]  # fmt: skip
        got = _pick(logits, rows).tolist()
        want = [
            torch.multinomial(logits[i : i + 1].softmax(-1), 1,
                              generator=torch.Generator().manual_seed(i)).item()
            for i in range(4)
        ]  # fmt: skip
        assert got == want, vocab


def test_sample_rows_finishes_each_row_before_the_next_step():
    events: list[str] = []

    class Logged(HistoryModel):
        def step(self, tokens):
            events.append(f"step {len(tokens)}")
            return super().step(tokens)

    rows = [RowOptions(max_new_tokens=n, temperature=0.0) for n in (2, 0, 3, 1)]
    sample_rows(Logged(7, 4), torch.tensor([1, 2, 3, 4]), rows, lambda i, t: False,
                on_finish=lambda i: events.append(f"done {i}"))  # fmt: skip
    assert events == ["done 1", "step 3", "done 3", "step 2", "done 0", "step 1", "done 2"]


def test_rows_that_join_between_tokens_get_what_they_get_alone():
    # continuous batching: rows 0-1 start; before step 3 rows 2-4 join (one of 0 tokens, one
    # with a repetition penalty over its context), before step 5 rows 5-6 (sampled, seeded)
    def seeded(i: int, row: RowOptions) -> RowOptions:
        return RowOptions(**{**row.__dict__, "generator": torch.Generator().manual_seed(10 + i)})

    rows = [seeded(i, r) for i, r in enumerate(ROWS + ROWS[1:3])]
    starts = [1, 2, 3, 4, 5, 6, 2]
    context = torch.tensor([[6, 6], [1, 2], [3, 0], [2, 2], [5, 5], [4, 1], [2, 2]])
    model = CountedHistory(7, 2)
    asked: list[int] = []

    def join(going: int):
        asked.append(going)
        groups = {3: (2, 5), 5: (5, 7)}  # step number -> the rows that join before it
        if len(asked) not in groups:
            return None
        a, b = groups[len(asked)]
        return Joining(CountedHistory(7, b - a), torch.tensor(starts[a:b]), rows[a:b],
                       context=context[a:b])  # fmt: skip

    finished: list[int] = []
    out = sample_rows(model, torch.tensor(starts[:2]), rows[:2], lambda i, t: False,
                      context=context[:2], on_finish=finished.append, join=join)  # fmt: skip
    assert len(out) == 7
    for i, (row, start) in enumerate(zip(rows, starts, strict=True)):
        plain = RowOptions(**{**row.__dict__, "generator": None})
        want = _alone(plain, start, 10 + i, context[i : i + 1]) if row.max_new_tokens else []
        assert out[i] == want, i
    # rows: 2 | +3 (row 3 has no tokens: finished at once) | +2; each leaves after its last
    assert model.widths == [2, 2, 4, 4, 6, 6, 4, 4, 3, 1, 1, 1, 1]
    assert asked == [2, 2, 2, 4, 4, 6, 4, 4, 3, 1, 1, 1, 1]  # (the rows going, before joins)
    assert finished[0] == 3 and sorted(finished) == list(range(7))
