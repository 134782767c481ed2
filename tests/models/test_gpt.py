"""GPT: no future leakage, cached == uncached decoding, one block against a hand-written
GPT-2 block and ``torch.nn.MultiheadAttention``, generation features, and parity with
``transformers.GPT2LMHeadModel`` both ways (a random tiny GPT-2 saved to a temp dir)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from attnkit.core.config import ConfigError
from attnkit.core.errors import RunError
from attnkit.models.base import AttnkitModel
from attnkit.models.gpt import GPT, GPTConfig, left_pad, positions_from_mask
from attnkit.models.hf_gpt2 import gpt_config_to_hf, load_hf_gpt2
from attnkit.nn.attention import MultiHeadAttention, causal_mask
from attnkit.nn.capture import capture
from attnkit.nn.generation import apply_repetition_penalty, sample
from attnkit.nn.layers import EncoderLayer
from gpt_support import V, tiny_gpt

ATOL = 1e-5


_tiny = tiny_gpt


def _lengths_mask(lengths: list[int], t: int, left: bool = False) -> torch.Tensor:
    pos = torch.arange(t)[None, :]
    n = torch.tensor(lengths)[:, None]
    return pos >= t - n if left else pos < n


# --------------------------------------------------------------------------------------
# causal masking
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("padded", [False, True])
def test_changing_a_later_token_never_changes_earlier_logits(padded: bool) -> None:
    model = _tiny()
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(0, V, (3, 12), generator=gen)
    mask = _lengths_mask([12, 9, 5], 12) if padded else None
    with torch.no_grad():
        base = model(ids, mask).logits
        assert base.shape == (3, 12, V)
        for t in range(11):
            changed = ids.clone()
            changed[:, t + 1] = (changed[:, t + 1] + 1 + t) % V
            out = model(changed, mask).logits
            torch.testing.assert_close(out[:, : t + 1], base[:, : t + 1], atol=1e-6, rtol=0)
            assert not torch.allclose(out[0, t + 1], base[0, t + 1])  # it does see itself


def test_no_gradient_flows_from_a_position_to_earlier_logits() -> None:
    model = _tiny()
    ids = torch.randint(0, V, (2, 8), generator=torch.Generator().manual_seed(2))
    emb = model.tok_embed(ids).detach().requires_grad_(True)

    def logits_from(e):
        x = e + model.pos.embedding(torch.arange(8))
        return model.lm_head(model.blocks(x, is_causal=True))

    jac = torch.autograd.functional.jacobian(lambda e: logits_from(e)[0, :, :3].sum(-1), emb)
    # jac[t, b, s, :]: d logit-sum at t of row 0 / d embedding of row b, position s
    for t in range(7):
        assert jac[t, 0, t + 1 :].abs().max() == 0
        assert jac[t, 0, : t + 1].abs().max() > 0
    assert jac[:, 1].abs().max() == 0  # rows never mix


def test_attention_weights_are_zero_on_future_and_padded_keys() -> None:
    model = _tiny()
    ids = torch.randint(0, V, (2, 6))
    mask = _lengths_mask([6, 4], 6)
    with torch.no_grad(), capture(model) as rec:
        out = model(ids, mask)
    weights = rec.attention_weights("causal_self")
    assert len(weights) == 2 and weights[0].shape == (2, 4, 6, 6)
    future = ~causal_mask(6)
    for w in weights:
        assert w[:, :, future].abs().max() == 0
        assert w[1, :, :4, 4:].abs().max() == 0
    assert out.last_hidden_state.shape == (2, 6, 32)


# --------------------------------------------------------------------------------------
# KV cache
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("left", [False, True])
def test_incremental_decoding_with_cache_matches_the_full_forward(left: bool) -> None:
    model = _tiny()
    t = 12
    ids = torch.randint(0, V, (3, t), generator=torch.Generator().manual_seed(3))
    mask = _lengths_mask([12, 10, 7], t, left=left)
    with torch.no_grad():
        full = model(ids, mask).logits
        cache = model.init_cache()
        pieces = [model(ids[:, :5], mask[:, :5], cache=cache).logits]  # prefill
        pieces.append(model(ids[:, 5:8], mask[:, :8], cache=cache).logits)  # a chunk
        for i in range(8, t):  # then one token at a time
            pieces.append(model(ids[:, i : i + 1], mask[:, : i + 1], cache=cache).logits)
    assert len(cache[0]) == t and cache[0].key.shape == (3, 4, t, 8)
    inc = torch.cat(pieces, 1)
    torch.testing.assert_close(inc[mask], full[mask], atol=ATOL, rtol=0)


def test_positions_follow_the_mask_on_either_padding_side() -> None:
    right = _lengths_mask([4, 2], 4)
    left = _lengths_mask([4, 2], 4, left=True)
    assert positions_from_mask(right).tolist() == [[0, 1, 2, 3], [0, 1, 0, 0]]
    assert positions_from_mask(left).tolist() == [[0, 1, 2, 3], [0, 0, 0, 1]]
    ids = torch.tensor([[1, 2, 3, 4], [5, 6, 0, 0]])
    moved, mask = left_pad(ids, right, pad_id=9)
    assert moved.tolist() == [[1, 2, 3, 4], [9, 9, 5, 6]] and mask.tolist() == left.tolist()
    # the same real tokens give the same logits at the same real positions
    model = _tiny()
    with torch.no_grad():
        a = model(ids, right).logits
        b = model(moved, mask).logits
    torch.testing.assert_close(a[right], b[mask], atol=ATOL, rtol=0)


def test_greedy_generation_is_the_same_with_and_without_cache() -> None:
    model = _tiny()
    prompt = torch.randint(0, V, (2, 5), generator=torch.Generator().manual_seed(4))
    cached = model.generate(prompt, max_new_tokens=10, temperature=0.0, use_cache=True)
    plain = model.generate(prompt, max_new_tokens=10, temperature=0.0, use_cache=False)
    assert cached.shape == (2, 10) and torch.equal(cached, plain)
    # each step's logits agree too (the stepper, as the search drives it)
    a, b = model.stepper(prompt, use_cache=True), model.stepper(prompt, use_cache=False)
    tokens = prompt[:, -1]
    with torch.no_grad():
        for _ in range(6):
            la, lb = a.step(tokens), b.step(tokens)
            torch.testing.assert_close(la, lb, atol=ATOL, rtol=0)
            tokens = la.argmax(-1)
    # sampling with one seed, beam search: the same tokens either way
    kw = dict(max_new_tokens=8, temperature=0.8, top_k=10, top_p=0.9)
    s1 = model.generate(prompt, generator=torch.Generator().manual_seed(5), **kw)
    s2 = model.generate(prompt, generator=torch.Generator().manual_seed(5), use_cache=False, **kw)
    assert torch.equal(s1, s2)
    b1 = model.generate(prompt, max_new_tokens=6, num_beams=3, eos_id=1)
    b2 = model.generate(prompt, max_new_tokens=6, num_beams=3, eos_id=1, use_cache=False)
    assert torch.equal(b1, b2) and b1.size(0) == 2


def test_generation_past_max_len_slides_the_window_the_same_way() -> None:
    model = _tiny(max_len=12)
    prompt = torch.randint(0, V, (2, 8), generator=torch.Generator().manual_seed(6))
    cached = model.generate(prompt, max_new_tokens=15, temperature=0.0)
    plain = model.generate(prompt, max_new_tokens=15, temperature=0.0, use_cache=False)
    assert cached.shape == (2, 15) and torch.equal(cached, plain)
    # a prompt longer than the context keeps its last max_len tokens
    long = torch.randint(0, V, (2, 20), generator=torch.Generator().manual_seed(12))
    a = model.generate(long, max_new_tokens=4, temperature=0.0)
    assert torch.equal(a, model.generate(long, 4, temperature=0.0, use_cache=False))
    assert torch.equal(a, model.generate(long[:, -12:], 4, temperature=0.0))
    # the last token follows from the last 12 tokens only, at positions 0..11
    seq = torch.cat([prompt, cached], 1)
    with torch.no_grad():
        window = model(seq[:, -13:-1]).logits[:, -1]
    assert torch.equal(window.argmax(-1), cached[:, -1])


def test_a_batch_of_prompts_of_different_lengths_generates_as_each_alone() -> None:
    model = _tiny()
    prompts = [[3, 7, 11, 2, 9, 4], [5, 1, 8], [12]]
    t = max(map(len, prompts))
    right = torch.tensor([p + [0] * (t - len(p)) for p in prompts])
    mask = _lengths_mask([len(p) for p in prompts], t)
    left = torch.tensor([[0] * (t - len(p)) + p for p in prompts])
    batched_r = model.generate(right, 8, attention_mask=mask, temperature=0.0)
    batched_l = model.generate(
        left, 8, attention_mask=_lengths_mask([6, 3, 1], t, left=True), temperature=0.0
    )
    assert torch.equal(batched_r, batched_l)
    for i, p in enumerate(prompts):
        alone = model.generate(torch.tensor(p), 8, temperature=0.0)
        assert torch.equal(alone[0], batched_r[i]), i


def _steps(stepper, tokens: torch.Tensor, n: int) -> list[torch.Tensor]:
    """n greedy steps from ``tokens`` (B,): each step's logits (B, V)."""
    out = []
    for _ in range(n):
        logits = stepper.step(tokens)
        out.append(logits)
        tokens = logits.argmax(-1)
    return out


@pytest.mark.parametrize("use_cache", [True, False])
@pytest.mark.parametrize("first_len", [1, 3, 9])  # the running rows' prompt: shorter, longer
def test_a_stepper_extended_between_tokens_steps_each_row_as_alone(
    use_cache: bool, first_len: int
) -> None:
    # continuous batching: prompts join a decoding after it has made some tokens; every row,
    # old and new, then gets the logits it gets alone (the window slides too: max_len 14)
    model = _tiny(max_len=14)
    gen = torch.Generator().manual_seed(21)
    running = torch.randint(0, V, (2, first_len), generator=gen)
    joining = [torch.randint(0, V, (1, n), generator=gen) for n in (1, 5)]
    with torch.no_grad():
        alone_run = _steps(model.stepper(running, use_cache=use_cache), running[:, -1], 9)
        alone_new = [_steps(model.stepper(p, use_cache=use_cache), p[:, -1], 9) for p in joining]
        batch = model.stepper(running, use_cache=use_cache)
        tokens = running[:, -1]
        for logits in _steps(batch, tokens, 3):  # 3 tokens made by the running rows
            tokens = logits.argmax(-1)
        for p in joining:  # two prompts of different lengths join, one after the other
            batch.extend(model.stepper(p, use_cache=use_cache))
        tokens = torch.cat([tokens, *(p[:, -1] for p in joining)])
        together = _steps(batch, tokens, 6)
        # the running rows leave: the batch is then as wide as the joined rows' history
        batch.reorder(torch.tensor([2, 3]))
        assert batch.ids.shape == (2, 5 - 1 + 6) and bool(batch.mask[:, 0].any())
        after = _steps(batch, together[-1][2:].argmax(-1), 3)
    for k, logits in enumerate(together):
        torch.testing.assert_close(logits[:2], alone_run[3 + k], atol=ATOL, rtol=0)
        torch.testing.assert_close(logits[2:3], alone_new[0][k], atol=ATOL, rtol=0)
        torch.testing.assert_close(logits[3:], alone_new[1][k], atol=ATOL, rtol=0)
    for k, logits in enumerate(after):
        torch.testing.assert_close(logits[:1], alone_new[0][6 + k], atol=ATOL, rtol=0)
        torch.testing.assert_close(logits[1:], alone_new[1][6 + k], atol=ATOL, rtol=0)


def test_extend_takes_a_stepper_of_the_same_model_only() -> None:
    a, b = _tiny(), _tiny()
    prompt = torch.tensor([[3, 4, 5]])
    with pytest.raises(ValueError, match="same model"):
        a.stepper(prompt).extend(b.stepper(prompt))
    with pytest.raises(ValueError, match="same model"):
        a.stepper(prompt).extend(a.stepper(prompt, use_cache=False))


# --------------------------------------------------------------------------------------
# generation features
# --------------------------------------------------------------------------------------
class FixedLogits:
    """A Stepper whose logits are the same every step (to test the search's own rules)."""

    def __init__(self, logits: torch.Tensor):
        self.logits = logits

    def step(self, tokens):
        return self.logits.expand(tokens.size(0), -1).clone()

    def reorder(self, index):
        pass


def test_repetition_penalty_is_hugging_face_s() -> None:
    logits = torch.tensor([[2.0, -1.0, 0.5, -3.0]])
    seen = torch.tensor([[True, True, False, False]])
    out = apply_repetition_penalty(logits, seen, 2.0)
    assert out.tolist() == [[1.0, -2.0, 0.5, -3.0]]
    # greedy with a penalty: a seen token is avoided once its logit falls below the next one
    step = FixedLogits(torch.tensor([[3.0, 2.0, 1.0, -1.0]]))
    start = torch.tensor([3, 3])
    plain = sample(step, start, 3, temperature=0.0)
    assert plain.tolist() == [[0, 0, 0]] * 2
    pen = sample(step, start, 3, temperature=0.0, repetition_penalty=2.0)
    assert pen.tolist() == [[0, 1, 0]] * 2  # 3/2 < 2, then 2/2 < 3/2 (not cumulative)
    # the context (a prompt) counts, its padding does not
    ctx = torch.tensor([[0, 1], [0, 1]])
    ctx_mask = torch.tensor([[True, True], [False, False]])
    out = sample(
        step, start, 1, temperature=0.0, repetition_penalty=4.0, context=ctx, context_mask=ctx_mask
    )
    assert out.tolist() == [[2], [0]]
    with pytest.raises(ValueError, match="repetition_penalty"):
        sample(step, start, 1, repetition_penalty=0.0)


def test_stop_sequences_finish_rows_and_pad_after_them() -> None:
    class Counting:
        """Row r emits r, r+1, r+2, ... (mod 6)."""

        def __init__(self):
            self.t = -1

        def step(self, tokens):
            self.t += 1
            nxt = (torch.arange(tokens.size(0)) + self.t) % 6
            return F.one_hot(nxt, 6).float() * 10

        def reorder(self, index):
            pass

    out = sample(Counting(), torch.tensor([0, 0]), 6, temperature=0.0, pad_id=9, stop=[[2, 3]])
    # row 0: 0 1 2 3 | row 1: 1 2 3 | stop kept, padded after, loop ends when all stopped
    assert out.tolist() == [[0, 1, 2, 3], [1, 2, 3, 9]]
    seen = []
    out = sample(
        Counting(),
        torch.tensor([0, 0]),
        6,
        eos_id=4,
        temperature=0.0,
        pad_id=9,
        stop=[[1, 2]],
        on_step=lambda t, toks, probs: seen.append(toks[:, -1].tolist()),
    )
    assert out.tolist() == [[0, 1, 2], [1, 2, 9]]  # EOS 4 never came: both stopped
    assert seen == [[0, 1], [1, 2], [2, 3]]  # streamed step by step


def test_generate_stops_at_eos_and_stop_sequences() -> None:
    model = _tiny()
    prompt = torch.randint(0, V, (1, 4), generator=torch.Generator().manual_seed(7))
    free = model.generate(prompt, 10, temperature=0.0)
    first = int(free[0, 2])
    cut = model.generate(prompt, 10, temperature=0.0, eos_id=first)
    k = free[0].tolist().index(first)
    assert cut[0, : k + 1].tolist() == free[0, : k + 1].tolist() and cut.size(1) == k + 1
    stop = free[0, 1:3].tolist()
    cut = model.generate(prompt, 10, temperature=0.0, stop=[stop])
    assert cut[0].tolist()[-2:] == stop and cut.size(1) <= 3
    with pytest.raises(ValueError, match="EOS"):
        model.generate(prompt, 4, num_beams=2)
    streamed = []
    model.generate(prompt, 3, temperature=0.0, on_step=lambda t, toks, p: streamed.append(t))
    assert streamed == [0, 1, 2]


# --------------------------------------------------------------------------------------
# one block against references
# --------------------------------------------------------------------------------------
def _reference_gpt2_block(layer: EncoderLayer, x: torch.Tensor, real: torch.Tensor):
    """GPT-2's block written out: x + c_proj(softmax(QK^T/sqrt(d) masked) V), then the MLP
    with the tanh GELU; every weight read from ``layer``."""
    attn, n = layer.self_attn, layer.self_attn.num_heads
    b, t, d = x.shape
    h = F.layer_norm(x, (d,), layer.add_norm1.norm.weight, layer.add_norm1.norm.bias, 1e-5)

    def heads(y):
        return y.view(b, t, n, d // n).transpose(1, 2)

    q, k, v = heads(attn.q_proj(h)), heads(attn.k_proj(h)), heads(attn.v_proj(h))
    scores = q @ k.transpose(-1, -2) / math.sqrt(d // n)
    allowed = torch.ones(t, t).tril().bool()[None, None] & real[:, None, None, :]
    scores = scores.masked_fill(~allowed, -1e9)
    ctx = (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, t, d)
    x = x + attn.out_proj(ctx)
    h = F.layer_norm(x, (d,), layer.add_norm2.norm.weight, layer.add_norm2.norm.bias, 1e-5)
    inner = layer.ffn.linear1(h)
    gelu = 0.5 * inner * (1 + torch.tanh(math.sqrt(2 / math.pi) * (inner + 0.044715 * inner**3)))
    return x + layer.ffn.linear2(gelu)


def test_one_block_matches_a_hand_written_gpt2_block() -> None:
    model = _tiny()
    layer = model.blocks.layers[0]
    x = torch.randn(3, 7, 32, generator=torch.Generator().manual_seed(8))
    real = _lengths_mask([7, 5, 2], 7)
    with torch.no_grad():
        ours = layer(x, key_padding_mask=real, is_causal=True)
        ref = _reference_gpt2_block(layer, x, real)
        torch.testing.assert_close(ours[real], ref[real], atol=ATOL, rtol=0)
        with capture(layer) as rec:  # the explicit-softmax path too
            ours_w = layer(x, key_padding_mask=real, is_causal=True)
        torch.testing.assert_close(ours_w[real], ref[real], atol=ATOL, rtol=0)
        assert rec.attention_weights()[0].shape == (3, 4, 7, 7)


def test_causal_attention_matches_torch_multihead_attention() -> None:
    torch.manual_seed(9)
    ours = MultiHeadAttention(32, 4).eval()
    theirs = torch.nn.MultiheadAttention(32, 4, batch_first=True).eval()
    with torch.no_grad():
        theirs.in_proj_weight.copy_(
            torch.cat([ours.q_proj.weight, ours.k_proj.weight, ours.v_proj.weight])
        )
        theirs.in_proj_bias.copy_(torch.cat([ours.q_proj.bias, ours.k_proj.bias, ours.v_proj.bias]))
        theirs.out_proj.weight.copy_(ours.out_proj.weight)
        theirs.out_proj.bias.copy_(ours.out_proj.bias)
        x = torch.randn(2, 9, 32)
        a, _ = ours(x, x, x, is_causal=True)
        future = torch.nn.Transformer.generate_square_subsequent_mask(9)  # -inf above diagonal
        b, wb = theirs(x, x, x, attn_mask=future, is_causal=True, need_weights=True)
        torch.testing.assert_close(a, b, atol=ATOL, rtol=0)
        _, wa = ours(x, x, x, is_causal=True, need_weights=True)
        torch.testing.assert_close(wa.mean(1), wb, atol=ATOL, rtol=0)


def test_encoder_without_the_new_arguments_is_unchanged() -> None:
    model = _tiny()
    x = torch.randn(2, 5, 32)
    with torch.no_grad():
        plain = model.blocks(x)
        explicit = model.blocks(x, key_padding_mask=None, attn_mask=None, is_causal=False,
                                cache=None)  # fmt: skip
        bidirectional_changes = model.blocks(x, is_causal=True)
    assert torch.equal(plain, explicit)
    assert not torch.allclose(plain[:, 0], bidirectional_changes[:, 0])


# --------------------------------------------------------------------------------------
# config
# --------------------------------------------------------------------------------------
def test_presets_and_gpt2_small_size() -> None:
    tiny = GPTConfig.from_dict({"preset": "tiny", "vocab_size": 65}, allow_derived=True)
    assert (tiny.num_layers, tiny.d_model, tiny.activation) == (2, 64, "gelu_tanh")
    mini = GPTConfig.from_dict({"preset": "mini", "vocab_size": 65, "d_model": 96})
    assert (mini.num_layers, mini.d_model, mini.num_heads) == (4, 96, 4)  # explicit wins
    small = GPTConfig.from_dict({"preset": "small", "vocab_size": 50257})
    assert (small.num_layers, small.d_model, small.d_ff, small.max_len) == (12, 768, 3072, 1024)
    recipe = GPTConfig.from_dict({"preset": "small"}, allow_derived=False)
    assert recipe.max_len == GPTConfig().max_len  # max_len stays the task's
    with torch.device("meta"):
        model = GPT(small)
    assert sum(p.numel() for p in model.parameters()) == 124_439_808  # GPT-2 small, tied
    assert small.layer_norm_eps == 1e-5 and small.tie_embeddings


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        ({"vocab_size": 10, "d_model": 30, "num_heads": 4}, "model.d_model"),
        ({"vocab_size": 10, "preset": "huge"}, "model.preset"),
        ({"vocab_size": 10, "d_modle": 32}, "'d_model'"),
        ({"vocab_size": 10, "activation": "swish"}, "model.activation"),
        ({"vocab_size": 10, "eos_id": 10}, "model.eos_id"),
        ({"vocab_size": 10, "pad_id": -1}, "model.pad_id"),
        ({"vocab_size": -1}, "model.vocab_size"),
        ({"vocab_size": 10, "dropout": 1.0}, "model.dropout"),
        ({"vocab_size": 10, "arch": "gpt3"}, "model.arch"),
    ],
)
def test_config_errors_name_the_key(raw: dict, key: str) -> None:
    with pytest.raises(ConfigError, match=key) as err:
        GPTConfig.from_dict(raw).validate()
    assert "\n" not in str(err.value)


def test_a_recipe_may_not_set_derived_sizes() -> None:
    with pytest.raises(ConfigError, match="model.vocab_size"):
        GPTConfig.from_dict({"vocab_size": 10}, allow_derived=False)


def test_positions_past_max_len_are_refused() -> None:
    model = _tiny(max_len=8)
    with pytest.raises(ValueError, match="max_len=8"):
        model(torch.zeros(1, 9, dtype=torch.long))


# --------------------------------------------------------------------------------------
# Hugging Face GPT-2
# --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def transformers():
    return pytest.importorskip("transformers")


def _random_hf(transformers, **changes):
    config = transformers.GPT2Config(
        n_layer=2, n_embd=64, n_head=4, n_positions=32, vocab_size=100, **changes
    )
    torch.manual_seed(10)
    model = transformers.GPT2LMHeadModel(config).eval()
    with torch.no_grad():  # every tensor random: biases and LayerNorms too
        for p in model.parameters():
            p.copy_(torch.randn_like(p) * 0.2 + (1.0 if p.dim() == 1 and p.numel() == 64 else 0))
    return model


def _padded_batch(t: int = 12) -> tuple[torch.Tensor, torch.Tensor]:
    ids = torch.randint(0, 100, (3, t), generator=torch.Generator().manual_seed(11))
    return ids, _lengths_mask([t, 9, 4], t)


def _hf_logits(model, ids, mask, position_ids=None):
    with torch.no_grad():
        return model(input_ids=ids, attention_mask=mask.long(), position_ids=position_ids).logits


@pytest.fixture(scope="module")
def hf_dir(transformers, tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("hf_gpt2")
    _random_hf(transformers).save_pretrained(directory)
    assert (directory / "model.safetensors").is_file()
    return directory


def test_loads_a_hugging_face_gpt2_with_matching_logits(transformers, hf_dir: Path) -> None:
    theirs = transformers.GPT2LMHeadModel.from_pretrained(hf_dir).eval()
    ours = GPT.from_pretrained(hf_dir)
    c = ours.config
    assert not ours.training and (c.num_layers, c.d_model, c.num_heads, c.d_ff) == (2, 64, 4, 256)
    assert (c.max_len, c.vocab_size, c.activation, c.eos_id) == (32, 100, "gelu_tanh", None)
    ids, mask = _padded_batch()  # right padding: positions 0.. in both
    with torch.no_grad():
        a = ours(ids, mask).logits
    b = _hf_logits(theirs, ids, mask)
    assert (a - b)[mask].abs().max() < ATOL
    # left padding: transformers needs the position ids that ours derives from the mask
    lids, lmask = left_pad(ids, mask, 0)
    with torch.no_grad():
        a = ours(lids, lmask).logits
    b = _hf_logits(theirs, lids, lmask, positions_from_mask(lmask))
    assert (a - b)[lmask].abs().max() < ATOL
    # greedy decoding of one prompt agrees with transformers' generate
    prompt = ids[:1, :5]
    mine = ours.generate(prompt, 8, temperature=0.0)
    with torch.no_grad():
        hf = theirs.generate(
            prompt,
            attention_mask=torch.ones_like(prompt),
            max_new_tokens=8,
            min_new_tokens=8,
            do_sample=False,
            pad_token_id=0,
            eos_token_id=None,
        )
    assert mine[0].tolist() == hf[0, 5:].tolist()


def test_a_pytorch_model_bin_loads_as_tensors_only(transformers, hf_dir: Path, tmp_path) -> None:
    theirs = transformers.GPT2LMHeadModel.from_pretrained(hf_dir).eval()
    (tmp_path / "config.json").write_text((hf_dir / "config.json").read_text())
    # GPT2Model's names (no transformer. prefix) and the old causal-mask buffers
    state = {k.removeprefix("transformer."): v for k, v in theirs.state_dict().items()}
    state["h.0.attn.bias"] = torch.ones(1, 1, 32, 32).tril().bool()
    state["h.0.attn.masked_bias"] = torch.tensor(-1e4)
    torch.save(state, tmp_path / "pytorch_model.bin")
    ours = load_hf_gpt2(tmp_path, GPTConfig)
    ids, mask = _padded_batch()
    with torch.no_grad():
        a = ours(ids, mask).logits
    assert (a - _hf_logits(theirs, ids, mask))[mask].abs().max() < ATOL

    torch.save({"x": NotATensor()}, tmp_path / "pytorch_model.bin")
    with pytest.raises(RunError, match="tensors only"):
        load_hf_gpt2(tmp_path, GPTConfig)


class NotATensor:
    """Pickled into a .bin: loading it would run code, so tensors-only loading refuses it."""


@pytest.mark.parametrize("tied", [True, False])
def test_saved_model_loads_in_transformers_without_missing_keys(
    transformers, tmp_path: Path, tied: bool
) -> None:
    ours = _tiny(tie_embeddings=tied, eos_id=3, activation="gelu_tanh")
    ours.save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())
    assert saved["model_type"] == "gpt2" and saved["n_embd"] == 32 and saved["n_inner"] == 64
    assert saved["tie_word_embeddings"] is tied and saved["eos_token_id"] == 3
    theirs, info = transformers.GPT2LMHeadModel.from_pretrained(tmp_path, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]
    assert not info["mismatched_keys"]
    theirs.eval()
    ids, mask = _padded_batch()
    ids = ids % V
    with torch.no_grad():
        a = ours(ids, mask).logits
    assert (a - _hf_logits(theirs, ids, mask))[mask].abs().max() < ATOL
    # and back: the same model
    again = GPT.from_pretrained(tmp_path)
    assert again.config == ours.config  # exact: attnkit's own config rides along
    with torch.no_grad():
        assert torch.equal(again(ids, mask).logits, a)


def test_attnkit_format_directory_still_loads(tmp_path: Path) -> None:
    ours = _tiny()
    AttnkitModel.save_pretrained(ours, tmp_path)  # attnkit's names, as a training run saves
    assert json.loads((tmp_path / "config.json").read_text())["model_type"] == "gpt"
    again = GPT.from_pretrained(tmp_path)
    ids = torch.randint(0, V, (1, 6))
    with torch.no_grad():
        assert torch.equal(again(ids).logits, ours(ids).logits)


def test_save_refuses_a_training_run(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"task": "lm"}))
    with pytest.raises(ConfigError, match="training run"):
        _tiny().save_pretrained(tmp_path)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("scale_attn_by_inverse_layer_idx", True),
        ("reorder_and_upcast_attn", True),
        ("add_cross_attention", True),
        ("scale_attn_weights", False),
        ("activation_function", "swish"),
        ("n_embd", "64"),
    ],
)
def test_unsupported_gpt2_settings_are_one_line_errors(
    hf_dir: Path, tmp_path: Path, key: str, value
) -> None:
    raw = json.loads((hf_dir / "config.json").read_text())
    raw[key] = value
    (tmp_path / "config.json").write_text(json.dumps(raw))
    with pytest.raises(ConfigError, match=key) as err:
        GPT.from_pretrained(tmp_path)
    assert "\n" not in str(err.value)


def test_checkpoint_that_misfits_its_config_is_a_one_line_error(
    hf_dir: Path, tmp_path: Path
) -> None:
    raw = json.loads((hf_dir / "config.json").read_text())
    raw["n_layer"] = 3
    (tmp_path / "config.json").write_text(json.dumps(raw))
    (tmp_path / "model.safetensors").write_bytes((hf_dir / "model.safetensors").read_bytes())
    # named before anything is loaded (the header's shapes; attnkit.models.sizes)
    with pytest.raises(
        RunError, match=r"n_layer is 3 but model.safetensors was saved with 2"
    ) as err:
        load_hf_gpt2(tmp_path, GPTConfig)
    assert "\n" not in str(err.value)


def test_config_round_trip_through_gpt2_names() -> None:
    config = GPTConfig(vocab_size=100, max_len=64, d_model=48, num_heads=3, d_ff=100, eos_id=5)
    hf = gpt_config_to_hf(config)
    assert hf["n_inner"] == 100 and hf["activation_function"] == "gelu_new"
    from attnkit.models.hf_gpt2 import gpt_config_from_hf

    assert gpt_config_from_hf(hf, GPTConfig) == config  # exact, from the attnkit_config key
    # a config.json from elsewhere (no attnkit key, or one that disagrees): GPT-2's keys
    plain = {k: v for k, v in hf.items() if k != "attnkit_config"}
    assert gpt_config_from_hf(plain, GPTConfig) == config.replace(
        attention_dropout=config.dropout, pad_id=0
    )
    edited = {**hf, "n_layer": 3}
    assert gpt_config_from_hf(edited, GPTConfig).num_layers == 3


def test_an_lm_run_exports_as_a_gpt2_directory(transformers, tiny_run_once, tmp_path) -> None:
    """``attnkit export --format hf`` asks the model what it can write: a GPT language model
    writes GPT-2 (its ``export_formats``); a model without a Hugging Face form is refused."""
    from attnkit.app.api import export
    from attnkit.runtime.run import RunDir
    from attnkit.tasks.run_config import RunConfig

    tokenizer = RunDir(tiny_run_once).load_tokenizer()
    cfg = RunConfig.from_dict(
        {
            "task": "lm",
            "data": {"name": "file", "train": "unused.txt", "max_len": 16},
            "model": {"arch": "gpt", "vocab_size": tokenizer.vocab_size, "max_len": 16,
                      "d_model": 16, "num_heads": 2, "d_ff": 32, "num_layers": 1},
        },
        source="run",
    )  # fmt: skip
    run = RunDir(tmp_path / "lm")
    run.create()
    run.write_config(cfg.to_dict())
    run.save_tokenizer(tokenizer)
    torch.manual_seed(0)
    ours = GPT(cfg.model).eval()
    run.save_weights(ours)
    out = export(run.path, tmp_path / "hf", fmt="hf")
    theirs = transformers.GPT2LMHeadModel.from_pretrained(out).eval()
    assert transformers.AutoTokenizer.from_pretrained(out).vocab_size == tokenizer.vocab_size
    ids, mask = torch.randint(0, tokenizer.vocab_size, (2, 7)), _lengths_mask([7, 4], 7)
    with torch.no_grad():
        a = ours(ids, mask).logits
    assert (a - _hf_logits(theirs, ids, mask))[mask].abs().max() < ATOL
    with pytest.raises(RunError, match="transformer model, which has no Hugging Face export"):
        export(tiny_run_once, tmp_path / "clf", fmt="hf")


# ----------------------------------------------------------------------------- bias: false
def test_bias_false_is_nanogpts_model_without_biases() -> None:
    """``model.bias: false`` (nanoGPT's ``bias=False``): no bias in any block's Linear or
    LayerNorm, the final LayerNorm included; the rest the same; it trains, its
    explainer records give beta as 0, and the GPT-2 export says in one line why not."""
    from attnkit.app.explain.parts import layer_norm_part
    from attnkit.models.hf_gpt2 import to_hf_state_dict

    with_bias, without = tiny_gpt(), tiny_gpt(bias=False)
    names = {n for n, _ in without.named_parameters()}
    assert not any(n.endswith(".bias") for n in names)
    assert names == {n for n, _ in with_bias.named_parameters() if not n.endswith(".bias")}
    assert GPTConfig.from_dict(without.config.to_dict()).bias is False
    ids = torch.randint(1, V, (2, 9), generator=torch.Generator().manual_seed(0))
    without.train()
    out = without(ids).logits
    F.cross_entropy(out.flatten(0, 1), ids.flatten()).backward()
    assert all(p.grad is not None for p in without.parameters())
    without.eval()
    with torch.no_grad(), capture(without) as rec:
        without(ids[:1])
    part = layer_norm_part(rec.of("add_norm")[0])
    assert part is not None and part["beta_norm"] == 0.0
    with pytest.raises(RunError, match="no biases"):
        to_hf_state_dict(without)
