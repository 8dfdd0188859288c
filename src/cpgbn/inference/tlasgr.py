"""TLASGR-MCMC: stochastic-gradient Riemannian Langevin steps for column-stochastic globals.

Cong, Chen, Liu & Zhou (2017), "Deep latent Dirichlet allocation with topic-layer-adaptive
stochastic gradient Riemannian MCMC", as used by the paper's Algorithm 1 (eq. for D_k^(new))
for the kernels D_k (each flattened to one point of the V*F simplex) and, in the same way, for
every column of Phi^(t).  Inference notes, section 6.

The update
----------
One column phi (n entries on the simplex) with Dirichlet prior Dir(eta 1_n) and minibatch
counts n~ (the latent counts the minibatch assigns to the column's entries, averaged over the
collected local draws), rho = N / |batch|:

    phi' = { phi + (eps_i / M) [(rho n~ + eta) - (rho n~. + eta n) phi]
             + Normal(0, (2 eps_i / M) diag(phi)) }_angle,

n~. the column's total.  Why this is a Langevin step: the conditional posterior of phi is
Dir(rho n~ + eta) (the minibatch stands in for the corpus), log-density
sum_v (rho n~_v + eta - 1) ln phi_v on the simplex.  With the metric G = M diag(1/phi) (the
Fisher information of a multinomial with M expected counts; M is a scalar per column, so it
rescales time and does not change the stationary law), the Riemannian Langevin drift
G^-1 grad ln p + div G^-1 is (rho n~_v + eta - 1) / M + 1 / M = (rho n~_v + eta) / M per entry;
keeping the sum at 1 removes its component along 1 in the direction phi, giving the bracket
above (whose entries sum to (rho n~. + eta n)(1 - sum phi) = 0).  The noise covariance
(2 eps / M) diag(phi) is G^-1 times 2 eps.

The projection {.}_angle (notes, section 6): the diagonal noise does not sum to 0, so
phi' <- phi' - (sum phi' - 1) phi.  For noise xi ~ N(0, s diag(phi)) this is
xi - (1' xi) phi, whose covariance is s (diag(phi) - phi phi'), the multinomial covariance on
the tangent space of the simplex: the step is exactly the Langevin step restricted to the
simplex.  Then entries <= FLOOR are set to FLOOR and the column is renormalised (a discretised
step can cross the boundary; FLOOR = 1e-30 is the library's floor of D and w), and clipped at
FLOOR once more (the renormalisation can push a floored entry just below it).

Step sizes and preconditioner (notes, section 6; i = minibatches seen, counting this one):

* eps_i = eps0 ((tau0 + i) / (tau0 + 1))^(-kappa0), tau0 = 20, kappa0 = 0.7, eps0 = 1;
* M (one per column k, the "topic-layer-adaptive" part): the exponential moving average of
  rho n~._k with forgetting rate varrho_i = (tau_FR + i)^(-kappa_FR), tau_FR = 0,
  kappa_FR = 0.9; varrho_1 = 1, so the first minibatch initialises it;
* the step divides by max(M_k, eta n): a column that has received no counts yet has M_k = 0
  and would take an infinite step, and eta n, the prior's total pseudo-count, is the curvature
  the prior alone gives.  While the data dominate (M_k >= eta n) this changes nothing;
  otherwise it keeps the coefficient of the drift on phi, 1 - eps (rho n~. + eta n) / M, at
  or above 1 - 2 eps for a minibatch with rho n~. <= M (the typical one), instead of
  overshooting far past the conditional posterior mean (on text, eta V F = 1200 pseudo-counts
  per kernel against a few hundred counts; notes, section 2).  The stored M is the plain
  moving average.

The functions are pure: :func:`tlasgr_step` returns the new parameter and a new
:class:`TLASGRState`, and takes its randomness from an explicit ``numpy.random.Generator`` (or
pre-drawn standard normals).  It is written once for every backend: given a backend
(``arrays``, :class:`cpgbn.inference.backend_protocols.Backend`) it works on that backend's arrays
through its helpers (float64 copies, host copies of the column totals, an output array) and
its block size, so the same code updates numpy globals column block by column block on the
host and tensors on a device at once.  :func:`simplex_langevin_step` is the arithmetic alone,
written with operators that numpy arrays and torch tensors share.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..backends.numba.numba_backend import COLUMN_BLOCK
from ..errors import CPGBNInputError

__all__ = ["FLOOR", "TLASGRSchedule", "TLASGRState", "check_step_inputs", "next_precision",
           "simplex_langevin_step", "tlasgr_step"]

#: Smallest entry kept on the simplex (the library's float32 floor of D and w).
FLOOR = 1e-30


@dataclass(frozen=True)
class TLASGRSchedule:
    """Step sizes eps_i and forgetting rates varrho_i (defaults: inference notes, section 6)."""

    eps0: float = 1.0
    tau0: float = 20.0
    kappa0: float = 0.7
    tau_fr: float = 0.0
    kappa_fr: float = 0.9

    def __post_init__(self):
        for name in ("eps0", "kappa_fr"):
            if not getattr(self, name) > 0:
                raise CPGBNInputError(f"{name} must be > 0, got {getattr(self, name)}")
        for name in ("tau0", "kappa0", "tau_fr"):
            if not getattr(self, name) >= 0:
                raise CPGBNInputError(f"{name} must be >= 0, got {getattr(self, name)}")

    def step_size(self, i: int) -> float:
        """eps_i = eps0 ((tau0 + i) / (tau0 + 1))^(-kappa0) for minibatch i >= 1 (eps_1 = eps0)."""
        return self.eps0 * ((self.tau0 + i) / (self.tau0 + 1.0)) ** (-self.kappa0)

    def forgetting_rate(self, i: int) -> float:
        """varrho_i = (tau_FR + i)^(-kappa_FR), capped at 1 (the weight of minibatch i in M)."""
        return min(1.0, (self.tau_fr + i) ** (-self.kappa_fr))


@dataclass
class TLASGRState:
    """What TLASGR-MCMC carries between minibatches for one column-stochastic matrix.

    precision : float64 (K,)
        M_k, the running estimate of rho n~._k (the expected corpus count of column k: the scale
        of the Fisher information of that column); 0 before the first minibatch.
    n_updates : int
        i, the minibatches processed so far.
    """

    precision: np.ndarray
    n_updates: int = 0

    @classmethod
    def initial(cls, n_columns: int) -> "TLASGRState":
        return cls(np.zeros(int(n_columns), dtype=np.float64), 0)

    def to_arrays(self) -> dict:
        """The state as named numpy arrays (for ``np.savez`` and the checkpoint files)."""
        return {"precision": np.array(self.precision, dtype=np.float64),
                "n_updates": np.array(self.n_updates, dtype=np.int64)}

    @classmethod
    def from_arrays(cls, arrays) -> "TLASGRState":
        """Inverse of :meth:`to_arrays` (any mapping with those two keys, e.g. an NpzFile)."""
        try:
            precision = np.array(arrays["precision"], dtype=np.float64)
            n_updates = np.asarray(arrays["n_updates"])
        except KeyError as exc:
            raise CPGBNInputError(f"TLASGR state arrays lack {exc.args[0]!r}") from None
        if precision.ndim != 1 or n_updates.shape != () or int(n_updates) < 0:
            raise CPGBNInputError("TLASGR state arrays are malformed: precision must be 1-D and "
                                  "n_updates a non-negative scalar")
        return cls(precision, int(n_updates))


def simplex_langevin_step(phi, counts, precision, step, *, rho: float, eta: float, normal,
                          floor: float = FLOOR):
    """The TLASGR arithmetic on (n, K) columns; numpy arrays or torch tensors alike.

    ``phi`` (n, K) columns on the simplex, ``counts`` (n, K) minibatch counts n~, ``precision``
    (K,) the preconditioner used (already floored), ``step`` the scalar eps_i, ``normal``
    (n, K) standard normal variates.  Returns the projected, floored, renormalised columns
    (module docstring).  Equals, per column k,
    ``p = phi + s (rho n + eta - (rho n.sum() + eta n_rows) phi) + sqrt(2 s phi) z`` with
    s = step / precision[k], then ``p -= (p.sum() - 1) phi``, ``p = p.clip(floor); p / p.sum()``,
    clipped at ``floor`` once more.
    """
    scaled = step / precision                                       # eps_i / M_k, (K,)
    n_rows = phi.shape[0]
    drift = (rho * counts + eta) - (rho * counts.sum(0) + eta * n_rows) * phi
    proposal = phi + scaled * drift + (2.0 * scaled * phi) ** 0.5 * normal
    proposal = proposal - (proposal.sum(0) - 1.0) * phi
    proposal = proposal.clip(min=floor)
    # clipped again: renormalising a column whose clips added mass pushes the floor below it
    # (the sum moves by at most n * floor, far below rounding)
    return (proposal / proposal.sum(0)).clip(min=floor)


def check_step_inputs(phi_shape, counts_shape, n_precision, rho, eta) -> None:
    """CPGBNInputError unless the shapes agree with each other and the state, rho > 0, eta > 0."""
    if len(phi_shape) < 2:
        raise CPGBNInputError(f"the parameter must have entries x columns (at least 2-D), got "
                              f"shape {tuple(phi_shape)}")
    if tuple(counts_shape) != tuple(phi_shape):
        raise CPGBNInputError(f"counts must have the parameter's shape {tuple(phi_shape)}, got "
                              f"{tuple(counts_shape)}")
    if n_precision != phi_shape[-1]:
        raise CPGBNInputError(f"the TLASGR state has {n_precision} columns, the parameter "
                              f"{phi_shape[-1]}")
    if not (np.isfinite(rho) and rho > 0):
        raise CPGBNInputError(f"rho must be a positive number, got {rho}")
    if not (np.isfinite(eta) and eta > 0):
        raise CPGBNInputError(f"eta must be a positive number, got {eta}")


def next_precision(state: TLASGRState, column_counts, rho: float,
                   schedule: TLASGRSchedule) -> np.ndarray:
    """M after minibatch i = n_updates + 1: (1 - varrho_i) M + varrho_i rho n~._k, float64 (K,)."""
    varrho = schedule.forgetting_rate(state.n_updates + 1)
    return (1.0 - varrho) * state.precision + varrho * rho * np.asarray(column_counts,
                                                                        dtype=np.float64)


class _HostArrays:
    """The array helpers of a backend (:class:`cpgbn.inference.backend_protocols.Backend`) for numpy
    arrays on the host: :func:`tlasgr_step`'s when it is given no backend."""

    #: Columns per block of the arithmetic on host arrays (bounds its temporary memory): the
    #: numba backend's, so that both draw a step's normals in the same blocks of streams.
    column_block = COLUMN_BLOCK

    @staticmethod
    def as_float(x):
        return np.asarray(x, dtype=np.float64)

    @staticmethod
    def to_numpy(x, dtype):
        return np.asarray(x, dtype=dtype)

    @staticmethod
    def to_backend(x, dtype):
        return np.asarray(x, dtype=dtype)

    @staticmethod
    def empty_like(x):
        return np.empty_like(x)


def tlasgr_step(phi, counts, state: TLASGRState, *, rho: float, eta: float, rng=None,
                normal=None, schedule: TLASGRSchedule = TLASGRSchedule(),
                floor: float = FLOOR, arrays=None) -> tuple:
    """One TLASGR-MCMC update of a column-stochastic parameter from one minibatch.

    Parameters
    ----------
    phi : array (..., K)
        The current value; every column (all leading axes flattened) lies on the simplex: a
        kernel array D of shape (V, F, K_1) (each kernel D_k(:)) or a Phi^(t) of shape
        (K_{t-1}, K_t).  Not modified.
    counts : array like ``phi``
        n~: the minibatch's counts on every entry (for D, n_{k,v,f} summed over the minibatch;
        for Phi^(t), the counts split from layer t-1 to layer t), possibly averaged over
        several local draws; not yet scaled by rho.
    state : TLASGRState
        M and i from the previous minibatches (:meth:`TLASGRState.initial` before the first).
    rho : float
        N / |batch|.
    eta : float
        The Dirichlet concentration of every entry (eta^(1) for D, eta^(t) for Phi^(t)).
    rng : numpy.random.Generator, or ``normal``: array (n, K) of standard normals
        The randomness (exactly one of the two).  ``normal`` may also be a callable
        ``normal(lo, hi)`` returning the (n, hi - lo) normals of columns lo..hi-1, asked once
        per column block, so the whole (n, K) array never exists (D's is 144 MB on IMDB).
    schedule : TLASGRSchedule
    floor : float
    arrays : a backend, or None
        The backend whose arrays ``phi``, ``counts`` and ``normal`` are
        (:class:`cpgbn.inference.backend_protocols.Backend`: its ``as_float``, ``to_numpy``,
        ``to_backend``, ``empty_like`` and ``column_block``); None: numpy arrays, worked on
        :data:`COLUMN_BLOCK` columns at a time.

    Returns ``(new_phi, new_state)``: new_phi has ``phi``'s shape and dtype (arithmetic in
    float64), on the backend; new_state has i + 1 and the updated M.  CPGBNInputError if a
    column of ``phi`` is off the simplex or a count is negative or not finite (checked on
    column sums, one small copy to the host per block).
    """
    if arrays is None:
        arrays, phi = _HostArrays, np.asarray(phi)
    counts = arrays.as_float(counts)
    check_step_inputs(tuple(phi.shape), tuple(counts.shape), len(state.precision), rho, eta)
    n_columns = phi.shape[-1]
    columns = phi.reshape(-1, n_columns)
    column_counts = counts.reshape(-1, n_columns)
    if (rng is None) == (normal is None):
        raise CPGBNInputError("give exactly one of rng and normal")
    if rng is not None:
        normal = arrays.to_backend(rng.standard_normal(tuple(columns.shape)), np.float64)
    if not callable(normal):
        normal = arrays.as_float(normal)
        if tuple(normal.shape) != tuple(columns.shape):
            raise CPGBNInputError(f"normal must have shape {tuple(columns.shape)}, got "
                                  f"{tuple(normal.shape)}")
        normal = _columns_of(normal)
    precision = next_precision(state, arrays.to_numpy(column_counts.sum(0), np.float64), rho,
                               schedule)
    i = state.n_updates + 1
    effective = arrays.to_backend(np.maximum(precision, eta * columns.shape[0]), np.float64)
    # column block by column block (the arithmetic is per column): on the host a few float64
    # temporaries of a block instead of the whole parameter's (6 copies of D, 0.9 GB on IMDB)
    block_size = arrays.column_block or n_columns
    new = arrays.empty_like(columns)
    for lo in range(0, n_columns, block_size):
        block = slice(lo, min(n_columns, lo + block_size))
        current = arrays.as_float(columns[:, block])
        block_counts = column_counts[:, block]
        sums = arrays.to_numpy(current.sum(0), np.float64)
        if bool((current < 0).any()) or not np.allclose(sums, 1.0, rtol=0, atol=1e-4):
            raise CPGBNInputError("every column of the parameter must lie on the simplex "
                                  "(non-negative, summing to 1)")
        # a NaN or infinite count makes its column's sum NaN or infinite
        totals = arrays.to_numpy(block_counts.sum(0), np.float64)
        if bool((block_counts < 0).any()) or not np.isfinite(totals).all():
            raise CPGBNInputError("counts must be finite and non-negative")
        new[:, block] = simplex_langevin_step(
            current, block_counts, effective[block], schedule.step_size(i), rho=float(rho),
            eta=float(eta), normal=normal(block.start, block.stop), floor=floor)
    return new.reshape(phi.shape), TLASGRState(precision, i)


def _columns_of(normal):
    """``normal`` as tlasgr_step's callable form: (lo, hi) -> its columns lo..hi-1."""
    return lambda lo, hi: normal[:, lo:hi]
