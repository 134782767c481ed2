"""Layer 1 (bottom): errors, config loading, atomic file io, the output-path guard.

Nothing here imports another attnkit layer (``tools/check_layers.py`` checks it)."""
