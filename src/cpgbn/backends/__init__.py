"""Backends: the same Gibbs conditionals written for two kinds of hardware.

``numba``  -- pure kernels over arrays, parallel over documents on the CPU, per-block RNG
              streams (bit-for-bit reproducible for a seed on any thread count);
``torch``  -- the same conditionals vectorised in PyTorch for a GPU (or the CPU).

:mod:`cpgbn.inference` owns the order of the steps and the run loop, and declares what it calls
on a backend (:mod:`cpgbn.inference.backend_protocols`); a backend only draws, and imports nothing from
:mod:`cpgbn.inference`.
"""
