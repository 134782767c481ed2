"""What models return: one output type per model family (named as Hugging Face's).

Tasks, the ONNX export (``attnkit.interop.onnx``: the graph's outputs are fields of these)
and the server read the fields by name, whatever the arch:

    ClassifierOutput  classifier family (transformer, rnn, ngram, elmo, gpt-, bert-classifier)
    Seq2SeqOutput     seq2seq family (transformer, lstm)
    MaskedLMOutput    masked-LM pretraining: masked_lm (mlm, ELECTRA) and bert_pretraining
                      (bert-mlm, bert-pretraining)
    TaggerOutput      tagger family (bert-tagger)
    SpanOutput        qa family (bert-qa)

A model config's ``OUTPUT`` (or ``output_from``) names its family's type, so an ONNX export
run by onnxruntime returns what the model it came from returned.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor

__all__ = ["ClassifierOutput", "MaskedLMOutput", "Seq2SeqOutput", "SpanOutput", "TaggerOutput"]


@dataclass
class ClassifierOutput:
    """What every classifier's ``forward`` returns (the ``classifier`` family: transformer,
    rnn / lstm / gru, ngram, elmo, gpt-classifier and bert-classifier; like Hugging Face's
    ``SequenceClassifierOutput``).

    logits: (B, num_classes) class scores. (A model that attends, ``returns_attention``,
    records its attention weights through ``attnkit.nn.capture``.)
    """

    logits: Tensor


@dataclass
class Seq2SeqOutput:
    """What every sequence-to-sequence model's ``forward`` returns (like Hugging Face's
    ``Seq2SeqLMOutput``).

    logits: (B, T, tgt_vocab) next-token scores for each target position.
    cross_attention: (B, T, S) how much each output position attended to each source token:
        an LSTM with attention gives its weights alpha_t (computed anyway, step by step);
        None otherwise (a Transformer's cross-attention: ``attnkit.nn.capture``).
    """

    logits: Tensor
    cross_attention: Tensor | None = None


@dataclass
class MaskedLMOutput:
    """What every masked-LM pretraining model's ``forward`` returns (like Hugging Face's
    ``MaskedLMOutput`` / ``BertForPreTrainingOutput`` / ``ElectraForPreTrainingOutput``);
    each model fills in what its objective produces, the rest is None.

    logits: masked-LM scores, (N, vocab) at the N chosen positions (row-major order) or
        (B, T, vocab) at every position: TransformerMLM, bert-mlm, bert-pretraining.
    next_sentence_logits: (B, 2) "B follows A" (index 0) vs "B is random": bert-pretraining.
    replaced_logits: (B, T) ELECTRA's discriminator, > 0 means "this token was replaced".
    """

    logits: Tensor | None = None
    next_sentence_logits: Tensor | None = None
    replaced_logits: Tensor | None = None


@dataclass
class TaggerOutput:
    """What a token tagger's ``forward`` returns (like Hugging Face's
    ``TokenClassifierOutput``).

    logits: (B, T, num_classes) label scores at every position.
    """

    logits: Tensor


@dataclass
class SpanOutput:
    """What an extractive question-answering model's ``forward`` returns (like Hugging
    Face's ``QuestionAnsweringModelOutput``).

    start_logits, end_logits: (B, T) each, how likely the answer starts / ends there.
    """

    start_logits: Tensor
    end_logits: Tensor
