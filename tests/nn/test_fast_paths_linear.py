"""attnkit.nn.fast_paths: oneDNN products give F.linear's numbers, forward and backward,
keep their packed weight only while the weight is unchanged, and step aside where they
must (few rows, autocast, ONNX export, the switch, quantization, copies)."""

from __future__ import annotations

import copy
import importlib
import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from attnkit.nn import fast_paths
from attnkit.nn.fast_paths import MIN_ROWS, Linear, linear

needs_onednn = pytest.mark.skipif(not fast_paths.enabled(), reason="no oneDNN on this machine")


@pytest.fixture(autouse=True)
def _onednn_with_gradients(monkeypatch):
    """The oneDNN products with gradients are tested on every x86 CPU, though they run by
    default only on AMD's (test_gradients_take_onednn_only_where_it_is_faster)."""
    monkeypatch.setattr(fast_paths, "_ON_WITH_GRAD", fast_paths._ON)


def _pair(in_f: int = 64, out_f: int = 96, bias: bool = True) -> tuple[Linear, nn.Linear]:
    torch.manual_seed(0)
    ours = Linear(in_f, out_f, bias=bias)
    ref = nn.Linear(in_f, out_f, bias=bias)
    ref.load_state_dict(ours.state_dict())
    return ours, ref


def test_linear_is_an_nn_linear_with_the_same_state_dict():
    ours, ref = _pair()
    assert isinstance(ours, nn.Linear)
    assert list(ours.state_dict()) == list(ref.state_dict()) == ["weight", "bias"]


@needs_onednn
@pytest.mark.parametrize("shape", [(MIN_ROWS, 64), (3, 40, 64), (2, 7, 11, 64)])
@pytest.mark.parametrize("bias", [True, False])
def test_forward_and_backward_match_torch(shape, bias):
    ours, ref = _pair(bias=bias)
    x = torch.randn(*shape)
    x1, x2 = x.clone().requires_grad_(), x.clone().requires_grad_()
    y1, y2 = ours(x1), ref(x2)
    assert y1.grad_fn is not None and "OneDnn" in type(y1.grad_fn).__name__  # it did run
    torch.testing.assert_close(y1, y2, rtol=1e-5, atol=1e-5)
    g = torch.randn_like(y1)
    y1.backward(g)
    y2.backward(g)
    torch.testing.assert_close(x1.grad, x2.grad, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ours.weight.grad, ref.weight.grad, rtol=1e-4, atol=1e-4)
    if bias:
        torch.testing.assert_close(ours.bias.grad, ref.bias.grad, rtol=1e-5, atol=1e-5)


@needs_onednn
@pytest.mark.parametrize("in_f,out_f", [(32, 128), (128, 32)])  # both transposition choices
def test_weight_gradient_for_wide_and_narrow_layers(in_f, out_f):
    ours, ref = _pair(in_f, out_f)
    x = torch.randn(50, in_f)
    ours(x).square().sum().backward()
    ref(x).square().sum().backward()
    torch.testing.assert_close(ours.weight.grad, ref.weight.grad, rtol=1e-4, atol=1e-4)


@needs_onednn
def test_frozen_weight_gets_no_gradient_and_input_still_does():
    ours, ref = _pair()
    ours.weight.requires_grad_(False)
    ours.bias.requires_grad_(False)
    x = torch.randn(32, 64, requires_grad=True)
    ours(x).sum().backward()
    assert ours.weight.grad is None
    xr = x.detach().clone().requires_grad_()
    ref(xr).sum().backward()
    torch.testing.assert_close(x.grad, xr.grad, rtol=1e-5, atol=1e-5)


@needs_onednn
def test_packed_weight_follows_weight_changes():
    ours, ref = _pair()
    x = torch.randn(40, 64)
    with torch.inference_mode():
        torch.testing.assert_close(ours(x), ref(x), rtol=1e-5, atol=1e-5)
    assert ours.__dict__["_onednn_weight"].value is not None  # packed and kept
    with torch.no_grad():  # in place: the version counter moves
        ours.weight.mul_(2)
        ref.weight.mul_(2)
    with torch.no_grad():
        torch.testing.assert_close(ours(x), ref(x), rtol=1e-5, atol=1e-5)
    ours.weight = nn.Parameter(torch.randn(96, 64))  # another tensor
    ref.weight = nn.Parameter(ours.weight.detach().clone())
    with torch.no_grad():
        torch.testing.assert_close(ours(x), ref(x), rtol=1e-5, atol=1e-5)
    ours.load_state_dict(ref.state_dict())  # copy_ into the parameter: version moves
    with torch.no_grad():
        torch.testing.assert_close(ours(x), ref(x), rtol=1e-5, atol=1e-5)


@needs_onednn
def test_packed_weight_is_dropped_by_a_training_step_of_a_fused_optimizer():
    ours, ref = _pair()
    x = torch.randn(40, 64)
    optimizers = [torch.optim.AdamW(m.parameters(), lr=0.1, fused=True) for m in (ours, ref)]
    for _ in range(2):  # evaluate, train a step, evaluate again (as the Trainer does)
        with torch.no_grad():
            torch.testing.assert_close(ours(x), ref(x), rtol=1e-5, atol=1e-5)
        for m, opt in zip((ours, ref), optimizers, strict=True):
            m(x).square().mean().backward()
            opt.step()  # in place, version counter unchanged
            opt.zero_grad()


@needs_onednn
def test_packed_weight_is_dropped_by_a_training_step_under_autocast():
    """bf16 training (autocast: F.linear's kernel) between two fp32 evaluations."""
    ours, ref = _pair()
    x = torch.randn(40, 64)
    optimizers = [torch.optim.AdamW(m.parameters(), lr=0.1, fused=True) for m in (ours, ref)]
    for _ in range(2):
        with torch.no_grad():
            torch.testing.assert_close(ours(x), ref(x), rtol=1e-5, atol=1e-5)
        for m, opt in zip((ours, ref), optimizers, strict=True):
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = m(x).float().square().mean()
            loss.backward()
            opt.step()
            opt.zero_grad()


@needs_onednn
def test_a_copy_starts_without_the_packed_weight():
    ours, _ = _pair()
    with torch.no_grad():
        ours(torch.randn(20, 64))
    twin = copy.deepcopy(ours)
    assert twin.__dict__["_onednn_weight"].value is None
    with torch.no_grad():
        twin.weight.zero_()
        twin.bias.zero_()
        assert twin(torch.randn(20, 64)).abs().max() == 0


@needs_onednn
def test_bfloat16_inference_matches():
    ours, ref = _pair()
    ours, ref = ours.to(torch.bfloat16), ref.to(torch.bfloat16)
    x = torch.randn(33, 64, dtype=torch.bfloat16)
    with torch.no_grad():
        torch.testing.assert_close(ours(x).float(), ref(x).float(), rtol=2e-2, atol=2e-2)


@needs_onednn
@pytest.mark.parametrize("bias", [True, False])
def test_autocast_inference_keeps_the_bf16_weight_and_gives_autocasts_numbers(bias):
    ours, ref = _pair(bias=bias)
    x = torch.randn(2, 20, 64)

    def both():
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            a, b = ours(x), ref(x)
        assert a.dtype == b.dtype == torch.bfloat16
        torch.testing.assert_close(a.float(), b.float(), rtol=0, atol=0)

    both()
    kept = ours.__dict__["_onednn_bf16"].value
    assert kept is not None and kept[4].dtype == torch.bfloat16  # cast once, kept
    both()
    assert ours.__dict__["_onednn_bf16"].value is kept  # (not cast again)
    with torch.no_grad():  # in place: cast again
        for m in (ours, ref):
            m.weight.mul_(-2)
            if bias:
                m.bias.add_(1)
    both()
    for m in (ours, ref):  # a training step under autocast drops it
        with torch.autocast("cpu", dtype=torch.bfloat16):
            m(x).float().square().mean().backward()
    assert ours.__dict__["_onednn_bf16"].value is None
    with torch.no_grad():
        for m in (ours, ref):
            m.weight.sub_(m.weight.grad)  # (no version change is needed: it was dropped)
    both()
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.float16):  # another dtype: autocast's
        torch.testing.assert_close(ours(x), ref(x), rtol=0, atol=0)


def _uses_onednn(module: nn.Module, x: torch.Tensor) -> bool:
    x = x.clone().requires_grad_()
    return "OneDnn" in type(module(x).grad_fn).__name__


@needs_onednn
def test_steps_aside_for_few_rows_autocast_and_export(monkeypatch):
    ours, _ = _pair()
    assert _uses_onednn(ours, torch.randn(MIN_ROWS, 64))
    assert not _uses_onednn(ours, torch.randn(MIN_ROWS - 1, 64))  # MKL's GEMV is faster
    with torch.autocast("cpu", dtype=torch.bfloat16):  # autocast's own bf16 product
        assert not _uses_onednn(ours, torch.randn(MIN_ROWS, 64))
    onnx = importlib.import_module("torch.onnx")
    monkeypatch.setattr(onnx, "is_in_onnx_export", lambda: True)  # inside an export
    assert not _uses_onednn(ours, torch.randn(MIN_ROWS, 64))


def test_attnkit_onednn_0_turns_it_off():
    code = (
        "import torch; from attnkit.nn import fast_paths as f; "
        "m = f.Linear(8, 8); x = torch.randn(32, 8, requires_grad=True); "
        "print(f.enabled(), type(m(x).grad_fn).__name__)"
    )
    env = {**os.environ, "ATTNKIT_ONEDNN": "0"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=120, check=True)  # fmt: skip
    assert done.stdout.split() == ["False", "AddmmBackward0"]


def test_function_form_matches_f_linear_without_owner():
    w, b = torch.randn(24, 16), torch.randn(24)
    x = torch.randn(5, 20, 16)
    with torch.no_grad():
        torch.testing.assert_close(linear(x, w, b), F.linear(x, w, b), rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(linear(x, w), F.linear(x, w), rtol=1e-5, atol=1e-5)


@needs_onednn
@pytest.mark.parametrize("name", ["relu", "gelu", "gelu_tanh"])
def test_linear_activation_fuses_without_gradients_and_matches(name):
    from attnkit.nn.layers import _ACTIVATIONS

    ours, ref = _pair()
    act = _ACTIVATIONS[name]
    x = torch.randn(2, 20, 64)
    with torch.no_grad():
        torch.testing.assert_close(fast_paths.linear_activation(ours, x, name, act),
                                   act(ref(x)), rtol=1e-5, atol=1e-5)  # fmt: skip
    calls = []
    spy = lambda t: calls.append(1) or act(t)  # noqa: E731
    with torch.no_grad():
        fast_paths.linear_activation(ours, x, name, spy)
    assert calls == []  # the kernel applied it
    xg = x.clone().requires_grad_()
    out = fast_paths.linear_activation(ours, xg, name, spy)  # with gradients: one by one
    assert calls == [1] and out.grad_fn is not None
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):  # bf16: fused too,
        fused = fast_paths.linear_activation(ours, x, name, spy)  # of the float32 sums
        assert calls == [1] and fused.dtype == torch.bfloat16
        torch.testing.assert_close(fused.float(), act(ref(x)).float(), rtol=0.02, atol=0.02)


@needs_onednn
def test_gradients_take_onednn_only_where_it_is_faster(monkeypatch):
    """Training products go through oneDNN on AMD CPUs only (MKL is the faster one with
    gradients on Intel's); without gradients oneDNN runs on both."""
    vendor = fast_paths.cpu_vendor()
    assert vendor  # (x86 Linux: /proc/cpuinfo's vendor_id)
    code = "from attnkit.nn import fast_paths as f; print(f._ON_WITH_GRAD)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=True)  # fmt: skip
    assert done.stdout.strip() == str(vendor in ("AuthenticAMD", "HygonGenuine"))
    ours, _ = _pair()
    x = torch.randn(MIN_ROWS, 64)
    monkeypatch.setattr(fast_paths, "_ON_WITH_GRAD", False)
    assert not _uses_onednn(ours, x)  # F.linear, forward and backward
    with torch.no_grad():
        torch.testing.assert_close(ours(x), F.linear(x, ours.weight, ours.bias))
        assert ours.__dict__["_onednn_weight"].value is not None  # (pre-packed: oneDNN's)
    monkeypatch.setattr(fast_paths, "_ON_WITH_GRAD", True)
    assert _uses_onednn(ours, x)
