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


def _import_torch_before_numba_threads() -> None:
    """Import torch, when installed, before anything can start numba's threads.

    numba's thread pool (its "omp" layer) and torch each bring an OpenMP runtime.  When
    numba's pool starts first, torch's MKL elementwise kernels (exp, log) open their thread
    teams in the other runtime, nested inside torch's own: on 2 cores the hybrid's features
    ran 4-15x slower in a loop of exp and log, and over 20x slower in ``transform``
    (docs/hybrid.md).  With torch loaded first both use one runtime.  The price is torch's
    import time (about a second) for ``import cpgbn`` when torch is installed.
    """
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        return
    try:
        import torch  # noqa: F401
    except Exception:  # a broken install: the paths that need torch say so when used
        pass


_import_torch_before_numba_threads()

from .version import VERSION as __version__  # noqa: E402
from .errors import CPGBNInputError, DataFileError, ModelFormatError  # noqa: E402
from .model import CPGBN, PGBN  # noqa: E402
from .classifier import CPGBNClassifier  # noqa: E402
from .text.stream import TextFile  # noqa: E402

__all__ = ["CPGBN", "PGBN", "CPGBNClassifier", "TextFile", "CPGBNInputError", "DataFileError",
           "ModelFormatError", "__version__"]
