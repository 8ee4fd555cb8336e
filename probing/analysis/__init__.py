"""Analyses of stored activations that are not probes: geometry and similarity of representations."""
