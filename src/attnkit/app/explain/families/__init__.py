"""One function per family: run the predictor's model on one text under
``attnkit.nn.capture`` and build the trace's inputs, embeddings, stacks and ``view``
(``attnkit.app.explain.schema``). Each returns a ``Part``; ``attnkit.app.explain.trace``
assembles and encodes it.

One module per group of families:

    common.py            Options, Part and the helpers every family uses (pad_input, PADDED)
    classifier_mlm.py    classifier, mlm (and mlm_pair: a bert-pretrain run's NSP)
    lm_bilm.py           lm (GPT), bilm (ELMo's biLM) and elmo_mix
    seq2seq_decoding.py  seq2seq (Transformer, LSTM), score_functions, teacher_forcing
    tag_qa.py            tag (NER), qa (extractive question answering)
"""

from __future__ import annotations

from attnkit.app.explain.families.classifier_mlm import NO_NSP_HEAD, classifier, mlm
from attnkit.app.explain.families.common import NOT_PADDED, PADDED, Options, Part
from attnkit.app.explain.families.lm_bilm import bilm, lm
from attnkit.app.explain.families.seq2seq_decoding import seq2seq
from attnkit.app.explain.families.tag_qa import qa, tag

__all__ = [
    "NOT_PADDED",
    "NO_NSP_HEAD",
    "PADDED",
    "Options",
    "Part",
    "bilm",
    "classifier",
    "lm",
    "mlm",
    "qa",
    "seq2seq",
    "tag",
]
