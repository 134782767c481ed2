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
from attnkit.data.paths import DataError, DatasetNotFoundError, resolve_data_dir
from attnkit.data.readers import (
    Example,
    Examples,
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
    "BucketBatchSampler",
    "ConvertedFile",
    "DataError",
    "DatasetFile",
    "DatasetInfo",
    "DatasetNotFoundError",
    "Example",
    "Examples",
    "dataset_path",
    "download",
    "fetch",
    "file_sha256",
    "get_dataset",
    "is_present",
    "list_datasets",
    "load_text_classification",
    "mirror_url",
    "pad_batch",
    "read_imdb",
    "read_nsmc",
    "read_table",
    "resolve_data_dir",
    "train_val_split",
]
