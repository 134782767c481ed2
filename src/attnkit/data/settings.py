"""The recipe's ``data`` and ``tokenizer`` sections: the settings every task shares.

Each task reads the ``data`` section with its own dataclass, a subclass of ``DataConfig``
declared in the task's module (``TaskSpec.data_settings``: ``mask_prob`` for mlm,
``doc_stride`` for qa, ...), which adds its fields and its checks (``validate``). A key of
another task's section is an error naming that task (``attnkit.tasks.run_config``).
"""

from __future__ import annotations

from dataclasses import dataclass

from attnkit.core.config import at_least, check, positive, short_repr

__all__ = ["FLAT_DATA_KEYS", "DataConfig", "TokenizerConfig"]


@dataclass
class DataConfig:
    """The data settings of every task: which dataset, its files, the validation split, the
    length of an example. A task's subclass adds its own (``TaskSpec.data_settings``)."""

    name: str = "nsmc"  # catalogue name (attnkit.data.catalogue: nsmc, imdb, ...) or "file"
    train: str | None = None  # data.name file: the user's files, per split
    validation: str | None = None
    test: str | None = None
    val_fraction: float = 0.05  # held out from train when there is no validation split
    val_split: str = "random"  # random | last: the last val_fraction of each class, in file order
    max_len: int = 128  # tokens per example (longer ones are truncated)
    limit: int | None = None  # a seeded random subset of N training examples (quick runs)
    data_dir: str | None = None  # where the catalogued datasets are (default: ATTNKIT_DATA)

    def validate(self) -> None:
        """One-line ``ConfigError`` naming the first bad value. A subclass checks its own
        fields after ``super().validate()``."""
        check(
            (self.max_len > 1, f"data.max_len must be > 1, got {short_repr(self.max_len)}"),
            (
                0.0 <= self.val_fraction < 1.0,
                f"data.val_fraction must be in [0, 1), got {short_repr(self.val_fraction)}",
            ),
            (self.val_split in ("random", "last"), "data.val_split must be random|last"),
            at_least("data.limit", self.limit, 1, optional=True),
            (
                self.limit is None
                or self.limit >= 2
                or self.val_fraction == 0
                or self.validation is not None,
                f"data.limit: {self.limit} leaves no example to hold out for validation "
                f"(data.val_fraction {self.val_fraction}); set data.limit >= 2 or "
                "data.val_fraction: 0",
            ),
        )


# The keys of the single, flat data section runs were saved with before each task had its
# own (the union of every task's settings): a run's config.json may hold those of other
# tasks, which reading it ignores.
FLAT_DATA_KEYS = frozenset(
    [
        "name",
        "train",
        "validation",
        "test",
        "text_column",
        "pair_column",
        "label_column",
        "val_fraction",
        "val_split",
        "max_len",
        "truncation",
        "limit",
        "extra_train",
        "data_dir",
        "mask_prob",
        "whole_word_mask",
        "doc_stride",
        "max_question_len",
        "max_answer_len",
        "label_unit",
        "src_lang",
        "tgt_lang",
    ]
)


@dataclass
class TokenizerConfig:
    kind: str = "wordpiece"  # wordpiece | bpe | char
    vocab_size: int = 16000
    min_frequency: int = 2
    lowercase: bool = False
    path: str | None = None  # an existing tokenizer.json instead of training one

    def validate(self) -> None:
        """One-line ``ConfigError`` naming the first bad value."""
        check(
            (
                self.kind in ("wordpiece", "bpe", "char"),
                "tokenizer.kind must be wordpiece|bpe|char",
            ),
            positive("tokenizer.vocab_size", self.vocab_size),
            positive("tokenizer.min_frequency", self.min_frequency),
        )
