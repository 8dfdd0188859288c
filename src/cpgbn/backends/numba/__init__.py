"""numba backend: random-number primitives and the Gibbs kernels (explicit per-block RNG states)."""
from .distributions import (
    beta,
    binomial,
    categorical_cumulative,
    crt,
    dirichlet,
    gamma,
    log_gamma,
    multinomial_cumulative,
    poisson,
    zero_truncated_poisson,
)
from .rng import (
    new_states,
    next_u64,
    seed_state,
    standard_exponential,
    standard_normal,
    uniform,
)

__all__ = [
    "seed_state",
    "new_states",
    "next_u64",
    "uniform",
    "standard_normal",
    "standard_exponential",
    "gamma",
    "log_gamma",
    "beta",
    "dirichlet",
    "poisson",
    "zero_truncated_poisson",
    "binomial",
    "categorical_cumulative",
    "multinomial_cumulative",
    "crt",
]
