"""Dynamic int8 quantization for CPU inference, and its file format.

Every ``nn.Linear`` becomes PyTorch's dynamically quantized Linear: its weight is stored as
int8 with one scale per output row (symmetric, per channel: w ~ scale_o * q_o,i with q in
[-127, 127]), and at run time each input batch is quantized to uint8 with its own range,
the product runs in integer arithmetic (fbgemm; VNNI instructions where the CPU has them)
and the result is scaled back to float. Embeddings, LayerNorm and attention stay in float.
On a 2-core CPU with AVX512-VNNI the Korean BERT-mini fine-tuned on NSMC (4 layers x 256)
classifies the 50K test reviews 1.96-2.05x faster and one review 1.39-1.85x faster (two
runs), at 0.8763 accuracy instead of 0.8767 (benchmarks/quantize.py); its Linear weights take
4x less room (the whole file 19 instead of 28 MB: embeddings stay float). It runs on the CPU
only.

``attnkit export RUN --format attnkit --quantize int8 -o DIR`` writes DIR as a run that
``attnkit.load`` / ``predict`` / ``evaluate`` / ``serve`` read like any other: the run's
config.json (with ``"quantization": "int8-dynamic"``) and tokenizer, and
``model.int8.safetensors`` holding, for each Linear ``NAME``: ``NAME.weight.int8`` (int8,
(out, in)), ``NAME.weight.scales`` (float64, (out,)), ``NAME.weight.zero_points`` (int64,
(out,), zeros) and ``NAME.bias``; every other tensor of the model as it was. No pickle.
"""

from __future__ import annotations

import copy
import warnings

import torch
from torch import Tensor, nn
from torch.ao.nn.quantized.dynamic import Linear as QuantizedLinear
from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

from attnkit.core.checkpoint import misfit_summary, read_tensors, save_tensors
from attnkit.core.errors import RunError
from attnkit.models.saved import INT8_WEIGHTS
from attnkit.nn.fast_paths import Linear

__all__ = [
    "INT8_WEIGHTS",
    "QUANTIZATION",
    "int8_state",
    "load_int8",
    "quantize_int8",
    "save_int8",
]

QUANTIZATION = "int8-dynamic"  # config.json's "quantization" of an exported int8 run


def quantize_int8(model: nn.Module) -> nn.Module:
    """``model`` with every ``nn.Linear`` dynamically quantized to int8 (in place; returned).
    Eval mode, CPU only."""
    for p in model.parameters():
        if p.device.type != "cpu":
            raise RunError(f"int8 quantization runs on the CPU; this model is on {p.device}")
    model.eval()
    for module in model.modules():  # attnkit's oneDNN-backed Linear is quantized as nn.Linear
        if type(module) is Linear:
            module.__dict__.pop("_onednn_weight", None)
            module.__class__ = nn.Linear
    with warnings.catch_warnings():
        # torch.ao.quantization says it is deprecated in favour of torchao; it is what
        # PyTorch 2.13 (this project's pin) runs dynamic int8 Linear layers with
        warnings.filterwarnings("ignore", message=".*deprecated.*", category=DeprecationWarning)
        warnings.filterwarnings("ignore", message=".*quantize_per_channel.*", category=UserWarning)
        return quantize_dynamic(model, {nn.Linear: per_channel_dynamic_qconfig}, inplace=True)


def _quantized_linears(model: nn.Module) -> dict[str, QuantizedLinear]:
    return {n: m for n, m in model.named_modules() if isinstance(m, QuantizedLinear)}


def int8_state(model: nn.Module) -> dict[str, Tensor]:
    """The tensors of ``model`` (a float model, left unchanged) quantized to int8, under
    the names of this module's docstring."""
    float_state = model.state_dict()
    quantized = quantize_int8(copy.deepcopy(model).cpu())
    state: dict[str, Tensor] = {}
    linears = _quantized_linears(quantized)
    for name, m in linears.items():
        weight, bias = m._weight_bias()
        state[f"{name}.weight.int8"] = weight.int_repr()
        state[f"{name}.weight.scales"] = weight.q_per_channel_scales()
        state[f"{name}.weight.zero_points"] = weight.q_per_channel_zero_points()
        if bias is not None:
            state[f"{name}.bias"] = bias.detach()
    linear_keys = {f"{n}.{p}" for n in linears for p in ("weight", "bias")}
    for key, value in float_state.items():
        if key not in linear_keys:
            state[key] = value
    return state


def save_int8(model: nn.Module, path) -> None:
    save_tensors(int8_state(model), path)


def load_int8(model: nn.Module, path) -> nn.Module:
    """Quantize ``model``'s structure (in place) and load ``path``'s int8 weights into it.
    Tensors that do not fit the model are a one-line ``RunError`` saying which."""
    tensors = read_tensors(path)
    quantize_int8(model)
    linears = _quantized_linears(model)
    own = model.state_dict()
    expected = {k for k in own if not any(k.startswith(f"{n}.") for n in linears)}
    for name, m in linears.items():
        expected |= {f"{name}.weight.{p}" for p in ("int8", "scales", "zero_points")}
        if m._weight_bias()[1] is not None:
            expected.add(f"{name}.bias")
    missing = sorted(expected - tensors.keys())
    extra = sorted(tensors.keys() - expected)
    if missing or extra:
        raise RunError(
            f"{path} does not match the model's config: {misfit_summary(missing, extra, [])}"
        )
    for name, m in linears.items():
        ints = tensors[f"{name}.weight.int8"]
        if tuple(ints.shape) != (m.out_features, m.in_features):
            raise RunError(
                f"{path}: {name}.weight.int8 is {tuple(ints.shape)}, the model's is "
                f"{(m.out_features, m.in_features)}"
            )
        weight = torch._make_per_channel_quantized_tensor(
            ints, tensors[f"{name}.weight.scales"], tensors[f"{name}.weight.zero_points"], 0
        )
        m.set_weight_bias(weight, tensors.get(f"{name}.bias"))
    # the float tensors, copied in place (load_state_dict would ask the quantized Linears
    # for keys of theirs that this file stores differently)
    targets = dict(model.named_parameters(remove_duplicate=False))
    targets.update(model.named_buffers(remove_duplicate=False))
    with torch.no_grad():
        for key, target in targets.items():
            if key in tensors:
                if tensors[key].shape != target.shape:
                    raise RunError(
                        f"{path}: {key} is {tuple(tensors[key].shape)}, the model's is "
                        f"{tuple(target.shape)}"
                    )
                target.copy_(tensors[key])
    return model
