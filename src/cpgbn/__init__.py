"""cpgbn: the Convolutional Poisson Gamma Belief Network (Wang, Chen, Xiao & Zhou, ICML 2019).

Word-order-aware deep topic models fitted by an exact Gibbs sampler: phrase-level kernels,
a hierarchy of phrase-level topics and document features for classifiers.

>>> from cpgbn import CPGBN
>>> model = CPGBN(layers=(200, 100, 50), vocab_size=8000, random_state=0).fit(texts)  # doctest: +SKIP
>>> features = model.transform(test_texts)                                            # doctest: +SKIP

The supervised model (sCPGBN), a classifier that is also a phrase-topic model:

>>> from cpgbn import CPGBNClassifier
>>> clf = CPGBNClassifier(layers=(200, 100, 50), random_state=0).fit(texts, labels)  # doctest: +SKIP
>>> clf.predict_proba(test_texts)                                                    # doctest: +SKIP
"""

# torch is not imported here: cpgbn imports it (when installed) just before numba's thread
# pool can start, which must not come first (cpgbn.backends.numba.openmp says why), so that
# ``import cpgbn`` and the CLI's commands that neither train nor encode stay fast.
from .version import VERSION as __version__
from .errors import CPGBNInputError, DataFileError, ModelFormatError
from .model import CPGBN
from .pgbn import PGBN
from .classifier import CPGBNClassifier
from .text.stream import TextFile

__all__ = ["CPGBN", "PGBN", "CPGBNClassifier", "TextFile", "CPGBNInputError", "DataFileError",
           "ModelFormatError", "__version__"]
