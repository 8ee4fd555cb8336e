"""Annotated corpora: the Sentence/Corpus contract, one streaming reader per format, and named datasets."""

from probing.corpora.base import Corpus, CorpusFormatError, Sentence
from probing.corpora.conllu import read_conllu
from probing.corpora.nltk_tagged import read_nltk_tagged
from probing.corpora.raganato import read_raganato
from probing.corpora.registry import DatasetNotFound, available, get, load
from probing.corpora.text import read_text

__all__ = [
    "Corpus",
    "CorpusFormatError",
    "DatasetNotFound",
    "Sentence",
    "available",
    "get",
    "load",
    "read_conllu",
    "read_nltk_tagged",
    "read_raganato",
    "read_text",
]
