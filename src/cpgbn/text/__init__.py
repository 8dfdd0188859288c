"""Text pipeline: tokenizer, vocabulary, encoded corpus and file readers.

Raw text goes ``read_labeled``/``read_lines`` (or :func:`cpgbn.datasets.load_dataset`) ->
``tokenize`` -> ``Vocabulary`` -> ``Corpus``, the flat integer layout the samplers consume.
A :class:`TextFile` stays on disk and is read in blocks (:mod:`cpgbn.text.stream`).
"""
from cpgbn.text.corpus import Corpus
from cpgbn.text.readers import read_labeled, read_lines
from cpgbn.text.stream import TextFile
from cpgbn.text.tokenize import EMOTICONS, tokenize
from cpgbn.text.vocabulary import OOV_ID, OOV_TOKEN, Vocabulary

__all__ = [
    "EMOTICONS",
    "OOV_ID",
    "OOV_TOKEN",
    "Corpus",
    "TextFile",
    "Vocabulary",
    "read_labeled",
    "read_lines",
    "tokenize",
]
