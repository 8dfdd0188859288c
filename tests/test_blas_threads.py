"""Sweeps keep numpy's BLAS on one thread (its spinning workers would take the numba kernels' cores)."""
import numpy as np
from threadpoolctl import threadpool_info

from cpgbn.backends.numba.numba_backend import one_blas_thread


def _blas_threads():
    return [info["num_threads"] for info in threadpool_info() if info["user_api"] == "blas"]


def test_one_blas_thread_inside_and_restored_after():
    np.ones((64, 64)) @ np.ones((64, 64))  # BLAS is loaded
    before = _blas_threads()
    assert before, "numpy's BLAS was not found by threadpoolctl"
    with one_blas_thread():
        assert _blas_threads() == [1] * len(before)
    assert _blas_threads() == before
