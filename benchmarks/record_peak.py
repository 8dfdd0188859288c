"""Where a Gibbs fit's memory peaks: the peak resident memory (``ru_maxrss``, GB) at the
boundaries of a fit's phases.

Fits the first ``--docs`` IMDB training reviews (K_1 = 200, ``--n-iter`` sweeps, every other
parameter at its default) on ``--device`` (numba when left out, else a torch device such as
``cpu``) with ``--threads`` threads, and prints the peak when the texts are loaded, before and
after the pilot chain (:func:`cpgbn.inference.pilot.run_pilot`), and before and after the
post-fit record of kernel windows (:func:`cpgbn.explain.kernel_windows.record_kernel_windows`).
The peak is monotone: the phase whose end raises it is the phase that sets it.

    python benchmarks/record_peak.py --data-dir ../shared/data --docs 2500 --n-iter 10
    python benchmarks/record_peak.py --data-dir ../shared/data --docs 2000 --n-iter 3 \\
        --device cpu --threads 2
"""
import argparse
import json
import resource
import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", required=True)
    ap.add_argument("--docs", type=int, default=2500)
    ap.add_argument("--n-iter", type=int, default=10)
    ap.add_argument("--burn-in", type=int, default=None, help="default n_iter // 2")
    ap.add_argument("--vocab-size", type=int, default=8000)
    ap.add_argument("--device", default=None, help="a torch device; numba when left out")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    import cpgbn.explain.kernel_windows as kernel_windows
    import cpgbn.modes.gibbs_mode as gibbs_mode
    from cpgbn import CPGBN
    from cpgbn.datasets import load_dataset
    from cpgbn.evaluate.provenance import provenance

    def peak_gb():
        return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 3)
    peaks = {}

    def bracketed(name, function):
        def measured(*a, **k):
            peaks[f"before_{name}_gb"] = peak_gb()
            result = function(*a, **k)
            peaks[f"after_{name}_gb"] = peak_gb()
            return result
        return measured
    # the fit's phases, as the mode and the estimator call them
    gibbs_mode.run_pilot = bracketed("pilot", gibbs_mode.run_pilot)
    kernel_windows.record_kernel_windows = bracketed("record",
                                                     kernel_windows.record_kernel_windows)
    texts, _ = load_dataset("imdb", "train", data_dir=args.data_dir)
    texts = list(texts[:args.docs])
    peaks["texts_loaded_gb"] = peak_gb()
    warnings.simplefilter("ignore", UserWarning)   # short documents padded
    burn_in = args.n_iter // 2 if args.burn_in is None else args.burn_in
    CPGBN(layers=(200,), vocab_size=args.vocab_size, random_state=0, n_threads=args.threads,
          n_iter=args.n_iter, burn_in=burn_in, device=args.device).fit(texts)
    peaks["end_gb"] = peak_gb()
    record = dict(docs=args.docs, n_iter=args.n_iter, burn_in=burn_in,
                  vocab_size=args.vocab_size, device=args.device or "numba",
                  threads=args.threads, **peaks, command="python " + " ".join(sys.argv),
                  **provenance())
    print(json.dumps(record))
    if args.out:
        Path(args.out).write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
