"""probing: look inside ELMo, layer by layer."""

__version__ = "0.1.0"
