"""ONNX export of a run's model, checked against onnxruntime, and running it back.

``attnkit export RUN --format onnx -o DIR`` writes DIR as a run without PyTorch weights:

- ``model.onnx`` (+ ``model.onnx.data``, the weights, when the exporter stores them apart):
  the model's forward pass, traced by ``torch.onnx.export(dynamo=True)`` with batch and
  sequence length left dynamic (1 <= T <= the recipe's ``data.max_len``);
- ``config.json`` (the run's, plus ``"onnx"``: input / output names, opset, and the largest
  difference between onnxruntime's outputs and PyTorch's on a check batch, measured at export
  time) and ``tokenizer.json``.

The graph's inputs are ``input_ids`` (B, T) int64, ``attention_mask`` (B, T) int64 (1 = real
token) and, for BERT models, ``token_type_ids`` (B, T) int64. Its outputs: ``logits``
(classify: (B, num_classes); tag: (B, T, num_labels)) or ``start_logits`` and ``end_logits``
(qa: (B, T) each). Encode texts with the run's tokenizer (``attnkit.load(DIR)`` does it all;
or ``tokenizers.Tokenizer.from_file("DIR/tokenizer.json")``, which holds the same vocabulary).

``attnkit.load(DIR)`` (and ``predict`` / ``evaluate`` / ``serve``) run the export with
onnxruntime through ``OnnxModel``: an ``nn.Module`` with no parameters whose ``forward`` takes
and returns what the exported model's did (its family's output type, ``attnkit.models.outputs``:
a classifier's ``ClassifierOutput``, a tagger's ``TaggerOutput``, QA's ``SpanOutput``; made by
``ModelConfig.output_from``), so the task's predictor works unchanged (attention weights,
and so ``explain``, are not in the graph). The graph's outputs are those types' fields of
the same names.

Needs ``pip install "attnkit[onnx]"`` (onnx, onnxscript for the exporter, onnxruntime).
"""

from __future__ import annotations

import logging
import math
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from attnkit.core.errors import InputError, RunError
from attnkit.core.extras import needs
from attnkit.models.saved import ONNX_FILE

__all__ = ["ONNX_FILE", "OnnxModel", "export_onnx", "onnx_signature", "trace_to_onnx"]

OPSET = 18


def onnx_signature(task: Any, model: nn.Module) -> tuple[list[str], list[str]]:
    """(input names, output names) of the ONNX graph of ``model`` trained by ``task`` (a
    ``TaskSpec``: its ``onnx_outputs``); RunError for models without an ONNX export (the
    model's ``export_formats`` say which have one)."""
    if not task.onnx_outputs or "onnx" not in getattr(model, "export_formats", ()):
        arch = getattr(getattr(model, "config", None), "arch", type(model).__name__)
        raise RunError(
            f"a {task.name} run with model.arch {arch} has no ONNX export (there is one for "
            "classify runs of transformer, bert-classifier and gpt-classifier, tag and qa runs)"
        )
    inputs = ["input_ids", "attention_mask"]
    if getattr(model, "takes_token_types", False):
        inputs.append("token_type_ids")
    return inputs, list(task.onnx_outputs)


def _require(module: str) -> Any:
    """The optional module ``module`` (the onnx extra; else a one-line MissingExtraError)."""
    with needs("onnx", "attnkit's ONNX support"):
        return __import__(module)


def _first_line(exc: BaseException) -> str:
    """The gist of an onnxruntime / protobuf error: its first non-empty line, shortened."""
    text = str(exc).strip()
    line = text.splitlines()[0] if text else type(exc).__name__
    return line if len(line) <= 200 else line[:200] + "..."


def output_tensors(output: Any, names: list[str]) -> tuple[Tensor, ...]:
    """A model's output (its family's output type) as the graph's output tensors: its
    fields ``names`` (e.g. ``logits``; ``start_logits``, ``end_logits``)."""
    return tuple(getattr(output, name) for name in names)


class _Graph(nn.Module):
    """What gets traced: int64 inputs in, the task's output tensors out."""

    def __init__(self, model: nn.Module, with_types: bool, outputs: list[str]) -> None:
        super().__init__()
        self.model, self.with_types, self.outputs = model, with_types, outputs

    def forward(
        self, input_ids: Tensor, attention_mask: Tensor, token_type_ids: Tensor | None = None
    ) -> tuple[Tensor, ...]:
        mask = attention_mask.bool()  # (B, T), True = real token
        types = {"token_type_ids": token_type_ids} if self.with_types else {}
        return output_tensors(self.model(input_ids, mask, **types), self.outputs)


def _check_batch(inputs: list[str], vocab_size: int, max_len: int) -> dict[str, Tensor]:
    """Two rows of random ids, the second padded after 60% of its length."""
    g = torch.Generator().manual_seed(0)
    t = min(max_len, 24)
    ids = torch.randint(5, max(6, vocab_size), (2, t), generator=g)
    mask = torch.ones(2, t, dtype=torch.long)
    mask[1, max(1, int(t * 0.6)) :] = 0
    batch = {"input_ids": ids * mask, "attention_mask": mask}
    if "token_type_ids" in inputs:
        types = torch.zeros(2, t, dtype=torch.long)
        types[:, t // 2 :] = 1
        batch["token_type_ids"] = types * mask
    return batch


def export_onnx(
    model: nn.Module, task: Any, path: str | Path, vocab_size: int, max_len: int
) -> dict[str, Any]:
    """Trace ``model`` (float, eval mode, CPU), trained by ``task`` (its ``TaskSpec``), to
    ONNX at ``path`` and check it against onnxruntime on a padded batch. Returns the
    ``"onnx"`` entry of the export's config.json: inputs, outputs, opset and
    ``max_abs_diff`` (onnxruntime vs PyTorch)."""
    inputs, outputs = onnx_signature(task, model)
    model = model.float().eval().to("cpu")
    graph = _Graph(model, "token_type_ids" in inputs, outputs).eval()
    example = _check_batch(inputs, vocab_size, max_len)
    diff = trace_to_onnx(graph, example, outputs, path, max_len)
    return {"inputs": inputs, "outputs": outputs, "opset": OPSET, "max_abs_diff": diff}


def trace_to_onnx(
    graph: nn.Module, example: dict[str, Tensor], outputs: list[str], path: str | Path, max_len: int
) -> float:
    """Write ``graph`` (called with ``example``'s (B, T) tensors, in order, as positional
    arguments; it returns a tuple of the ``outputs`` tensors) to ONNX at ``path`` with
    dynamic batch and length (<= ``max_len``); returns the largest absolute difference
    between onnxruntime's outputs and ``graph``'s on ``example``."""
    _require("onnxscript")
    inputs = list(example)
    batch, seq = torch.export.Dim("batch"), torch.export.Dim("seq", max=max_len)
    dims = {0: batch, 1: seq}
    quiet = logging.getLogger("torch.onnx._internal.exporter._registration")
    level = quiet.level  # it warns that torchvision's operators are not there
    quiet.setLevel(logging.ERROR)
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the exporter's deprecation and shape notes
            torch.onnx.export(
                graph,
                tuple(example.values()),
                str(path),
                input_names=inputs,
                output_names=outputs,
                dynamic_shapes=tuple(dims for _ in inputs),
                opset_version=OPSET,
                dynamo=True,
                verbose=False,
            )
            want = graph(*example.values())
    finally:
        quiet.setLevel(level)
    got = OnnxModel(path, inputs, outputs).run(example)
    return max(float((w - g).abs().max()) for w, g in zip(want, got, strict=True))


class OnnxModel(nn.Module):
    """An exported model run by onnxruntime, called as the model it came from:
    ``forward(input_ids, attention_mask, token_type_ids=None)`` with (B, T) tensors returns
    what that model returned, as CPU float tensors: ``wrap({output name: tensor})``, the
    model config's ``output_from`` (its family's output type: a classifier's
    ``ClassifierOutput``, a tagger's ``TaggerOutput``, QA's ``SpanOutput``); without
    ``wrap`` the dict itself."""

    explains_by_contributions = False  # what the classify predictor asks before explaining
    returns_attention = False

    def __init__(
        self,
        path: str | Path,
        inputs: list[str],
        outputs: list[str],
        threads: int = 0,
        wrap: Callable[[dict[str, Tensor]], Any] | None = None,
    ) -> None:
        super().__init__()
        ort = _require("onnxruntime")
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or torch.get_num_threads()
        # onnxruntime's threads otherwise spin for a while after each run, taking the cores
        # from whatever PyTorch (or anything else in the process) does next
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        try:
            self.session = ort.InferenceSession(
                str(path), options, providers=["CPUExecutionProvider"]
            )
            graph = _require("onnx").load(str(path), load_external_data=False)
        except RunError:
            raise
        except Exception as exc:  # onnxruntime's and protobuf's own errors: many kinds
            raise RunError(f"{path} is damaged or not an ONNX model ({_first_line(exc)})") from None
        names = {node.name for node in self.session.get_inputs()}
        outs = {node.name for node in self.session.get_outputs()}
        if not set(inputs) <= names or not set(outputs) <= outs:
            raise RunError(
                f"{path} is not the model its config.json describes (inputs {sorted(names)}, "
                f"outputs {sorted(outs)})"
            )
        self.inputs, self.outputs = list(inputs), list(outputs)
        self.wrap = wrap
        self.takes_token_types = "token_type_ids" in self.inputs
        self.path = Path(path)
        # numbers stored in the graph: the weights (+ constant tables such as positions)
        self.num_parameters = sum(math.prod(t.dims) for t in graph.graph.initializer)

    def run(self, batch: dict[str, Tensor]) -> list[Tensor]:
        """The graph's outputs for a batch of (B, T) tensors named as its inputs."""
        feed = {}
        for name in self.inputs:
            value = batch.get(name)
            if value is None:  # segment ids default to 0 (one sentence)
                value = torch.zeros_like(batch["input_ids"])
            feed[name] = value.detach().to("cpu", torch.long).numpy()
        return [torch.from_numpy(x) for x in self.session.run(self.outputs, feed)]

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
    ) -> Any:
        if attention_mask is None:
            raise InputError("an ONNX model needs the attention mask")
        batch = {"input_ids": input_ids, "attention_mask": attention_mask}
        if token_type_ids is not None:
            batch["token_type_ids"] = token_type_ids
        out = dict(zip(self.outputs, self.run(batch), strict=True))
        return out if self.wrap is None else self.wrap(out)
