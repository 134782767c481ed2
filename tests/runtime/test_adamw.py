"""attnkit.runtime.adamw.AdamW: torch's fused AdamW to the bit, without torch._dynamo."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
import torch
from torch import nn

from attnkit.runtime.adamw import AdamW


def _model(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(6, 16), nn.GELU(), nn.LayerNorm(16), nn.Linear(16, 3))


def _groups(model: nn.Module) -> list[dict]:
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    return [{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}]


def _batches(n: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    return [torch.randn(8, 6, generator=g) for _ in range(n)]


def _train(model: nn.Module, opt: torch.optim.Optimizer, xs: list[torch.Tensor]) -> None:
    lrs = [1e-2, 5e-3, 0.0]
    for i, x in enumerate(xs):
        for group in opt.param_groups:
            group["lr"] = lrs[i % len(lrs)]
        model(x).logsumexp(-1).mean().backward()
        if i == 2:  # a parameter without a gradient this step is left alone
            model[3].bias.grad = None
        opt.step()
        opt.zero_grad(set_to_none=True)


def _assert_same(a: torch.optim.Optimizer, b: torch.optim.Optimizer) -> None:
    sa, sb = a.state_dict(), b.state_dict()
    assert sa["param_groups"] == sb["param_groups"]
    assert sa["state"].keys() == sb["state"].keys()
    for k, state in sb["state"].items():
        for name, value in state.items():
            assert torch.equal(sa["state"][k][name], value), (k, name)


@pytest.mark.parametrize("fused", [True, False])
def test_same_updates_as_torch(fused: bool) -> None:
    ours, theirs = _model(), _model()
    kwargs = {"lr": 1e-2, "betas": (0.9, 0.99), "eps": 1e-8, "fused": fused, "foreach": not fused}
    a = AdamW(_groups(ours), **kwargs)
    b = torch.optim.AdamW(_groups(theirs), **kwargs)
    _train(ours, a, _batches(6))
    _train(theirs, b, _batches(6))
    for p, q in zip(ours.parameters(), theirs.parameters(), strict=True):
        assert torch.equal(p, q)
    _assert_same(a, b)


def test_resumes_from_a_state_dict_like_torch() -> None:
    """Three steps by torch's AdamW, its state dict loaded into ours, three more: the
    weights and state of six uninterrupted steps of torch's (checkpoints interchange)."""
    xs = _batches(6)
    whole, parts = _model(), _model()
    reference = torch.optim.AdamW(_groups(whole), lr=1e-2, fused=True)
    _train(whole, reference, xs)
    first = torch.optim.AdamW(_groups(parts), lr=1e-2, fused=True)
    _train(parts, first, xs[:3])
    resumed = AdamW(_groups(parts), lr=1e-2, fused=True)
    resumed.load_state_dict(first.state_dict())
    lrs = [1e-2, 5e-3, 0.0]
    for i, x in enumerate(xs[3:], start=3):
        for group in resumed.param_groups:
            group["lr"] = lrs[i % 3]
        parts(x).logsumexp(-1).mean().backward()
        resumed.step()
        resumed.zero_grad()
    for p, q in zip(parts.parameters(), whole.parameters(), strict=True):
        assert torch.equal(p, q)
    _assert_same(resumed, reference)


def test_unusual_settings_take_torchs_step() -> None:
    """AMSGrad and a closure: torch's own step (the same result as torch's AdamW)."""
    ours, theirs = _model(), _model()
    a = AdamW(ours.parameters(), lr=1e-2, amsgrad=True, fused=True)
    b = torch.optim.AdamW(theirs.parameters(), lr=1e-2, amsgrad=True, fused=True)
    _train(ours, a, _batches(3))
    _train(theirs, b, _batches(3))
    for p, q in zip(ours.parameters(), theirs.parameters(), strict=True):
        assert torch.equal(p, q)
    x = torch.randn(4, 6)

    def closure() -> torch.Tensor:
        a.zero_grad()
        loss = ours(x).sum()
        loss.backward()
        return loss

    assert torch.is_tensor(a.step(closure))


def test_a_training_run_never_imports_dynamo(tmp_path) -> None:
    """A whole ``attnkit.train`` (construction, steps, evaluation, checkpoints with the
    optimizer's state) in a fresh process leaves torch._dynamo unimported."""
    code = textwrap.dedent(
        f"""
        import json, sys
        import attnkit
        text = "To be, or not to be, that is the question. " * 40
        path = {str(tmp_path / "t.txt")!r}
        open(path, "w").write(text)
        recipe = {{
            "task": "lm",
            "data": {{"name": "file", "train": path, "val_fraction": 0.2, "max_len": 16}},
            "tokenizer": {{"kind": "char", "min_frequency": 1}},
            "model": {{"arch": "gpt", "num_layers": 1, "d_model": 16, "num_heads": 2,
                      "d_ff": 32, "dropout": 0.0}},
            "training": {{"max_steps": 4, "batch_size": 4, "eval_every": 2,
                         "progress": False, "bf16": False}},
        }}
        open(path + ".yaml", "w").write(json.dumps(recipe))  # JSON is YAML
        attnkit.train(path + ".yaml", out={str(tmp_path / "run")!r}, verbose=False)
        print(json.dumps("torch._dynamo" in sys.modules))
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) is False
    assert (tmp_path / "run" / "last").is_dir()
