"""How well a chain mixes, measured during the sweeps it runs anyway.

Two per-sweep quantities, read from the latent counts m (P, K_1) of the convolutional layer
(m_{j,k,s}: the units of document j's tokens that the augmentation gave to kernel k at
position s, summed over the word and the column; see :mod:`cpgbn.inference.state`):

* **moved**: 0.5 * sum_{j,s,k} |m_t - m_{t-1}| / sum m, the share of token units whose
  (position, kernel) assignment changed in sweep t.  It is a *lower bound* on the units that
  moved: a unit that left (s, k) while another arrived there cancels out, and only the net change
  of every count is seen.  (With a varying total, under the Bernoulli-Poisson link, the larger
  of the two totals is the denominator, so the share stays in [0, 1].)
* **switched**: the share of positions occupied in both sweeps (some count > 0) whose dominant
  kernel, the first k of largest m_{j,k,s}, changed.  With a large pseudo-count per token a
  position's units move together, and this share shows whether its kernel changes at all.

And one summary of the features: after every sweep, the per-kernel sums of the training
features, s_k = sum_j theta^(1)_{jk} / L_j (the columns of what the classifier is given, with
the length normalisation; the weights are the caller's), K_1 numbers per sweep.
:func:`effective_sample_size` of each kernel's series over the collected sweeps says how many
independent draws the averaged features are worth.

:class:`MixingMonitor` computes all of this on the backend (one pass over m with a narrow copy
of the last sweep's; the numba and the PyTorch backends each implement
``assignment_changes``), :class:`MixingTrace` keeps the per-sweep values while the chain runs
(checkpoints keep it), and :class:`Mixing` is the finished record a fitted model keeps
(``CPGBN.mixing_``).  None of it draws or writes anything the sampler reads.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from .communicator import as_communicator

__all__ = ["Mixing", "MixingMonitor", "MixingTrace", "assignment_change_counts",
           "change_shares", "dominant_kernels", "effective_sample_size"]


# ---------------------------------------------------------------------- the per-sweep shares
def dominant_kernels(m: np.ndarray) -> np.ndarray:
    """The first kernel of largest count at every position, -1 where the position holds none."""
    m = np.asarray(m)
    best = m.argmax(axis=1)
    return np.where(m.max(axis=1, initial=0) > 0, best, -1)


def assignment_change_counts(previous: np.ndarray, m: np.ndarray,
                             previous_dominant: np.ndarray | None = None) -> np.ndarray:
    """int64[6]: sum |m - previous|, sum m, sum previous, switched positions, positions occupied
    in both, max m (the fields of the backends' ``assignment_changes``, in NumPy)."""
    m = np.asarray(m, dtype=np.int64)
    previous = np.asarray(previous, dtype=np.int64)
    before = dominant_kernels(previous) if previous_dominant is None else previous_dominant
    now = dominant_kernels(m)
    both = (now >= 0) & (before >= 0)
    return np.array([np.abs(m - previous).sum(), m.sum(), previous.sum(),
                     (both & (now != before)).sum(), both.sum(), m.max(initial=0)],
                    dtype=np.int64)


def shares_of(counts) -> tuple[float, float]:
    """(moved, switched) from the six sums of :func:`assignment_change_counts`; switched is NaN
    when no position is occupied in both sweeps."""
    moved_twice, now, before, switched, both = (int(x) for x in counts[:5])
    total = max(now, before)
    moved = 0.5 * moved_twice / total if total else 0.0
    return moved, (switched / both if both else float("nan"))


def change_shares(previous: np.ndarray, m: np.ndarray) -> tuple[float, float]:
    """(moved, switched) between two latent count arrays m_{t-1} and m_t (module docstring)."""
    return shares_of(assignment_change_counts(previous, m))


# ---------------------------------------------------------------------- effective sample size
def effective_sample_size(x) -> float:
    """ESS of a scalar series by Geyer's initial monotone sequence estimator (Geyer 1992).

    n / tau with tau = -1 + 2 sum_{i<m} G_i, where G_i = rho_{2i} + rho_{2i+1} are sums of
    adjacent autocorrelations (biased estimate, by FFT), cut before the first G_i <= 0 and made
    non-increasing.  For an AR(1) series with coefficient rho it tends to n (1 - rho)/(1 + rho).
    NaN for fewer than 4 values, a constant series or non-finite values.
    """
    x = np.asarray(x, dtype=np.float64)
    n = len(x)
    if n < 4 or not np.all(np.isfinite(x)):
        return float("nan")
    centred = x - x.mean()
    size = 1 << int(np.ceil(np.log2(2 * n)))  # zero padding: no circular wrap-around
    spectrum = np.fft.rfft(centred, size)
    acov = np.fft.irfft(spectrum * np.conj(spectrum), size)[:n] / n
    if not acov[0] > 0:
        return float("nan")
    rho = acov / acov[0]
    pairs = n // 2
    sums = rho[0:2 * pairs:2] + rho[1:2 * pairs:2]
    positive = sums > 0
    cut = pairs if positive.all() else int(np.argmin(positive))
    if cut == 0:
        return float("nan")
    tau = -1.0 + 2.0 * np.minimum.accumulate(sums[:cut]).sum()
    return float(n / tau) if tau > 0 else float("nan")


# ---------------------------------------------------------------------- records
@dataclass
class Mixing:
    """The mixing record of a chain (``CPGBN.mixing_``); sweeps in the order they ran.

    moved : (n_sweeps,) -- share of token units whose (position, kernel) changed (a lower bound).
    switched : (n_sweeps,) -- share of occupied positions whose dominant kernel changed.
    feature_sums : (n_sweeps, K_1) -- per-kernel sums of the training features after each sweep.
    seconds : (n_sweeps,) -- time the diagnostic took after each sweep.
    n_collected : int -- the last n_collected sweeps are the averaged ones.
    """

    moved: np.ndarray
    switched: np.ndarray
    feature_sums: np.ndarray
    seconds: np.ndarray
    n_collected: int

    def collected(self, values: np.ndarray) -> np.ndarray:
        return values[len(values) - self.n_collected:]

    def feature_ess(self) -> np.ndarray:
        """(K_1,) ESS of each kernel's feature sum over the collected sweeps."""
        rows = self.collected(self.feature_sums)
        rows = rows[np.all(np.isfinite(rows), axis=1)]
        return np.array([effective_sample_size(rows[:, k]) for k in range(rows.shape[1])])

    def summary(self) -> dict:
        """The figures a report needs: medians over the collected sweeps, ESS quantiles."""
        ess = self.feature_ess()
        finite = ess[np.isfinite(ess)]

        def median(values):
            values = values[np.isfinite(values)]
            return float(np.median(values)) if len(values) else float("nan")
        return {"moved_median": median(self.collected(self.moved)),
                "switched_median": median(self.collected(self.switched)),
                "moved_first": float(self.moved[0]) if len(self.moved) else float("nan"),
                "ess_median": float(np.median(finite)) if len(finite) else float("nan"),
                "ess_min": float(finite.min()) if len(finite) else float("nan"),
                "n_collected": int(self.n_collected),
                "seconds": float(np.sum(self.seconds))}

    def describe(self) -> list[tuple[str, str]]:
        """(label, text) lines for a model summary."""
        s = self.summary()
        return [("mixing", f"per sweep {100 * s['moved_median']:.2f}% of token units change "
                           f"kernel or position (a lower bound) and {100 * s['switched_median']:.2f}% "
                           "of occupied positions change dominant kernel (medians over the "
                           f"averaged sweeps; first sweep {100 * s['moved_first']:.1f}% of units)"),
                ("feature ESS", f"median {s['ess_median']:.1f}, min {s['ess_min']:.1f} of "
                                f"{s['n_collected']} averaged sweeps (effective sample size of "
                                "each kernel's summed training features)")]

    def as_record(self, digits: int = 4) -> dict:
        """JSON-ready (NaN as None): :meth:`summary`, the per-sweep shares and each kernel's ESS,
        to ``digits`` significant digits."""
        def rounded(values):
            return [None if not np.isfinite(v) else float(f"{v:.{digits}g}") for v in values]
        figures = {k: (v if np.isfinite(v) else None) for k, v in self.summary().items()}
        return dict(figures, moved=rounded(self.moved), switched=rounded(self.switched),
                    ess=rounded(self.feature_ess()))

    def arrays(self) -> dict[str, np.ndarray]:
        """The record as named arrays (for a model or checkpoint file)."""
        return {"mixing_moved": self.moved, "mixing_switched": self.switched,
                "mixing_features": self.feature_sums, "mixing_seconds": self.seconds}

    @classmethod
    def from_arrays(cls, arrays: dict, n_collected: int) -> "Mixing | None":
        """The record from :meth:`arrays` (None when they are absent: an older file)."""
        if "mixing_moved" not in arrays:
            return None
        return cls(np.asarray(arrays["mixing_moved"], dtype=np.float64),
                   np.asarray(arrays["mixing_switched"], dtype=np.float64),
                   np.asarray(arrays["mixing_features"], dtype=np.float64),
                   np.asarray(arrays["mixing_seconds"], dtype=np.float64), int(n_collected))


@dataclass
class MixingTrace:
    """The per-sweep values while a chain runs (kept by the driver's Collector)."""

    moved: list[float] = field(default_factory=list)
    switched: list[float] = field(default_factory=list)
    feature_sums: list[np.ndarray] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)

    def pad_to(self, n_sweeps: int, n_kernels: int) -> None:
        """NaN for sweeps that ran without the diagnostic (a checkpoint written without it)."""
        while len(self.moved) < n_sweeps:
            self.moved.append(float("nan"))
            self.switched.append(float("nan"))
            self.feature_sums.append(np.full(n_kernels, np.nan))
            self.seconds.append(0.0)

    def result(self, n_collected: int, n_kernels: int) -> Mixing:
        sums = (np.array(self.feature_sums, dtype=np.float64) if self.feature_sums
                else np.zeros((0, n_kernels)))
        return Mixing(np.array(self.moved, dtype=np.float64),
                      np.array(self.switched, dtype=np.float64), sums,
                      np.array(self.seconds, dtype=np.float64), int(n_collected))

    def arrays(self, n_kernels: int) -> dict[str, np.ndarray]:
        return self.result(0, n_kernels).arrays()

    @classmethod
    def from_arrays(cls, arrays: dict) -> "MixingTrace | None":
        record = Mixing.from_arrays(arrays, 0)
        if record is None:
            return None
        return cls(record.moved.tolist(), record.switched.tolist(), list(record.feature_sums),
                   record.seconds.tolist())


class MixingMonitor:
    """Measures a chain's mixing after every sweep, on the backend that runs it.

    ``weights`` : (N,) -- the features' weight of each document (1 / L_j for length-normalised
    features), or None for theta^(1)'s plain column sums.
    ``communicator`` : the workers of a data-parallel chain, each over its shard (``weights``
    then its documents'): the counts and the feature sums are summed over them.  The counts
    are integers, so the shares are one process' exactly; the feature sums are float sums in
    another order, equal to one process' up to rounding (a diagnostic that no draw reads).
    """

    def __init__(self, weights=None, communicator=None):
        self.weights = None if weights is None else np.ascontiguousarray(weights, dtype=np.float64)
        self.communicator = as_communicator(communicator)
        self._memory = None
        self._weights_on = None

    def start(self, backend, state) -> None:
        """Remember the latent counts of ``state`` (a state on ``backend``) as the last sweep's."""
        _, self._memory = backend.assignment_changes(state.m, None)
        n_docs = state.theta[0].shape[0]
        weights = np.ones(n_docs) if self.weights is None else self.weights
        self._weights_on = backend.to_backend(weights, np.float64)

    def observe(self, backend, state, trace: MixingTrace) -> None:
        """Append the sweep just made to ``trace`` (:meth:`start` first)."""
        start = time.perf_counter()
        with backend.sweep_context():  # numba: BLAS on one thread, as in the sweep
            counts, self._memory = backend.assignment_changes(state.m, self._memory)
            sums = backend.to_numpy(self._weights_on @ state.theta[0], np.float64)
        # over the workers (one process: as they are); the shares read the first five
        # counts, all sums (the sixth is a maximum)
        counts = self.communicator.sum(np.asarray(counts[:5], dtype=np.int64))
        sums = self.communicator.sum(np.asarray(sums, dtype=np.float64))
        moved, switched = shares_of(counts)
        trace.moved.append(moved)
        trace.switched.append(switched)
        trace.feature_sums.append(np.array(sums, dtype=np.float64))
        trace.seconds.append(time.perf_counter() - start)
