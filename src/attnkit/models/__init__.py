"""Models built from ``attnkit.attention`` and ``attnkit.layers``; they know only tensors."""

from attnkit.models.classifier import RNNClassifier, TransformerClassifier, build_classifier

__all__ = ["RNNClassifier", "TransformerClassifier", "build_classifier"]
