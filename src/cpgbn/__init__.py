"""cpgbn: the Convolutional Poisson Gamma Belief Network (Wang, Chen, Xiao & Zhou, ICML 2019).

Word-order-aware deep topic models fitted by an exact Gibbs sampler: phrase-level kernels,
a hierarchy of phrase-level topics and document features for classifiers.

>>> from cpgbn import CPGBN
>>> model = CPGBN(layers=(200, 100, 50), vocab_size=8000, random_state=0).fit(texts)  # doctest: +SKIP
>>> features = model.transform(test_texts)                                            # doctest: +SKIP
"""
from .version import VERSION as __version__
from .errors import CPGBNInputError, DataFileError, ModelFormatError
from .model import CPGBN, PGBN

__all__ = ["CPGBN", "PGBN", "CPGBNInputError", "DataFileError", "ModelFormatError", "__version__"]
