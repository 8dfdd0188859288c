"""The paper's datasets (MR, SUBJ, TREC, IMDB) in one place, in the style of ``sklearn.datasets``.

>>> from cpgbn.datasets import fetch, load_dataset
>>> fetch("trec")                        # doctest: +SKIP  (downloads into ~/.cache/cpgbn once)
>>> texts, labels = load_dataset("trec", "train")  # doctest: +SKIP

Modules, each importing only those above it:

* :mod:`~cpgbn.datasets.registry` -- names, files, classes, splits, the data and cache folders;
* :mod:`~cpgbn.datasets.sources` -- the original files' URLs and checksums, and their conversion;
* :mod:`~cpgbn.datasets.download` -- :func:`fetch`: download, verify, convert, write atomically;
* :mod:`~cpgbn.datasets.loaders` -- :func:`load_dataset`: the splits and cross-validation folds
  (it imports the download machinery only when a missing dataset is to be fetched).

The text pipeline that turns the loaded documents into a corpus is :mod:`cpgbn.text`.
"""
from cpgbn.datasets.download import fetch
from cpgbn.datasets.loaders import fold_indices, load_dataset, resolve_data_dir
from cpgbn.datasets.registry import DATASETS, cache_dir, dataset_info, has_dataset

__all__ = ["DATASETS", "cache_dir", "dataset_info", "fetch", "fold_indices", "has_dataset",
           "load_dataset", "resolve_data_dir"]
