"""Search over a trained model: beam search, greedy decoding, sampling (see ``search``)."""

from mtkit.decoding.search import Hypothesis, generate

__all__ = ["Hypothesis", "generate"]
