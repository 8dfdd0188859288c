"""Where a Gibbs fit's memory peaks: the peak resident memory before and after the post-fit
record of kernel windows (:func:`cpgbn.explain.kernel_windows.record_kernel_windows`).

Fits the first ``--docs`` IMDB training reviews (K_1 = 200, ``--n-iter`` sweeps, one numba
thread, every other parameter at its default) and prints ``ru_maxrss`` (GB) when the record
starts and when it ends.

    python benchmarks/record_peak.py --data-dir ../shared/data --docs 2500 --n-iter 10
"""
import argparse
import json
import resource
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", required=True)
    ap.add_argument("--docs", type=int, default=2500)
    ap.add_argument("--n-iter", type=int, default=10)
    args = ap.parse_args()
    import cpgbn.explain.kernel_windows as kernel_windows
    from cpgbn import CPGBN
    from cpgbn.datasets import load_dataset
    from cpgbn.evaluate.provenance import provenance

    def peak_gb():
        return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2)
    peaks = {}
    record = kernel_windows.record_kernel_windows

    def measured(*a, **k):
        peaks["before_record_gb"] = peak_gb()
        found = record(*a, **k)
        peaks["after_record_gb"] = peak_gb()
        return found
    kernel_windows.record_kernel_windows = measured
    texts, _ = load_dataset("imdb", "train", data_dir=args.data_dir)
    CPGBN(layers=(200,), random_state=0, n_threads=1, n_iter=args.n_iter,
          burn_in=args.n_iter // 2).fit(list(texts[:args.docs]))
    print(json.dumps(dict(docs=args.docs, n_iter=args.n_iter, **peaks,
                          command="python " + " ".join(sys.argv), **provenance())))


if __name__ == "__main__":
    main()
