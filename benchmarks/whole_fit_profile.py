"""Where a whole default fit's time goes outside its sweeps (issue 57): cProfile over
``CPGBN(layers=(200,), random_state=0, n_threads=2).fit(texts)`` of MR's 10,662 sentences,
the fit's and the sweeps' seconds, then the profile's top entries by cumulative time (the
pilot, the encoding, torch's import, the post-fit records, the chains' starts).

    python benchmarks/whole_fit_profile.py --data-dir ../shared/data

A diagnostic: it prints, it writes no record.
"""
import argparse
import cProfile
import pstats
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--dataset", default="mr")
    ap.add_argument("--entries", type=int, default=45)
    args = ap.parse_args()
    import numpy as np
    from cpgbn import CPGBN
    from cpgbn.datasets import load_dataset
    texts, _ = load_dataset(args.dataset, "all", data_dir=args.data_dir)
    warnings.simplefilter("ignore", UserWarning)   # short documents padded: said once
    model = CPGBN(layers=(200,), random_state=0, n_threads=2, progress=False)
    profiler = cProfile.Profile()
    start = time.perf_counter()
    profiler.enable()
    model.fit(list(texts))
    profiler.disable()
    print("fit", round(time.perf_counter() - start, 1), "s; sweeps",
          round(float(np.sum(model.sweep_seconds_)), 1), "s")
    pstats.Stats(profiler).sort_stats("cumulative").print_stats(args.entries)


if __name__ == "__main__":
    main()
