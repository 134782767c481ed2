"""Models built from ``attnkit.attention`` and ``attnkit.layers``; they know only tensors."""

from attnkit.models.classifier import RNNClassifier, TransformerClassifier, build_classifier
from attnkit.models.ngram import NgramClassifier

__all__ = ["NgramClassifier", "RNNClassifier", "TransformerClassifier", "build_classifier"]
