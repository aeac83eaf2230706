"""Tokenizers, corpus readers and the binarized dataset format."""
