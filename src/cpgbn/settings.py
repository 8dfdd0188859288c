"""The estimators' parameters checked and resolved, each value once.

:class:`~cpgbn.model.CPGBN` (and PGBN and the classifier, through it) validates its
parameters here when a fit or transform starts, as scikit-learn estimators do: the model's
(:func:`model_settings`) and the run's (:func:`run_settings`, with every inference mode's own
parameters checked by :func:`cpgbn.modes.check_mode_parameters`).  Each function reads the
estimator's settings by name (its parameters, and the settings it fixes, which ``get_params``
does not list: :meth:`CPGBN._parameters <cpgbn.model.CPGBN._parameters>`) and returns plain
values; a message names the parameter and the value it was given.
"""

from __future__ import annotations

from collections.abc import Sequence
from numbers import Integral

from .errors import CPGBNInputError, check_int as _check_int, check_positive as _check_positive
from .inference.state import Hyperparameters
from .modes import check_mode_parameters

__all__ = ["model_settings", "run_settings"]


def model_settings(params: dict, observation) -> dict:
    """The model's settings in ``params`` (an estimator's, by name) checked (messages name the
    parameter) and resolved: layers, filter_width, padding, vocab_size, the observation model
    (``observation``: the estimator's, ``token_count`` resolved) and the
    :class:`~cpgbn.inference.state.Hyperparameters`."""
    layers = params["layers"]
    if isinstance(layers, Integral) and not isinstance(layers, bool):
        layers = (layers,)
    if not isinstance(layers, Sequence) or len(layers) == 0:
        raise CPGBNInputError(f"layers must be a non-empty sequence of integers, got {layers!r}")
    layers = tuple(_check_int("layer size", k, 1) for k in layers)
    eta = params["eta"]
    etas = tuple(eta) if isinstance(eta, Sequence) else (eta,) * len(layers)
    if len(etas) != len(layers):
        raise CPGBNInputError(f"eta must be one number or one per layer ({len(layers)}), got {eta!r}")
    etas = tuple(_check_positive("eta", e) for e in etas)
    filter_width = _check_int("filter_width", params["filter_width"], 1)
    padding = _check_int("padding", params["padding"], 0)
    if padding > filter_width - 1:
        raise CPGBNInputError(f"padding must be <= filter_width - 1 = {filter_width - 1} (a "
                              f"kernel must cover at least one word), got {padding}")
    beta = params["pooling_concentration"]
    return dict(
        layers=layers, filter_width=filter_width, padding=padding,
        vocab_size=_check_int("vocab_size", params["vocab_size"], 2), observation=observation,
        hyper=Hyperparameters(eta=etas, e0=_check_positive("e0", params["e0"]),
                              f0=_check_positive("f0", params["f0"]),
                              sample_r=bool(params["sample_r"]),
                              pooling_concentration=(
                                  None if beta is None
                                  else _check_positive("pooling_concentration", beta))))


#: The most sweeps of a ``transform`` chain by default (``transform_iter=None``): on
#: validation splits of the training documents of TREC, SUBJ, MR and 2,500 IMDB reviews
#: (K_1 = 200, seeds 0-2), the features of 50 sweeps (37 of burn-in) classified as those of
#: the fit's 200 did, within the chain's own seed-to-seed spread, at a quarter of the cost
#: (``python -m studies.transform_sweeps.transform_sweeps``, results/transform_sweeps.md).
#: From the fitted kernels a transform's chain starts sparse and has no warm-up to lose.
TRANSFORM_SWEEPS = 50


def run_settings(params: dict, mode) -> dict:
    """How fits and inference run, from the settings in ``params`` (an estimator's, by name):
    the Gibbs sweeps, the features, threads, memory, device and every mode's own parameters
    (:func:`cpgbn.modes.check_mode_parameters`), checked and resolved; ``mode``: the
    estimator's mode class."""
    n_iter = _check_int("n_iter", params["n_iter"], 1)
    burn_in = _check_int("burn_in", params["burn_in"], 0)
    if burn_in >= n_iter:
        raise CPGBNInputError(f"burn_in must be < n_iter, got burn_in={burn_in}, n_iter={n_iter}")
    t_iter = min(n_iter, TRANSFORM_SWEEPS) if params["transform_iter"] is None else _check_int(
        "transform_iter", params["transform_iter"], 1)
    # the fit's share of burn-in: 37 of the 50 at the defaults (150 of 200)
    t_burn = burn_in * t_iter // n_iter if params["transform_burn_in"] is None else _check_int(
        "transform_burn_in", params["transform_burn_in"], 0)
    if t_burn >= t_iter:
        raise CPGBNInputError(
            f"transform_burn_in must be < transform_iter, got {t_burn} and {t_iter}")
    normalization = params["feature_normalization"]
    if normalization not in ("length", "none"):
        raise CPGBNInputError("feature_normalization must be 'length' or 'none', got "
                              f"{normalization!r}")
    if params["n_threads"] is not None:
        _check_int("n_threads", params["n_threads"], 1)
    if params["memory_limit"] is not None:
        _check_int("memory_limit", params["memory_limit"], 1)
    if params["device"] is not None:
        try:
            from .backends.torch.devices import resolve_device
        except ImportError:
            raise CPGBNInputError("device=... needs PyTorch: pip install 'cpgbn[torch]'") from None
        resolve_device(params["device"])
    return dict(
        **check_mode_parameters(params, mode),
        n_iter=n_iter, burn_in=burn_in, transform_iter=t_iter, transform_burn_in=t_burn,
        feature_normalization=normalization, n_threads=params["n_threads"],
        memory_limit=params["memory_limit"], device=params["device"],
        progress=bool(params["progress"]))
