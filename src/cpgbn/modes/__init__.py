"""Inference modes: the ways ``CPGBN(inference=...)`` fits a model and infers new documents.

Each mode is a class (:class:`~cpgbn.modes.base.InferenceMode`) that owns its parameters'
checks, its fit, the fitted state it returns, its features for new documents and its memory
estimate:

* ``"gibbs"`` -- :class:`~cpgbn.modes.gibbs_mode.GibbsMode`, the exact full-batch sampler;
* ``"minibatch-gibbs"`` -- :class:`~cpgbn.modes.minibatch_modes.MinibatchGibbsMode`, local Gibbs
  sweeps + TLASGR-MCMC per minibatch;
* ``"hybrid"`` -- :class:`~cpgbn.modes.hybrid_mode.HybridMode`, the Weibull encoder + TLASGR-MCMC
  (paper Algorithm 1);
* ``"supervised"`` -- :class:`~cpgbn.modes.supervised.SupervisedMode`, the hybrid with sCPGBN's
  softmax (the classifier's mode, in :data:`REGISTERED_MODES` only: it needs labels).

:func:`mode_for` is the one place where the value of ``inference`` is looked up.  A new
algorithm is ``inference/X.py`` (the algorithm) + ``modes/X_mode.py`` (its mode class) + one
line in :data:`MODE_CLASSES`; a new backend is a folder of :mod:`cpgbn.backends` + one entry in
:mod:`cpgbn.backends.device_registry` (docs/architecture.md).
"""

from __future__ import annotations

from ..errors import CPGBNInputError
from .base import (FITTED_ATTRIBUTES, Checkpointing, FittedState, InferenceMode, Training,
                   features)
from .gibbs_mode import GibbsMode
from .hybrid_mode import HybridMode
from .minibatch_modes import LOCAL_BURN_IN, LOCAL_COLLECT, MinibatchGibbsMode, \
    steps_per_epoch
from .supervised import SupervisedMode

__all__ = ["MODES", "MODE_CLASSES", "REGISTERED_MODES", "LOSS_NAMES", "FITTED_ATTRIBUTES",
           "LOCAL_BURN_IN", "LOCAL_COLLECT", "Checkpointing", "FittedState", "InferenceMode",
           "Training", "features", "check_mode_parameters", "mode_class", "mode_for",
           "registered_mode", "steps_per_epoch"]

#: Every mode by its value of ``CPGBN(inference=...)``.
MODE_CLASSES: dict[str, type[InferenceMode]] = {
    mode.name: mode for mode in (GibbsMode, MinibatchGibbsMode, HybridMode)}

#: The values of ``CPGBN(inference=...)``.
MODES = tuple(MODE_CLASSES)

#: Every mode by its name (:attr:`InferenceMode.name`): those of :data:`MODE_CLASSES`, and
#: the classifier's ``"supervised"``, which ``CPGBNClassifier`` and ``cpgbn fit --supervised``
#: find here (it is not a value of ``CPGBN(inference=...)``: it needs labels).
REGISTERED_MODES: dict[str, type[InferenceMode]] = {
    **MODE_CLASSES, SupervisedMode.name: SupervisedMode}

#: What each minibatch mode's per-step loss (``CPGBN.loss_trace_``) is.
LOSS_NAMES = {name: mode.loss_name for name, mode in MODE_CLASSES.items()
              if mode.loss_name is not None}


def mode_class(name) -> type[InferenceMode]:
    """The mode class of ``CPGBN(inference=name)``: the one lookup of that value.  Besides the
    names of :data:`MODES`, ``inference`` may be a registered mode's class or a subclass of
    one (a variant of a mode, e.g. a study's Gibbs sampler on a backend of its own, or the
    classifier's :class:`~cpgbn.modes.supervised.SupervisedMode`)."""
    if isinstance(name, type) and issubclass(name, tuple(REGISTERED_MODES.values())):
        return name
    if not isinstance(name, str) or name not in MODE_CLASSES:
        raise CPGBNInputError(f"inference must be one of {', '.join(map(repr, MODES))} or an "
                              f"InferenceMode subclass, got {name!r}")
    return MODE_CLASSES[name]


def registered_mode(name: str) -> type[InferenceMode]:
    """The mode class registered as ``name`` (:data:`REGISTERED_MODES`)."""
    if name not in REGISTERED_MODES:
        raise CPGBNInputError(f"no inference mode is named {name!r}; the modes are "
                              + ", ".join(map(repr, REGISTERED_MODES)))
    return REGISTERED_MODES[name]


def check_mode_parameters(params: dict, mode: type[InferenceMode]) -> dict:
    """Every mode's own parameters of ``params`` checked and resolved (as scikit-learn
    validates the parameters a model does not use), those of the estimator's ``mode`` too
    (a subclass of a mode's class may add some), and ``inference``: ``mode``."""
    resolved = {"inference": mode}
    for each in dict.fromkeys([*MODE_CLASSES.values(), mode]):
        resolved.update(each.check_parameters(params))
    return resolved


def mode_for(settings: dict) -> InferenceMode:
    """The mode that ``settings["inference"]`` names, over ``settings`` (the estimator's
    validated parameters), after its compatibility checks."""
    mode = mode_class(settings["inference"])(settings)
    mode.check_compatible()
    return mode
