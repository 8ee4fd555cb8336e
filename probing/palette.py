"""The one colour palette: Okabe & Ito (2008), "Color Universal Design", whose colours stay distinguishable
under the common colour-vision deficiencies, by name; the figures (:mod:`probing.figures.style`) and the
views (:mod:`probing.views.umap`, the explorer) take their colours from it."""

from __future__ import annotations

OKABE_ITO = {
    "blue": "#0072B2",
    "vermillion": "#D55E00",
    "bluish green": "#009E73",
    "reddish purple": "#CC79A7",
    "orange": "#E69F00",
    "sky blue": "#56B4E9",
    "yellow": "#F0E442",
    "black": "#000000",
}
# the order the views give categories (senses, word forms, corpora) by frequency; black stays for the
# type-average star
CATEGORY_COLOURS = tuple(
    OKABE_ITO[c] for c in ("blue", "orange", "bluish green", "vermillion", "reddish purple", "sky blue", "yellow")
)
