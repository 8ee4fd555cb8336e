"""Analyses that are not probes: what a representation or a model does beyond a probe's accuracy on one layer.

Nothing is imported here: ``import probing.analysis`` loads no analysis (torch, scipy) until one of its
modules is.
"""
