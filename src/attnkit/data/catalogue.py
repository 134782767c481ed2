"""The dataset catalogue: what each dataset is, where it comes from, where it lives locally and
how it is read.

The local layout (relative to the data directory, see :func:`resolve_data_dir`) is the same as
the project's offline copy, e.g. ``nsmc/ratings_train.txt.gz``, so ``ATTNKIT_DATA`` can point at
either a fetched cache or that copy.

Each entry carries its readers, one per kind of examples it can be read as
(``attnkit.data.kinds``: ``labelled``, ``pairs``, ``parallel``, ``tagged``, ``qa``,
``documents``, ``text``, ``segments``). A task names the kinds it reads and asks for a split
with ``read(cfg.data, kind, split)``; ``data.name: file`` (the user's own files) is read the
same way (``attnkit.data.user_files``). Adding a dataset = one entry here (or
``register_dataset`` from elsewhere) + its reader.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

from attnkit.core.errors import ConfigError
from attnkit.data.kinds import Reader
from attnkit.data.ner_readers import (
    CONLL2003_SPLITS,
    CONLL2003_TAGS,
    KLUE_NER_SPLITS,
    KLUE_NER_TAGS,
    read_conll2003,
    read_klue_ner,
)
from attnkit.data.pairs import KLUE_NLI_SPLITS, read_klue_nli
from attnkit.data.parallel import CHATBOT_SPLITS, MULTI30K_SPLITS, read_chatbot, read_multi30k
from attnkit.data.paths import DataError, locate
from attnkit.data.qa_readers import KORQUAD_SPLITS, read_korquad
from attnkit.data.readers import (
    IMDB_SPLITS,
    NSMC_SPLITS,
    read_imdb,
    read_nsmc,
    read_text_file,
    read_unlabeled,
)
from attnkit.data.sentence_split import has_segments, review_segments
from attnkit.data.split import split_by_position
from attnkit.data.user_files import FILE_READERS

if TYPE_CHECKING:
    from attnkit.data.settings import DataConfig

__all__ = [
    "USER_FILES",
    "ConvertedFile",
    "DatasetFile",
    "DatasetInfo",
    "Reader",
    "check_data",
    "dataset_of",
    "dataset_path",
    "describe",
    "find_kind",
    "find_reader",
    "get_dataset",
    "has_split",
    "kinds_of",
    "list_datasets",
    "names_reading",
    "read",
    "reader_of",
    "register_dataset",
    "unregister_dataset",
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
    ``readers`` maps each kind of examples it can be read as (``attnkit.data.kinds.KINDS``)
    to its ``Reader``.
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
    readers: Mapping[str, Reader] = field(default_factory=dict)

    @property
    def download_size(self) -> int | None:
        """Total download size in bytes, or ``None`` if a size is unknown."""
        sizes = [f.size for f in self.files]
        return None if any(s is None for s in sizes) else sum(s for s in sizes if s is not None)


# ----------------------------------------------------------------------------- readers
# Each turns a reader of (split, data_dir) into a Reader's read(data settings, split).
def _by_split(read_split: Callable[[str, str | Path | None], Any]) -> Callable[[Any, str], Any]:
    def read_one(data: Any, split: str) -> Any:
        return read_split(split, data.data_dir)

    return read_one


def _unlabelled(name: str) -> Callable[[Any, str], list[str]]:
    """The reviews of ``name`` that are safe to pretrain on (``read_unlabeled``)."""

    def read_corpus(data: Any, split: str) -> list[str]:
        return read_unlabeled(name, data.data_dir)

    return read_corpus


class ReviewDocuments(Sequence[list[str]]):
    """Reviews as documents of sentences (``review_segments``), each cut when it is read:
    a ``data.limit`` subset of NSMC's 639,270 reviews cuts only the reviews it keeps
    (cutting them all took 6 s). Reviews with no text outside ``<br>`` tags (no segment)
    are left out, as they would be after cutting."""

    def __init__(self, reviews: list[str]) -> None:
        self._reviews = [r for r in reviews if has_segments(r)]

    def __len__(self) -> int:
        return len(self._reviews)

    def __iter__(self) -> Iterator[list[str]]:
        return map(review_segments, self._reviews)

    @overload
    def __getitem__(self, i: int) -> list[str]: ...
    @overload
    def __getitem__(self, i: slice) -> list[list[str]]: ...
    def __getitem__(self, i: int | slice) -> list[str] | list[list[str]]:
        if isinstance(i, slice):
            return [review_segments(r) for r in self._reviews[i]]
        return review_segments(self._reviews[i])


def _review_segments(name: str) -> Callable[[Any, str], ReviewDocuments]:
    """The unlabelled reviews of ``name`` as documents of sentences (``ReviewDocuments``)."""

    def read_documents(data: Any, split: str) -> ReviewDocuments:
        return ReviewDocuments(read_unlabeled(name, data.data_dir))

    return read_documents


def _multi30k(data: Any, split: str) -> list[Any]:
    split = {"validation": "val"}.get(split, split)
    return read_multi30k(split, data.src_lang, data.tgt_lang, data.data_dir)


def _multi30k_languages(data: Any) -> str | None:
    if {data.src_lang, data.tgt_lang} == {"de", "en"}:
        return None
    return "multi30k has de and en: data.src_lang / tgt_lang must be de->en or en->de"


SHAKESPEARE_SPLITS = {"train": "tinyshakespeare/input.txt"}
SHAKESPEARE_VAL_FRACTION = 0.1  # the usual (char-rnn, nanoGPT) split: last 10% validates


def _shakespeare(data: Any, split: str) -> str:
    """The first 90% of the characters (train) or the last 10% (validation)."""
    path = locate("tinyshakespeare", SHAKESPEARE_SPLITS, "train", data.data_dir)
    train, validation = split_by_position(read_text_file(path, "data"), SHAKESPEARE_VAL_FRACTION)
    return validation if split == "validation" else train


def _reviews(name: str, read_split: Callable[[str, str | Path | None], Any]) -> dict[str, Reader]:
    """NSMC's and IMDB's readers: labelled reviews, and their unlabelled ones for pretraining."""
    corpus = f"the unlabelled {name} corpus"
    return {
        "labelled": Reader(_by_split(read_split), ("train", "test"), labels=SENTIMENT),
        "documents": Reader(_unlabelled(name), ("train",), what=corpus),
        "segments": Reader(_review_segments(name), ("train",), what=corpus),
    }


SENTIMENT = ("negative", "positive")  # the names of NSMC's and IMDB's labels 0 and 1
_FULL_SPLITS = ("train", "validation", "test")


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
        splits=NSMC_SPLITS,
        readers=_reviews("nsmc", read_nsmc),
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
        splits=IMDB_SPLITS,
        readers=_reviews("imdb", read_imdb),
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
        splits=MULTI30K_SPLITS,
        readers={"parallel": Reader(_multi30k, _FULL_SPLITS, check=_multi30k_languages)},
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
        splits=CHATBOT_SPLITS,
        readers={"parallel": Reader(_by_split(read_chatbot), _FULL_SPLITS)},
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
        splits=SHAKESPEARE_SPLITS,
        readers={
            "text": Reader(
                _shakespeare,
                ("train", "validation"),
                what="Tiny Shakespeare (first 90% / last 10% of the characters)",
            )
        },
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
        splits=CONLL2003_SPLITS,
        readers={"tagged": Reader(_by_split(read_conll2003), labels=tuple(CONLL2003_TAGS))},
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
        splits=KLUE_NER_SPLITS,
        readers={
            "tagged": Reader(_by_split(read_klue_ner), labels=tuple(KLUE_NER_TAGS), unit="char")
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
        splits=KLUE_NLI_SPLITS,
        readers={"pairs": Reader(_by_split(read_klue_nli))},
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
        splits=KORQUAD_SPLITS,
        readers={"qa": Reader(_by_split(read_korquad), scorer="korquad")},
        notes=(
            _FIXED_SPLIT_NOTE.format(key="the article title")
            + ": 112 / 14 / 14 articles, 4,330 / 586 / 858 questions; no article in two "
            "splits",
            "dev is the official dev set (140 articles): use it to compare with published "
            "scores of models trained on KorQuAD's train set (not in the offline copy)",
        ),
    ),
)


# the user's own files (data.name: file): not a catalogued dataset, read the same way
USER_FILES = DatasetInfo(
    name="file",
    description="your own files: data.train, data.validation, data.test",
    language="",
    task="",
    license="",
    files=(),
    splits={},
    readers=FILE_READERS,
)
_REGISTERED: dict[str, DatasetInfo] = {}  # register_dataset's, after the built-in ones


def list_datasets() -> list[DatasetInfo]:
    """Return every catalogued dataset, in catalogue order (registered ones last)."""
    return [*_DATASETS, *_REGISTERED.values()]


def get_dataset(name: str) -> DatasetInfo:
    """Return the catalogue entry for ``name`` (case-insensitive).

    Raises:
        DataError: unknown name; the message lists the known names.
    """
    key = name.strip().lower()
    infos = list_datasets()
    for info in infos:
        if info.name == key:
            return info
    known = ", ".join(info.name for info in infos)
    raise DataError(f"unknown dataset '{name}'; known datasets: {known}")


def register_dataset(info: DatasetInfo, replace: bool = False) -> DatasetInfo:
    """Add ``info`` to the catalogue (a dataset defined outside attnkit: a plugin, a test);
    every task that reads one of its kinds then reads it by name. Returns it."""
    key = info.name.strip().lower()
    if key != info.name or not key or key == USER_FILES.name:
        raise ValueError(f"a dataset needs a lowercase name other than 'file', got {info.name!r}")
    if any(d.name == key for d in _DATASETS):
        raise ValueError(f"{key!r} is a built-in dataset")
    if key in _REGISTERED and not replace and _REGISTERED[key] is not info:
        raise ValueError(f"dataset {key!r} is already in the catalogue")
    _REGISTERED[key] = info
    return info


def unregister_dataset(name: str) -> None:
    """Remove a dataset ``register_dataset`` added (the built-in ones stay)."""
    _REGISTERED.pop(name, None)


def dataset_path(
    name: str, split: str, data_dir: str | Path | None = None, lang: str | None = None
) -> Path:
    """Return the local file of one split of a catalogued dataset (``paths.locate``).

    A compressed split (``.gz``) is also accepted uncompressed (e.g. an upstream
    ``ratings_train.txt`` placed by hand). ``lang`` fills the ``{lang}`` placeholder of
    parallel corpora.

    Raises:
        DataError: unknown dataset or split, or ``lang`` missing for a parallel corpus.
        DatasetNotFoundError: no candidate file exists; lists every path tried.
    """
    info = get_dataset(name)
    return locate(info.name, info.splits, split, data_dir, lang)


# ----------------------------------------------------------------------------- a recipe's data
def dataset_of(data: DataConfig) -> DatasetInfo:
    """The entry that reads a recipe's data: ``USER_FILES`` for ``data.name: file``, else
    the catalogued dataset (``DataError`` if there is none of that name)."""
    return USER_FILES if data.name == USER_FILES.name else get_dataset(data.name)


def kinds_of(data: DataConfig | str) -> tuple[str, ...]:
    """Every kind the recipe's dataset (or the dataset of that ``data.name``) can be read as,
    in its readers' order (() for no such dataset)."""
    name = data if isinstance(data, str) else data.name
    try:
        return tuple((USER_FILES if name == USER_FILES.name else get_dataset(name)).readers)
    except DataError:
        return ()


def find_kind(data: DataConfig | str, kinds: Iterable[str]) -> str | None:
    """The first of ``kinds`` the recipe's dataset (or the dataset of that ``data.name``)
    can be read as (None: none of them, or no such dataset)."""
    offered = kinds_of(data)
    return next((kind for kind in kinds if kind in offered), None)


def find_reader(data: DataConfig, kind: str) -> Reader | None:
    """The recipe's dataset's reader of ``kind``, or None (none, or no such dataset)."""
    try:
        return dataset_of(data).readers.get(kind)
    except DataError:
        return None


def reader_of(data: DataConfig, kind: str) -> Reader:
    """The recipe's dataset's reader of ``kind`` (``DataError`` if it has none)."""
    info = dataset_of(data)
    if kind not in info.readers:
        offers = ", ".join(info.readers) or "nothing"
        raise DataError(f"dataset '{info.name}' cannot be read as {kind} (it offers {offers})")
    return info.readers[kind]


def has_split(data: DataConfig, kind: str, split: str) -> bool:
    """Whether the recipe's dataset has ``split`` of its own, read as ``kind``: a file named
    for it (``data.name: file``) or a split of the catalogued dataset (KLUE-NLI's fixed
    validation part, say; NSMC and IMDB have none, so validation is held out of train)."""
    info = dataset_of(data)
    reader = info.readers.get(kind)
    if reader is None:
        return False
    splits = reader.splits if reader.splits is not None else tuple(info.splits)
    if split not in splits:
        return False
    return bool(getattr(data, split, None)) if reader.file else True


def read(data: DataConfig, kind: str, split: str) -> Any:
    """One split of the recipe's dataset, read as ``kind`` (``kinds.KINDS`` says what it
    is: e.g. ``labelled`` -> ``Examples``)."""
    return reader_of(data, kind).read(data, split)


def names_reading(kinds: Iterable[str]) -> list[str]:
    """The ``data.name`` values that can be read as one of ``kinds``, ``file`` last."""
    kinds = tuple(kinds)
    return [
        info.name
        for info in (*list_datasets(), USER_FILES)
        if any(kind in info.readers for kind in kinds)
    ]


def check_data(data: DataConfig, kind: str) -> None:
    """``ConfigError`` for data settings the dataset's reader of ``kind`` cannot read: a
    setting it reads missing from the task's section, the user's files without
    ``data.train``, a value the dataset refuses (``Reader.check``)."""
    reader = reader_of(data, kind)
    missing = [name for name in reader.settings if not hasattr(data, name)]
    if missing:  # (a task's data_settings that lack what its kind's reader reads)
        raise ConfigError(
            f"data.name {data.name} read as {kind} needs the data setting(s) "
            f"{', '.join(missing)}, which this task's data section lacks"
        )
    if reader.file and not data.train:
        raise ConfigError(f"data.name {data.name} needs data.train ({reader.file})")
    message = reader.check(data) if reader.check else None
    if message:
        raise ConfigError(message)


def describe(data: DataConfig, kind: str) -> str:
    """How messages name what the recipe's data is read from, as ``kind``: the reader's
    ``what``, the user's training file's name, or the dataset's name."""
    reader = reader_of(data, kind)
    if reader.what:
        return reader.what
    return Path(data.train).name if reader.file and data.train else data.name
