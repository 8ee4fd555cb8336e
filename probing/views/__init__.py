"""Views of representations: nearest neighbours (:mod:`.neighbors`) and UMAP maps (:mod:`.umap`).

The UMAP module is imported on demand (``from probing.views.umap import ...``) because umap-learn
and numba are slow to import.
"""

from probing.views.neighbors import (
    PAPER_TABLE4_SOURCES,
    cosine_topk,
    format_table,
    neighbors,
    occurrence_neighbors,
    sentence_text,
    table4,
    type_neighbors,
)

__all__ = [
    "PAPER_TABLE4_SOURCES",
    "cosine_topk",
    "format_table",
    "neighbors",
    "occurrence_neighbors",
    "sentence_text",
    "table4",
    "type_neighbors",
]
