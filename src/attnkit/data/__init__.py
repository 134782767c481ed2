"""Datasets: catalogue, download, readers and batching.

``BucketBatchSampler`` and ``pad_batch`` are imported on first use: they need torch, and the
catalogue, fetch and readers do not (``attnkit data list`` starts in a fraction of a second).
"""

from typing import TYPE_CHECKING

from attnkit.data.catalogue import (
    ConvertedFile,
    DatasetFile,
    DatasetInfo,
    dataset_path,
    get_dataset,
    list_datasets,
)
from attnkit.data.fetch import download, fetch, file_sha256, is_present, mirror_url
from attnkit.data.ner_readers import (
    TaggedSentence,
    load_tagged,
    read_conll2003,
    read_klue_ner,
    read_tagged_file,
    to_iob2,
)
from attnkit.data.pairs import NLI_LABELS, PairExample, read_klue_nli, read_pair_file
from attnkit.data.paths import DataError, DatasetNotFoundError, resolve_data_dir
from attnkit.data.qa_readers import (
    QAExample,
    answer_offset_mismatches,
    read_korquad,
    read_squad_file,
)
from attnkit.data.readers import (
    FIXED_SPLITS,
    Example,
    Examples,
    fixed_split,
    load_text_classification,
    read_imdb,
    read_nsmc,
    read_table,
    train_val_split,
)

if TYPE_CHECKING:
    from attnkit.data.batching import BucketBatchSampler, pad_batch


def __getattr__(name: str):
    if name in ("BucketBatchSampler", "pad_batch"):
        from attnkit.data import batching

        return getattr(batching, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "FIXED_SPLITS",
    "NLI_LABELS",
    "BucketBatchSampler",
    "ConvertedFile",
    "DataError",
    "DatasetFile",
    "DatasetInfo",
    "DatasetNotFoundError",
    "Example",
    "Examples",
    "PairExample",
    "QAExample",
    "TaggedSentence",
    "answer_offset_mismatches",
    "dataset_path",
    "download",
    "fetch",
    "file_sha256",
    "fixed_split",
    "get_dataset",
    "is_present",
    "list_datasets",
    "load_tagged",
    "load_text_classification",
    "mirror_url",
    "pad_batch",
    "read_conll2003",
    "read_imdb",
    "read_klue_ner",
    "read_klue_nli",
    "read_korquad",
    "read_nsmc",
    "read_pair_file",
    "read_squad_file",
    "read_table",
    "read_tagged_file",
    "resolve_data_dir",
    "to_iob2",
    "train_val_split",
]
