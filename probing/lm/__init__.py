"""ELMo as a language model: LM heads, per-word and per-sentence scores, minimal pairs (BLiMP), SyntaxGym
suites."""

from .agreement import agreement_items
from .head import AdaptiveHead, LmHead, NoHeadError, SoftmaxHead
from .pairs import minimal_pairs
from .score import load_model, score, sentence_scores
from .surprisal import surprisal, surprisal_figure
from .syntaxgym import evaluate_predictions, region_surprisal

__all__ = [
    "agreement_items",
    "evaluate_predictions",
    "region_surprisal",
    "surprisal",
    "surprisal_figure",
    "AdaptiveHead",
    "LmHead",
    "NoHeadError",
    "SoftmaxHead",
    "load_model",
    "minimal_pairs",
    "score",
    "sentence_scores",
]
