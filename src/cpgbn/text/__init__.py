"""Text pipeline: tokenizer, vocabulary, encoded corpus, file readers and dataset loaders.

Raw text goes ``load_dataset``/``read_labeled`` -> ``tokenize`` -> ``Vocabulary`` ->
``Corpus``, the flat integer layout the samplers consume.
"""
from cpgbn.text.corpus import Corpus
from cpgbn.text.datasets import DATASETS, dataset_info, load_dataset, resolve_data_dir
from cpgbn.text.readers import read_labeled, read_lines
from cpgbn.text.tokenize import EMOTICONS, tokenize
from cpgbn.text.vocabulary import OOV_ID, OOV_TOKEN, Vocabulary

__all__ = [
    "DATASETS",
    "EMOTICONS",
    "OOV_ID",
    "OOV_TOKEN",
    "Corpus",
    "Vocabulary",
    "dataset_info",
    "load_dataset",
    "read_labeled",
    "read_lines",
    "resolve_data_dir",
    "tokenize",
]
