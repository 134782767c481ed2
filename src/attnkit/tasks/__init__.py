"""One small module per task: each maps a batch to a loss / predictions and names its metrics."""
