"""The paper's datasets in one place, in the style of ``sklearn.datasets``.

>>> from cpgbn.datasets import fetch, load_dataset
>>> fetch("trec")                        # doctest: +SKIP  (downloads into ~/.cache/cpgbn once)
>>> texts, labels = load_dataset("trec", "train")  # doctest: +SKIP
"""
from cpgbn.text.datasets import DATASETS, cache_dir, dataset_info, load_dataset, resolve_data_dir
from cpgbn.text.download import fetch

__all__ = ["DATASETS", "cache_dir", "dataset_info", "fetch", "load_dataset", "resolve_data_dir"]
