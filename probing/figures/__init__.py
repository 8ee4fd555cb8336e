"""Figures: one style (:mod:`~probing.figures.style`: palette, matplotlib settings, the axes helper, the
percent rule, :func:`save`) and one module per family, each function returning a matplotlib ``Figure`` and
writing nothing:

* :mod:`~probing.figures.layers`: a task's score per layer (:func:`layer_scores`,
  :func:`layer_scores_panels`), :func:`selectivity`, :func:`overview`;
* :mod:`~probing.figures.mix`: :func:`mix_weights`; :mod:`~probing.figures.tags`: :func:`tag_gains`;
* :mod:`~probing.figures.splits`: :func:`directions` (forward/backward halves), :func:`oov_split`;
* :mod:`~probing.figures.mdl`: :func:`codelength_by_layer`, :func:`compression_by_layer`;
* :mod:`~probing.figures.curves`: :func:`learning_curves` (score against training sentences);
* :mod:`~probing.figures.similarity`: :func:`similarity_heatmap`;
* :mod:`~probing.figures.syntax`: :func:`metric_by_layer`, :func:`rank_sweep`, :func:`tree_comparison`;
* :mod:`~probing.figures.grammar`: :func:`minimal_pairs_figure` (BLiMP by phenomenon beside the authors'
  models), :func:`agreement_figure` (accuracy vs attractors).
* :mod:`~probing.figures.erasure`: :func:`present_vs_used` (a property's probe accuracy beside what erasing it
  costs other tasks and the LM; every built-in kind's figure hook draws it when a task has erased rows).

Seeds are averaged by :func:`probing.results.aggregate.aggregate` (re-exported here as :func:`aggregate`).
The input tables are described in :mod:`probing.figures.layers`.
"""

from probing.figures.curves import learning_curves
from probing.figures.erasure import present_vs_used
from probing.figures.grammar import agreement_figure, minimal_pairs_figure
from probing.figures.layers import (
    layer_scores,
    layer_scores_panels,
    overview,
    selectivity,
    split_layer,
)
from probing.figures.mdl import codelength_by_layer, compression_by_layer
from probing.figures.mix import UNSTABLE_MIX_RANGE, WEIGHT_COLUMNS, mix_weights
from probing.figures.similarity import similarity_heatmap, similarity_matrix
from probing.figures.splits import DIRECTION_COLOURS, directions, oov_split
from probing.figures.style import OKABE_ITO, group_names, save, slug
from probing.figures.syntax import metric_by_layer, rank_sweep, tree_comparison
from probing.figures.tags import PER_TAG_COLUMNS, tag_gains
from probing.results import RESULT_COLUMNS, layer_sort_key
from probing.results.aggregate import aggregate

__all__ = [
    "agreement_figure",
    "minimal_pairs_figure",
    "DIRECTION_COLOURS",
    "OKABE_ITO",
    "PER_TAG_COLUMNS",
    "RESULT_COLUMNS",
    "UNSTABLE_MIX_RANGE",
    "WEIGHT_COLUMNS",
    "aggregate",
    "codelength_by_layer",
    "compression_by_layer",
    "directions",
    "group_names",
    "layer_scores",
    "layer_scores_panels",
    "layer_sort_key",
    "learning_curves",
    "metric_by_layer",
    "mix_weights",
    "oov_split",
    "overview",
    "present_vs_used",
    "rank_sweep",
    "save",
    "selectivity",
    "similarity_heatmap",
    "similarity_matrix",
    "slug",
    "split_layer",
    "tag_gains",
    "tree_comparison",
]
