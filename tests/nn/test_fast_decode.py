"""attnkit.nn.fast_decode: a decoding step without module calls computes what the modules
compute (GPT's stepper with and without its plan), and steps aside where it would not."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from attnkit.models.gpt import GPT, GPTStepper
from attnkit.nn.capture import capture
from attnkit.nn.fast_decode import DecodePlan
from attnkit.nn.layers import BlockConfig, Encoder
from gpt_support import V, tiny_gpt

_tiny = tiny_gpt


def _steppers(model: GPT, prompt: torch.Tensor, mask: torch.Tensor | None = None):
    fast = model.stepper(prompt, mask)
    slow = model.stepper(prompt, mask)
    slow.plan = None  # the module path
    assert fast.plan is not None
    return fast, slow


def _walk(fast: GPTStepper, slow: GPTStepper, start: torch.Tensor, steps: int, atol=0.0):
    """Drive both steppers with the same tokens; their logits must agree each step."""
    tokens = start
    calls = 0
    real = DecodePlan.step

    def counted(self, *a, **k):
        nonlocal calls
        calls += 1
        return real(self, *a, **k)

    DecodePlan.step = counted  # type: ignore[method-assign]
    try:
        with torch.no_grad():
            for _ in range(steps):
                a, b = fast.step(tokens), slow.step(tokens)
                torch.testing.assert_close(a, b, atol=atol, rtol=0)
                tokens = a.argmax(-1)
    finally:
        DecodePlan.step = real  # type: ignore[method-assign]
    return calls


@pytest.mark.parametrize("bias", [True, False])  # False: no Linear / LayerNorm biases
def test_steps_equal_the_module_path_with_and_without_padding(bias) -> None:
    model = _tiny(bias=bias)
    prompt = torch.randint(1, V, (3, 6), generator=torch.Generator().manual_seed(1))
    fast, slow = _steppers(model, prompt)
    assert _walk(fast, slow, prompt[:, -1], 10) == 10  # every step took the plan
    # left-padded rows of different lengths: the mask and each row's own positions
    mask = torch.arange(6)[None, :] >= torch.tensor([[0], [2], [5]])
    fast, slow = _steppers(model, prompt.masked_fill(~mask, 0), mask)
    assert not fast.all_real
    assert _walk(fast, slow, prompt[:, -1], 10) == 10


def test_the_window_slides_and_beams_reorder_the_same_way() -> None:
    model = _tiny(max_len=12)
    prompt = torch.randint(1, V, (2, 8), generator=torch.Generator().manual_seed(2))
    fast, slow = _steppers(model, prompt)
    _walk(fast, slow, prompt[:, -1], 15)  # past max_len: refills, then the plan again
    fast, slow = _steppers(model, prompt)
    with torch.no_grad():
        for step in (fast, slow):
            step.step(prompt[:, -1])
            step.reorder(torch.tensor([1, 1, 0]))
    _walk(fast, slow, torch.tensor([3, 4, 5]), 5)
    # and through the searches themselves
    plain = model.generate(prompt, max_new_tokens=6, num_beams=3, eos_id=1, use_cache=False)
    assert torch.equal(model.generate(prompt, max_new_tokens=6, num_beams=3, eos_id=1), plain)


def test_batches_of_many_rows_take_the_same_products_as_the_modules() -> None:
    # >= fast_paths.MIN_ROWS rows: oneDNN products (pre-packed weights, the GELU post-op)
    model = _tiny(seed=3)
    prompt = torch.randint(1, V, (20, 5), generator=torch.Generator().manual_seed(3))
    fast, slow = _steppers(model, prompt)
    assert _walk(fast, slow, prompt[:, -1], 6, atol=1e-5) == 6


def test_bfloat16_models_decode_as_their_modules_do() -> None:
    model = _tiny(seed=4).to(torch.bfloat16)
    prompt = torch.randint(1, V, (2, 5), generator=torch.Generator().manual_seed(4))
    fast, slow = _steppers(model, prompt)
    assert _walk(fast, slow, prompt[:, -1], 6) == 6


def test_the_plan_steps_aside_where_it_would_compute_something_else() -> None:
    model = _tiny()
    prompt = torch.randint(1, V, (1, 4), generator=torch.Generator().manual_seed(5))
    plan = model.stepper(prompt).plan
    assert plan is not None and plan.usable() is False  # gradients on (outside no_grad)
    with torch.no_grad():
        assert plan.usable()
        with capture():  # the capture records the explicit formula, layer by layer
            assert not plan.usable()
        model.train()  # dropout 0: train mode computes the same
        assert plan.usable()
        dropped = _tiny(dropout=0.1).train()
        assert dropped.stepper(prompt).plan is not None
        assert not dropped.stepper(prompt).plan.usable()  # type: ignore[union-attr]
        model.eval()
    # a hook anywhere in the model sees the module calls: no plan
    handle = model.blocks.layers[0].ffn.register_forward_hook(lambda *a: None)
    assert model.stepper(prompt).plan is None
    handle.remove()
    handle = nn.modules.module.register_module_forward_hook(lambda *a: None)
    try:
        with torch.no_grad():
            assert not plan.usable()
    finally:
        handle.remove()
    # post-norm stacks, int8 Linear layers: the module path
    post = Encoder(BlockConfig(d_model=8, num_heads=2, d_ff=16, dropout=0.0), 1)
    assert DecodePlan.build(post) is None
    from attnkit.interop.quantize import quantize_int8

    int8 = quantize_int8(copy.deepcopy(model))
    assert isinstance(int8, GPT) and int8.stepper(prompt).plan is None


@pytest.mark.parametrize("use_cache", [True, False])
def test_generation_under_capture_still_records_every_step(use_cache: bool) -> None:
    model = _tiny()
    prompt = torch.randint(1, V, (1, 4), generator=torch.Generator().manual_seed(6))
    with capture() as rec:
        out = model.generate(prompt, max_new_tokens=3, temperature=0.0, use_cache=use_cache)
    attention = rec.of("attention")
    forwards = 3 + use_cache  # (with the cache: the prompt's, then one per new token)
    assert out.shape == (1, 3) and len(attention) == 2 * forwards  # 2 layers each
