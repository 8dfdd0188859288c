"""Where a hybrid training process's memory goes on IMDB (issue 25: peak RSS under 2 GB).

Runs ``CPGBN(inference="hybrid").fit`` on the 25,000 IMDB training reviews (200-100-50,
V = 30,000, F = 3, minibatches of ``--batch-size``) for ``--steps`` steps, sampling the process's
resident memory (VmRSS) every 5 ms in a thread, and reports per part of the run its duration and
the RSS at its start, its maximum and at its end: the imports and texts, building the corpus
(``fit`` up to the trainer), the trainer's construction, then every step, split into the
encoder's part and the local chain with its TLASGR step.  The last lines are the steady RSS
(median at the end of the steps after the first five) and the peak (VmHWM).  The parts are
found by wrapping the library's functions from outside (module attributes replaced in this
process only), so the same script measures older commits too.

    python benchmarks/hybrid_memory.py --data-dir ../shared/data --steps 40 --out results/speed/hybrid_memory.json
"""
from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE)]


def status_mb(field: str) -> float:
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024.0
    raise RuntimeError(f"no {field} in /proc/self/status")


class Recorder:
    """RSS samples from a thread, and named marks; ``parts()`` joins them."""

    def __init__(self, every: float = 0.005):
        self.samples, self.marks, self._stop = [], [], False
        self._thread = threading.Thread(target=self._run, args=(every,), daemon=True)
        self._thread.start()

    def _run(self, every):
        while not self._stop:
            self.samples.append((time.perf_counter(), status_mb("VmRSS")))
            time.sleep(every)

    def mark(self, label: str) -> None:
        self.marks.append((time.perf_counter(), label))

    def parts(self) -> list[dict]:
        self._stop = True
        self._thread.join()
        ends = self.marks[1:] + [(time.perf_counter(), None)]
        out = []
        for (start, label), (stop, _) in zip(self.marks, ends):
            rss = [r for t, r in self.samples if start <= t <= stop] or [status_mb("VmRSS")]
            out.append({"part": label, "seconds": round(stop - start, 2),
                        "rss_start_mb": round(rss[0]), "rss_max_mb": round(max(rss)),
                        "rss_end_mb": round(rss[-1])})
        return out


class Stop(Exception):
    """Ends ``fit`` after the wanted number of steps."""


def wrap(owner, name: str, before, after=None) -> None:
    original = getattr(owner, name)

    def wrapped(*args, **kwargs):
        before(*args)
        result = original(*args, **kwargs)
        if after is not None:
            after(*args)
        return result

    setattr(owner, name, wrapped)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=os.environ.get("CPGBN_DATA"))
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)

    recorder = Recorder()
    recorder.mark("imports and texts")
    from cpgbn.datasets import dataset_info, load_dataset
    from cpgbn.evaluate.provenance import provenance
    from cpgbn.inference import hybrid, minibatch
    from cpgbn.model import CPGBN

    texts, _ = load_dataset("imdb", "train", data_dir=args.data_dir)
    counter = {"step": 0}
    wrap(CPGBN, "_corpus", lambda *a: recorder.mark("corpus"))
    wrap(hybrid.HybridTrainer, "__init__", lambda *a: recorder.mark("trainer"))

    def step_starts(self, i, batch):
        counter["step"] += 1
        if counter["step"] > args.steps:
            raise Stop
        recorder.mark(f"step {counter['step']}: encoder")

    wrap(hybrid.HybridTrainer, "step", step_starts)
    wrap(minibatch.MinibatchGibbs, "step",
         lambda *a: recorder.mark(f"step {counter['step']}: local chain and TLASGR"))
    model = CPGBN(layers=(200, 100, 50), vocab_size=dataset_info("imdb")["vocab_size"] + 1,
                  inference="hybrid", n_epochs=1, batch_size=args.batch_size,
                  random_state=args.seed, n_threads=args.threads, progress=False)
    try:
        model.fit(texts)
    except Stop:
        pass
    peak = status_mb("VmHWM")
    parts = recorder.parts()
    step_ends = [p["rss_end_mb"] for p in parts if p["part"].endswith("TLASGR")]
    steady = sorted(step_ends[5:])[len(step_ends[5:]) // 2] if len(step_ends) > 5 else None
    record = {"parts": parts, "steady_rss_mb": steady, "peak_rss_mb": round(peak, 1),
              "steps": args.steps, "batch_size": args.batch_size, "threads": args.threads,
              "seed": args.seed, "command": "python " + " ".join(sys.argv), **provenance()}
    for p in parts:
        print(f"{p['part']:38s} {p['seconds']:7.2f} s  RSS {p['rss_start_mb']:5d} -> max "
              f"{p['rss_max_mb']:5d} -> {p['rss_end_mb']:5d} MB")
    print(f"steady RSS {steady} MB (median at the end of steps 6..{args.steps}), peak {peak:.0f} MB")
    if args.out is not None:
        from records import write_record   # here: it imports cpgbn
        write_record(args.out, record)


if __name__ == "__main__":
    main()
