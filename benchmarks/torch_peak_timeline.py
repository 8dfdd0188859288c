"""Where the PyTorch sampler's peak on the CPU comes from (issue 57): the resident memory of a
short Gibbs fit sampled every 20 ms, with torch imported before the "before" figure (the
gibbs_memory record counts torch's import inside the fit), and optionally torch's profiler
over the fit (``--profile``: allocations by operator, sorted by memory).

    python benchmarks/torch_peak_timeline.py --data-dir ../shared/data --docs 500
    python benchmarks/torch_peak_timeline.py --data-dir ../shared/data --docs 300 --n-iter 2 --profile

A diagnostic: it prints a JSON line (and the profiler's table), it writes no record.
"""
import argparse
import json
import resource
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))


def rss_gb() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * resource.getpagesize() / 2**30


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--docs", type=int, default=500)
    ap.add_argument("--k", type=int, default=200)
    ap.add_argument("--n-iter", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    import torch  # noqa: F401  (before the "before" figure)
    from cpgbn import CPGBN
    from cpgbn.datasets import load_dataset
    texts, _ = load_dataset("imdb", "train", data_dir=args.data_dir)
    texts = list(texts[:args.docs])
    model = CPGBN(layers=(args.k,), vocab_size=8001, n_iter=args.n_iter,
                  burn_in=args.n_iter - 1, random_state=0, n_threads=args.threads,
                  device="cpu", progress=False)
    samples, done = [], threading.Event()

    def sample():
        t0 = time.perf_counter()
        while not done.is_set():
            samples.append((round(time.perf_counter() - t0, 2), round(rss_gb(), 3)))
            time.sleep(0.02)
    before = rss_gb()
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    start = time.perf_counter()
    if args.profile:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            model.fit(texts)
    else:
        model.fit(texts)
    seconds = time.perf_counter() - start
    done.set()
    sampler.join()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(json.dumps(dict(docs=args.docs, n_iter=args.n_iter, before_gb=round(before, 3),
                          peak_gb=round(peak, 3), fit_seconds=round(seconds, 1),
                          sampled_max_gb=max(b for _, b in samples),
                          timeline=samples[::25])))
    if args.profile:
        print(prof.key_averages().table(sort_by="cpu_memory_usage", row_limit=20))


if __name__ == "__main__":
    main()
