"""The package version (``attnkit.__version__``); run directories record it."""

__version__ = "0.2.0"  # 0.2: run format 2 (complete model configs), task registry
