"""Tests for attnkit.data.tokenization (tiny corpora built here; no files, no network)."""

from __future__ import annotations

import itertools
import json

import pytest

from attnkit.data.tokenization import SPECIAL_TOKENS, Tokenizer, train_tokenizer, truncate

KO_SUBJECTS = ["이 영화는", "배우들의 연기가", "스토리가", "음악이", "감독의 연출이", "결말이"]
KO_PREDICATES = [
    "정말 재미있었어요.",
    "너무 지루했다.",
    "최고였습니다!",
    "별로였어요.",
    "감동적이었다.",
]
KO_PREFIXES = ["", "솔직히 ", "그런데 ", "친구랑 봤는데 "]
EN_SUBJECTS = ["The movie", "The acting", "The story", "The music", "The ending", "This film"]
EN_PREDICATES = ["was great.", "was boring.", "is the best!", "was not good.", "made me cry."]
EN_PREFIXES = ["", "Honestly, ", "Well, ", "I think "]

KO = [p + s + " " + v for p, s, v in itertools.product(KO_PREFIXES, KO_SUBJECTS, KO_PREDICATES)]
EN = [p + s + " " + v for p, s, v in itertools.product(EN_PREFIXES, EN_SUBJECTS, EN_PREDICATES)]
CORPUS = KO + EN  # 240 sentences

# ordinary spacing, only word-final . , ! ?  -> WordPiece round trip is exact
PLAIN = [
    "그런데 이 영화는 정말 재미있었어요.",
    "Honestly, the acting was great!",
    "음악이 별로였어요.",
]
# unusual spacing / punctuation -> WordPiece round trip is exact up to whitespace
TRICKY = ["결말이   최고였습니다 !", "The story , was great...", "  The ending,was boring.  "]
UNSEEN_KO = "그런데 뷁햏 똠방각하 영화는 최고였습니다!"  # 뷁 햏 똠 방 각 하 never seen


@pytest.fixture(scope="module")
def wordpiece() -> Tokenizer:
    return train_tokenizer(CORPUS, kind="wordpiece", vocab_size=400)


@pytest.fixture(scope="module")
def bpe() -> Tokenizer:
    return train_tokenizer(iter(CORPUS), kind="bpe", vocab_size=500)


def squash(text: str) -> str:
    return "".join(text.split())


@pytest.mark.parametrize("kind", ["wordpiece", "bpe"])
def test_special_tokens_are_ids_0_to_6(kind, wordpiece, bpe):
    tok = {"wordpiece": wordpiece, "bpe": bpe}[kind]
    assert [tok.token_to_id(t) for t in SPECIAL_TOKENS] == list(range(7))
    assert (tok.pad_id, tok.unk_id, tok.cls_id, tok.sep_id) == (0, 1, 2, 3)
    assert (tok.mask_id, tok.bos_id, tok.eos_id) == (4, 5, 6)
    assert tok.id_to_token(4) == "[MASK]" and tok.kind == kind
    assert 7 < tok.vocab_size == len(tok) <= {"wordpiece": 400, "bpe": 500}[kind]


def test_wordpiece_round_trip(wordpiece):
    for text in PLAIN:
        assert wordpiece.decode(wordpiece.encode(text)) == wordpiece.normalize(text)
    for text in TRICKY + CORPUS:
        ids = wordpiece.encode(text)
        assert wordpiece.unk_id not in ids
        assert squash(wordpiece.decode(ids)) == squash(wordpiece.normalize(text))


def test_wordpiece_uses_subwords_and_unk(wordpiece):
    # words never seen whole are built from pieces seen in other words
    pieces = wordpiece.tokenize("스토리는 정말")
    assert "[UNK]" not in pieces and any(p.startswith("##") for p in pieces)
    assert wordpiece.decode(wordpiece.encode("스토리는 정말")) == "스토리는 정말"
    assert wordpiece.decode(wordpiece.encode("음악의 감동적이었어요")) == "음악의 감동적이었어요"
    assert "##m" in wordpiece.tokenize("Themusic")
    ids = wordpiece.encode(UNSEEN_KO)
    assert wordpiece.unk_id in ids
    decoded = wordpiece.decode(ids)
    assert decoded == "그런데 [UNK] [UNK] 영화는 최고였습니다!"  # [UNK] is never hidden


def test_bpe_round_trip_exact_even_for_unseen(bpe):
    for text in PLAIN + TRICKY + CORPUS + [UNSEEN_KO, "emoji 🤖 and tabs\tend", "Ünïcödé"]:
        ids = bpe.encode(text)
        assert bpe.unk_id not in ids
        assert bpe.decode(ids) == bpe.normalize(text)


def test_nfkc_and_lowercase():
    tok = train_tokenizer(CORPUS, kind="bpe", vocab_size=400, lowercase=True)
    assert tok.normalize("ＴＨＥ Ｍｏｖｉｅ ①") == "the movie 1"
    assert tok.decode(tok.encode("The MOVIE was GREAT.")) == "the movie was great."
    wp = train_tokenizer(CORPUS, kind="wordpiece", vocab_size=300, lowercase=True)
    assert wp.encode("THE MOVIE") == wp.encode("the movie")


def test_encode_specials_and_truncation(wordpiece):
    text = "이 영화는 정말 재미있었어요."
    plain = wordpiece.encode(text)
    full = wordpiece.encode(text, add_cls=True, add_sep=True)
    assert full == [wordpiece.cls_id, *plain, wordpiece.sep_id]
    gpt = wordpiece.encode(text, add_bos=True, add_eos=True)
    assert gpt[0] == wordpiece.bos_id and gpt[-1] == wordpiece.eos_id
    cut, truncated = wordpiece.encode(
        text, max_len=4, add_cls=True, add_sep=True, return_truncated=True
    )
    assert truncated and cut == [wordpiece.cls_id, *plain[:2], wordpiece.sep_id]
    same, truncated = wordpiece.encode(
        text, max_len=len(full), add_cls=True, add_sep=True, return_truncated=True
    )
    assert not truncated and same == full
    with pytest.raises(ValueError, match="no room"):
        wordpiece.encode(text, max_len=1, add_cls=True, add_sep=True)


def test_truncate_keeps_head_tail_or_both():
    ids = list(range(10))
    assert truncate(ids, 4) == [0, 1, 2, 3]
    assert truncate(ids, 4, "tail") == [6, 7, 8, 9]
    assert truncate(ids, 8, "head+tail") == [0, 1, 4, 5, 6, 7, 8, 9]  # 8 // 4 = 2 from the head
    assert truncate(ids, 3, "head+tail") == [7, 8, 9]  # 3 // 4 = 0: tail only
    assert truncate(ids, 10, "tail") == ids and truncate(ids, 0, "tail") == []
    for budget in (4, 20):  # a bad choice is an error even when nothing needs cutting
        with pytest.raises(ValueError, match="keep must be one of"):
            truncate(ids, budget, "middle")


def test_encode_truncation_keeps_specials(wordpiece):
    text = "친구랑 봤는데 이 영화는 정말 재미있었어요."
    plain = wordpiece.encode(text)
    assert len(plain) > 6
    for keep in ("head", "tail", "head+tail"):
        ids, cut = wordpiece.encode(text, max_len=6, add_cls=True, keep=keep, return_truncated=True)
        assert cut and ids == [wordpiece.cls_id, *truncate(plain, 5, keep)]
        batch = wordpiece.encode_batch([text, "좋다"], max_len=6, add_cls=True, keep=keep)
        assert batch[0] == ids and batch[1] == wordpiece.encode("좋다", add_cls=True)


def test_encode_batch_matches_encode(bpe):
    texts = CORPUS[:50] + [UNSEEN_KO, ""]
    batch = bpe.encode_batch(texts, max_len=8, add_bos=True, add_eos=True)
    assert batch == [bpe.encode(t, max_len=8, add_bos=True, add_eos=True) for t in texts]
    ids, flags = bpe.encode_batch(texts, max_len=8, add_bos=True, return_truncated=True)
    assert flags == [len(bpe.encode(t)) > 7 for t in texts]
    assert any(flags) and not all(flags)
    assert all(len(x) <= 8 for x in ids)
    assert bpe.encode_batch(iter(["a", "b"])) == [bpe.encode("a"), bpe.encode("b")]


def test_decode_skips_specials(wordpiece):
    ids = (
        wordpiece.encode("음악이 최고였습니다!", add_cls=True, add_sep=True)
        + [wordpiece.pad_id] * 3
    )
    assert wordpiece.decode(ids) == "음악이 최고였습니다!"
    assert wordpiece.decode(ids, skip_special=False).startswith("[CLS] 음악이")
    assert wordpiece.decode_batch([ids, ids[:2]]) == ["음악이 최고였습니다!", "음악이"]


def test_save_and_load(tmp_path, wordpiece, bpe):
    path = wordpiece.save(tmp_path / "run")
    assert path == tmp_path / "run" / "tokenizer.json"
    assert [p.name for p in path.parent.iterdir()] == ["tokenizer.json"]  # no temp file left
    json.loads(path.read_text(encoding="utf-8"))
    for source in (tmp_path / "run", path):
        loaded = Tokenizer.load(source)
        assert loaded.encode(UNSEEN_KO) == wordpiece.encode(UNSEEN_KO)
        assert loaded.decode(loaded.encode(PLAIN[0])) == PLAIN[0]
    file = bpe.save(tmp_path / "bpe.json")
    assert Tokenizer.load(file).encode_batch(KO[:5]) == bpe.encode_batch(KO[:5])


def test_load_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="tokenizer.json"):
        Tokenizer.load(tmp_path)
    with pytest.raises(FileNotFoundError):
        Tokenizer.load(tmp_path / "missing.json")
    bad = tmp_path / "tokenizer.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="not a valid tokenizer.json"):
        Tokenizer.load(tmp_path)


def test_unknown_kind():
    with pytest.raises(ValueError, match="unknown tokenizer kind"):
        train_tokenizer(CORPUS, kind="unigram")  # type: ignore[arg-type]
