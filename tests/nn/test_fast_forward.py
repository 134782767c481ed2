"""attnkit.nn.fast_forward: an Encoder's inference forward without module calls computes
what the modules compute (BERT's post-norm stack, GPT's pre-norm causal one, with and
without padding), runs where it applies, and steps aside where it would not."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import attnkit.nn.layers as layers_module
from attnkit.models.bert import BertConfig, BertModel
from attnkit.nn import fast_forward
from attnkit.nn.capture import capture
from attnkit.nn.layers import BlockConfig, Encoder, EncoderLayer
from gpt_support import V, tiny_gpt


def _moved(model: nn.Module, seed: int = 0) -> nn.Module:
    """``model`` with its biases and LayerNorms moved away from 0 / 1 (every one acts)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name or name.endswith("bias"):
                p.add_(torch.randn(p.shape, generator=g) * 0.1)
    return model.eval()


def _bert(**changes) -> BertModel:
    torch.manual_seed(0)
    sizes = dict(vocab_size=V, max_len=64, d_model=32, num_heads=4, d_ff=64, num_layers=2)
    return _moved(BertModel(BertConfig(**{**sizes, **changes})))  # type: ignore[return-value]


class _Counted:
    """Counts the calls of fast_forward.encoder_forward that computed (did not return None)
    and of EncoderLayer.forward; ``modules()`` runs a block on the module path only."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.plans = self.layers = 0
        self.off = False
        real_plan, real_layer = layers_module.encoder_forward, EncoderLayer.forward

        def plan(*args, **kwargs):
            out = None if self.off else real_plan(*args, **kwargs)
            self.plans += out is not None
            return out

        def layer(module, *args, **kwargs):
            self.layers += 1
            return real_layer(module, *args, **kwargs)

        monkeypatch.setattr(layers_module, "encoder_forward", plan)
        monkeypatch.setattr(EncoderLayer, "forward", layer)

    def modules(self, fn):
        self.off = True
        try:
            return fn()
        finally:
            self.off = False


@pytest.fixture
def counted(monkeypatch):
    return _Counted(monkeypatch)


def _ids(batch: int, seq: int, seed: int = 1) -> torch.Tensor:
    return torch.randint(1, V, (batch, seq), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("batch, seq", [(1, 5), (2, 12)])  # F.linear rows; oneDNN's (>= 16)
def test_bert_outputs_equal_the_module_path(counted, batch, seq) -> None:
    model = _bert()
    ids = _ids(batch, seq)
    mask = torch.ones(batch, seq, dtype=torch.long)
    mask[-1, seq - 2 :] = 0  # the last row ends in padding
    with torch.inference_mode():
        for m in (None, mask):
            fast = model(ids, m, output_hidden_states=True)
            assert counted.plans and not counted.layers  # the plan ran, no layer module
            slow = counted.modules(lambda m=m: model(ids, m, output_hidden_states=True))
            assert counted.layers == 2
            counted.plans = counted.layers = 0
            torch.testing.assert_close(
                fast.last_hidden_state, slow.last_hidden_state, atol=0, rtol=0
            )
            torch.testing.assert_close(fast.pooler_output, slow.pooler_output, atol=0, rtol=0)
            assert len(fast.hidden_states) == len(slow.hidden_states) == 3
            for a, b in zip(fast.hidden_states, slow.hidden_states, strict=True):
                torch.testing.assert_close(a, b, atol=0, rtol=0)


def test_an_empty_batch_of_positions_gives_what_the_modules_give(counted) -> None:
    stack = _bert().encoder
    x = torch.zeros(2, 0, 32)  # (B, T = 0, d): a text with no tokens left after a bound
    with torch.inference_mode():
        fast = stack(x)
        slow = counted.modules(lambda: stack(x))
    assert counted.plans == 1 and fast.shape == slow.shape == (2, 0, 32)


@pytest.mark.parametrize("bias", [True, False])  # False: no Linear / LayerNorm biases
def test_gpt_scores_a_sequence_as_the_module_path_does(counted, bias) -> None:
    model = tiny_gpt(bias=bias)  # pre-norm, causal, a final LayerNorm
    ids = _ids(2, 10)
    mask = torch.arange(10)[None, :] >= torch.tensor([[0], [3]])  # left padding
    with torch.no_grad():
        for m in (None, mask):
            fast = model(ids, m).logits
            assert counted.plans == 1 and counted.layers == 0
            slow = counted.modules(lambda m=m: model(ids, m).logits)
            counted.plans = counted.layers = 0
            torch.testing.assert_close(fast, slow, atol=0, rtol=0)


def test_a_prompt_read_into_an_empty_cache_is_the_module_paths(counted) -> None:
    # the prefill of generation: the plan fills each layer's cache; a cache that already
    # holds positions (a decoding step) is left to the modules
    model = tiny_gpt()
    ids = _ids(2, 9)
    mask = torch.arange(9)[None, :] >= torch.tensor([[0], [4]])  # left padding
    with torch.no_grad():
        for m in (None, mask):
            fast_cache, slow_cache = model.init_cache(), model.init_cache()
            fast = model(ids, m, cache=fast_cache).logits
            assert counted.plans == 1 and counted.layers == 0
            slow = counted.modules(lambda m=m, c=slow_cache: model(ids, m, cache=c).logits)
            torch.testing.assert_close(fast, slow, atol=0, rtol=0)
            for a, b in zip(fast_cache, slow_cache, strict=True):
                torch.testing.assert_close(a.key, b.key, atol=0, rtol=0)
                torch.testing.assert_close(a.value, b.value, atol=0, rtol=0)
            counted.plans = counted.layers = 0
            nxt = ids[:, :1]
            m2 = None if m is None else torch.cat([m, torch.ones(2, 1, dtype=torch.bool)], 1)
            model(nxt, m2, cache=fast_cache)  # one more position: the modules' work
            assert counted.plans == 0 and counted.layers == 2
            counted.plans = counted.layers = 0


def test_bf16_autocast_gives_the_module_paths_numbers(counted) -> None:
    model = _bert()
    ids = _ids(2, 12)
    with torch.inference_mode(), torch.autocast("cpu", torch.bfloat16):
        fast = model(ids).last_hidden_state
        slow = counted.modules(lambda: model(ids).last_hidden_state)
    assert counted.plans == 1
    torch.testing.assert_close(fast, slow, atol=0, rtol=0)


def test_the_module_path_runs_where_the_plan_would_not_compute_the_same(counted) -> None:
    model = _bert(dropout=0.1)
    ids = _ids(2, 12)

    def modules_ran(run) -> None:
        before = counted.layers
        run()
        assert counted.plans == 0 and counted.layers > before

    modules_ran(lambda: model(ids))  # gradients (the test runs with them on)
    with torch.no_grad():
        with capture():  # the explainer records the explicit formula
            modules_ran(lambda: model(ids))
        model.train()  # dropout on
        modules_ran(lambda: model(ids))
        model.eval()
        calls = []  # a forward hook on one sub-module runs
        handle = model.encoder.layers[1].ffn.register_forward_hook(lambda *a: calls.append(1))
        modules_ran(lambda: model(ids))
        handle.remove()
        assert calls == [1]
        x = model.embeddings(ids, torch.zeros_like(ids))
        modules_ran(lambda: torch.jit.trace(model.encoder, x, check_trace=False))  # tracing
        model(ids)  # and, with nothing in the way, the plan
        assert counted.plans == 1


def test_an_int8_model_keeps_its_quantized_layers() -> None:
    quantize = pytest.importorskip("attnkit.interop.quantize")
    model = _bert()
    ids = _ids(2, 12)
    q = quantize.quantize_int8(model)
    layer = q.encoder.layers[0]
    assert fast_forward.layer_weights(layer) is None  # not plain float Linear layers
    with torch.no_grad():
        torch.testing.assert_close(
            q(ids).last_hidden_state, model(ids).last_hidden_state, atol=0.1, rtol=0
        )


def test_changed_weights_are_the_ones_used() -> None:
    model = _bert()
    ids = _ids(2, 12)
    with torch.no_grad():
        before = model(ids).last_hidden_state
        attn = model.encoder.layers[0].self_attn
        attn.v_proj.weight.mul_(2.0)  # in place: the concatenated [W^Q W^K W^V] is rebuilt
        changed = model(ids).last_hidden_state
        attn.v_proj.weight.div_(2.0)
        torch.testing.assert_close(model(ids).last_hidden_state, before, atol=1e-6, rtol=0)
        assert (changed - before).abs().max() > 1e-3
        model.encoder.layers[1].ffn.linear2.weight = nn.Parameter(torch.zeros(32, 64))
        replaced = model(ids).last_hidden_state
        assert (replaced - before).abs().max() > 1e-3
        model.double()  # the same Parameters, new storage (and no version change)
        out = model(ids).last_hidden_state
        assert out.dtype == torch.float64
        torch.testing.assert_close(out.float(), replaced, atol=1e-4, rtol=0)


def test_a_stack_of_other_layers_runs_its_modules(counted) -> None:
    class Mine(EncoderLayer):
        pass

    stack = _moved(Encoder(BlockConfig(d_model=32, num_heads=4, d_ff=64, dropout=0.0), 2))
    stack.layers[1] = Mine(BlockConfig(d_model=32, num_heads=4, d_ff=64, dropout=0.0))
    x = torch.randn(2, 12, 32)
    with torch.no_grad():
        stack(x)
        mask = torch.ones(12, 12, dtype=torch.bool).tril()
        stack.layers[1] = EncoderLayer(BlockConfig(d_model=32, num_heads=4, d_ff=64, dropout=0.0))
        stack(x, attn_mask=mask)  # an attention mask: the modules
        assert counted.plans == 0
        stack(x)
    assert counted.plans == 1
