"""ELMo as a language model: LM heads, per-word and per-sentence scores, minimal pairs (BLiMP)."""

from .head import AdaptiveHead, LmHead, NoHeadError, SoftmaxHead
from .pairs import minimal_pairs
from .score import load_model, score, sentence_scores

__all__ = [
    "AdaptiveHead",
    "LmHead",
    "NoHeadError",
    "SoftmaxHead",
    "load_model",
    "minimal_pairs",
    "score",
    "sentence_scores",
]
