"""Layer 2: the building blocks every model shares -- attention (score functions, masks,
multi-head attention), layers (embeddings, positional encoding, FFN, Add & Norm,
encoder/decoder blocks), dropout and generation (the ``Stepper`` protocol)."""
