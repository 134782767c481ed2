"""Entity F1 (seqeval parity) and the SQuAD v1.1 / KorQuAD 1.0 answer scores."""

from __future__ import annotations

import random
import warnings

import pytest

from attnkit.tasks.metrics import entity_f1, get_entities, korquad_scores, qa_report, squad_scores

IOB = ["O", "O", "O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG", "I-MISC"]
ODD = [*IOB, "E-PER", "S-LOC", "B", "I", "O", "E-LOC", "S-PER", "I-", "X-PER"]


def _random_corpus(rng: random.Random, tags: list[str]) -> tuple[list[list[str]], list[list[str]]]:
    true = [rng.choices(tags, k=rng.randint(0, 12)) for _ in range(rng.randint(1, 6))]
    pred = []
    for sentence in true:  # mostly right, some noise, so that true positives occur
        pred.append([t if rng.random() < 0.6 else rng.choice(tags) for t in sentence])
    return true, pred


# ----------------------------------------------------------------- entities
def test_get_entities_examples() -> None:
    assert get_entities(["B-PER", "I-PER", "O", "B-LOC"]) == [("PER", 0, 1), ("LOC", 3, 3)]
    # IOB1 / malformed IOB2: an I-X after O or after another type starts an entity
    assert get_entities(["I-PER", "I-PER", "I-LOC", "O", "I-ORG"]) == [
        ("PER", 0, 1),
        ("LOC", 2, 2),
        ("ORG", 4, 4),
    ]
    assert get_entities(["B-PER", "B-PER", "I-PER"]) == [("PER", 0, 0), ("PER", 1, 2)]
    assert get_entities([]) == []


def test_get_entities_equals_seqeval() -> None:
    seq = pytest.importorskip("seqeval.metrics.sequence_labeling")
    rng = random.Random(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # seqeval warns about the non-NE tags of ODD
        for tags in (IOB, ODD):
            for _ in range(300):
                sequence = rng.choices(tags, k=rng.randint(0, 15))
                assert get_entities(sequence) == seq.get_entities(sequence)


# ----------------------------------------------------------------- entity_f1
def test_entity_f1_hand_computed() -> None:
    true = [["B-PER", "I-PER", "O", "B-LOC"], ["B-LOC", "O"]]
    pred = [["B-PER", "I-PER", "O", "O"], ["B-LOC", "B-ORG"]]
    r = entity_f1(true, pred)
    # true: PER(0-1), LOC(3), LOC(5); pred: PER(0-1), LOC(5), ORG(6): 2 of 3 right both ways
    assert (r["precision"], r["recall"], r["support"]) == (2 / 3, 2 / 3, 3)
    assert r["f1"] == pytest.approx(2 / 3)
    assert r["per_type"]["PER"] == {"precision": 1.0, "recall": 1.0, "f1": 1.0, "support": 1}
    assert r["per_type"]["LOC"] == {
        "precision": 1.0,
        "recall": 0.5,
        "f1": pytest.approx(2 / 3),
        "support": 2,
    }
    assert r["per_type"]["ORG"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 0}
    assert list(r["per_type"]) == ["LOC", "ORG", "PER"]


def test_entity_f1_no_entity_across_sentences() -> None:
    # I-PER at the start of sentence 2 does not continue sentence 1's PER
    r = entity_f1([["B-PER"], ["I-PER"]], [["B-PER"], ["I-PER"]])
    assert r["support"] == 2 and r["f1"] == 1.0
    assert entity_f1([["O"]], [["O"]]) == {
        "precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 0, "per_type": {},
    }  # fmt: skip


def test_entity_f1_length_mismatch() -> None:
    with pytest.raises(ValueError, match="2 sentences"):
        entity_f1([["O"], ["O"]], [["O"]])
    with pytest.raises(ValueError, match="sentence 0"):
        entity_f1([["O", "O"]], [["O"]])


@pytest.mark.parametrize("tags", [IOB, ODD], ids=["iob", "odd"])
def test_entity_f1_equals_seqeval(tags: list[str]) -> None:
    metrics = pytest.importorskip("seqeval.metrics")
    rng = random.Random(42)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # UndefinedMetricWarning, non-NE tag warnings
        for _ in range(150):
            true, pred = _random_corpus(rng, tags)
            ours = entity_f1(true, pred)
            assert ours["precision"] == pytest.approx(metrics.precision_score(true, pred))
            assert ours["recall"] == pytest.approx(metrics.recall_score(true, pred))
            assert ours["f1"] == pytest.approx(metrics.f1_score(true, pred))
            report = metrics.classification_report(true, pred, output_dict=True)
            types = {k: v for k, v in report.items() if not k.endswith(" avg")}
            assert sorted(types) == list(ours["per_type"])
            for name, theirs in types.items():
                mine = ours["per_type"][name]
                assert mine["precision"] == pytest.approx(theirs["precision"])
                assert mine["recall"] == pytest.approx(theirs["recall"])
                assert mine["f1"] == pytest.approx(theirs["f1-score"])
                assert mine["support"] == theirs["support"]
            if types:
                assert ours["support"] == report["micro avg"]["support"]


# ----------------------------------------------------------------- SQuAD v1.1
@pytest.mark.parametrize(
    ("prediction", "truths", "em", "f1"),
    [
        ("The Cat!", ["cat"], 1.0, 1.0),  # lowercase, punctuation and articles removed
        ("Denver Broncos", ["Denver Broncos", "The Denver Broncos"], 1.0, 1.0),
        ("U.S.", ["us"], 1.0, 1.0),  # "." deleted, not replaced by a space
        ("an  apple ,  a day", ["apple day"], 1.0, 1.0),
        # tokens {cat, sat} vs {cat, sat, on, mat}: P = 1, R = 1/2, F1 = 2/3
        ("a cat sat", ["the cat sat on the mat"], 0.0, 2 / 3),
        # {in, 1990s} vs {1990s}: P = 1/2, R = 1 -> 2/3; best of the ground truths
        ("in the 1990s", ["nineties", "the 1990s"], 0.0, 2 / 3),
        # bag of words: {new, york, new} vs {new, york}: common 2, P = 2/3, R = 1 -> 0.8
        ("new york new", ["New York"], 0.0, 0.8),
        ("Paris", ["London"], 0.0, 0.0),
        # both normalise to "": EM 1 but F1 0 (v1.1's f1 returns 0 when nothing is shared)
        ("the", ["a"], 1.0, 0.0),
    ],
)
def test_squad_scores(prediction: str, truths: list[str], em: float, f1: float) -> None:
    got_em, got_f1 = squad_scores(prediction, truths)
    assert got_em == em
    assert got_f1 == pytest.approx(f1)


def test_squad_articles_are_whole_words() -> None:
    # "theatre" keeps its "the"; "the atre" -> "atre": no shared token
    assert squad_scores("theatre", ["the atre"]) == (0.0, 0.0)
    assert squad_scores("Anne and the man", ["anne man"]) == (
        0.0,
        pytest.approx(0.8),
    )  # {anne,and,man}


def test_squad_needs_a_ground_truth() -> None:
    with pytest.raises(ValueError):
        squad_scores("x", [])


# ----------------------------------------------------------------- KorQuAD 1.0
@pytest.mark.parametrize(
    ("prediction", "truths", "em", "f1"),
    [
        ("서울", ["서울"], 1.0, 1.0),
        ("《서울》", ["서울"], 1.0, 1.0),  # 《 》 -> spaces, collapsed
        ("‘한국’", ["'한국'"], 1.0, 1.0),
        ("1,000명", ["1000명"], 1.0, 1.0),  # ASCII punctuation deleted
        # characters 서울특별시 (5) vs 서울 (2): common 2, P = 2/5, R = 1, F1 = 0.8/1.4 = 4/7
        ("서울특별시", ["서울"], 0.0, 4 / 7),
        # spaces do not count: same characters, so F1 = 1 although EM = 0
        ("세종 대왕", ["세종대왕"], 0.0, 1.0),
        # ( ) -> spaces: "주 삼성" vs "삼성": chars 주삼성 vs 삼성: P = 2/3, R = 1, F1 = 0.8
        ("(주)삼성", ["삼성"], 0.0, 0.8),
        # · is not ASCII punctuation and is kept: 김·이 vs 김이: P = 2/3, R = 1, F1 = 0.8
        ("김·이", ["김이"], 0.0, 0.8),
        # no article removal: "the beatles" vs "beatles": chars thebeatles (10) vs beatles (7);
        # all 7 of beatles are shared: P = 7/10, R = 1, F1 = 1.4/1.7 = 14/17
        ("The Beatles", ["beatles"], 0.0, 14 / 17),
        # max over ground truths: 이순신 장군 vs 이순신 (3/5, 1 -> 0.75) or 장군 (2/5, 1 -> 4/7)
        ("이순신 장군", ["장군", "이순신"], 0.0, 0.75),
        ("부산", ["서울"], 0.0, 0.0),
    ],
)
def test_korquad_scores(prediction: str, truths: list[str], em: float, f1: float) -> None:
    got_em, got_f1 = korquad_scores(prediction, truths)
    assert got_em == em
    assert got_f1 == pytest.approx(f1)


def test_korquad_differs_from_squad_on_articles_and_partial_words() -> None:
    assert squad_scores("The Beatles", ["beatles"]) == (1.0, 1.0)
    assert squad_scores("서울특별시", ["서울"]) == (0.0, 0.0)  # one token each, not equal
    assert korquad_scores("서울특별시", ["서울"])[1] > 0.5


# ----------------------------------------------------------------- qa_report
def test_qa_report_percentages_and_missing_answers() -> None:
    predictions = {"q1": "Seoul", "q2": "the cat", "extra": "ignored"}
    references = {"q1": ["Seoul"], "q2": ["a dog", "cat"], "q3": ["x"]}
    r = qa_report(predictions, references)
    assert r == {
        "exact_match": pytest.approx(200 / 3),
        "f1": pytest.approx(200 / 3),
        "count": 3,
        "missing": 1,
    }
    r = qa_report(
        {"a": "서울특별시", "b": "세종 대왕"}, {"a": ["서울"], "b": ["세종대왕"]}, scorer="korquad"
    )
    assert r["exact_match"] == 0.0
    assert r["f1"] == pytest.approx(100 * (4 / 7 + 1.0) / 2)
    assert qa_report({}, {}) == {"exact_match": 0.0, "f1": 0.0, "count": 0, "missing": 0}
    with pytest.raises(ValueError, match="scorer"):
        qa_report({}, {}, scorer="bleu")
