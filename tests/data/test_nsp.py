"""Next-sentence-prediction pairs (attnkit.data.nsp) and whole-word masking (data.masking)."""

from __future__ import annotations

import math
import random

import pytest
import torch

from attnkit.core.errors import DataError
from attnkit.data.masking import IGNORE_INDEX, mask_tokens, wordpiece_word_starts
from attnkit.data.nsp import make_nsp_pairs, review_segments, split_documents
from attnkit.data.sentence_split import has_segments

CLS, SEP = 2, 3


def test_split_documents_uses_blank_line_blocks() -> None:
    text = "First doc, line one.\nLine two.\n\n  \n\n첫 문장입니다.\n둘째 문장이에요.\n\nlast\n"
    assert split_documents(text) == [
        ["First doc, line one.", "Line two."],
        ["첫 문장입니다.", "둘째 문장이에요."],
        ["last"],
    ]
    assert split_documents("\n\n") == []


def test_review_segments_splits_sentences_and_br() -> None:
    assert review_segments("Great film! Loved it. Would watch again?  Yes") == [
        "Great film!",
        "Loved it.",
        "Would watch again?",
        "Yes",
    ]
    assert review_segments("Bad acting.<br /><br />Worse plot<br/>3/10") == [
        "Bad acting.",
        "Worse plot",
        "3/10",
    ]
    assert review_segments("배우 연기가 좋았다. 스토리는 별로예요. 그래도 추천") == [
        "배우 연기가 좋았다.",
        "스토리는 별로예요.",
        "그래도 추천",
    ]
    assert review_segments("3.5점 줍니다") == ["3.5점 줍니다"]  # no whitespace after '.'
    assert review_segments("  ") == []


REVIEWS = ["Good. Very good!", "<br /><br />", "  <BR/> ", "x<br>", "<br>y. z", "...", "<b>", "<"]


def test_review_documents_are_the_reviews_cut_and_cut_only_when_read(monkeypatch) -> None:
    from attnkit.data import catalogue
    from attnkit.data.split import limit_examples

    eager = [segs for r in REVIEWS if (segs := review_segments(r))]
    docs = catalogue.ReviewDocuments(REVIEWS)
    assert [has_segments(r) for r in REVIEWS] == [bool(review_segments(r)) for r in REVIEWS]
    assert len(docs) == len(eager) == 6 and list(docs) == eager and docs[1:3] == eager[1:3]
    assert docs[-1] == eager[-1] and limit_examples(docs, None, 0) == eager
    cut: list[str] = []
    monkeypatch.setattr(catalogue, "review_segments", lambda r: cut.append(r) or [r])
    kept = limit_examples(docs, 2, seed=3)  # the same subset as of the eager list
    assert kept == [[r] for r in cut] and len(cut) == 2
    assert [review_segments(r) for r in cut] == limit_examples(eager, 2, seed=3)


def _tok(doc: int, seg: int) -> int:
    return 10 + doc * 100 + seg  # a token id that encodes (document, segment)


def _synthetic(n_docs: int, seg_len: int = 3, rng_seed: int = 0) -> list[list[list[int]]]:
    r = random.Random(rng_seed)
    return [[[_tok(d, s)] * seg_len for s in range(r.randint(1, 8))] for d in range(n_docs)]


def _check_format(ex, max_len: int) -> tuple[list[int], list[int]]:
    ids, types = ex.input_ids, ex.token_type_ids
    assert len(ids) == len(types) <= max_len
    assert ids[0] == CLS and ids[-1] == SEP and ids.count(SEP) == 2
    mid = ids.index(SEP)
    assert types == [0] * (mid + 1) + [1] * (len(ids) - mid - 1)
    a, b = ids[1:mid], ids[mid + 1 : -1]
    assert a and b
    return a, b


def test_make_nsp_pairs_format_and_truncation() -> None:
    long_docs = [[[20 + d] * 50 for _ in range(4)] for d in range(3)]
    pairs = make_nsp_pairs(long_docs, 32, CLS, SEP, random.Random(0), num_pairs=50)
    assert len(pairs) == 50
    for ex in pairs:
        a, b = _check_format(ex, 32)
        assert len(ex.input_ids) == 32  # both parts were longer than the budget
        assert abs(len(a) - len(b)) <= 1  # the longer one was cut
    short = make_nsp_pairs(_synthetic(20), 128, CLS, SEP, random.Random(1))
    assert len(short) == sum(len(d) >= 2 for d in _synthetic(20))  # one per A document
    for ex in short:
        _check_format(ex, 128)


def test_make_nsp_pairs_is_deterministic_per_seed() -> None:
    docs = _synthetic(30)
    one = make_nsp_pairs(docs, 64, CLS, SEP, random.Random(7), num_pairs=100)
    two = make_nsp_pairs(docs, 64, CLS, SEP, random.Random(7), num_pairs=100)
    other = make_nsp_pairs(docs, 64, CLS, SEP, random.Random(8), num_pairs=100)
    assert one == two
    assert one != other


def test_make_nsp_pairs_statistics_and_negatives() -> None:
    docs = _synthetic(200)
    n = 4000
    pairs = make_nsp_pairs(docs, 512, CLS, SEP, random.Random(123), num_pairs=n)
    positives = 0
    for ex in pairs:
        a, b = _check_format(ex, 512)
        a_doc, a_seg = divmod(a[-1] - 10, 100)
        b_doc, b_seg = divmod(b[0] - 10, 100)
        if ex.is_next:
            positives += 1
            assert (b_doc, b_seg) == (a_doc, a_seg + 1)  # the true next segment
        else:
            assert b_doc != a_doc  # from another document
        # A is consecutive segments of one document
        segs = [divmod(t - 10, 100) for t in a]
        assert {d for d, _ in segs} == {a_doc}
    # binomial(4000, 0.5): sigma = sqrt(n)/2/n ~ 0.0079; 0.03 is a 3.8-sigma bound
    assert abs(positives / n - 0.5) <= 0.03, positives / n
    assert 0.03 / (math.sqrt(n) / 2 / n) > 3.5


def test_make_nsp_pairs_needs_two_documents() -> None:
    with pytest.raises(DataError, match="at least 2 documents"):
        make_nsp_pairs([[[5, 6], [7]]], 16, CLS, SEP, random.Random(0))
    with pytest.raises(DataError, match="2 or more segments"):
        make_nsp_pairs([[[5, 6]], [[7]]], 16, CLS, SEP, random.Random(0))


def _words_batch(seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(B, T) ids, attention mask, word starts: words of 1-4 pieces, padded rows."""
    g = torch.Generator().manual_seed(seed)
    B, T = 64, 40
    ids = torch.randint(7, 1000, (B, T), generator=g)
    starts = torch.rand(B, T, generator=g) < 0.5
    starts[:, 0] = True
    lengths = torch.randint(10, T + 1, (B,), generator=g)
    mask = torch.arange(T)[None, :] < lengths[:, None]
    ids = ids.masked_fill(~mask, 0)
    return ids, mask, starts


def test_whole_word_masking_chooses_whole_words() -> None:
    ids, mask, starts = _words_batch(0)
    g = torch.Generator().manual_seed(1)
    corrupted, labels = mask_tokens(ids, mask, 4, 1000, 7, generator=g, word_starts=starts)
    chosen = labels != IGNORE_INDEX
    assert not (chosen & ~mask).any()
    assert torch.equal(corrupted[~chosen], ids[~chosen])
    word_id = starts.long().cumsum(dim=1)  # each row's words
    for r in range(ids.shape[0]):
        for w in word_id[r][mask[r]].unique():
            in_word = (word_id[r] == w) & mask[r]
            assert chosen[r][in_word].all() or not chosen[r][in_word].any()
        assert chosen[r].any()
    share = (chosen.sum() / mask.sum()).item()
    # ~1,600 maskable tokens in words of mean length 2: share sd ~ 0.013; +0.02 for the
    # at-least-one-word-per-row rule
    assert 0.11 < share < 0.21, share


def test_whole_word_masking_default_path_unchanged() -> None:
    ids, mask, starts = _words_batch(2)
    g1 = torch.Generator().manual_seed(5)
    g2 = torch.Generator().manual_seed(5)
    a = mask_tokens(ids, mask, 4, 1000, 7, generator=g1)
    b = mask_tokens(ids, mask, 4, 1000, 7, generator=g2, word_starts=None)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    # all tokens word starts = per-token masking with the same draws
    g3 = torch.Generator().manual_seed(5)
    c = mask_tokens(ids, mask, 4, 1000, 7, generator=g3, word_starts=torch.ones_like(starts))
    assert torch.equal(a[0], c[0]) and torch.equal(a[1], c[1])


class _FakeTokenizer:
    vocab = {0: "[PAD]", 5: "play", 6: "##ing", 7: "##s", 8: "good", 9: "한국"}

    def id_to_token(self, i: int) -> str | None:
        return self.vocab.get(i)


def test_wordpiece_word_starts() -> None:
    ids = torch.tensor([[5, 6, 8, 5, 7], [9, 6, 0, 0, 0]])
    expected = torch.tensor([[True, False, True, True, False], [True, False, True, True, True]])
    assert torch.equal(wordpiece_word_starts(_FakeTokenizer(), ids), expected)


def test_single_segment_documents_only_give_negative_bs() -> None:
    docs = [[[_tok(0, 0)], [_tok(0, 1)]]] + [[[_tok(d, 0)] * 2] for d in range(1, 6)]
    pairs = make_nsp_pairs(docs, 16, CLS, SEP, random.Random(3), num_pairs=200)
    assert {p.is_next for p in pairs} == {0, 1}
    for ex in pairs:
        a, b = _check_format(ex, 16)
        assert a == [_tok(0, 0)]  # only the two-segment document gives an A
        assert b == ([_tok(0, 1)] if ex.is_next else [b[0]] * 2)
