"""The CPGBN / tomotopy LDA ratio on MR-200, repeated in fresh processes to show its spread.

One run of ``gibbs_speed.py`` gives one ratio, but on a shared 2-core machine both samplers'
times move by 20-30% from minute to minute and tomotopy's by as much between processes, so a
single ratio can land on either side of a target.  This runs ``gibbs_speed.py --datasets mr
--structures 200 --no-memory`` ``--repeats`` times, each in a fresh process (the two samplers
take turns inside each), and writes every run's times and ratio with their median and range to
results/speed/lda_ratio.json (the last line of stdout is the JSON).

    python benchmarks/lda_ratio.py [--repeats 5] [--data-dir DIR]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--data-dir", default=None)
    args = ap.parse_args()
    from cpgbn.evaluate.provenance import provenance
    origin = provenance()
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeats):
            out = os.path.join(tmp, f"run{i}.json")
            command = [sys.executable, str(HERE / "gibbs_speed.py"), "--datasets", "mr",
                       "--structures", "200", "--no-memory", "--out", out]
            if args.data_dir:
                command += ["--data-dir", args.data_dir]
            subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
            row = json.loads(Path(out).read_text())["rows"][0]
            runs.append({k: row[k] for k in ("seconds_per_sweep", "tomotopy_lda200_seconds",
                                             "ratio_to_lda")})
            print(f"run {i}: CPGBN-200 {row['seconds_per_sweep']:.3f} s, tomotopy "
                  f"{row['tomotopy_lda200_seconds']:.4f} s, ratio {row['ratio_to_lda']:.2f}",
                  flush=True)
    ratios = np.array([r["ratio_to_lda"] for r in runs])
    record = dict(dataset="mr", layers="200", runs=runs, ratio_median=float(np.median(ratios)),
                  ratio_min=float(ratios.min()), ratio_max=float(ratios.max()),
                  command="python " + " ".join(sys.argv), **origin)
    (HERE.parent / "results" / "speed" / "lda_ratio.json").write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps(record))


if __name__ == "__main__":
    main()
