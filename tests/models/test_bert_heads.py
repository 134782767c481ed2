"""BERT's heads (attnkit.models.bert) read and write Hugging Face checkpoints of
transformers' BertFor* classes and compute the same logits."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from attnkit.models import (
    ClassifierOutput,
    MaskedLMOutput,
    SpanOutput,
    TaggerOutput,
    from_pretrained,
)
from attnkit.models.bert import (
    BertConfig,
    BertForMaskedLM,
    BertForPreTraining,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
    BertModel,
)

transformers = pytest.importorskip("transformers")

ATOL = 1e-5
SIZES = dict(vocab_size=99, max_len=64, d_model=32, num_heads=4, d_ff=37, num_layers=2)
HF_SIZES = dict(
    vocab_size=99,
    max_position_embeddings=64,
    hidden_size=32,
    num_attention_heads=4,
    intermediate_size=37,
    num_hidden_layers=2,
)
# (ours, Hugging Face's class name, num_labels)
HEADS = [
    (BertForMaskedLM, "BertForMaskedLM", None),
    (BertForPreTraining, "BertForPreTraining", None),
    (BertForSequenceClassification, "BertForSequenceClassification", 3),
    (BertForTokenClassification, "BertForTokenClassification", 5),
    (BertForQuestionAnswering, "BertForQuestionAnswering", None),
]
IDS = [h[1] for h in HEADS]


def _batch() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A padded batch: input_ids, attention_mask, token_type_ids (B=3, T=10)."""
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(1, 99, (3, 10), generator=g)
    mask = torch.ones_like(ids)
    mask[1, 7:] = 0
    mask[2, 4:] = 0
    ids[mask == 0] = 0
    types = torch.zeros_like(ids)
    types[0, 5:] = 1
    types[1, 4:7] = 1
    return ids, mask, types


# each head's output type and its fields in the order of transformers' names below
OUTPUTS = {
    ClassifierOutput: ("logits",),
    TaggerOutput: ("logits",),
    MaskedLMOutput: ("logits", "next_sentence_logits"),  # prediction_, seq_relationship_
    SpanOutput: ("start_logits", "end_logits"),
}


def _ours(model, batch) -> list[torch.Tensor]:
    with torch.no_grad():
        out = model(*batch)
    assert type(out) is model.OUTPUT  # each head returns its family's output type
    values = [getattr(out, name) for name in OUTPUTS[type(out)]]
    return [v for v in values if v is not None]


def _theirs(model, batch) -> list[torch.Tensor]:
    ids, mask, types = batch
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=mask, token_type_ids=types)
    names = ("logits", "prediction_logits", "seq_relationship_logits", "start_logits", "end_logits")
    return [out[k] for k in names if k in out]


def _assert_close(a: list[torch.Tensor], b: list[torch.Tensor], mask: torch.Tensor) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        assert x.shape == y.shape
        if x.dim() >= 2 and x.shape[1] == mask.shape[1]:  # per position: real tokens only
            x, y = x[mask.bool()], y[mask.bool()]
        assert (x - y).abs().max().item() < ATOL


def _hf_model(name: str, num_labels: int | None):
    extra = {} if num_labels is None else {"num_labels": num_labels}
    config = transformers.BertConfig(**HF_SIZES, **extra)
    torch.manual_seed(0)
    model = getattr(transformers, name)(config)
    with torch.no_grad():  # random (not zero) biases and LayerNorms, so every tensor counts
        for p in model.parameters():
            p.add_(0.02 * torch.randn_like(p))
    return model.eval()


@pytest.mark.parametrize(("ours", "name", "num_labels"), HEADS, ids=IDS)
def test_transformers_checkpoints_load_and_give_the_same_logits(
    tmp_path: Path, ours, name: str, num_labels: int | None
) -> None:
    theirs = _hf_model(name, num_labels)
    theirs.save_pretrained(tmp_path)
    model = from_pretrained(tmp_path)
    assert type(model) is ours and not model.training
    assert model.loading_info == {"missing_keys": [], "unexpected_keys": []}
    if num_labels is not None:
        assert model.config.num_classes == num_labels
    assert type(ours.from_pretrained(tmp_path)) is ours
    batch = _batch()
    _assert_close(_ours(model, batch), _theirs(theirs, batch), batch[1])


@pytest.mark.parametrize(("ours", "name", "num_labels"), HEADS, ids=IDS)
def test_saved_heads_load_in_transformers_without_missing_keys(
    tmp_path: Path, ours, name: str, num_labels: int | None
) -> None:
    torch.manual_seed(0)
    model = ours(BertConfig(**SIZES, num_classes=num_labels or 2)).eval()
    model.save_pretrained(tmp_path)
    cls = getattr(transformers, name)
    theirs, info = cls.from_pretrained(tmp_path, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    assert theirs.config.architectures == [name]
    if num_labels is not None:
        assert theirs.config.num_labels == num_labels
    batch = _batch()
    _assert_close(_ours(model, batch), _theirs(theirs.eval(), batch), batch[1])
    again = from_pretrained(tmp_path)
    assert type(again) is ours and again.config == model.config


def test_a_headless_checkpoint_gives_the_encoder_and_a_new_head(tmp_path: Path, caplog) -> None:
    torch.manual_seed(0)
    encoder = BertModel(BertConfig(**SIZES)).eval()
    encoder.save_pretrained(tmp_path)
    with caplog.at_level("WARNING", logger="attnkit"):
        model = BertForSequenceClassification.from_pretrained(tmp_path)
    assert model.loading_info["missing_keys"] == ["classifier.weight", "classifier.bias"]
    assert "newly initialized" in caplog.text
    assert model.config.arch == "bert-classifier"
    for k, v in encoder.state_dict().items():
        assert torch.equal(model.bert.state_dict()[k], v), k
    # a BertModel from a masked LM's checkpoint (which has no pooler): a new pooler
    BertForMaskedLM(BertConfig(**SIZES)).save_pretrained(tmp_path / "mlm")
    bare = BertModel.from_pretrained(tmp_path / "mlm")
    assert bare.loading_info["missing_keys"] == ["pooler.dense.weight", "pooler.dense.bias"]
    assert bare.loading_info["unexpected_keys"][0].startswith("cls.predictions.")


def test_mlm_positions_and_the_tied_decoder() -> None:
    torch.manual_seed(0)
    model = BertForMaskedLM(BertConfig(**SIZES)).eval()
    assert model.config.arch == "bert-mlm" and model.bert.pooler is None
    word = model.bert.embeddings.word.weight
    assert model.decoder_weight() is word
    assert model.decoder_weight().data_ptr() == word.data_ptr()
    ids, mask, types = _batch()
    positions = torch.rand(ids.shape, generator=torch.Generator().manual_seed(2)) < 0.3
    positions &= mask.bool()
    with torch.no_grad():
        full = model(ids, mask, types).logits
        chosen = model(ids, mask, types, positions=positions).logits
    assert full.shape == (3, 10, 99) and chosen.shape == (int(positions.sum()), 99)
    torch.testing.assert_close(chosen, full[positions], atol=1e-6, rtol=0)
    # pretraining: the same masked-LM rows and (B, 2) next-sentence logits
    pre = BertForPreTraining(BertConfig(**SIZES)).eval()
    with torch.no_grad():
        out = pre(ids, mask, types, positions=positions)
        mlm, nsp = out.logits, out.next_sentence_logits
        full_mlm = pre(ids, mask, types).logits
    assert nsp.shape == (3, 2)
    torch.testing.assert_close(mlm, full_mlm[positions], atol=1e-6, rtol=0)
