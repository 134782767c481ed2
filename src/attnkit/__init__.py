"""attnkit: attention and the Transformer family, from first principles to working tools."""

from attnkit.core.version import __version__
from attnkit.runtime.callbacks import Callback  # (the standard library only: stays light)

__all__ = [
    "Callback",
    "__version__",
    "calibrate",
    "evaluate",
    "explain",
    "export",
    "load",
    "plot_attention",
    "plot_curves",
    "plot_positional_encoding",
    "recipe",
    "recipes",
    "train",
]


def load(run_dir, map_location="cpu", **kwargs):
    """Load a trained run for prediction: ``attnkit.load("runs/nsmc").predict([...])``;
    ``map_location="cuda"`` puts the model on the GPU (inputs follow it); ``precision``
    auto (bf16 where the device has it natively) | fp32 | bf16; ``quantize="int8"``."""
    from attnkit.app.api import load as _load

    return _load(run_dir, map_location=map_location, **kwargs)


def train(*args, **kwargs):
    """Train from a recipe; see :func:`attnkit.app.api.train`."""
    from attnkit.app.api import train as _train

    return _train(*args, **kwargs)


def recipes():
    """The bundled recipes, each with ``name``, ``task``, ``trains`` (one line), ``data``
    (what it reads), ``minutes`` (training measured on 2 CPU cores, None: not measured) and
    ``text`` (its YAML, to copy and edit); ``attnkit.train(name)`` trains one."""
    from attnkit.core.recipes import bundled_recipes

    return bundled_recipes()


def recipe(name):
    """The bundled recipe ``name`` (see :func:`recipes`); ``attnkit.recipe("nsmc-quick").text``
    is its YAML. An unknown name raises ``ConfigError`` naming the closest ones."""
    from attnkit.core.recipes import bundled_recipe

    return bundled_recipe(name)


def evaluate(*args, **kwargs):
    """Evaluate a run on a split; see :func:`attnkit.app.api.evaluate`."""
    from attnkit.app.api import evaluate as _evaluate

    return _evaluate(*args, **kwargs)


def calibrate(*args, **kwargs):
    """Fit a classify run's softmax temperature; see :func:`attnkit.app.api.calibrate`."""
    from attnkit.app.api import calibrate as _calibrate

    return _calibrate(*args, **kwargs)


def export(*args, **kwargs):
    """Write a run's model in Hugging Face's format; see :func:`attnkit.app.api.export`."""
    from attnkit.app.api import export as _export

    return _export(*args, **kwargs)


def explain(run, text, **options):
    """Step ``text`` through a run's forward pass: an ``Explanation`` that Jupyter shows as
    the offline explorer inline, with ``.save(path)`` and ``.trace`` (the data); see
    :func:`attnkit.app.explain.inline.explain`."""
    from attnkit.app.explain.inline import explain as _explain

    return _explain(run, text, **options)


def plot_attention(weights, x_labels, y_labels, path=None, **options):
    """Heatmap of one (q_len, k_len) attention matrix: a figure (inline in a notebook), or
    written to ``path``; see :func:`attnkit.runtime.viz.plot_attention`."""
    from attnkit.runtime.viz import plot_attention as _plot

    return _plot(weights, x_labels, y_labels, path, **options)


def plot_positional_encoding(max_len=50, d_model=128, path=None):
    """The sinusoidal positional encoding as a heatmap: a figure, or written to ``path``;
    see :func:`attnkit.runtime.viz.plot_positional_encoding`."""
    from attnkit.runtime.viz import plot_positional_encoding as _plot

    return _plot(max_len, d_model, path)


def plot_curves(run, path=None):
    """Learning curves of a run (its directory, ``attnkit.train``'s result, or metrics rows):
    a figure, or written to ``path``; see :func:`attnkit.runtime.viz.plot_curves`."""
    from attnkit.runtime.viz import plot_curves as _plot

    return _plot(run, path)
