"""sCPGBN's supervised term (paper section 2.3), as the hybrid trainer is given it.

The hybrid inference (:mod:`cpgbn.inference.hybrid`) learns the unsupervised model; a
:class:`Supervision` given to :class:`~cpgbn.inference.hybrid.HybridTrainer` adds a softmax
on the encoder's features and the cross-entropy of each labelled document to its loss,
L = L_g + xi L_c per document, and says which steps are generative and how the best epoch is
chosen (:class:`Validation`).  The trainer asks the term (:meth:`Supervision.batch_term`,
:meth:`Supervision.generative`, :meth:`Supervision.config`) instead of holding its options:
without one, every step is Algorithm 1's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from ..errors import CPGBNInputError, check_positive
from .labels import LabelCodes

__all__ = ["Supervision", "Validation"]


@dataclass
class Validation:
    """Model selection inside a supervised fit: held-out training documents scored at the end
    of every epoch (:class:`Supervision`'s ``validation``).

    data : ConvData -- the held-out documents (never in a minibatch).
    codes : (N_val,) int64 -- their class indices.
    every : int -- steps between two scores (one epoch of the fitted part).
    patience : int or None -- stop after this many scores in a row without a better
        accuracy (None: run every epoch; the best is kept all the same).
    """

    data: object
    codes: np.ndarray
    every: int
    patience: int | None = None

    def __post_init__(self):
        if int(self.every) < 1:
            raise CPGBNInputError(f"validation every must be >= 1 step, got {self.every}")
        if self.patience is not None and int(self.patience) < 1:
            raise CPGBNInputError(f"patience must be >= 1 or None, got {self.patience}")

    def due(self, step: int) -> bool:
        """Whether step ``step`` (1-based) ends an epoch, to be scored."""
        return step % self.every == 0


@dataclass
class Supervision:
    """The supervised term of the hybrid's loss (module docstring).

    classes : sequence of labels -- the classes of the encoder's softmax (``classes[c]`` is
        class index c); a batch's labels (``None``, ``""`` or NaN: unlabelled) add ``xi``
        times the cross-entropy of each labelled document to its loss
        (:meth:`EncoderBackend.gradient`'s ``supervision``).
    xi : float -- the weight of the cross-entropy, L = L_g + xi L_c (per document).
    loss_scale : float -- the loss is multiplied by it before the gradient (the optimiser's
        step is the same for any scale but the clip, which reads the gradient's norm): the
        supervised fit passes 1 / (mean units of a document), so L_g enters per unit.
    elbo : bool -- False: the loss is xi L_c alone and the globals are never updated (the
        discriminative baseline: the encoder's network trained by cross-entropy alone).
    generative_every : int -- the generative half every this many steps (1: every step,
        Algorithm 1): on step i with i % generative_every == 0 the loss is L_g + xi L_c and
        the globals take their step; on the others the loss is xi L_c alone (the softmax's
        path, no draw) and the globals rest.
    elbo_reaches_filters : bool -- False: the ELBO's gradient stops at the first hidden layer,
        whose filters learn from the cross-entropy alone (the unsupervised model's filters
        always learn from the ELBO).
    validation : :class:`Validation` or None -- held-out documents scored at the end of every
        epoch; the best epoch's encoder and globals are returned, and the run stops when
        ``patience`` scores in a row bring no better one (one process only).
    """

    classes: Sequence
    xi: float = 1.0
    loss_scale: float = 1.0
    elbo: bool = True
    generative_every: int = 1
    elbo_reaches_filters: bool = True
    validation: Validation | None = None
    labels: LabelCodes = field(init=False, repr=False)

    def __post_init__(self):
        self.labels = LabelCodes(self.classes)
        # > 0, as the estimator's xi (per unit) is checked: one rule for both
        self.xi = check_positive("xi", self.xi)
        if not (np.isfinite(self.loss_scale) and self.loss_scale > 0):
            raise CPGBNInputError(f"loss_scale must be a positive number, got {self.loss_scale}")
        self.loss_scale = float(self.loss_scale)
        if int(self.generative_every) < 1:
            raise CPGBNInputError(f"generative_every must be >= 1, got {self.generative_every}")
        self.generative_every = int(self.generative_every)
        self.elbo = bool(self.elbo)
        self.elbo_reaches_filters = bool(self.elbo_reaches_filters)

    @property
    def n_classes(self) -> int:
        return len(self.labels.classes)

    def batch_term(self, labels, n_docs: int) -> tuple[np.ndarray, float]:
        """(class index per document, -1 where unlabelled; xi) of a batch's ``labels``: the
        encoder backend's ``supervision``."""
        return self.labels.codes(labels, n_docs), self.xi

    def generative(self, step: int) -> bool:
        """Whether step ``step`` (1-based) runs the generative half (L_g and the globals')."""
        return self.elbo and step % self.generative_every == 0

    def config(self) -> dict:
        """What a checkpoint's configuration records of the term: the classes and xi, then
        each option only where it differs from Algorithm 1's, so that the checkpoints of
        earlier runs keep their fingerprints."""
        v = self.validation
        return {"classes": [str(c) for c in self.labels.classes], "xi": self.xi,
                **({} if self.elbo else {"elbo": False}),
                **({} if self.loss_scale == 1.0 else {"loss_scale": self.loss_scale}),
                **({} if self.generative_every == 1
                   else {"generative_every": self.generative_every}),
                **({} if self.elbo_reaches_filters else {"elbo_reaches_filters": False}),
                **({} if v is None else
                   {"validation": [int(v.data.n_docs), int(v.every), v.patience]})}
