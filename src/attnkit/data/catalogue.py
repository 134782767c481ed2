"""The dataset catalogue: what each dataset is, where it comes from and where it lives locally.

The local layout (relative to the data directory, see :func:`resolve_data_dir`) is the same as
the project's offline copy, e.g. ``nsmc/ratings_train.txt.gz``, so ``ATTNKIT_DATA`` can point at
either a fetched cache or that copy.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from attnkit.data.paths import DataError, DatasetNotFoundError, resolve_data_dir

__all__ = [
    "ConvertedFile",
    "DatasetFile",
    "DatasetInfo",
    "dataset_path",
    "get_dataset",
    "has_split",
    "list_datasets",
]


@dataclass(frozen=True)
class ConvertedFile:
    """A file that a converter writes from a downloaded archive.

    ``sha256`` is the checksum of the file's *decompressed* content (``None``: not checked);
    ``size`` the length of that content in bytes if known (``attnkit data list`` compares it
    with the gzip trailer to spot a truncated file without decompressing it).
    """

    relpath: str
    sha256: str | None = None
    size: int | None = None


@dataclass(frozen=True)
class DatasetFile:
    """One file to download.

    Attributes:
        relpath: where it is stored under the data directory. For an archive that is converted
            (``convert`` set) this is only where the archive sits while it is converted.
        url: the upstream URL.
        sha256: SHA-256 of the bytes served at ``url`` (always verified before anything is kept).
        size: size in bytes at ``url`` if known (for progress bars, and for the quick check of
            ``attnkit data list``: the stored file's size, or for ``compress`` the size in its
            gzip trailer).
        compress: gzip the download when storing it (``relpath`` then ends in ``.gz``); a stored
            file is recognised as present when its decompressed content matches ``sha256``.
        convert: name of the converter that turns the archive into ``outputs`` (e.g. ``"imdb"``).
        outputs: the files the converter writes.
    """

    relpath: str
    url: str
    sha256: str
    size: int | None = None
    compress: bool = False
    convert: str | None = None
    outputs: tuple[ConvertedFile, ...] = ()

    @property
    def filename(self) -> str:
        """The last component of the URL (what a mirror serves)."""
        return self.url.rstrip("/").rsplit("/", 1)[-1]


@dataclass(frozen=True)
class DatasetInfo:
    """A catalogued dataset.

    ``splits`` maps a split name to its path under the data directory; a path may contain a
    ``{lang}`` placeholder for parallel corpora (e.g. ``multi30k/train.{lang}.gz``).
    """

    name: str
    description: str
    language: str
    task: str
    license: str
    files: tuple[DatasetFile, ...]
    splits: dict[str, str]
    homepage: str = ""
    citation: str = ""
    notes: tuple[str, ...] = ()

    @property
    def download_size(self) -> int | None:
        """Total download size in bytes, or ``None`` if a size is unknown."""
        sizes = [f.size for f in self.files]
        return None if any(s is None for s in sizes) else sum(s for s in sizes if s is not None)


_GH = "https://raw.githubusercontent.com"
_NSMC = f"{_GH}/e9t/nsmc/cc0670e872d4ac27bfe36c87456783004b39ef6c"
_M30K = f"{_GH}/multi30k/dataset/a3d2e0d26b56f3846f66a952536ffed4e401d05a/data/task1/raw"
_CHATBOT = f"{_GH}/songys/Chatbot_data/4cf20d13fc46f5037fd1c531cd566e2dd9f72974"
_IMDB_URL = "https://ai.stanford.edu/~amaas/data/sentiment/aclImdb_v1.tar.gz"
# KLUE: the local files are byte-identical to upstream; KorQuAD: the local .gz holds the
# upstream JSON unchanged (so its sha256/size are of the decompressed content)
_KLUE = f"{_GH}/KLUE-benchmark/KLUE/3efd98708a40ff49251fddde35453f8fbb11f536/klue_benchmark"
_KORQUAD = f"{_GH}/korquad/korquad.github.io/61d7d6682948375dd8f06ef27e788fd19982af38/dataset"
# valid/test: the local .gz files hold the upstream eng.testa / eng.testb unchanged
_CONLL = f"{_GH}/imabhivaibhav/NER/7dc3944fb10a6d1f1ac65508379147679ab5aa1d"
_FIXED_SPLIT_NOTE = (
    "train / validation / test are a fixed 80/10/10 cut of the one dev file, made by the "
    "reader from the SHA-256 of {key} (no seed); dev is the whole file"
)

_M30K_FILES = {  # local .gz files are unmodified copies of upstream: (sha256, size)
    "train.en.gz": ("d79cfa999dd4c51d2cb42499b6796d5a882c3a8a961923c25a898c90f8bbd56f", 568929),
    "train.de.gz": ("726e39b2fa9eb9ffb6dc763fb35a179f80fae06ffc5d28b6ace5faa883de28a6", 637044),
    "val.en.gz": ("14f7d25ddd868909a9213e361768460edcacdd6ab9d1e77b92560dc10c10dc28", 21650),
    "val.de.gz": ("f0cba2f995189cf5770f29a8a9a537a3ad3f51657ad873405082ff6863a5e75a", 24681),
    "test_2016_flickr.en.gz": (
        "611d361c6334bc7246101d48097c13cf5c4413c5befc793cc629934359d532d9",
        21077,
    ),
    "test_2016_flickr.de.gz": (
        "9204244e408ccb38d2a55cfcd344df15005fc42a07a6e55ca6c52b6ababb8cc8",
        22890,
    ),
}

_DATASETS: tuple[DatasetInfo, ...] = (
    DatasetInfo(
        name="nsmc",
        description="Naver Sentiment Movie Corpus v1.0: Korean movie reviews, binary sentiment",
        language="ko",
        task="text-classification",
        license="CC0-1.0",
        homepage="https://github.com/e9t/nsmc",
        citation="Lucy Park, Naver Sentiment Movie Corpus v1.0, https://github.com/e9t/nsmc",
        files=(
            DatasetFile(
                relpath="nsmc/ratings_train.txt.gz",
                url=f"{_NSMC}/ratings_train.txt",
                sha256="e03b7d14e9e41be8d464a28057cd25d7396c53e67aa7fd5f7e552c59b0ee2940",
                size=14628807,
                compress=True,
            ),
            DatasetFile(
                relpath="nsmc/ratings_test.txt.gz",
                url=f"{_NSMC}/ratings_test.txt",
                sha256="8ac9f64052f11dbf6ae0acb5e038f03d90a76f0eda7820cfb3a92d02edfcebda",
                size=4893335,
                compress=True,
            ),
        ),
        splits={
            "train": "nsmc/ratings_train.txt.gz",
            "test": "nsmc/ratings_test.txt.gz",
            "unlabeled": "nsmc/unlabeled.txt.gz",
        },
        notes=(
            "150,000 train / 50,000 test rows; 8 empty documents are dropped when read",
            "unlabeled: 639,270 raw reviews, one per line, none of the test set (for MLM "
            "pretraining; not fetched: built from e9t/nsmc's raw per-movie files)",
        ),
    ),
    DatasetInfo(
        name="imdb",
        description="IMDB Large Movie Review Dataset v1.0 (Maas et al., 2011): English, binary",
        language="en",
        task="text-classification",
        license="no license stated upstream; cite Maas et al. (2011)",
        homepage="https://ai.stanford.edu/~amaas/data/sentiment/",
        citation="Maas et al., Learning Word Vectors for Sentiment Analysis, ACL 2011",
        files=(
            DatasetFile(
                relpath="imdb/aclImdb_v1.tar.gz",
                url=_IMDB_URL,
                sha256="c40f74a18d3b61f90feba1e17730e0d38e8b97c05fde7008942e91923d1658fe",
                size=84125825,
                convert="imdb",
                outputs=(
                    ConvertedFile(
                        "imdb/train.jsonl.gz",
                        "2660b5f41d92414f7d89d583a19ab43a548089661a83c5a254c72b8fdaebcf97",
                        size=34_456_238,
                    ),
                    ConvertedFile(
                        "imdb/test.jsonl.gz",
                        "8fd0edaf99cf0f8a1e601773b6dba48c7f560671cb9ab8b301b6e73205c8aac6",
                        size=33_674_569,
                    ),
                ),
            ),
        ),
        splits={
            "train": "imdb/train.jsonl.gz",
            "test": "imdb/test.jsonl.gz",
            "unlabeled": "imdb/unsup.jsonl.gz",
        },
        notes=(
            "25,000 train / 25,000 test; the archive is converted to JSON Lines and deleted",
            "unlabeled: the 50,000 aclImdb/train/unsup reviews (JSON Lines, id + text)",
        ),
    ),
    DatasetInfo(
        name="multi30k",
        description="Multi30k task 1: Flickr30k captions, English-German, aligned by line",
        language="de-en",
        task="translation",
        license="non-commercial research and education use; cite Elliott et al. (2016)",
        homepage="https://github.com/multi30k/dataset",
        citation="Elliott et al., Multi30K: Multilingual English-German Image Descriptions, 2016",
        files=tuple(
            DatasetFile(f"multi30k/{name}", f"{_M30K}/{name}", sha, size)
            for name, (sha, size) in _M30K_FILES.items()
        ),
        splits={
            "train": "multi30k/train.{lang}.gz",
            "val": "multi30k/val.{lang}.gz",
            "test": "multi30k/test_2016_flickr.{lang}.gz",
        },
    ),
    DatasetInfo(
        name="chatbot-ko",
        description="Korean chatbot Q&A pairs (Chatbot_data_for_Korean v1.0), labels 0/1/2",
        language="ko",
        task="dialogue",
        license="MIT",
        homepage="https://github.com/songys/Chatbot_data",
        citation="Youngsook Song, Chatbot_data_for_Korean v1.0, 2018",
        files=(
            DatasetFile(
                relpath="chatbot/ChatbotData.csv",
                url=f"{_CHATBOT}/ChatbotData.csv",
                sha256="287eb129695b577321c80ad397bb3c2279164d4ca577874d129fd3db5b30afe2",
                size=889842,
            ),
        ),
        splits={"train": "chatbot/ChatbotData.csv"},
        notes=("CSV with header Q,A,label; one label has trailing spaces",),
    ),
    DatasetInfo(
        name="tinyshakespeare",
        description="Tiny Shakespeare (char-rnn): 1.1M characters for language modelling",
        language="en",
        task="language-modeling",
        license="public domain text",
        homepage="https://github.com/karpathy/char-rnn",
        files=(
            DatasetFile(
                relpath="tinyshakespeare/input.txt",
                url=f"{_GH}/karpathy/char-rnn/master/data/tinyshakespeare/input.txt",
                sha256="86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed",
                size=1115394,
            ),
        ),
        splits={"train": "tinyshakespeare/input.txt"},
        notes=("usual split: first 90% train, last 10% validation",),
    ),
    DatasetInfo(
        name="conll2003",
        description="CoNLL-2003 English NER (Reuters): PER, ORG, LOC, MISC; IOB2 tags",
        language="en",
        task="token-classification",
        license="research use only (Reuters RCV1 text); annotations: CoNLL-2003 shared task",
        homepage="https://www.clips.uantwerpen.be/conll2003/ner/",
        citation="Tjong Kim Sang and De Meulder, Introduction to the CoNLL-2003 Shared Task: "
        "Language-Independent Named Entity Recognition, CoNLL 2003",
        files=(
            DatasetFile(
                relpath="conll2003/valid.txt.gz",
                url=f"{_CONLL}/eng.testa",
                sha256="c02eb19809eafb83998326a0481942eb37d96f31826ae387cfe8773699969f5b",
                size=827443,
                compress=True,
            ),
            DatasetFile(
                relpath="conll2003/test.txt.gz",
                url=f"{_CONLL}/eng.testb",
                sha256="dc4ac7f3d6d01a6bec59261814561da3b287b6b493b97d1f69c580b52ec1831b",
                size=748095,
                compress=True,
            ),
        ),
        splits={
            "train": "conll2003/train.txt.gz",
            "validation": "conll2003/valid.txt.gz",
            "test": "conll2003/test.txt.gz",
        },
        notes=(
            "14,041 train / 3,250 validation (eng.testa) / 3,453 test (eng.testb) sentences; "
            "columns: word POS chunk NER, tags already IOB2",
            "train is not fetched: the only copy found had 245 stray lines, removed by hand "
            "(see the offline copy's README); place conll2003/train.txt.gz yourself",
            "the text is Reuters RCV1 (research use only): do not redistribute",
        ),
    ),
    DatasetInfo(
        name="klue-ner",
        description="KLUE-NER v1.1 dev: 5,000 Korean sentences, per-character tags; fixed "
        "80/10/10 split",
        language="ko",
        task="token-classification",
        license="CC-BY-SA-4.0",
        homepage="https://github.com/KLUE-benchmark/KLUE",
        citation="Park et al., KLUE: Korean Language Understanding Evaluation, NeurIPS 2021 "
        "Datasets and Benchmarks",
        files=(
            DatasetFile(
                relpath="klue/klue-ner-v1.1_dev.tsv",
                url=f"{_KLUE}/klue-ner-v1.1/klue-ner-v1.1_dev.tsv",
                sha256="0f4d5e818f7b82d299c3a87856fc40a706f5943207580ddb252397e387050a54",
                size=2635045,
            ),
        ),
        splits={
            "train": "klue/klue-ner-v1.1_dev.tsv",
            "validation": "klue/klue-ner-v1.1_dev.tsv",
            "test": "klue/klue-ner-v1.1_dev.tsv",
            "dev": "klue/klue-ner-v1.1_dev.tsv",
        },
        notes=(
            _FIXED_SPLIT_NOTE.format(key="each sentence's guid") + ": 4,000 / 500 / 500 sentences",
            "entity types PS, LC, OG, DT, TI, QT; KLUE's train set is not public in a "
            "usable copy, so published dev scores are not comparable with a model "
            "trained on this train split and tested on this test split",
        ),
    ),
    DatasetInfo(
        name="klue-nli",
        description="KLUE-NLI v1.1 dev: 3,000 Korean sentence pairs, 3 labels; fixed split "
        "by premise",
        language="ko",
        task="pair-classification",
        license="CC-BY-SA-4.0",
        homepage="https://github.com/KLUE-benchmark/KLUE",
        citation="Park et al., KLUE: Korean Language Understanding Evaluation, NeurIPS 2021 "
        "Datasets and Benchmarks",
        files=(
            DatasetFile(
                relpath="klue/klue-nli-v1.1_dev.json",
                url=f"{_KLUE}/klue-nli-v1.1/klue-nli-v1.1_dev.json",
                sha256="0699db82be17766b26e199864e6260443e17ec6e91d1870e876419e388f245b1",
                size=1498298,
            ),
        ),
        splits={
            "train": "klue/klue-nli-v1.1_dev.json",
            "validation": "klue/klue-nli-v1.1_dev.json",
            "test": "klue/klue-nli-v1.1_dev.json",
            "dev": "klue/klue-nli-v1.1_dev.json",
        },
        notes=(
            _FIXED_SPLIT_NOTE.format(key="the premise")
            + ": 2,400 / 300 / 300 pairs (800 / 100 / 100 premises, each with one "
            "entailment, one neutral and one contradiction hypothesis)",
        ),
    ),
    DatasetInfo(
        name="korquad",
        description="KorQuAD 1.0 dev: 5,774 Korean QA questions (SQuAD v1); fixed split by article",
        language="ko",
        task="question-answering",
        license="CC-BY-ND-2.0-KR (redistribute unmodified)",
        homepage="https://korquad.github.io/",
        citation="Lim et al., KorQuAD1.0: Korean QA Dataset for Machine Reading "
        "Comprehension, 2019",
        files=(
            DatasetFile(
                relpath="korquad/KorQuAD_v1.0_dev.json.gz",
                url=f"{_KORQUAD}/KorQuAD_v1.0_dev.json",
                sha256="25ffeb51e6c51ec02c071b60a10188e10005c144110f0d876b26079d80a35bdf",
                size=3881058,
                compress=True,
            ),
        ),
        splits={
            "train": "korquad/KorQuAD_v1.0_dev.json.gz",
            "validation": "korquad/KorQuAD_v1.0_dev.json.gz",
            "test": "korquad/KorQuAD_v1.0_dev.json.gz",
            "dev": "korquad/KorQuAD_v1.0_dev.json.gz",
        },
        notes=(
            _FIXED_SPLIT_NOTE.format(key="the article title")
            + ": 112 / 14 / 14 articles, 4,330 / 586 / 858 questions; no article in two "
            "splits",
            "dev is the official dev set (140 articles): use it to compare with published "
            "scores of models trained on KorQuAD's train set (not in the offline copy)",
        ),
    ),
)


def list_datasets() -> list[DatasetInfo]:
    """Return every catalogued dataset, in catalogue order."""
    return list(_DATASETS)


def get_dataset(name: str) -> DatasetInfo:
    """Return the catalogue entry for ``name`` (case-insensitive).

    Raises:
        DataError: unknown name; the message lists the known names.
    """
    key = name.strip().lower()
    for info in _DATASETS:
        if info.name == key:
            return info
    known = ", ".join(info.name for info in _DATASETS)
    raise DataError(f"unknown dataset '{name}'; known datasets: {known}")


if TYPE_CHECKING:
    from attnkit.core.config import DataConfig


def has_split(data: DataConfig, split: str) -> bool:
    """Whether a recipe's data has ``split`` of its own: a file named for it (``data.name:
    file``) or a split of the catalogued dataset (KLUE-NLI's fixed validation part, say; NSMC
    and IMDB have none, so validation is held out of train)."""
    if data.name == "file":
        return bool(getattr(data, split, None))
    return split in get_dataset(data.name).splits


def dataset_path(
    name: str, split: str, data_dir: str | Path | None = None, lang: str | None = None
) -> Path:
    """Return the local file of one split of a catalogued dataset.

    A compressed split (``.gz``) is also accepted uncompressed (e.g. an upstream
    ``ratings_train.txt`` placed by hand). ``lang`` fills the ``{lang}`` placeholder of
    parallel corpora.

    Raises:
        DataError: unknown dataset or split, or ``lang`` missing for a parallel corpus.
        DatasetNotFoundError: no candidate file exists; lists every path tried.
    """
    info = get_dataset(name)
    if split not in info.splits:
        raise DataError(
            f"dataset '{info.name}' has no split '{split}'; splits: {', '.join(info.splits)}"
        )
    rel = info.splits[split]
    if "{lang}" in rel:
        if not lang:
            raise DataError(f"dataset '{info.name}' is parallel; pass lang (e.g. 'en' or 'de')")
        rel = rel.format(lang=lang)
    root = resolve_data_dir(data_dir)
    candidates = [root / rel]
    if rel.endswith(".gz"):
        candidates.append(root / rel[: -len(".gz")])
    for path in candidates:
        if path.is_file():
            return path
    raise DatasetNotFoundError(info.name, candidates, split=split)
