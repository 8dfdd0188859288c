"""A trial of the stack Geweke case's power against one mutation, at several seed offsets.

Runs ``tests/test_geweke.py``'s ``stack`` case (its default-tier sweeps and seed, plus each
offset) with the ``cpgbn`` that ``PYTHONPATH`` selects, and prints one JSON line per offset:
the largest |z|, the statistic that holds it, and the z of r's and theta's statistics.  Made
for issue 49's upper-split error (``upper_split_drops_theta_above`` in ``mutations.py``): run
it once on the checkout and once on a copy of ``src/`` with the mutation applied, each with an
empty ``NUMBA_CACHE_DIR`` (results/mutation/upper_split_trial/README.md has the commands).

    PYTHONPATH=src python studies/mutation/upper_split_trial.py 0,1,2,3,4
"""
import json
import sys
import time
from pathlib import Path

import numba

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
from test_geweke import CASES, SEEDS, SWEEPS, run_geweke, statistic_names  # noqa: E402


def main(offsets: str) -> None:
    import cpgbn
    numba.set_num_threads(1)
    print(cpgbn.__file__, flush=True)
    names = statistic_names(CASES["stack"])
    for offset in map(int, offsets.split(",")):
        start = time.time()
        z = run_geweke(CASES["stack"], SWEEPS["stack"], SWEEPS["stack"],
                       seed=SEEDS["stack"] + offset)
        worst = int(abs(z).argmax())
        print(json.dumps({"offset": offset, "max": round(float(abs(z).max()), 2),
                          "worst": names[worst],
                          "share": {n: round(float(v), 2) for n, v in zip(names, z)
                                    if "theta" in n or n.startswith("r ") or "log r" in n},
                          "s": round(time.time() - start)}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "0,1,2,3,4")
