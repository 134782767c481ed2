"""attnkit: attention and the Transformer family, from first principles to working tools."""

__version__ = "0.2.0"  # 0.2: run format 2 (complete model configs), task registry


def load(run_dir, map_location="cpu", **kwargs):
    """Load a trained run for prediction: ``attnkit.load("runs/nsmc").predict([...])``;
    ``map_location="cuda"`` puts the model on the GPU (inputs follow it); ``precision``
    auto (bf16 where the device has it natively) | fp32 | bf16; ``quantize="int8"``."""
    from attnkit.api import load as _load

    return _load(run_dir, map_location=map_location, **kwargs)


def train(*args, **kwargs):
    """Train from a recipe; see :func:`attnkit.api.train`."""
    from attnkit.api import train as _train

    return _train(*args, **kwargs)


def evaluate(*args, **kwargs):
    """Evaluate a run on a split; see :func:`attnkit.api.evaluate`."""
    from attnkit.api import evaluate as _evaluate

    return _evaluate(*args, **kwargs)


def calibrate(*args, **kwargs):
    """Fit a classify run's softmax temperature; see :func:`attnkit.api.calibrate`."""
    from attnkit.api import calibrate as _calibrate

    return _calibrate(*args, **kwargs)


def export(*args, **kwargs):
    """Write a run's model in Hugging Face's format; see :func:`attnkit.api.export`."""
    from attnkit.api import export as _export

    return _export(*args, **kwargs)
