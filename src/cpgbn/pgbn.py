"""The bag-of-words baseline :class:`PGBN`: CPGBN's sampler on word counts (filter width 1)."""

from __future__ import annotations

from .layers.cells import ConvData, ObservationModel, from_bag_of_words
from .model import CPGBN
from .params import PGBN_PARAMETERS, declare_init
from .text.corpus import Corpus

__all__ = ["PGBN"]


class PGBN(CPGBN):
    """Poisson Gamma Belief Network on bag-of-words counts (Zhou, Cong & Chen 2016): the baseline.

    The same sampler as :class:`CPGBN` with filter width 1 and each document a single column of
    word counts, so the bottom layer is Poisson factor analysis (``layers=(200,)``: PFA) and the
    stack above it is identical.  Word order is ignored.  ``token_count`` multiplies every word
    count (1 = the plain model; larger values temper the likelihood like CPGBN's pseudo-count).
    ``filter_width`` is ignored (always 1).  The minibatch ``inference`` modes apply as for
    CPGBN (the hybrid's encoder then reads each document's word counts).
    ``pooling_concentration`` is not offered: with one position per document the split is
    trivial and both pooling priors are the same model.
    """

    #: One column per document: nothing to pad, and nothing to split over positions.
    _fixed_settings = {"padding": 0, "pooling_concentration": None}

    __init__ = declare_init(PGBN_PARAMETERS)

    def _observation(self) -> ObservationModel:
        """Word counts, multiplied by ``token_count`` (an integer; the link is not offered)."""
        if self.token_count == "bernoulli-poisson":
            return ObservationModel.counts(1)
        return ObservationModel.counts(self.token_count)

    def _data(self, corpus: Corpus, filter_width: int, stacklevel: int = 3) -> ConvData:
        return from_bag_of_words(corpus.tokens, corpus.offsets, self._observation().scale)

    def _model_settings(self) -> dict:
        params = super()._model_settings()
        params["filter_width"] = 1
        return params
