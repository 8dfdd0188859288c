"""Which OpenMP runtime starts first: torch's, when it is installed, before numba's threads.

numba's thread pool (its "omp" layer) and torch each bring an OpenMP runtime.  When numba's
pool starts first, torch's MKL elementwise kernels (exp, log) open their thread teams in the
other runtime, nested inside torch's own: on 2 cores the hybrid's features ran 4-15x slower
in a loop of exp and log, and over 20x slower in ``transform`` (docs/hybrid.md).  With torch
loaded first both use one runtime.

numba starts its pool lazily: at the first call of a parallel kernel (compiled or loaded from
the cache) or of ``numba.get_num_threads``/``set_num_threads``, never at import.  So torch is
imported here, by every piece of cpgbn that can start the pool, just before it does:
:class:`~cpgbn.backends.numba.numba_backend.NumbaBackend`, which alone calls the parallel kernels,
and :func:`cpgbn.modes.base.numba_threads` and the Gibbs mode's memory estimate, which ask
numba for its thread count.  ``import cpgbn``, and the CLI's commands that neither train nor
encode, then never pay torch's import (about a second, three for ``cpgbn --version``).
Code that starts numba's pool itself before cpgbn does gets the other order, as it did when
``import cpgbn`` imported torch.
"""

from __future__ import annotations

import functools
import importlib.util

__all__ = ["import_torch_first"]


@functools.cache
def import_torch_first() -> None:
    """Import torch, when installed, unless it is imported already; once per process (a
    cached no-op after the first call, so the callers may call it on every use)."""
    if importlib.util.find_spec("torch") is None:
        return
    try:
        import torch  # noqa: F401
    except Exception:  # a broken install: the paths that need torch say so when used
        pass
