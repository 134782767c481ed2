"""attnkit: attention and the Transformer family, from first principles to working tools."""

from attnkit.core.version import __version__

__all__ = ["__version__", "calibrate", "evaluate", "export", "load", "train"]


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
