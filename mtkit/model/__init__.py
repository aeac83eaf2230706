"""The Transformer encoder-decoder."""
