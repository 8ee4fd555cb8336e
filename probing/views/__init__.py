"""Views of representations: nearest neighbours (:mod:`.neighbors`), UMAP maps (:mod:`.umap`), sense
separation (:mod:`.senses`) and the interactive occurrence explorer (:func:`explore`, :mod:`.explorer`).

The UMAP module is imported on demand (``from probing.views.umap import ...``) because umap-learn
and numba are slow to import; ``probing.views.explore`` loads :mod:`.explorer` on first use.
"""

from typing import Any

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


def __getattr__(name: str) -> Any:
    if name == "explore":
        from probing.views.explorer import explore

        return explore
    raise AttributeError(f"module 'probing.views' has no attribute {name!r}")


__all__ = [
    "PAPER_TABLE4_SOURCES",
    "cosine_topk",
    "explore",
    "format_table",
    "neighbors",
    "occurrence_neighbors",
    "sentence_text",
    "table4",
    "type_neighbors",
]
