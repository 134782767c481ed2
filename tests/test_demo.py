"""make demo's building blocks: the toy run draws both figures and learns something."""

from attnkit.demo import main, train_reverser


def test_toy_demo_writes_figures(tmp_path, capsys):
    assert main(["--toy", "--steps", "30", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "positional_encoding.png").is_file()
    assert (tmp_path / "cross_attention.png").is_file()
    assert "token accuracy" in capsys.readouterr().out


def test_reverser_learns_beyond_chance():
    _, acc = train_reverser(steps=150, log_every=0)
    assert acc > 0.3  # chance is 0.1 (ten digits)
