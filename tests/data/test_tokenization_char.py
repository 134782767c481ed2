"""Tests for the character-level tokenizer (``train_tokenizer(kind="char")``)."""

from __future__ import annotations

import pytest

from attnkit.core.config import ConfigError
from attnkit.data.tokenization import SPECIAL_TOKENS, Tokenizer, train_tokenizer
from attnkit.tasks.run_config import load_config

SHAKESPEARE = (
    "First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak.\n"
)
KOREAN = "이 영화는 정말 재미있었어요.\n너무 지루했다."
EMOJI = "좋아요 😀👍🏽\t🇰🇷!"
CORPUS = [SHAKESPEARE, KOREAN, EMOJI, "hello\n  world", "HELLO world"]


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    return train_tokenizer(CORPUS, kind="char", min_frequency=1)


@pytest.mark.parametrize(
    "text", ["hello\n  world", KOREAN, EMOJI, SHAKESPEARE, "  hello, speak  \n", ""]
)
def test_round_trip_is_exact(tok: Tokenizer, text: str) -> None:
    ids = tok.encode(text)
    assert len(ids) == len(text)  # one id per code point: no normalisation, nothing merged
    assert tok.decode(ids) == text
    assert tok.decode_batch([ids, tok.encode("ae")]) == [text, "ae"]


def test_every_character_is_a_token(tok: Tokenizer) -> None:
    assert tok.tokenize("hello\n  world") == list("hello\n  world")
    assert tok.tokenize("Hi 😀") == ["H", "i", " ", "😀"]  # case kept, emoji one token
    assert tok.kind == "char"
    assert repr(tok).startswith("Tokenizer(kind='char'")


def test_special_tokens_have_the_usual_ids(tok: Tokenizer) -> None:
    assert [tok.token_to_id(t) for t in SPECIAL_TOKENS] == list(range(len(SPECIAL_TOKENS)))
    assert (tok.pad_id, tok.unk_id, tok.cls_id, tok.sep_id) == (0, 1, 2, 3)
    assert (tok.mask_id, tok.bos_id, tok.eos_id) == (4, 5, 6)
    # the same ids as the subword kinds
    wp = train_tokenizer(CORPUS * 3, kind="wordpiece", vocab_size=200)
    assert [wp.token_to_id(t) for t in SPECIAL_TOKENS] == [
        tok.token_to_id(t) for t in SPECIAL_TOKENS
    ]
    ids = tok.encode("ae", add_bos=True, add_eos=True)
    assert ids[0] == tok.bos_id and ids[-1] == tok.eos_id
    assert tok.decode(ids) == "ae"  # skip_special drops them
    assert tok.decode(ids, skip_special=False) == "[BOS]ae[EOS]"


def test_vocabulary_is_specials_then_characters(tok: Tokenizer) -> None:
    chars = sorted(set("".join(CORPUS)))
    assert tok.vocab_size == len(SPECIAL_TOKENS) + len(chars)
    vocab = [tok.id_to_token(i) for i in range(tok.vocab_size)]
    assert vocab == SPECIAL_TOKENS + chars
    assert "\n" in vocab and " " in vocab and "\t" in vocab


def test_unknown_character_is_unk(tok: Tokenizer) -> None:
    ids = tok.encode("hi뷁!")
    assert ids[2] == tok.unk_id and len(ids) == 4
    assert tok.decode(ids) == "hi[UNK]!"  # [UNK] stays visible


def test_min_frequency_and_vocab_size() -> None:
    texts = ["aaab", "aac\n"]  # a: 5, b: 1, c: 1, \n: 1
    tk = train_tokenizer(texts, kind="char", min_frequency=2)
    assert tk.vocab_size == len(SPECIAL_TOKENS) + 1
    assert tk.encode("ab") == [tk.token_to_id("a"), tk.unk_id]
    tk = train_tokenizer(["aaabbc"], kind="char", min_frequency=1, vocab_size=9)
    assert [tk.id_to_token(i) for i in range(7, tk.vocab_size)] == ["a", "b"]  # most frequent


def test_lowercase_only_when_asked() -> None:
    cased = train_tokenizer(["Ab"], kind="char", min_frequency=1)
    assert cased.decode(cased.encode("Ab")) == "Ab"
    lower = train_tokenizer(["Ab"], kind="char", min_frequency=1, lowercase=True)
    assert lower.vocab_size == len(SPECIAL_TOKENS) + 2
    assert lower.decode(lower.encode("AB")) == "ab"


def test_save_load_round_trip(tok: Tokenizer, tmp_path) -> None:
    path = tok.save(tmp_path)
    assert path.name == "tokenizer.json"
    again = Tokenizer.load(tmp_path)
    assert again.kind == "char" and again.vocab_size == tok.vocab_size
    for text in ["hello\n  world", KOREAN, EMOJI, "뷁"]:
        assert again.encode(text) == tok.encode(text)
        assert again.decode(again.encode(text)) == tok.decode(tok.encode(text))


def test_config_accepts_char_kind() -> None:
    assert load_config(None, ["tokenizer.kind=char"]).tokenizer.kind == "char"
    with pytest.raises(ConfigError, match=r"tokenizer\.kind must be wordpiece\|bpe\|char"):
        load_config(None, ["tokenizer.kind=chars"])


def test_char_lookup_gives_what_the_backend_gives():
    """A char tokenizer without a normalizer looks code points up itself in
    encode_offsets_batch: the same ids and spans as the backend, [UNK] included, and texts
    holding an added token's string ("[EOS]") still go to the backend."""
    import random

    corpus = "First Citizen:\nBefore we proceed any further, hear me speak.\n\t한국어 ✓ é"
    tok = train_tokenizer([corpus], kind="char", vocab_size=256, min_frequency=1)
    rng = random.Random(0)
    alphabet = [*corpus, "\r", "\x00", "\u200b", "\U0001f600", "Q", "[", "]"]
    texts = ["", "  ", corpus, "a[PAD]b", "[EOS]x", "unseen: Ωж😀"]
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randrange(60))) for _ in range(100)]
    assert tok._chars is not None
    fast = tok.encode_offsets_batch(texts)
    tok._chars = None  # the backend's answer
    assert fast == tok.encode_offsets_batch(texts)
    assert tok.encode_offsets_batch(["[EOS]"])[0][0] == [tok.token_to_id("[EOS]")]


def test_char_ids_batch_is_the_ids_without_spans(tok: Tokenizer) -> None:
    """``char_ids_batch``: the ids ``encode_offsets_batch`` gives (one per character, [UNK]
    for an unseen one); None where it cannot answer alone: an added token's string in a
    text, or a tokenizer that is not per character."""
    texts = ["hello\n  world", KOREAN, EMOJI, "", "unseen: Ωж"]
    assert tok.char_ids_batch(texts) == [ids for ids, _ in tok.encode_offsets_batch(texts)]
    assert tok.char_ids_batch(["a[EOS]b"]) is None
    wordpiece = train_tokenizer(CORPUS * 5, kind="wordpiece", vocab_size=120, min_frequency=1)
    assert wordpiece.char_ids_batch(["hello"]) is None
