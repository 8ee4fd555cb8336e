"""ELMo in PyTorch: load the official AllenNLP weights, or models pretrained by ``probing pretrain``."""

from .elmo import Elmo
from .model import ScalarMix
from .options import ElmoOptions, OptionsError
from .weights import WeightsError

__all__ = ["Elmo", "ElmoOptions", "OptionsError", "ScalarMix", "WeightsError"]
