"""numba kernel of the mixing diagnostic: how far the latent counts m moved in one sweep.

:func:`compare_assignments` reads the latent counts m (P, K_1) of the sweep just made against
the backend's copy of the previous sweep's, in one pass over both, and overwrites that copy.
It only reads the sampler's state, and its sums are whole numbers added in a fixed order per
block of positions, so they do not depend on the thread count.  The NumPy expression it equals
is :func:`cpgbn.inference.mixing.assignment_change_counts` (tested against it).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

#: Positions per parallel block (only the work's split: the sums are exact integers).
ROW_BLOCK = 1024
#: The fields of the returned counts, in order.
FIELDS = ("moved_twice", "units_now", "units_before", "switched", "occupied_both", "largest")


@njit(parallel=True, cache=True)
def compare_assignments(m, previous, previous_dominant):
    """Compare m with ``previous`` (the last sweep's m, any integer dtype) and overwrite it.

    Returns int64[6] (:data:`FIELDS`): sum |m - previous|, sum m, sum previous, the number of
    positions occupied (some count > 0) in both sweeps whose dominant kernel (the first k of
    largest count) differs, the number occupied in both, and max m.  ``previous`` becomes m
    (cast to its dtype: the caller checks ``largest`` fits) and ``previous_dominant`` the
    dominant kernel of every position (-1 where it holds no count).
    """
    n_rows, n_kernels = m.shape
    n_blocks = (n_rows + ROW_BLOCK - 1) // ROW_BLOCK
    sums = np.zeros((n_blocks, 6), dtype=np.int64)
    for block in prange(n_blocks):
        moved = 0
        now = 0
        before = 0
        switched = 0
        both = 0
        largest = 0
        for p in range(block * ROW_BLOCK, min(n_rows, (block + 1) * ROW_BLOCK)):
            top = 0
            for k in range(n_kernels):  # branch-free, so that the compiler vectorises it
                x = np.int64(m[p, k])
                y = np.int64(previous[p, k])
                moved += abs(x - y)
                now += x
                before += y
                top = max(top, x)
                previous[p, k] = x
            best = -1
            if top > 0:
                for k in range(n_kernels):
                    if m[p, k] == top:
                        best = k
                        break
            largest = max(largest, top)
            if best >= 0 and previous_dominant[p] >= 0:
                both += 1
                if best != previous_dominant[p]:
                    switched += 1
            previous_dominant[p] = best
        sums[block, 0] = moved
        sums[block, 1] = now
        sums[block, 2] = before
        sums[block, 3] = switched
        sums[block, 4] = both
        sums[block, 5] = largest
    out = np.zeros(6, dtype=np.int64)
    for block in range(n_blocks):
        for i in range(5):
            out[i] += sums[block, i]
        if sums[block, 5] > out[5]:
            out[5] = sums[block, 5]
    return out
